"""Token + position + segment embeddings for every encoder in the zoo.

One layer, driven by the config, because the variants differ only in how the
word vector is made and where the width changes:
  * BERT: word (H) + position (H) + type (H) -> norm.
  * ALBERT: word (E) + position (E) + type (E) -> norm -> dense E->H
    (factorised embedding; the projection comes after the norm, as in ALBERT).
  * MobileBERT: word (E=128) -> [e(t+1), e(t), e(t-1)] (3E) -> dense -> H, then
    + position (H) + type (H) -> norm (paper section 3.4; zeros beyond the
    sequence ends, the [PAD] row at padded positions unless
    `trigram_zero_padding`).
  * KroneckerBERT: the word table is A^E (x) B^E (KroneckerEmbedding).
  * A carved student: the word table at rank r (LowRankEmbedding).
  * Mixed-vocabulary teacher: ids >= vocab_size index a student table of
    width mixed_vocab_embedding_size, projected up to the teacher's width.
"""

import tensorflow as tf
import tf_keras as keras

from tfmodels.configs import ModelConfig, embedding_layout
from tfmodels.layers.attention import static_or_dynamic_shape
from tfmodels.layers.dense import Dense
from tfmodels.layers.kronecker import KroneckerEmbedding
from tfmodels.layers.low_rank import LowRankEmbedding
from tfmodels.layers.normalization import make_normalization
from tfmodels.layers.plain_call import plain_call


def trigram_concat(word_vectors):
  """[e(t+1), e(t), e(t-1)] along the feature axis, zeros beyond the ends."""
  next_tokens = tf.pad(word_vectors[:, 1:], [[0, 0], [0, 1], [0, 0]])
  prev_tokens = tf.pad(word_vectors[:, :-1], [[0, 0], [1, 0], [0, 0]])
  return tf.concat([next_tokens, word_vectors, prev_tokens], axis=-1)


@keras.utils.register_keras_serializable(package="tfmodels")
@plain_call
class Embeddings(keras.layers.Layer):
  """The embedding block of an encoder, configured by a ModelConfig.

  Args:
    config: ModelConfig or its dict.

  Call args:
    input_ids: int [B, T]; segment_ids: int [B, T]; input_mask: optional
      0/1 [B, T] (used by the 3-gram embedding, see call()).

  Returns:
    [B, T, hidden_size], the input of the first transformer block.

  Example:
    >>> from tfmodels.configs import load_config
    >>> emb = Embeddings(load_config("tiny_mobilebert"))
    >>> emb(tf.ones([1, 4], tf.int32), tf.zeros([1, 4], tf.int32)).shape
    TensorShape([1, 4, 32])
  """

  def __init__(self, config, **kwargs):
    super().__init__(**kwargs)
    c = self.config = ModelConfig.coerce(config)
    init = lambda: keras.initializers.TruncatedNormal(
        stddev=c.initializer_range)
    E, H = c.embedding_size, c.hidden_size

    if c.low_rank_ranks.get("word_embeddings"):
      self.word_embeddings = LowRankEmbedding(
          c.vocab_size, E, c.low_rank_ranks["word_embeddings"],
          c.initializer_range, name="word_embeddings")
    elif c.kronecker_embedding_size:
      self.word_embeddings = KroneckerEmbedding(
          c.vocab_size, E, c.kronecker_embedding_size, c.initializer_range,
          name="word_embeddings")
    else:
      self.word_embeddings = keras.layers.Embedding(
          c.vocab_size, E, embeddings_initializer=init(),
          name="word_embeddings")
    self.student_embeddings = self.student_projection = None
    if c.mixed_vocab_size:
      self.student_embeddings = keras.layers.Embedding(
          c.mixed_vocab_size, c.mixed_vocab_embedding_size,
          embeddings_initializer=init(), name="student_word_embeddings")
      self.student_projection = Dense(
          E, use_bias=False, kernel_initializer=init(),
          name="student_embedding_projection")

    self.project_first, self.project_last, self.width = embedding_layout(c)
    self.projection = None
    if self.project_first or self.project_last:
      self.projection = Dense(
          H, kernel_initializer=init(), name="embedding_transformation")
    self.type_embeddings = keras.layers.Embedding(
        c.type_vocab_size, self.width, embeddings_initializer=init(),
        name="token_type_embeddings")
    self.norm = make_normalization(c.normalization_type, c.layer_norm_eps,
                                   "norm")
    self.dropout = keras.layers.Dropout(c.hidden_dropout_prob)

  def build(self, input_shape):
    self.position_embeddings = self.add_weight(
        "position_embeddings",
        shape=(self.config.max_position_embeddings, self.width),
        initializer=keras.initializers.TruncatedNormal(
            stddev=self.config.initializer_range))
    super().build(input_shape)

  def word_vectors(self, input_ids):
    """Word vectors [B, T, E]; student ids (>= vocab_size) when mixed."""
    c = self.config
    if not c.mixed_vocab_size:
      return self.word_embeddings(input_ids)
    is_student = input_ids >= c.vocab_size
    teacher_ids = tf.where(is_student, tf.zeros_like(input_ids), input_ids)
    student_ids = tf.where(is_student, input_ids - c.vocab_size,
                           tf.zeros_like(input_ids))
    student = self.student_projection(self.student_embeddings(student_ids))
    return tf.where(is_student[..., None], student,
                    self.word_embeddings(teacher_ids))

  def call(self, input_ids, segment_ids, input_mask=None, training=None):
    x = self.word_vectors(input_ids)
    if self.config.trigram_input:
      if self.config.trigram_zero_padding and input_mask is not None:
        # The variant: padded positions give zeros, so the last real token's
        # e(t+1) is the same whether or not padding follows. The reference
        # (Google's, Hugging Face's) feeds the [PAD] row there.
        x = x * tf.cast(input_mask, x.dtype)[..., None]
      x = trigram_concat(x)
    if self.project_first:
      x = self.projection(x)
    seq_len = static_or_dynamic_shape(input_ids)[1]
    # A gather of the positions, as the word table is read: a converter
    # quantizes a gathered table, not one sliced to a dynamic length.
    x = x + tf.gather(self.position_embeddings, tf.range(seq_len))[None]
    x = x + self.type_embeddings(segment_ids)
    x = self.dropout(self.norm(x), training=training)
    if self.project_last:
      x = self.projection(x)
    return x

  def output_embedding_table(self):
    """[vocab, E] word table, for a tied MLM decoder."""
    return self.word_embeddings.embeddings

  def student_output_embedding_table(self):
    """[student vocab, E] projected student table (mixed-vocab teacher)."""
    table = self.student_embeddings.embeddings
    # Under mixed precision the kernel may read as float16, the table not.
    return tf.matmul(table, tf.cast(self.student_projection.kernel,
                                    table.dtype))

  def get_config(self):
    config = super().get_config()
    config["config"] = self.config.to_dict()
    return config
