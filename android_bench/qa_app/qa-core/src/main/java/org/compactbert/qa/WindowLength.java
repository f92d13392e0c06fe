package org.compactbert.qa;

/**
 * The length a window runs at on a dynamic-length model (convert_tflite's default: shape signature
 * {@code [1, -1]}): the smallest multiple of {@link #STEP} that holds its real tokens, at most the
 * model's default length. The Python twin picks the same ({@code SpanModel.window_length}), so a
 * question costs its tokens, not 384 positions of padding.
 */
public final class WindowLength {
  /** converters/contract.py's LENGTH_STEP. */
  public static final int STEP = 32;

  /** The logit of the positions a shortened window did not run: never a start or an end. */
  public static final float PADDING_LOGIT = -1e4f;

  private WindowLength() {}

  /** The run length of a window with {@code tokens} real tokens on a model of length {@code max}. */
  public static int of(int tokens, int max) {
    int steps = (Math.max(tokens, 1) + STEP - 1) / STEP;
    return Math.min(max, steps * STEP);
  }

  /** Real tokens of a window: its mask's ones. */
  static int tokens(int[] mask) {
    int n = 0;
    for (int m : mask) {
      n += m != 0 ? 1 : 0;
    }
    return n;
  }
}
