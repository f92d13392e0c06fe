r"""Where an int8 file departs from its float32 file, layer by layer.

    python -m converters.layer_errors --model_dir RUN \
        --tflite RUN_int8.tflite --reference RUN_float32.tflite \
        --data_dir data/wordnet_qa [--examples 16]

A whole-model score says that an int8 file lost (or, oddly, gained)
accuracy; this says where. The same dev windows (--model_dir's task and
length) go through both files, whose intermediate tensors LiteRT keeps
(`experimental_preserve_all_tensors`). The float32 file is the float
reference: convert_tflite validates it against the Keras model, and both
files fold and fuse the same ops (a NoNorm folded into the next
projection), so their tensors match by name where Keras's could not. They
must come from one convert_tflite run (`--modes float32,int8`): with
calibration data the export also equalizes the residual streams of the
NoNorms it keeps (a per-channel scale moved into the weights), and a
float32 file converted alone does not, so its streams would hold other
scales than the int8 file's under the same names. The files' model cards
say what was done; different ones are refused.
Each layer's output is the last tensor of the layer (its ops are named
after the Keras layers: `.../layer_3_ffn/...`, `.../layer_3/...`) that is
hidden-size wide and in both files. Per layer:

  rel_error     ||int8 - float|| / ||float|| over the windows' real tokens
  max_abs       the largest difference
  clipped       the share of the float activations outside the range the
                int8 tensor can hold (scale x [-128, 127] about its zero
                point): values calibration did not see, cut off
  range         the float activations' [min, max] and the int8 range
  tensor        the tensor compared

Written as JSON (--output) and printed as a table.
"""

import dataclasses
import json
import os
import re
import sys

import numpy as np

from tfmodels import markdown
from tfmodels.command_options import (define_flags, from_flags, option,
                                      run_command)


@dataclasses.dataclass(frozen=True, kw_only=True)
class LayerErrorOptions:
  """The command line; `main` builds it with `command_options.from_flags`."""
  model_dir: str | None = option(None, "The model both files were "
                                 "converted from (its config, task and "
                                 "vocabulary).", required=True)
  tflite: str | None = option(None, "The int8 .tflite file.", required=True)
  reference: str | None = option(None, "The float32 .tflite file of the "
                                 "same model.", required=True)
  data_dir: str | None = option(None, "The task's data; dev windows are "
                                "compared.", required=True)
  examples: int = option(16, "Dev windows compared.")
  max_seq_length: int = option(0, "Window length (0: the run's "
                               "task.json).")
  vocab_file: str | None = option(None, "vocab.txt (default: the run's).")
  output: str | None = option(None, "Where the JSON goes (default: print "
                              "only).")


def define_command_flags():
  """Defines the flags, when run as a command only (tests import its
  functions beside other commands' flags)."""
  define_flags(LayerErrorOptions)


def layer_tensors(ops, names, widths, num_layers, width):
  """{layer: name of its output tensor}: of the tensors `width` wide whose
  name (its first part, where the converter fused several ops) lies inside
  `layer_i_` or `layer_i/`, the last one computed. `ops`: lists of output
  tensor indices in execution order; `names`/`widths`: by tensor index."""
  pattern = re.compile(r"(?:^|/)layer_(\d+)(?:_|/)")
  found = {}
  for outputs in ops:
    for index in outputs:
      name = names.get(index, "").split(";")[0]
      layers = set(pattern.findall(name))
      if len(layers) == 1 and widths.get(index) == width:
        found[int(layers.pop())] = name
  return {i: found[i] for i in range(num_layers) if i in found}


def compare(float_states, int8_states, quantization, mask):
  """Per layer: relative error, largest difference, clipped share and
  ranges of the int8 states against the float ones, over the mask's
  tokens. `float_states`/`int8_states`: {layer: [N, L, H]};
  `quantization`: {layer: (scale, zero point)} (scale 0: a float
  tensor)."""
  rows = []
  real = mask.astype(bool)
  for layer in sorted(int8_states):
    k, f = float_states[layer][real], int8_states[layer][real]
    scale, zero = quantization[layer]
    low, high = ((-128 - zero) * scale, (127 - zero) * scale) if scale else (
        None, None)
    clipped = (float(np.mean((k < low) | (k > high))) if scale else 0.0)
    rows.append({
        "layer": layer,
        "rel_error": float(np.linalg.norm(f - k) / max(np.linalg.norm(k),
                                                       1e-12)),
        "max_abs": float(np.max(np.abs(f - k))),
        "clipped": clipped,
        "float_range": [float(k.min()), float(k.max())],
        "int8_range": None if not scale else [float(low), float(high)]})
  return rows


class _File:
  """A .tflite file run window by window, every tensor kept."""

  def __init__(self, path):
    from ai_edge_litert.interpreter import Interpreter
    self.interpreter = Interpreter(model_path=path,
                                   experimental_preserve_all_tensors=True)
    key = next(iter(self.interpreter.get_signature_list()))
    self.inputs = self.interpreter.get_signature_list()[key]["inputs"]
    self.runner = self.interpreter.get_signature_runner(key)
    self.details = None

  def run(self, inputs, row):
    self.runner(**{n: inputs[n][row:row + 1] for n in self.inputs})
    if self.details is None:  # shapes are known once it ran at a length
      self.details = {d["index"]: d
                      for d in self.interpreter.get_tensor_details()}
      self.by_name = {}
      for index, d in self.details.items():
        self.by_name.setdefault(d["name"].split(";")[0], index)

  def ops(self):
    return [list(op["outputs"]) for op in
            self.interpreter._get_ops_details()]  # pylint: disable=protected-access

  def value(self, name):
    """[L, H] dequantized, and (scale, zero point)."""
    index = self.by_name[name]
    v = self.interpreter.get_tensor(index)
    scale, zero = self.details[index]["quantization"]
    if scale:
      v = (v.astype(np.float32) - zero) * scale
    return v[0], (float(scale), int(zero))


def layer_states(int8_path, float_path, inputs, num_layers, width):
  """({layer: int8 [N, L, H]}, {layer: float [N, L, H]}, {layer: (scale,
  zero point)}, {layer: tensor name}) over the windows."""
  files = _File(int8_path), _File(float_path)
  n, length = inputs["ids"].shape
  int8, flt, quantization = {}, {}, {}
  for row in range(n):
    for f in files:
      f.run(inputs, row)
    if row == 0:
      reference = files[1]
      common = {i: d["name"] for i, d in reference.details.items()
                if d["name"].split(";")[0] in files[0].by_name}
      chosen = layer_tensors(
          reference.ops(), common,
          {i: int(d["shape"][-1]) for i, d in reference.details.items()
           if len(d["shape"]) == 3}, num_layers, width)
    for layer, name in chosen.items():
      q, quantization[layer] = files[0].value(name)
      f, _ = files[1].value(name)
      int8.setdefault(layer, np.zeros((n, length, width), np.float32))[
          row] = q
      flt.setdefault(layer, np.zeros((n, length, width), np.float32))[
          row] = f
  return int8, flt, quantization, chosen


def check_same_folding(tflite, reference):
  """ValueError when the model cards beside the two files say their NoNorms
  were folded or equalized differently (a card without the record: not
  known, not refused)."""
  folding = {}
  for flag, path in (("--tflite", tflite), ("--reference", reference)):
    card = os.path.splitext(path)[0] + ".model_card.json"
    if os.path.exists(card):
      with open(card) as f:
        folding[flag] = json.load(f).get("nonorm_folding")
  known = [v for v in folding.values() if v is not None]
  if len(known) == 2 and known[0] != known[1]:
    raise ValueError(
        f"--reference {reference}: its NoNorms were exported as "
        f"{folding['--reference']}, --tflite's as {folding['--tflite']}; "
        "the same tensor holds other per-channel scales in each (convert "
        "both in one convert_tflite run: --modes float32,int8)")


def measure(options):
  """The rows of every layer (`compare`) and what they were measured on."""
  from converters import source, validate
  from tfmodels.configs import load_config
  from tfmodels.tokenization import WordPieceTokenizer
  from tfmodels.training.tasks import make_task
  from tfmodels.vocab_record import resolve
  config = load_config(os.path.join(options.model_dir, "config.json"))
  task_spec = source.read_task(options.model_dir)
  length = options.max_seq_length or task_spec.get("max_seq_length")
  if not length:
    raise ValueError(f"--model_dir {options.model_dir}: no task.json "
                     "length; give --max_seq_length")
  vocab = resolve(options.model_dir, options.vocab_file,
                  model_flag="--model_dir")
  task = make_task(task_spec.get("task", "squad"), options.data_dir,
                   WordPieceTokenizer(vocab), length)
  inputs = validate.contract_inputs(task.features("dev", options.examples),
                                    slice(0, options.examples))
  int8, reference, quantization, tensors = layer_states(
      options.tflite, options.reference, inputs, config.num_hidden_layers,
      config.hidden_size)
  if not int8:
    raise ValueError(f"--tflite {options.tflite}: no layer output tensor "
                     f"(layer_N_..., {config.hidden_size} wide) in both it "
                     "and --reference; not converted from --model_dir?")
  return {"model_dir": os.path.abspath(options.model_dir),
          "tflite": os.path.abspath(options.tflite),
          "reference": os.path.abspath(options.reference),
          "examples": int(inputs["ids"].shape[0]), "max_seq_length": length,
          "layers": [dict(r, tensor=tensors[r["layer"]]) for r in compare(
              reference, int8, quantization, inputs["mask"])]}


def table(result):
  lines = [f"{result['tflite']} against {result['reference']} "
           f"({result['examples']} dev windows, L = "
           f"{result['max_seq_length']})", "",
           *markdown.table(
               ["layer", "rel. error", "max abs", "clipped", "float range",
                "int8 range"],
               ([r["layer"], f"{r['rel_error']:.4f}", f"{r['max_abs']:.3f}",
                 f"{100 * r['clipped']:.2f}%",
                 f"[{r['float_range'][0]:.1f}, {r['float_range'][1]:.1f}]",
                 f"[{r['int8_range'][0]:.1f}, {r['int8_range'][1]:.1f}]"
                 if r["int8_range"] else "float"]
                for r in result["layers"]))]
  return "\n".join(lines)


def main(argv):
  if len(argv) > 1:
    sys.exit(f"error: unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(LayerErrorOptions)
  if options.examples < 1:
    sys.exit(f"error: --examples {options.examples}: give 1 or more")
  for flag in ("model_dir", "tflite", "reference", "data_dir"):
    if not os.path.exists(getattr(options, flag)):
      sys.exit(f"error: --{flag} {getattr(options, flag)}: no such file or "
               "directory")
  try:
    check_same_folding(options.tflite, options.reference)
    result = measure(options)
  except (ValueError, OSError) as e:
    sys.exit(f"error: {str(e).splitlines()[0]}")
  print(table(result))
  if options.output:
    from tfmodels.staging import write_file
    write_file(options.output, json.dumps(result, indent=1) + "\n")


def run():
  run_command(define_command_flags, main)


if __name__ == "__main__":
  run()
