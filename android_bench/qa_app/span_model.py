"""A converted span model on LiteRT's signature runner, tensors by name.

The converter does not promise an input order (a TFLite file may list
`segment_ids` before `mask`), and a model without metadata gives positions
only: binding by position is how the official example goes wrong. So the
inputs `ids`, `mask`, `segment_ids` and outputs `start_logits`, `end_logits`
are found in the model's signature by name, or the model is refused.

    model = SpanModel("qa.tflite", num_threads=4)
    start, end = model(ids, mask, segment_ids)   # int32 [L] each -> float32 [L]
"""

import time

import numpy as np

from android_bench.qa_app import (DEFAULT_THREADS, INPUT_NAMES, OUTPUT_NAMES,
                                   WINDOW_STEP, QaAppError)

# The logit a dynamic model's unrun padding positions get back: never a
# start or end (decode only looks at context tokens anyway).
PADDING_LOGIT = -1e4


class SpanModel:
  """A `.tflite` span model with a `[1, L]` signature; one whose length is
  dynamic (shape signature [1, -1], default [1, L]) runs each window at the
  smallest multiple of WINDOW_STEP that holds its tokens.

  Args:
    model_path: str, the `.tflite` file (e.g. `convert_tflite.py` output).
    num_threads: int, CPU threads of the interpreter.
    signature_key: str or None; None takes the model's only signature (or
      `serving_default` among several).
    fit_length: bool; False runs a dynamic model at its default length, as
      a fixed one (the time the app would pay without sizing windows).
  """

  def __init__(self, model_path, num_threads=DEFAULT_THREADS,
               signature_key=None, fit_length=True):
    from ai_edge_litert.interpreter import Interpreter
    self.model_path = str(model_path)
    try:
      self._interpreter = Interpreter(model_path=self.model_path,
                                      num_threads=num_threads)
    except (ValueError, RuntimeError, OSError) as e:
      first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
      raise QaAppError(f"{model_path}: cannot load the model ({first})"
                        ) from None
    signatures = self._interpreter.get_signature_list()
    self.signature_key = self._pick_signature(signatures, signature_key)
    found = signatures[self.signature_key]
    missing = [n for n in INPUT_NAMES if n not in found["inputs"]] + [
        n for n in OUTPUT_NAMES if n not in found["outputs"]]
    if missing:
      raise QaAppError(
          f"{model_path}: signature {self.signature_key!r} lacks "
          f"{', '.join(missing)} (it has inputs {sorted(found['inputs'])}, "
          f"outputs {sorted(found['outputs'])})")
    self._runner = self._interpreter.get_signature_runner(self.signature_key)
    details = self._runner.get_input_details()
    shapes = {n: tuple(int(d) for d in details[n]["shape"])
              for n in INPUT_NAMES}
    if len(set(shapes.values())) != 1 or len(shapes["ids"]) != 2 or (
        shapes["ids"][0] != 1):
      raise QaAppError(
          f"{model_path}: inputs must all be [1, L], got {shapes}")
    for name in INPUT_NAMES:
      if details[name]["dtype"] != np.int32:
        raise QaAppError(f"{model_path}: input {name} is "
                          f"{np.dtype(details[name]['dtype']).name}, not int32")
    self.sequence_length = shapes["ids"][1]
    signature = details["ids"].get("shape_signature")
    self.dynamic = signature is not None and list(signature) == [1, -1]
    self.fits = self.dynamic and fit_length
    self.last_latency_s = self.last_length = None

  def window_length(self, tokens):
    """The length a window with `tokens` real tokens runs at."""
    if not self.fits:
      return self.sequence_length
    steps = -(-max(int(tokens), 1) // WINDOW_STEP)
    return min(self.sequence_length, steps * WINDOW_STEP)

  def _pick_signature(self, signatures, key):
    if not signatures:
      raise QaAppError(
          f"{self.model_path}: the model has no signature; convert it with "
          f"named inputs {', '.join(INPUT_NAMES)}")
    if key is not None:
      if key not in signatures:
        raise QaAppError(f"{self.model_path}: no signature {key!r} "
                          f"(it has {sorted(signatures)})")
      return key
    if len(signatures) == 1:
      return next(iter(signatures))
    if "serving_default" in signatures:
      return "serving_default"
    raise QaAppError(f"{self.model_path}: several signatures "
                      f"{sorted(signatures)}; name one")

  def feed(self, ids, mask, segment_ids):
    """One window's inputs as the model runs them: {name: int32 [1, n]},
    n = `window_length` of its real tokens (the rest is masked padding)."""
    length = (self.window_length(np.count_nonzero(mask)) if self.fits
              else len(ids))
    return {name: np.asarray(value, np.int32).reshape(1, -1)[:, :length]
            for name, value in zip(INPUT_NAMES, (ids, mask, segment_ids))}

  def __call__(self, ids, mask, segment_ids):
    """One window: int arrays [L] -> (start_logits, end_logits) float32 [L].
    A dynamic model runs the window's first `window_length` tokens only;
    their logits come back padded to [L] (`padded`)."""
    feed = self.feed(ids, mask, segment_ids)
    begin = time.perf_counter()
    out = self._runner(**feed)
    self.last_latency_s = time.perf_counter() - begin
    self.last_length = feed["ids"].shape[1]
    return padded(out, len(ids))


def padded(outputs, full):
  """(start_logits, end_logits) of a window's run, float32 [full]: the
  positions it did not run get PADDING_LOGIT."""
  return tuple(
      np.pad(np.asarray(outputs[name], np.float32).reshape(-1),
             (0, full - np.asarray(outputs[name]).size),
             constant_values=PADDING_LOGIT)
      for name in OUTPUT_NAMES)
