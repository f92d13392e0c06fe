"""KroneckerBERT's knowledge distillation (Tahaei et al., sec. 3.5).

Compression keeps the teacher's depth and widths, so the student is
initialised layer by layer from the teacher (`kronecker_init`) and trained
to match, with no projections: the embedding output, every layer's
attention score matrix O = QK^T / sqrt(d_k) (eq. 9) and every layer's FFN
output, each by MSE (eq. 14), plus MLM + NSP in pre-training and, in
fine-tuning, logit KD from a fine-tuned teacher plus the task's own loss.
"""

from tfmodels.checkpoints.model_dir import encoder_of
from tfmodels.distillation.kronecker_init import init_from_teacher
from tfmodels.distillation.losses import masked_lm_loss, mse
from tfmodels.distillation.progressive import (copy_from_teacher,
                                               layer_transfer_terms)


def intermediate_kd_loss(teacher, student, input_mask):
  """Embedding + sum over layers of attention-score and FFN-output MSE."""
  embedding = mse(teacher["embedding_output"], student["embedding_output"],
                  input_mask)
  attention = sum(mse(t, s, input_mask) for t, s in zip(
      teacher["attention_scores"], student["attention_scores"]))
  ffn = sum(mse(t, s, input_mask) for t, s in zip(
      teacher["hidden_states"], student["hidden_states"]))
  return embedding, attention, ffn


def initialise_student(student, teacher):
  """Kronecker layers by nearest Kronecker product, the rest copied.

  Returns (Kronecker layers initialised, other variables copied).
  """
  factored = init_from_teacher(encoder_of(student), encoder_of(teacher))
  copied = copy_from_teacher(student, teacher, prefixes=("",))
  return factored, copied


def pretraining_loss(student, teacher):
  """loss_fn(batch): intermediate KD + the student's own MLM + NSP."""
  import tensorflow as tf

  def loss_fn(batch):
    features = {k: batch[k] for k in student.input}
    s = student(features, training=True)
    t = teacher({k: batch[k] for k in teacher.input}, training=False)
    embedding, attention, ffn = intermediate_kd_loss(t, s,
                                                     batch["input_mask"])
    mlm = masked_lm_loss(batch["masked_lm_ids"], s["mlm_logits"],
                         batch["masked_lm_weights"])
    nsp = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        batch["next_sentence_labels"], s["sentence_logits"]))
    metrics = {"embedding_kd": embedding, "attention_kd": attention,
               "ffn_kd": ffn, "mlm": mlm, "nsp": nsp}
    return embedding + attention + ffn + mlm + nsp, metrics
  return loss_fn


# What each task-stage KD mode compares, so what teacher and student must
# share: head-for-head attention needs equal heads, feature maps equal depth
# and width; soft logits only the task (and the vocabulary the ids index).
TASK_KD_NEEDS = {
    "all": ("num_hidden_layers", "hidden_size", "num_attention_heads",
            "vocab_size"),
    "transfer": ("num_hidden_layers", "hidden_size", "num_attention_heads",
                 "vocab_size"),
    "hidden": ("num_hidden_layers", "hidden_size", "vocab_size"),
    "carved": ("num_hidden_layers", "hidden_size", "vocab_size"),
    "prediction": ("vocab_size",),
}


def finetuning_loss(student, teacher, task, intermediate="all",
                    teacher_heads=None, layer_weights=(1.0, 1.0)):
  """loss_fn(batch) of eq. 14: intermediate KD + logit KD + the task loss.

  `task` is a `training.tasks` task: it knows its logits and labels.
  `intermediate` picks the layer-wise terms: "all" is eq. 14 (embedding,
  raw attention scores and FFN outputs by MSE); "transfer" is MobileBERT's
  own layer-wise losses, feature-map (eq. 2) and attention (eq. 3, KL
  after softmax) transfer at every layer, which a PKT/JKT student was
  trained with (`progressive.layer_transfer_terms`); "hidden" the
  feature-map term alone (a carved student with fewer heads: CoFi's
  layer-wise distillation on hidden states); "carved" a carved student's
  (`compress`): the feature maps, and each kept head's attention
  distributions against the teacher head it was carved from
  (`teacher_heads`: per layer, carving.json's kept_heads); "prediction"
  none: the prediction layer's soft targets and the task loss only (Hinton
  et al.'s distillation, TinyBERT's prediction-layer stage).
  `layer_weights` (feature maps, attention) scale the layer-wise terms of
  "transfer", "hidden" and "carved".
  """
  from tfmodels.inference import model_inputs
  if intermediate not in TASK_KD_NEEDS:
    raise ValueError(f"intermediate must be one of {sorted(TASK_KD_NEEDS)},"
                     f" got {intermediate!r}")
  if (intermediate == "carved") != (teacher_heads is not None):
    raise ValueError("teacher_heads go with intermediate='carved' (and it "
                     "needs them)")
  weight = {"fmt": layer_weights[0], "at": layer_weights[1]}

  def loss_fn(batch):
    inputs = model_inputs(batch)
    s = student(inputs, training=True)
    t = teacher(inputs, training=False)
    logit = task.logit_kd(t, s, batch)
    supervised = task.supervised_loss(s, batch)
    metrics = {"logit_kd": logit, "task": supervised}
    if intermediate == "all":
      embedding, attention, ffn = intermediate_kd_loss(t, s,
                                                       batch["input_mask"])
      metrics.update(embedding_kd=embedding, attention_kd=attention,
                     ffn_kd=ffn)
    elif intermediate in ("transfer", "hidden", "carved"):
      terms = layer_transfer_terms(
          t, s, batch["input_mask"], range(len(s["hidden_states"])),
          attention=intermediate != "hidden", teacher_heads=teacher_heads)
      metrics.update({k: weight[k.split("_")[0]] * v
                      for k, v in terms.items()})
    return sum(metrics.values()), metrics
  return loss_fn
