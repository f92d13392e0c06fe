package org.compactbert.qa;

/**
 * Runs the span model on one window. The core never sees the runtime: the Android app implements
 * this with LiteRT's Interpreter, the tests with recorded logits.
 */
public interface ModelRunner extends AutoCloseable {
  /** L of the model's fixed {@code [1, L]} inputs. */
  int sequenceLength();

  /**
   * Fills {@code startLogits} and {@code endLogits} (length L) for inputs {@code ids},
   * {@code mask}, {@code segmentIds} (length L).
   */
  void run(int[] ids, int[] mask, int[] segmentIds, float[] startLogits, float[] endLogits);

  @Override
  default void close() {}
}
