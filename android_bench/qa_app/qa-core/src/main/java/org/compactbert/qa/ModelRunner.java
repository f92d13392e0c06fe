package org.compactbert.qa;

/**
 * Runs the span model on one window. The core never sees the runtime: the Android app implements
 * this with LiteRT's Interpreter, the tests with recorded logits.
 */
public interface ModelRunner extends AutoCloseable {
  /** L of the model's {@code [1, L]} inputs (a dynamic-length model's default shape). */
  int sequenceLength();

  /**
   * Whether the model takes inputs {@code [1, n]} of any n (shape signature {@code [1, -1]}): the
   * core then runs each window at {@link WindowLength#of} its tokens instead of L.
   */
  default boolean dynamicLength() {
    return false;
  }

  /**
   * Fills {@code startLogits} and {@code endLogits} for inputs {@code ids}, {@code mask},
   * {@code segmentIds}, all of the window's run length n (L, or less on a dynamic-length model).
   */
  void run(int[] ids, int[] mask, int[] segmentIds, float[] startLogits, float[] endLogits);

  @Override
  default void close() {}
}
