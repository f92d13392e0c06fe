"""Runs a .tflite file on feeds from an .npz file and saves what it returns.

The script `android_bench.arm64` starts inside the emulated arm64 Python
(qemu-user, `make arm64-root`), and the host's Python can run it too, so
both sides of a comparison go through the same lines. It imports only
numpy, ai_edge_litert, the standard library and the repository's plain-
Python `converters/delegates.py`: the arm64 root has nothing else.

    python arm64_runner.py --model m.tflite --feeds feeds.npz \
        --outputs outputs.npz --info info.json [--threads 1] [--repeats 0]

feeds.npz holds `"<feed>:<input name>"` arrays (feed 0, 1, ...; their
lengths may differ, a dynamic [1, -1] signature is resized per feed);
outputs.npz gets `"<feed>:<output name>"`. Each feed runs once, then
--repeats more times between two `mark`s (the inferences the qemu
plugin counts instructions of). The
interpreter is LiteRT's default: the XNNPACK delegate on --threads
threads; info.json says how many nodes it took. Failures: one line
`arm64_runner: error: ...` on stderr, exit status 2.
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

# Run as a script (in the arm64 root too) the repository is not on the path;
# converters/delegates.py is plain Python either side can import.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
from converters.delegates import delegate_coverage  # noqa: E402

ERROR_STATUS = 2
# The instruction-count plugin (`arm64_root.PLUGIN_SOURCE`) counts what runs
# between two marks: lseek(-1, MARK_OFFSET, SEEK_SET) starts a section and
# SEEK_CUR ends it. The call fails (a bad descriptor) and does nothing
# anywhere else, the host included.
MARK_OFFSET = 0x41524D36


class RunnerError(Exception):
  """A feed, model or signature this script cannot run; one line."""


def mark(end):
  """Starts (end=False) or ends a counted section for the qemu plugin."""
  try:
    os.lseek(-1, MARK_OFFSET, os.SEEK_CUR if end else os.SEEK_SET)
  except OSError:
    pass


def feed_key(index, name):
  return f"{index}:{name}"


def split_key(key):
  """(feed index, tensor name) of an .npz key; names may hold ':'."""
  index, _, name = key.partition(":")
  if not index.isdigit() or not name:
    raise RunnerError(f"bad array name {key!r}: want '<feed>:<tensor>'")
  return int(index), name


def save_arrays(path, dicts):
  """A list of {name: array} -> one .npz, written whole or not at all."""
  staging = f"{path}.partial.npz"
  np.savez(staging, **{feed_key(i, name): np.asarray(value)
                       for i, values in enumerate(dicts)
                       for name, value in values.items()})
  os.replace(staging, path)


def load_arrays(path):
  """The list of {name: array} `save_arrays` wrote."""
  with np.load(path, allow_pickle=False) as stored:
    dicts = {}
    for key in stored.files:
      index, name = split_key(key)
      dicts.setdefault(index, {})[name] = stored[key]
  if sorted(dicts) != list(range(len(dicts))):
    raise RunnerError(f"{path}: feeds {sorted(dicts)} are not 0..n-1")
  return [dicts[i] for i in range(len(dicts))]


def _versions():
  from importlib import metadata
  found = {"numpy": np.__version__}
  try:
    found["ai-edge-litert"] = metadata.version("ai-edge-litert")
  except metadata.PackageNotFoundError:
    found["ai-edge-litert"] = None
  return found


def xnnpack_coverage(interpreter):
  """{replaced, nodes, partitions}: the nodes the delegate took."""
  replaced, nodes, partitions = delegate_coverage(interpreter)
  return {"replaced": replaced, "nodes": nodes, "partitions": partitions}


def pick_signature(interpreter, model_path, key):
  """`key`, or the model's only signature (or serving_default)."""
  signatures = interpreter.get_signature_list()
  if not signatures:
    raise RunnerError(f"{model_path}: the model has no signature (convert "
                      "it with named inputs)")
  if key is not None:
    if key not in signatures:
      raise RunnerError(f"{model_path}: no signature {key!r} (it has "
                        f"{sorted(signatures)})")
    return key
  if len(signatures) == 1:
    return next(iter(signatures))
  if "serving_default" in signatures:
    return "serving_default"
  raise RunnerError(f"{model_path}: several signatures {sorted(signatures)}; "
                    "name one")


def _checked_feed(details, feed, index, model_path):
  """The feed as the signature wants it (its names, its dtypes); refused
  in one line otherwise. Shapes are left to the runner's resize."""
  missing = sorted(set(details) - set(feed))
  extra = sorted(set(feed) - set(details))
  if missing or extra:
    raise RunnerError(f"{model_path}: feed {index} "
                      + (f"lacks {', '.join(missing)}" if missing else "")
                      + ("; " if missing and extra else "")
                      + (f"has unknown {', '.join(extra)}" if extra else "")
                      + f" (inputs: {', '.join(sorted(details))})")
  checked = {}
  for name, value in feed.items():
    want = np.dtype(details[name]["dtype"])
    value = np.asarray(value)
    if value.dtype != want and not np.can_cast(value.dtype, want, "same_kind"):
      raise RunnerError(f"{model_path}: feed {index} input {name} is "
                        f"{value.dtype}, the model wants {want}")
    checked[name] = value.astype(want, copy=False)
  return checked


def run_feeds(model_path, feeds, num_threads=1, signature_key=None,
              repeats=0):
  """(outputs, info): each feed's {output name: array} and what ran.

  One interpreter with LiteRT's default delegate (XNNPACK) on `num_threads`
  threads; each feed runs 1 + `repeats` times in a row (same shape, so
  only the first resizes; the repeats between `mark`s). info: machine,
  versions, signature, XNNPACK coverage, invokes, wall seconds (under
  emulation these are no latency)."""
  from ai_edge_litert import interpreter as litert
  if num_threads < 1 or repeats < 0:
    raise RunnerError(f"threads {num_threads} (>= 1), repeats {repeats} "
                      "(>= 0)")
  begin = time.perf_counter()
  try:
    interpreter = litert.Interpreter(
        model_path=str(model_path), num_threads=num_threads,
        experimental_op_resolver_type=litert.OpResolverType.AUTO)
  except (ValueError, RuntimeError, OSError) as e:
    first = (str(e).strip().splitlines() or [repr(e)])[0]
    raise RunnerError(f"{model_path}: cannot load the model ({first})"
                      ) from None
  key = pick_signature(interpreter, model_path, signature_key)
  runner = interpreter.get_signature_runner(key)
  details = runner.get_input_details()
  loaded = time.perf_counter()
  outputs, invokes = [], 0
  for index, feed in enumerate(feeds):
    feed = _checked_feed(details, feed, index, model_path)
    try:
      result = runner(**feed)
      outputs.append({name: np.array(value) for name, value in result.items()})
      if repeats:
        mark(False)
        for _ in range(repeats):
          runner(**feed)
        mark(True)
      invokes += 1 + repeats
    except (ValueError, RuntimeError) as e:
      first = (str(e).strip().splitlines() or [repr(e)])[0]
      shapes = {n: list(np.shape(v)) for n, v in feed.items()}
      raise RunnerError(f"{model_path}: feed {index} {shapes} failed "
                        f"({first})") from None
  info = {"machine": platform.machine(), "versions": _versions(),
          "signature_key": key, "num_threads": num_threads,
          "xnnpack": xnnpack_coverage(interpreter), "invokes": invokes,
          "load_s": loaded - begin, "run_s": time.perf_counter() - loaded}
  return outputs, info


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--model", required=True)
  parser.add_argument("--feeds", required=True)
  parser.add_argument("--outputs", required=True)
  parser.add_argument("--info", required=True)
  parser.add_argument("--threads", type=int, default=1)
  parser.add_argument("--signature_key", default=None)
  parser.add_argument("--repeats", type=int, default=0)
  args = parser.parse_args(argv)
  try:
    if not os.path.isfile(args.model):
      raise RunnerError(f"{args.model}: no such model file")
    feeds = load_arrays(args.feeds)
    outputs, info = run_feeds(args.model, feeds, args.threads,
                              args.signature_key, args.repeats)
    save_arrays(args.outputs, outputs)
  except (RunnerError, OSError, ValueError) as e:
    print(f"arm64_runner: error: {e}", file=sys.stderr)
    return ERROR_STATUS
  staging = f"{args.info}.partial"
  with open(staging, "w", encoding="utf-8") as f:
    json.dump(info, f)
  os.replace(staging, args.info)
  return 0


if __name__ == "__main__":
  sys.exit(main())
