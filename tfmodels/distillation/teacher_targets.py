"""The teacher's logits on the train rows, computed once and reused.

Prediction-layer distillation (`finetune --task_kd prediction`) reads
nothing of the teacher but its logits (`task.logit_kd`), and the teacher
runs in inference mode, so a row's logits are the same at every step and
every epoch. They are computed here in one pass (`inference.predict`,
bounded memory) and carried as columns of the train features, so a
student step costs the student's forward and backward only; the loss is
the live one (`kronecker.finetuning_loss(..., "prediction")`) term for
term.

    features = {**features, **teacher_logits(teacher, task, features)}
    loss = loss_fn(student, task)     # reads batch["teacher/start_logits"]
"""

from tfmodels.inference import model_inputs, predict

PREFIX = "teacher/"


def teacher_logits(teacher, task, features):
  """{PREFIX + key: the teacher's logits per row} for `task.logit_keys`;
  every position kept (the soft targets cover padding as the live ones
  do)."""
  out = predict(teacher, features, list(task.logit_keys))
  return {PREFIX + k: v for k, v in out.items()}


def loss_fn(student, task):
  """loss_fn(batch): the task loss plus `task.logit_kd` against the batch's
  carried teacher logits."""

  def compute(batch):
    student_out = student(model_inputs(batch), training=True)
    teacher_out = {k: batch[PREFIX + k] for k in task.logit_keys}
    logit = task.logit_kd(teacher_out, student_out, batch)
    supervised = task.supervised_loss(student_out, batch)
    metrics = {"logit_kd": logit, "task": supervised}
    return sum(metrics.values()), metrics
  return compute
