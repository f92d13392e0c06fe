"""How a student is made from its fine-tuned teacher, said once.

    recipe = dataclasses.replace(RECIPE, steps=400)  # a row's override
    carve = carve_command(recipe, teacher, data, model_dir, ("--heads", 6))
    steps = student_steps(recipe, ("heldout", "student"), "squad", data,
                          heldout_dir, model_dir, student_dir, vocab, 128,
                          teacher)

The carve (compress: the caller says what is cut, the recipe how the cut
model recovers) and the task stage (finetune: what of the teacher the
student learns, for how long or until a held-out slice stops improving, how
fast). `ship`, `distill_from_minilm` and `mixed_vocab_student` build their
carve and student steps here, so a better recipe reaches all three; a run
or an experiment's row overrides fields by name. The command lines are
checked against the commands' own options as they are built (`command`), so
a renamed flag fails when the steps are made, not hours into a run.
"""

import ast
import dataclasses
import functools
import importlib.util
import keyword

from experiments.common.pipeline import Step, python_module


# finetune --task_kd modes with layer-wise terms (their weights apply).
LAYER_KD = ("transfer", "hidden", "carved")


@dataclasses.dataclass(frozen=True)
class StudentRecipe:
  """The student's making; each field is the flag it sets."""
  # compress --substitute: MobileBERT's operational optimizations ("" keeps
  # the teacher's LayerNorm and gelu).
  substitute: str = "layernorm=nonorm,gelu=relu"
  # compress --recover_steps / --recover_learning_rate: feature-map
  # distillation from the teacher after the carve, where ops were
  # substituted (nothing to recover otherwise).
  recover_steps: int = 200
  recover_learning_rate: float = 1e-4
  # finetune --substitute / --blend_steps: with blend_steps, the swap is
  # made by the student's run instead (NoNorms fitted, each swapped op's
  # output moved from the original op's to its own over the first
  # blend_steps steps; at most eval_first_steps), on a carve that kept
  # LayerNorm and gelu and so needs no recovery. Against the converged
  # teacher, blending over 100 steps matched the swap at the carve on QA
  # (95.4% of the teacher's F1 against 95.1%) and cost spam 1.9 points
  # (docs/experiment_notes.md, "The NoNorm / relu swap blended in"): 0.
  blend_steps: int = 0
  # compress --calibration_examples: training examples the heads' and
  # neurons' importances are taken on.
  calibration_examples: int = 256
  # finetune --task_kd: what of the teacher the student learns besides the
  # labels (prediction: its soft logits; carved: also every layer's hidden
  # states and each kept head's attention distributions, weighted by
  # hidden_kd_weight and attention_kd_weight). Against a teacher at its
  # plateau, carved + trained to the student's own plateau kept 95.1% of
  # its QA F1 where prediction for 400 steps kept 91% (docs/
  # experiment_notes.md, "Teacher-labelled augmentation against the
  # converged teacher").
  task_kd: str = "carved"
  hidden_kd_weight: float = 1.0
  attention_kd_weight: float = 1.0
  # finetune --train_steps, --batch_size, --learning_rate (peak, after
  # --warmup_fraction of the steps; linear decay). With `heldout`, steps
  # is the cap of a run that stops at its plateau.
  steps: int = 6400
  batch_size: int = 16
  learning_rate: float = 2e-4
  warmup_fraction: float = 0.1
  # tfmodels.data.heldout --examples, then finetune --eval_split heldout:
  # `heldout` training examples (QA articles, spam rows) held out and
  # scored as the student trains, the run ending at the first doubling of
  # its steps (from eval_first_steps) that gains less than min_gain
  # points, or at `steps` (then a cap), or after max_minutes (0: no cap).
  # 0 held out: a run of `steps`, on all of train.
  heldout: int = 800
  eval_first_steps: int = 200
  min_gain: float = 0.5
  max_minutes: float = 40.0
  # tfmodels.data.augment --copies / --replace_share / --neighbours:
  # TinyBERT's word replacement, `augment_copies` copies of each training
  # example (after the held-out slice is taken) for the teacher to label,
  # neighbours from its own word table. 0: the training set as it is.
  # Two copies took the layer-wise student from 95.1% to 96.2% of the
  # converged teacher's QA F1 in float (94.4% to 95.7% in int8), its QA
  # run from 18 to 40 minutes (the same notes).
  augment_copies: int = 0
  augment_share: float = 0.4
  augment_neighbours: int = 15

  def record(self):
    return dataclasses.asdict(self)

  def recovers(self):
    """Whether the carve swaps ops and recovers from the swap."""
    return bool(self.substitute) and not self.blend_steps


RECIPE = StudentRecipe()


def carve_command(recipe, teacher_dir, data_dir, model_dir, cut, *more):
  """compress's command line: `cut` (--heads ...) says what is cut, the
  recipe how; `more`: the caller's other compress flags."""
  recovers = recipe.recovers()
  return command(
      "tfmodels.training.compress", "--teacher_dir", teacher_dir,
      "--data_dir", data_dir, "--model_dir", model_dir, *cut,
      *(("--substitute", recipe.substitute) if recovers else ()),
      "--recover_steps", recipe.recover_steps if recovers else 0,
      "--recover_learning_rate", recipe.recover_learning_rate,
      "--calibration_examples", recipe.calibration_examples, *more)


def student_steps(recipe, names, task, data_dir, heldout_dir, init_dir,
                  model_dir, vocab_file, max_seq_length, teacher_dir,
                  inputs=(), more=(), teacher_vocab=None):
  """The task stage of a carved student learning from `teacher_dir`, as
  pipeline steps named `names` (held-out data, training). With
  `recipe.heldout` a first step writes train without the slice, the slice
  and dev to `heldout_dir` (tfmodels.data.heldout); with
  `recipe.augment_copies` a step (names[1] + "_augment") writes train's
  augmented copies beside the rest to `heldout_dir` + "_augmented"
  (tfmodels.data.augment, the teacher's table read with `teacher_vocab`,
  default `vocab_file`). The training step reads the last of them, or
  `data_dir`. `inputs`: the training step's inputs (the pipeline's);
  `more`: its checkpointing and logging flags."""
  steps = []
  if recipe.heldout:
    steps.append(Step(names[0], command(
        "tfmodels.data.heldout", "--task", task, "--data_dir", data_dir,
        "--examples", recipe.heldout, "--output_dir", heldout_dir),
        heldout_dir, (), clean=True))
    data_dir, inputs = heldout_dir, (*inputs, heldout_dir)
  if recipe.augment_copies:
    augmented = heldout_dir + "_augmented"
    steps.append(Step(names[1] + "_augment", command(
        "tfmodels.data.augment", "--task", task, "--data_dir", data_dir,
        "--teacher_dir", teacher_dir, "--vocab_file",
        teacher_vocab or vocab_file, "--copies", recipe.augment_copies,
        "--replace_share", recipe.augment_share, "--neighbours",
        recipe.augment_neighbours, "--output_dir", augmented), augmented,
        tuple(i for i in inputs if i in (data_dir, teacher_dir)),
        clean=True))
    data_dir, inputs = augmented, (*inputs, augmented)
  steps.append(Step(names[1], _student_command(
      recipe, task, data_dir, init_dir, model_dir, vocab_file,
      max_seq_length, teacher_dir, *more), model_dir, tuple(inputs),
      clean=True))
  return steps


def _student_command(recipe, task, data_dir, init_dir, model_dir, vocab_file,
                     max_seq_length, teacher_dir, *more):
  curve = ("--eval_split", "heldout", "--eval_first_steps",
           recipe.eval_first_steps, "--min_gain", recipe.min_gain,
           "--max_minutes", recipe.max_minutes) if recipe.heldout else ()
  layers = ("--hidden_kd_weight", recipe.hidden_kd_weight,
            "--attention_kd_weight", recipe.attention_kd_weight) if (
                recipe.task_kd in LAYER_KD) else ()
  swap = ("--substitute", recipe.substitute, "--blend_steps",
          recipe.blend_steps) if recipe.blend_steps else ()
  return command(
      "tfmodels.training.finetune", "--task", task, "--data_dir", data_dir,
      "--init_dir", init_dir, "--model_dir", model_dir, "--vocab_file",
      vocab_file, "--max_seq_length", max_seq_length, "--train_steps",
      recipe.steps, "--batch_size", recipe.batch_size, "--learning_rate",
      recipe.learning_rate, "--warmup_fraction", recipe.warmup_fraction,
      "--teacher_dir", teacher_dir, "--task_kd", recipe.task_kd, *layers,
      *swap, *curve, *more)


def command(module, *args):
  """python -m module args, every `--flag` in args checked against the
  module's options (ValueError naming the flag and the module)."""
  known = command_flags(module)
  for arg in map(str, args):
    if arg.startswith("--"):
      name = arg[2:].split("=", 1)[0]
      if name not in known:
        raise ValueError(f"{module} has no flag --{name}")
  return python_module(module, *args)


@functools.cache
def command_flags(module):
  """The flags a command defines, read from its source (importing it would
  define them in this process too): the fields of the options class it
  passes to `define_flags`, with those of its bases."""
  tree, imports = _parse(module)
  defined = [node.args[0].id for node in ast.walk(tree)
             if isinstance(node, ast.Call) and getattr(
                 node.func, "id", None) == "define_flags" and node.args]
  if not defined:
    raise ValueError(f"{module} defines no options class")
  return frozenset(name for cls in defined
                   for name in _fields(tree, imports, cls))


def _parse(module):
  spec = importlib.util.find_spec(module)
  if spec is None or not spec.origin:
    raise ValueError(f"no module {module}")
  with open(spec.origin, encoding="utf-8") as f:
    tree = ast.parse(f.read())
  imports = {alias.asname or alias.name: node.module
             for node in tree.body if isinstance(node, ast.ImportFrom)
             for alias in node.names}
  return tree, imports


def _fields(tree, imports, name):
  """Flag names of class `name` in `tree`, bases first (from their own
  modules where imported)."""
  cls = next((n for n in tree.body
              if isinstance(n, ast.ClassDef) and n.name == name), None)
  if cls is None:
    if name not in imports:
      raise ValueError(f"options class {name} not found")
    return _fields(*_parse(imports[name]), name)
  names = set()
  for base in cls.bases:
    if isinstance(base, ast.Name) and base.id != "object":
      names |= _fields(tree, imports, base.id)
  for item in cls.body:
    if isinstance(item, ast.AnnAssign) and _is_option(item.value):
      field = item.target.id
      names.add(field[:-1] if field.endswith("_") and keyword.iskeyword(
          field[:-1]) else field)
  return names


def _is_option(value):
  """A field made with `option`, `redefault` or an `..._option` helper (a
  field made otherwise is no flag)."""
  if not isinstance(value, ast.Call):
    return False
  name = getattr(value.func, "id", None) or getattr(value.func, "attr", "")
  return name in ("option", "redefault") or name.endswith("_option")
