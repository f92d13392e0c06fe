"""Where the repository and its shipped data are, for the experiments that
run the project's commands on them (one definition, so a move cannot leave
one experiment looking in the wrong place), and the step that slices the
data when a test runs an experiment small."""

import os

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
DATA = os.path.join(REPO, "data")
VOCAB = os.path.join(DATA, "vocab", "uncased_vocab.txt")
# The Task Library's venv (Makefile: .venv-task; requirements-task.txt).
TASK_LIBRARY_PYTHON = os.path.join(REPO, ".venv-task", "bin", "python")


def task_library_flags():
  """`--task_library_python` for an app command when the venv exists
  (`make setup` makes it), else nothing: the command asks the twin alone."""
  return (("--task_library_python", TASK_LIBRARY_PYTHON)
          if os.path.exists(TASK_LIBRARY_PYTHON) else ())


def data_sources(slices, directory):
  """(steps, pre-training text per split, task directory per data/ name).

  `slices` None: the shipped files, no step. Otherwise a dict of
  `experiments.demo.data`'s sizes (pretraining_documents, spam_rows, qa_questions): one step
  cuts the shipped sets into `directory` and the paths point there.
  """
  from experiments.common.pipeline import Step, python_module
  if slices is None:
    root, suffix, steps = DATA, ".txt.gz", []
  else:
    root, suffix = directory, ".txt"
    steps = [Step("slices", python_module(
        "experiments.demo.data", "--output_dir", directory,
        "--pretraining_documents", slices["pretraining_documents"],
        "--spam_rows", ",".join(map(str, slices["spam_rows"])),
        "--qa_questions", ",".join(map(str, slices["qa_questions"]))),
        directory, clean=True)]
  return (steps, {split: os.path.join(root, "pretraining", split + suffix)
                  for split in ("train", "heldout")},
          {name: os.path.join(root, name) for name in ("spam", "wordnet_qa")})
