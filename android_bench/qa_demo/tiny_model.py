"""A tiny converted span model, for tests and fixtures until a real one exists.

A seeded, untrained `tiny_mobilebert` span model widened to the real
vocabulary and 384 positions, exported through a tf.function whose inputs are
named `ids`, `mask`, `segment_ids` and whose outputs are `start_logits`,
`end_logits` (the contract `converters/convert_tflite.py` follows), and
converted with `TFLiteConverter.from_concrete_functions`. Its answers mean
nothing; its logits are real TFLite outputs, which is what the end-to-end
fixture needs. Pass `golden --model` a converted QA model to replace it.

    model = export_tiny_span_model("/tmp/tiny_qa.tflite", vocab_size=30522)
"""

import os
import tempfile

from android_bench.qa_demo import INPUT_NAMES, SEQUENCE_LENGTH

CONFIG = "tiny_mobilebert"


def export_tiny_span_model(path, vocab_size, sequence_length=SEQUENCE_LENGTH,
                           seed=0, config_name=CONFIG):
  """Writes the `.tflite` file atomically and returns the Keras model."""
  import tensorflow as tf
  import tf_keras as keras

  from tfmodels.checkpoints.model_dir import Head, build_model
  from tfmodels.configs import load_config

  keras.utils.set_random_seed(seed)
  config = load_config(config_name).replace(
      vocab_size=vocab_size, max_position_embeddings=sequence_length)
  model = build_model(config, Head(kind="span"))

  @tf.function(input_signature=[
      tf.TensorSpec([1, sequence_length], tf.int32, name=n)
      for n in INPUT_NAMES])
  def serve(ids, mask, segment_ids):
    out = model({"input_ids": ids, "input_mask": mask,
                 "segment_ids": segment_ids}, training=False)
    return {"start_logits": out["start_logits"],
            "end_logits": out["end_logits"]}

  converter = tf.lite.TFLiteConverter.from_concrete_functions(
      [serve.get_concrete_function()], model)
  content = converter.convert()
  directory = os.path.dirname(os.path.abspath(path))
  os.makedirs(directory, exist_ok=True)
  fd, staging = tempfile.mkstemp(prefix=".tiny-", suffix=".tflite",
                                 dir=directory)
  try:
    with os.fdopen(fd, "wb") as f:
      f.write(content)
    os.replace(staging, path)
  except BaseException:
    os.unlink(staging)
    raise
  return model
