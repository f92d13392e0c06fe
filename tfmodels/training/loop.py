"""A resumable custom training loop on tf.distribute.

Checkpoints hold the model, the optimizer and the loop's global step.
Input pipelines are deterministic, so a resumed run rebuilds its dataset and
skips the batches already consumed (`Trainer.start_step` of them): a run
killed at any point resumes from its last checkpoint exactly where it was,
with the same weights, optimizer moments and next batch. (Distributed
iterators cannot be checkpointed, which is why the skip is needed.)

Each step's metrics are appended to model_dir/history.jsonl as the step ends
(one JSON object per line, `step` included), so a crash loses none of the
curve; a resumed run first drops the rows after its checkpoint, which it is
about to train again, so no step appears twice.

A checkpoint or history write the disk refuses (full, over a size limit)
ends the run with a `WriteError` naming the path; the save's partial files
(`ckpt-N_temp/`, merged files the state file does not list) are removed
then, and by the next run if the process died mid-save, so the resume
starts from the last whole checkpoint, exactly.
"""

import json
import os
import re
import shutil
import sys

import tensorflow as tf
import tf_keras as keras
from tqdm import tqdm

from tfmodels.staging import open_own, refuse_link, write_file
from tfmodels.write_errors import WRITE_FAILURES, refused

STRATEGIES = ("one_device", "mirrored", "multi_worker_mirrored")
HISTORY = "history.jsonl"


def get_strategy(name):
  """tf.distribute strategy by name (multi-worker reads TF_CONFIG)."""
  if name == "one_device":
    return tf.distribute.OneDeviceStrategy("/cpu:0" if not tf.config.
                                           list_physical_devices("GPU")
                                           else "/gpu:0")
  if name == "mirrored":
    return tf.distribute.MirroredStrategy()
  if name == "multi_worker_mirrored":
    return tf.distribute.MultiWorkerMirroredStrategy()
  raise ValueError(f"--distribution_strategy {name!r} is not one of "
                   f"{', '.join(STRATEGIES)} (no TPU here)")


def is_chief(strategy):
  """True on the one worker that writes checkpoints, summaries and logs."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not resolver.task_type:
    return True
  return resolver.task_type == "chief" or (
      resolver.task_type == "worker" and resolver.task_id == 0)


class Trainer:
  """Trains a model with `loss_fn(batch) -> (loss, metrics dict)` steps.

  Args:
    strategy: tf.distribute strategy the model and optimizer were built in.
    model: keras.Model that is trained and checkpointed.
    optimizer: keras optimizer (a LossScaleOptimizer is applied as such).
    model_dir: checkpoints go here, summaries under model_dir/summaries.
    max_to_keep: newest checkpoints kept.
  """

  def __init__(self, strategy, model, optimizer, model_dir, max_to_keep=3):
    self.strategy, self.model, self.optimizer = strategy, model, optimizer
    self.model_dir = model_dir
    self.chief = is_chief(strategy)
    self.loss_scaled = isinstance(
        optimizer, keras.mixed_precision.LossScaleOptimizer)
    # The loop's own step count: under float16 loss scaling the optimizer
    # skips steps with inf / nan gradients, so its `iterations` can lag.
    with strategy.scope():
      self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False,
                                     name="global_step")
    self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer,
                                          global_step=self.global_step)
    latest = tf.train.latest_checkpoint(model_dir)
    # Every worker must take part in saving; only the chief's copy is kept.
    save_dir = model_dir if self.chief else os.path.join(
        model_dir, f".worker_{strategy.cluster_resolver.task_id}")
    self.manager = tf.train.CheckpointManager(self.checkpoint, save_dir,
                                              max_to_keep=max_to_keep)
    _remove_partial_saves(save_dir)  # of a run that died mid-save
    if latest:
      # Create the slots first so the restore fills them at once, rather
      # than relying on deferred restores through a LossScaleOptimizer.
      with strategy.scope():
        optimizer.build(model.trainable_variables)
      self.checkpoint.restore(latest)
      if int(self.global_step.numpy()) == 0:  # written before global_step
        self.global_step.assign(self.optimizer.iterations)
      print(f"resumed from {latest} at step {self.start_step}", flush=True)
    self.history_path = os.path.join(model_dir, HISTORY)
    if self.chief:
      for appended in (self.history_path,  # lines and event files
                       os.path.join(model_dir, "summaries")):
        refuse_link(appended, "--model_dir")
      try:
        _truncate_history(self.history_path, self.start_step)
      except OSError as e:
        raise refused(self.history_path, "the history", e) from None

  @property
  def start_step(self):
    return int(self.global_step.numpy())

  def _step(self, batch, loss_fn, variables):
    def replica_step(batch):
      with tf.GradientTape() as tape:
        loss, metrics = loss_fn(batch)
        scaled = loss / self.strategy.num_replicas_in_sync
        if self.loss_scaled:
          scaled = self.optimizer.get_scaled_loss(scaled)
      grads = tape.gradient(scaled, variables)
      if self.loss_scaled:  # float16: steps with inf / nan grads are skipped
        grads = self.optimizer.get_unscaled_gradients(grads)
      self.optimizer.apply_gradients(zip(grads, variables))
      return dict(metrics, loss=loss)
    per_replica = self.strategy.run(replica_step, args=(batch,))
    return {k: self.strategy.reduce(tf.distribute.ReduceOp.MEAN, v, axis=None)
            for k, v in per_replica.items()}

  def train(self, iterator, loss_fn, total_steps, variables=None,
            checkpoint_every=100, log_every=10, description=None,
            record=None, should_stop=None):
    """Steps from start_step to total_steps on batches of `iterator`.

    The iterator must start at batch start_step (see the module docstring);
    `variables` default to the model's trainable ones. Returns the steps'
    history rows, also appended to history.jsonl with the fields of
    `record` (e.g. the distillation stage). `should_stop(step)`, called
    after each step, ends the run there (checkpointed) when it is true.
    """
    variables = variables or self.model.trainable_variables
    # Slots made here, not in the step's first call: a tf.function whose
    # first call creates variables is traced twice (seconds per command).
    with self.strategy.scope():
      self.optimizer.build(variables)
    step_fn = tf.function(lambda batch: self._step(batch, loss_fn,
                                                   variables))
    writer = (tf.summary.create_file_writer(
        os.path.join(self.model_dir, "summaries")) if self.chief
              else tf.summary.create_noop_writer())
    history = []
    start = self.start_step
    log = (open_own(self.history_path, "a", "--model_dir") if self.chief
           else open(os.devnull, "a"))
    with log, writer.as_default(), tqdm(total=total_steps, initial=start,
                                   unit="step", file=sys.stdout,
                                   desc=description,
                                   disable=not self.chief) as bar:
      for step in range(start + 1, total_steps + 1):
        metrics = {k: float(v) for k, v in step_fn(next(iterator)).items()}
        history.append(dict(metrics, step=step, **(record or {})))
        try:
          log.write(json.dumps(history[-1]) + "\n")
          log.flush()
        except OSError as e:
          raise refused(self.history_path, f"step {step}", e,
                        self._resumes_from()) from None
        bar.update(1)
        if step % log_every == 0 or step == total_steps:
          bar.set_postfix(loss=f"{metrics['loss']:.4f}")
          for name, value in metrics.items():
            tf.summary.scalar(name, value, step=step)
          tf.summary.scalar("learning_rate", float(tf.convert_to_tensor(
              self.optimizer.learning_rate)), step=step)
        stop = should_stop is not None and should_stop(step)
        if step % checkpoint_every == 0 or step == total_steps or stop:
          self.global_step.assign(step)
          self._save(step)
        if stop:
          break
    if not self.chief:  # its copies only existed to take part in saving
      shutil.rmtree(self.manager.directory, ignore_errors=True)
    return history

  def _save(self, step):
    """Checkpoint `step`; on a refused write, its partial files go and a
    WriteError names it."""
    try:
      self.manager.save(checkpoint_number=step)
    except WRITE_FAILURES as e:
      _remove_partial_saves(self.manager.directory, failed=step)
      raise refused(os.path.join(self.manager.directory, f"ckpt-{step}"),
                    "the checkpoint", e,
                    "removed its partial files; " + self._resumes_from()
                    ) from None

  def _resumes_from(self):
    latest = self.manager.latest_checkpoint
    return (f"the run resumes from {os.path.basename(latest)}" if latest
            else "the run has no checkpoint to resume from")


_PARTIAL = re.compile(r"ckpt-(\d+)(_temp|\.index|\.data-\d+-of-\d+)|"
                      r"checkpoint\.tmp[0-9a-f]{32}")


def _remove_partial_saves(directory, failed=None):
  """Removes what checkpoint saves that did not finish left in `directory`:
  `ckpt-N_temp/` shards, the state file's temporary, and the merged files of
  the `failed` save or of any newer than the newest the state file lists.
  The directory is the claimed run's, so no other save is under way."""
  state = tf.train.get_checkpoint_state(directory)
  listed = set()
  for path in state.all_model_checkpoint_paths if state else []:
    number = re.search(r"ckpt-(\d+)$", path)
    if number:
      listed.add(int(number.group(1)))
  newest = max(listed, default=None)
  try:
    names = os.listdir(directory)
  except OSError:
    return
  for name in names:
    match = _PARTIAL.fullmatch(name)
    if not match:
      continue
    if match.group(2) and match.group(2) != "_temp":  # a merged file
      number = int(match.group(1))
      if number in listed or not (number == failed or (
          newest is not None and number > newest)):
        continue  # a whole checkpoint, or nothing says it is not
    path = os.path.join(directory, name)
    if os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)
    else:
      try:
        os.unlink(path)
      except OSError:
        pass


def _truncate_history(path, last_step):
  """Keeps history rows up to `last_step` (and drops a half-written line)."""
  if not os.path.exists(path):
    return
  kept, dropped = [], False
  with open(path) as f:
    for line in f:
      try:
        keep = json.loads(line)["step"] <= last_step
      except (ValueError, TypeError, KeyError):
        keep = False
      if keep:
        kept.append(line if line.endswith("\n") else line + "\n")
      else:
        dropped = True
  if dropped:
    write_file(path, "".join(kept))
