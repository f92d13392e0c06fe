"""The GPU delegate's rules (converters/gpu_delegate.py) on tiny converted
graphs: what it refuses and why, where that leaves its one partition, and
the rewrites that avoid a refusal (a broadcast matmul instead of tensordot,
tf.unstack instead of slices).
"""

import flatbuffers
import numpy as np
import pytest
import tensorflow as tf
from ai_edge_litert import schema_py_generated as schema

from converters import gpu_delegate, tflite_file, validate

RNG = np.random.default_rng(0)
KERNEL = tf.constant(RNG.normal(size=[8, 16]).astype(np.float32))
BIAS = tf.constant(RNG.normal(size=[16]).astype(np.float32))
TABLE = tf.constant(RNG.normal(size=[50, 8]).astype(np.float32))


def convert(fn, *specs, float16=False):
  """A .tflite of `fn` over `specs` (float16: weights stored as float16)."""
  function = tf.function(fn, input_signature=list(specs))
  converter = tf.lite.TFLiteConverter.from_concrete_functions(
      [function.get_concrete_function()], function)
  if float16:
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
  return converter.convert()


def floats(*shape):
  return tf.TensorSpec(shape, tf.float32)


def ints(*shape):
  return tf.TensorSpec(shape, tf.int32)


def refused(data):
  return [(r["op"], r["count"], r["where"], r["reason"])
          for r in gpu_delegate.gpu_incompatible_ops(data)]


def encoder_layer(context, x):
  """The attention output of our fixed-length export: Keras' tensordot
  after the heads' reshape, then the residual add."""
  y = tf.tensordot(tf.reshape(context, [1, 8, 8]), KERNEL, [[2], [0]])
  return tf.nn.softmax(tf.matmul(y + BIAS + x, KERNEL, transpose_b=True))


def test_a_graph_of_supported_ops_is_one_gpu_partition(tmp_path):
  data = convert(lambda x: tf.nn.softmax(tf.nn.gelu(
      tf.matmul(x, KERNEL) + BIAS) * 2.0 - 1.0), floats(1, 6, 8))
  path = tmp_path / "model.tflite"
  path.write_bytes(data)
  report = gpu_delegate.gpu_delegate_report(str(path))
  assert report == {"rules": "LiteRT 1.4.1 GPU delegate",
                    "total_nodes": report["total_nodes"],
                    "gpu_nodes": report["total_nodes"], "gpu_partitions": 1,
                    "weights_dequantize": 0, "dynamic_shapes": False,
                    "refused": []}
  assert report["total_nodes"] == sum(tflite_file.op_histogram(data).values())
  assert gpu_delegate.gpu_incompatible_ops(data) == []


def test_int64_cast_and_top_k_are_named_with_their_reasons():
  # The analyzer calls this graph GPU-compatible; the delegate's op list
  # has no TOPK_V2 and its CAST goes between float32 and int32 only.
  data = convert(lambda x: (lambda values, indices: (
      values * 2.0, tf.cast(indices, tf.int64)))(*tf.math.top_k(x, k=2)),
                 floats(1, 8))
  assert set(tflite_file.op_histogram(data)) == {"TOPK_V2", "MUL", "CAST"}
  assert refused(data) == [
      ("CAST", 1, "no GPU op around it",
       "CAST INT32 -> INT64: the delegate casts only between float32 and "
       "int32, and bool <-> float"),
      ("TOPK_V2", 1, "before the GPU graph",
       "not in the GPU delegate's op list")]
  report = gpu_delegate.gpu_delegate_report(data)
  assert (report["gpu_nodes"], report["gpu_partitions"]) == (1, 1)


def test_an_int32_cast_to_float_is_taken_int64_tensors_are_not():
  mask = lambda m: tf.cast(m, tf.float32) * -1e4
  assert refused(convert(mask, ints(1, 8))) == []
  data = convert(lambda m: tf.cast(tf.reshape(tf.cast(m, tf.int64), [2, 4]),
                                   tf.float32) * 3.0, ints(1, 8))
  assert tflite_file.op_histogram(data) == {"CAST": 2, "RESHAPE": 1, "MUL": 1}
  assert refused(data) == [
      ("CAST", 1, "before the GPU graph",
       "CAST INT32 -> INT64: the delegate casts only between float32 and "
       "int32, and bool <-> float"),
      ("CAST", 1, "before the GPU graph",
       "CAST INT64 -> FLOAT32: the delegate casts only between float32 and "
       "int32, and bool <-> float"),
      ("RESHAPE", 1, "before the GPU graph",
       "INT64 input tensor: the delegate computes in float32 / float16 (int32 "
       "only into CAST, GATHER and ONE_HOT)")]
  # An int64 MUL is a newer version of the op than the delegate takes.
  data = convert(lambda m: tf.cast(tf.cast(m, tf.int64) * 3, tf.float32),
                 ints(1, 8))
  assert ("MUL", 1, "no GPU op around it",
          "version 5: the delegate takes MUL up to version 3") in refused(data)


def test_an_embedding_lookup_by_2d_ids_stays_before_the_gpu_graph():
  lookup = lambda ids: tf.nn.softmax(tf.matmul(tf.gather(TABLE, ids), TABLE,
                                               transpose_b=True))
  assert refused(convert(lookup, ints(1, 6))) == [
      ("GATHER", 1, "before the GPU graph",
       "indices of rank 2: the delegate gathers by 1-D indices only")]
  # 1-D indices meet the GATHER rule, but the ids' int32 reshape then stays
  # on the CPU in its place: nothing to win.
  flat = lambda ids: lookup(tf.reshape(ids, [-1]))
  assert refused(convert(flat, ints(1, 6))) == [
      ("RESHAPE", 1, "before the GPU graph",
       "INT32 input tensor: the delegate computes in float32 / float16 "
       "(int32 only into CAST, GATHER and ONE_HOT)")]


def test_a_2d_residual_add_splits_the_gpu_graph_and_matmul_avoids_it():
  specs = floats(1, 8, 2, 4), floats(1, 8, 16)
  data = convert(encoder_layer, *specs)
  report = gpu_delegate.gpu_delegate_report(data)
  assert report["refused"] == [{
      "op": "ADD", "count": 1, "where": "inside: splits the GPU graph",
      "reason": "broadcasts [8, 16] with [1, 8, 16]: the delegate broadcasts "
                "a lower rank only into 4-D ([1, H, W, C] with 3-D, [1, 1] "
                "or [B, C])",
      "means": gpu_delegate.WHERE_MEANS["inside: splits the GPU graph"]}]
  # RESHAPE -> FULLY_CONNECTED | ADD | FULLY_CONNECTED -> SOFTMAX
  assert report["total_nodes"] == 5
  assert (report["gpu_nodes"], report["gpu_partitions"]) == (2, 2)
  # A broadcast matmul keeps the dense's output 3-D: one partition.
  def matmul_layer(context, x):
    y = tf.matmul(tf.reshape(context, [1, 8, 8]), KERNEL)
    return tf.nn.softmax(tf.matmul(y + BIAS + x, KERNEL, transpose_b=True))
  rewritten = convert(matmul_layer, *specs)
  assert tflite_file.op_histogram(rewritten) == tflite_file.op_histogram(data)
  report = gpu_delegate.gpu_delegate_report(rewritten)
  assert (report["refused"], report["gpu_nodes"]) == ([], 5)


def test_output_slices_that_drop_an_axis_stay_after_the_gpu_graph():
  span = lambda x: (lambda logits: (logits[..., 0], logits[..., 1]))(
      tf.matmul(x, KERNEL[:, :2]))
  assert refused(convert(span, floats(1, 6, 8))) == [
      ("STRIDED_SLICE", 2, "after the GPU graph",
       "shrink_axis_mask: the delegate's slices keep every axis")]
  unstacked = lambda x: tuple(tf.unstack(tf.matmul(x, KERNEL[:, :2]), axis=-1))
  data = convert(unstacked, floats(1, 6, 8))
  assert "UNPACK" in tflite_file.op_histogram(data)
  assert refused(data) == []


def test_float16_weights_dequantize_into_the_gpu_graph():
  data = convert(lambda x: tf.nn.softmax(tf.matmul(x, KERNEL) + BIAS),
                 floats(1, 6, 8), float16=True)
  ops = tflite_file.op_histogram(data)
  assert ops["DEQUANTIZE"] >= 1
  report = gpu_delegate.gpu_delegate_report(data)
  assert report["refused"] == []
  assert report["weights_dequantize"] == ops["DEQUANTIZE"]
  assert report["gpu_nodes"] == report["total_nodes"] == sum(ops.values())
  # With a refusal the delegate keeps every DEQUANTIZE off its partition
  # (it reads the float16 weights themselves).
  data = convert(encoder_layer, floats(1, 8, 2, 4), floats(1, 8, 16),
                 float16=True)
  report = gpu_delegate.gpu_delegate_report(data)
  weights = tflite_file.op_histogram(data)["DEQUANTIZE"]
  assert report["weights_dequantize"] == weights
  assert [r["op"] for r in report["refused"]] == ["ADD"]
  assert report["total_nodes"] == 5 + weights and report["gpu_nodes"] == 2
  assert (f"(2 partitions; {weights} DEQUANTIZE of float16 weights it reads "
          "directly)") in validate._gpu_lines(report)[0]  # pylint: disable=protected-access


def with_version(data, op, version):
  """The model with `op`'s operator code at `version`."""
  model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
  for code in model.operatorCodes:
    if code.builtinCode == getattr(schema.BuiltinOperator, op):
      code.version = version
  builder = flatbuffers.Builder(1024)
  builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
  return bytes(builder.Output())


def test_an_op_version_past_the_delegates_is_refused():
  data = convert(lambda x: tf.reshape(x, [1, 48]) * 2.0, floats(1, 6, 8))
  assert refused(data) == []
  assert refused(with_version(data, "RESHAPE", 2)) == [
      ("RESHAPE", 1, "after the GPU graph",
       "version 2: the delegate takes RESHAPE up to version 1")]


def test_a_dynamic_length_is_reported():
  report = gpu_delegate.gpu_delegate_report(
      convert(lambda x: tf.nn.softmax(x * 2.0), floats(1, None)))
  assert report["dynamic_shapes"] is True and report["refused"] == []


def test_every_rule_names_a_tflite_builtin():
  builtins = {k for k in vars(schema.BuiltinOperator) if not k.startswith("_")}
  assert set(gpu_delegate._RULES) <= builtins  # pylint: disable=protected-access


def test_the_markdown_report_lists_them_per_float_mode():
  gpu = gpu_delegate.gpu_delegate_report(
      convert(encoder_layer, floats(1, 8, 2, 4), floats(1, 8, 16)))
  measured = {"size_bytes": 1, "ops": {"ADD": 1}, "float_ops": {"ADD": 1},
              "difference": {"max_abs": 0.0, "mean_abs": 0.0}}
  modes = {"float32": dict(measured, gpu_delegate=gpu), "int8": measured}
  text = validate.markdown(validate.build_report({}, None, modes))
  float32, int8 = text.split("## float32")[1].split("## int8")
  assert ("- GPU delegate (LiteRT 1.4.1 GPU delegate rules): 2 of 5 nodes "
          "in the one partition it takes by default (2 partitions); it "
          "cannot take:\n  - ADD 1: broadcasts [8, 16] with [1, 8, 16]"
          in float32)
  assert ("(inside: splits the GPU graph; costs a GPU -> CPU -> GPU round "
          "trip per inference: a rewrite should avoid it)") in float32
  assert "GPU delegate" not in int8
  modes["float32"]["gpu_delegate"] = dict(gpu, refused=[])
  assert ("- GPU delegate (LiteRT 1.4.1 GPU delegate rules): all 5 ops "
          "supported") in validate.markdown(validate.build_report({}, None,
                                                                  modes))


@pytest.mark.parametrize("bad", [b"", b"not a model at all"])
def test_bytes_that_are_no_model_are_refused(bad):
  with pytest.raises(tflite_file.TFLiteFileError):
    gpu_delegate.gpu_delegate_report(bad)
