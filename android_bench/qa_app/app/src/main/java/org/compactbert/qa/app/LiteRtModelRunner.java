package org.compactbert.qa.app;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.compactbert.qa.ModelRunner;
import org.tensorflow.lite.DataType;
import org.tensorflow.lite.Interpreter;
import org.tensorflow.lite.Tensor;

/**
 * The span model on LiteRT's Interpreter, through its signature runner.
 *
 * <p>Tensors are found by their signature names ({@code ids}, {@code mask}, {@code segment_ids}
 * in; {@code start_logits}, {@code end_logits} out), never by position: a converted model may list
 * {@code segment_ids} before {@code mask}, and feeding them swapped gives confident nonsense.
 * A model without these names is refused with a message that lists the names it has.
 *
 * <p>A dynamic-length model (shape signature {@code [1, -1]}, convert_tflite's default) is fed
 * arrays of each window's run length; {@code runSignature} resizes its inputs to them.
 */
final class LiteRtModelRunner implements ModelRunner {
  static final String[] INPUTS = {"ids", "mask", "segment_ids"};
  static final String[] OUTPUTS = {"start_logits", "end_logits"};

  private final Interpreter interpreter;
  private final String signatureKey;
  private final int length;
  private final boolean dynamic;
  private int[][] ids;
  private int[][] mask;
  private int[][] segments;
  private float[][] start;
  private float[][] end;
  private final Map<String, Object> inputs = new HashMap<>();
  private final Map<String, Object> outputs = new HashMap<>();

  /** @param model the .tflite flat buffer (memory-mapped from assets or a file) */
  LiteRtModelRunner(ByteBuffer model, int numThreads) {
    Interpreter.Options options = new Interpreter.Options();
    options.setNumThreads(numThreads);
    interpreter = new Interpreter(model, options);
    try {
      signatureKey = pickSignature(interpreter.getSignatureKeys());
      requireNames("inputs", interpreter.getSignatureInputs(signatureKey), INPUTS);
      requireNames("outputs", interpreter.getSignatureOutputs(signatureKey), OUTPUTS);
      Tensor idsTensor = interpreter.getInputTensorFromSignature("ids", signatureKey);
      int[] shape = idsTensor.shape();
      if (shape.length != 2 || shape[0] != 1) {
        throw new IllegalArgumentException(
            "input ids has shape " + Arrays.toString(shape) + ", expected [1, L]");
      }
      for (String name : INPUTS) {
        Tensor t = interpreter.getInputTensorFromSignature(name, signatureKey);
        if (t.dataType() != DataType.INT32 || !Arrays.equals(t.shape(), shape)) {
          throw new IllegalArgumentException("input " + name + " is " + t.dataType() + " "
              + Arrays.toString(t.shape()) + ", expected INT32 " + Arrays.toString(shape));
        }
      }
      length = shape[1];
      dynamic = Arrays.equals(idsTensor.shapeSignature(), new int[] {1, -1});
    } catch (RuntimeException e) {
      interpreter.close();
      throw e;
    }
    buffers(length);
  }

  /** Input and output arrays of one run length, in the signature's maps. */
  private void buffers(int n) {
    ids = new int[1][n];
    mask = new int[1][n];
    segments = new int[1][n];
    start = new float[1][n];
    end = new float[1][n];
    inputs.put("ids", ids);
    inputs.put("mask", mask);
    inputs.put("segment_ids", segments);
    outputs.put("start_logits", start);
    outputs.put("end_logits", end);
  }

  private static String pickSignature(String[] keys) {
    if (keys.length == 1) {
      return keys[0];
    }
    if (Arrays.asList(keys).contains("serving_default")) {
      return "serving_default";
    }
    throw new IllegalArgumentException("the model has signatures " + Arrays.toString(keys)
        + "; expected one (convert it with convert_tflite.py)");
  }

  private void requireNames(String kind, String[] have, String[] want) {
    List<String> present = Arrays.asList(have);
    for (String name : want) {
      if (!present.contains(name)) {
        throw new IllegalArgumentException("signature '" + signatureKey + "' has " + kind + " "
            + present + ", but not '" + name + "'");
      }
    }
  }

  @Override
  public int sequenceLength() {
    return length;
  }

  @Override
  public boolean dynamicLength() {
    return dynamic;
  }

  @Override
  public void run(int[] inputIds, int[] inputMask, int[] segmentIds, float[] startLogits,
      float[] endLogits) {
    int n = inputIds.length;
    if (n != ids[0].length) {
      if (!dynamic && n != length) {
        throw new IllegalArgumentException("a window of " + n + " tokens for a model of length "
            + length);
      }
      buffers(n);
    }
    System.arraycopy(inputIds, 0, ids[0], 0, n);
    System.arraycopy(inputMask, 0, mask[0], 0, n);
    System.arraycopy(segmentIds, 0, segments[0], 0, n);
    interpreter.runSignature(inputs, outputs, signatureKey);
    System.arraycopy(start[0], 0, startLogits, 0, n);
    System.arraycopy(end[0], 0, endLogits, 0, n);
  }

  /** Native time of the last window, in nanoseconds (null before the first run). */
  Long lastNativeNanos() {
    return interpreter.getLastNativeInferenceDurationNanoseconds();
  }

  @Override
  public void close() {
    interpreter.close();
  }
}
