"""Task heads: layers that read an encoder's output dict.

  MaskedLMHead         dense + act + LayerNorm, logits against the tied word
                       table (MobileBERT: concat(word table, extra_output_weights))
  ClassificationHead   pooled output -> logits (NSP / SOP with 2 classes,
                       regression with 1)
  SpanHead             sequence -> start_logits, end_logits (SQuAD)
  TokenTaggingHead     sequence -> per-token tag logits
  JointIntentSlotHead  pooled -> intent logits, sequence -> slot logits (SNIPS)
"""

import tensorflow as tf
import tf_keras as keras

from tfmodels.configs import ModelConfig, embedding_layout
from tfmodels.layers.activations import get_activation
from tfmodels.layers.dense import Dense
from tfmodels.layers.plain_call import plain_call


def _init(config):
  return keras.initializers.TruncatedNormal(stddev=config.initializer_range)


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class MaskedLMHead(keras.layers.Layer):
  """Masked-LM logits with the decoder tied to the input word embeddings.

  The transform is dense(width) + activation + a real LayerNorm (also for
  NoNorm MobileBERT, as released). `width` is the embedding size for ALBERT
  and the hidden size otherwise; when the tied table is narrower than the
  hidden size (MobileBERT, 128 < 512) the decoder is
  concat(word_embeddings [V, E], extra_output_weights [V, H - E]).

  Args:
    config: ModelConfig.
    embeddings: the encoder's `Embeddings` layer (supplies the tied tables).

  Call args:
    sequence_output: [B, T, H]; positions: optional int [B, P] to gather.

  Returns:
    dict: `logits` [B, P or T, V]; with a mixed-vocabulary teacher also
    `student_logits` [B, P or T, V_student] (the paper's second softmax).

  Example:
    >>> # head = MaskedLMHead(config, encoder.get_layer("embeddings"))
  """

  def __init__(self, config: ModelConfig, embeddings, **kwargs):
    super().__init__(**kwargs)
    c = self.config = config
    self.embeddings = embeddings
    _, albert_style, _ = embedding_layout(c)
    self.width = c.embedding_size if albert_style else c.hidden_size
    self.dense = Dense(self.width, kernel_initializer=_init(c),
                                    name="transform")
    self.activation = get_activation(c.hidden_act)
    self.norm = keras.layers.LayerNormalization(epsilon=c.mlm_layer_norm_eps
                                                or c.layer_norm_eps,
                                                name="transform_norm")

  def build(self, input_shape):
    c = self.config
    self.extra_output_weights = None
    if self.width > c.embedding_size:
      self.extra_output_weights = self.add_weight(
          "extra_output_weights",
          shape=(c.vocab_size, self.width - c.embedding_size),
          initializer=_init(c))
    self.output_bias = self.add_weight("output_bias", shape=(c.vocab_size,),
                                       initializer="zeros")
    if c.mixed_vocab_size:
      self.student_output_bias = self.add_weight(
          "student_output_bias", shape=(c.mixed_vocab_size,),
          initializer="zeros")
    super().build(input_shape)

  def call(self, sequence_output, positions=None):
    h = sequence_output
    if positions is not None:
      h = tf.gather(h, positions, batch_dims=1)
    h = self.norm(self.activation(self.dense(h)))
    # The tied table belongs to the embedding layer: under a mixed
    # precision policy it is not auto-cast here.
    table = tf.cast(self.embeddings.output_embedding_table(), h.dtype)
    if self.extra_output_weights is not None:
      table = tf.concat([table, self.extra_output_weights], axis=1)
    out = {"logits": tf.matmul(h, table, transpose_b=True) + self.output_bias}
    if self.config.mixed_vocab_size:
      student = tf.cast(self.embeddings.student_output_embedding_table(),
                        h.dtype)
      out["student_logits"] = (tf.matmul(h, student, transpose_b=True)
                               + self.student_output_bias)
    return out

  def get_config(self):
    # The tied embeddings go by value: a head revived from its config has
    # its own copy (as keras-hub's MaskedLMHead does), no longer tied.
    config = super().get_config()
    config.update(config=self.config.to_dict(),
                  embeddings=keras.layers.serialize(self.embeddings))
    return config

  @classmethod
  def from_config(cls, config):
    config = dict(config)
    model_config = ModelConfig.coerce(config.pop("config"))
    embeddings = keras.layers.deserialize(config.pop("embeddings"))
    # Its tables exist once it has been called, as the encoder's do before
    # the head reads them.
    ids = tf.zeros([1, 1], tf.int32)
    embeddings(ids, ids)
    return cls(model_config, embeddings, **config)


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class ClassificationHead(keras.layers.Layer):
  """Dropout + dense on a pooled vector: classes, NSP/SOP (2) or regression (1).

  Args:
    num_classes: int.
    dropout: float.
    initializer_range: float.

  Example:
    >>> ClassificationHead(3)(tf.ones([2, 8])).shape
    TensorShape([2, 3])
  """

  def __init__(self, num_classes, dropout=0.1, initializer_range=0.02,
               **kwargs):
    super().__init__(**kwargs)
    self.num_classes = num_classes
    self.dropout_rate = dropout
    self.initializer_range = initializer_range
    self.dropout = keras.layers.Dropout(dropout)
    self.dense = Dense(
        num_classes, name="logits",
        kernel_initializer=keras.initializers.TruncatedNormal(
            stddev=initializer_range))

  def call(self, pooled, training=None):
    return self.dense(self.dropout(pooled, training=training))

  def get_config(self):
    config = super().get_config()
    config.update(num_classes=self.num_classes, dropout=self.dropout_rate,
                  initializer_range=self.initializer_range)
    return config


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class SpanHead(keras.layers.Layer):
  """SQuAD span head: one dense(2) per token, split into start / end logits.

  Example:
    >>> out = SpanHead()(tf.ones([1, 5, 8]))
    >>> out["start_logits"].shape
    TensorShape([1, 5])
  """

  def __init__(self, initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self.initializer_range = initializer_range
    self.dense = Dense(
        2, name="span_logits",
        kernel_initializer=keras.initializers.TruncatedNormal(
            stddev=initializer_range))

  def call(self, sequence_output):
    logits = self.dense(sequence_output)
    # One UNPACK, which TFLite's GPU delegate takes; two shrinking slices
    # (logits[..., 0]) it refuses (converters/gpu_delegate.py).
    start, end = tf.unstack(logits, axis=-1)
    return {"start_logits": start, "end_logits": end}

  def get_config(self):
    config = super().get_config()
    config.update(initializer_range=self.initializer_range)
    return config


@keras.utils.register_keras_serializable(package="tfmodels")
class TokenTaggingHead(ClassificationHead):
  """Per-token tag logits (NER / slot filling): [B, T, H] -> [B, T, tags].

  Example:
    >>> TokenTaggingHead(5)(tf.ones([1, 4, 8])).shape
    TensorShape([1, 4, 5])
  """


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class JointIntentSlotHead(keras.layers.Layer):
  """Intent from the pooled vector and IOB slots per token (SNIPS style).

  Args:
    num_intents: int; num_slots: int; dropout: float; initializer_range: float.

  Example:
    >>> head = JointIntentSlotHead(7, 5)
    >>> out = head(tf.ones([1, 8]), tf.ones([1, 4, 8]))
    >>> out["intent_logits"].shape, out["slot_logits"].shape
    (TensorShape([1, 7]), TensorShape([1, 4, 5]))
  """

  def __init__(self, num_intents, num_slots, dropout=0.1,
               initializer_range=0.02, **kwargs):
    super().__init__(**kwargs)
    self._config = dict(num_intents=num_intents, num_slots=num_slots,
                        dropout=dropout, initializer_range=initializer_range)
    self.intent = ClassificationHead(num_intents, dropout, initializer_range,
                                     name="intent")
    self.slots = TokenTaggingHead(num_slots, dropout, initializer_range,
                                  name="slots")

  def call(self, pooled, sequence_output, training=None):
    return {"intent_logits": self.intent(pooled, training=training),
            "slot_logits": self.slots(sequence_output, training=training)}

  def get_config(self):
    config = super().get_config()
    config.update(self._config)
    return config
