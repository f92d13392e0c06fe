"""A named pretrained teacher cut to its first layers, for the tiny scales.

    python -m experiments.common.tiny_teacher --layers 2 --output_dir DIR

The tiny demo and the tiny recipes check that every command of a chain
runs and that every artifact holds together, not what the numbers are; the
whole 6-layer MiniLM made them spend most of their time in its layers. This
writes a Hugging Face directory as a user's `save_pretrained` would: the
teacher's config with `num_hidden_layers` set, its embeddings and first
layers' tensors (the rest dropped), and its tokenizer files unchanged. The
width, the heads, the FFN and the 30522-piece vocabulary stay the real
teacher's, so the chains carve, tokenize and convert what they would at full
scale.
"""

import dataclasses
import json
import os
import re
import sys

from absl import app

from experiments.common.real_teacher import MINILM
from tfmodels.command_options import define_flags, from_flags, option

# The files of a Hugging Face directory a teacher's readers look at, copied
# as they are beside the cut model.
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json")
_LAYER = re.compile(r"(?:^|\.)layer\.(\d+)\.")


@dataclasses.dataclass(frozen=True, kw_only=True)
class TinyTeacherOptions:
  teacher: str = option(MINILM, "A named pretrained teacher "
                        "(tfmodels.checkpoints.teachers).")
  layers: int = option(2, "Layers kept: the teacher's first N.")
  output_dir: str = option(None, "The Hugging Face directory to write.",
                           required=True)


define_flags(TinyTeacherOptions)


def layer_of(name):
  """The encoder layer a tensor belongs to (None: embeddings, pooler)."""
  match = _LAYER.search(name)
  return int(match.group(1)) if match else None


def write_tiny_teacher(source, layers, output_dir):
  """`source`'s first `layers` layers as a Hugging Face directory at
  `output_dir`; returns (kept tensors, dropped tensors)."""
  from safetensors.numpy import load_file, save
  from tfmodels.configs import read_json_object
  from tfmodels.staging import staged_directory
  config = read_json_object(os.path.join(source, "config.json"))
  held = config.get("num_hidden_layers")
  if not isinstance(held, int) or not 1 <= layers <= held:
    raise ValueError(f"--layers {layers}: the teacher has {held} layers")
  tensors = load_file(os.path.join(source, "model.safetensors"))
  kept = {k: v for k, v in tensors.items()
          if layer_of(k) is None or layer_of(k) < layers}
  with staged_directory(output_dir, "tiny_teacher", "--output_dir") as out:
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
      f.write(save(kept, metadata={"format": "pt"}))
    with open(os.path.join(out, "config.json"), "w") as f:
      json.dump({**config, "num_hidden_layers": layers}, f, indent=2)
    for name in TOKENIZER_FILES:
      if os.path.isfile(os.path.join(source, name)):
        with open(os.path.join(source, name), "rb") as f, open(
            os.path.join(out, name), "wb") as g:
          g.write(f.read())
  return len(kept), len(tensors) - len(kept)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(TinyTeacherOptions)
  from tfmodels.checkpoints.teachers import teacher_dir
  from tfmodels.checkpoints.weight_mapping import CheckpointError
  from tfmodels.configs import ConfigError
  from tfmodels.staging import OutputError, check_output
  try:
    check_output(options.output_dir, "--output_dir", True, "tiny_teacher")
    kept, dropped = write_tiny_teacher(teacher_dir(options.teacher),
                                       options.layers, options.output_dir)
  except (CheckpointError, ConfigError, OSError, OutputError,
          ValueError) as e:
    sys.exit(f"error: {e}")
  print(f"{options.teacher}: first {options.layers} layers ({kept} tensors "
        f"kept, {dropped} dropped) -> {options.output_dir}")


def run():
  app.run(main)


if __name__ == "__main__":
  run()
