package org.compactbert.qa;

import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * Start/end logits of every window to one answer, the algorithm of
 * {@code tfmodels.data.squad.postprocess}.
 *
 * <p>In each window, the {@code nBest} highest start logits are paired with the {@code nBest}
 * highest end logits; a pair counts when both ends lie in the passage part of the window, the end
 * is not before the start, the span has at most {@code maxAnswerLength} pieces and the start is
 * scored by this window (max context). The best start + end logit over all windows wins, and its
 * pieces' offsets, widened to the whitespace-delimited words they sit in ({@link #wholeWords}),
 * cut the answer out of the original passage: the TFLite Task Library's BertQuestionAnswerer
 * answers whole words, and so does {@code squad.postprocess(word_edges=True)}, the Python twin's
 * decoder. Ties go to the earlier window, then the earlier start, then the earlier end, exactly as
 * the Python side breaks them.
 */
public final class AnswerDecoder {
  public static final int DEFAULT_N_BEST = 20;
  public static final int DEFAULT_MAX_ANSWER_LENGTH = 32;

  private final int nBest;
  private final int maxAnswerLength;

  public AnswerDecoder() {
    this(DEFAULT_N_BEST, DEFAULT_MAX_ANSWER_LENGTH);
  }

  public AnswerDecoder(int nBest, int maxAnswerLength) {
    if (nBest <= 0 || maxAnswerLength <= 0) {
      throw new IllegalArgumentException(
          "n-best and max answer length must be positive: " + nBest + ", " + maxAnswerLength);
    }
    this.nBest = nBest;
    this.maxAnswerLength = maxAnswerLength;
  }

  /**
   * @param passage the text the features were built from
   * @param startLogits one row per feature, {@code [features][sequence length]}
   */
  public Answer decode(String passage, List<QaFeature> features, float[][] startLogits,
      float[][] endLogits) {
    if (startLogits.length != features.size() || endLogits.length != features.size()) {
      throw new IllegalArgumentException("logits for " + startLogits.length + " and "
          + endLogits.length + " windows do not match " + features.size() + " features");
    }
    Answer best = Answer.NONE;
    for (int f = 0; f < features.size(); f++) {
      QaFeature feature = features.get(f);
      float[] s = startLogits[f];
      float[] e = endLogits[f];
      if (s.length != feature.sequenceLength() || e.length != feature.sequenceLength()) {
        throw new IllegalArgumentException("window " + f + ": logits of length " + s.length
            + " and " + e.length + " for a sequence of " + feature.sequenceLength());
      }
      int lo = feature.contextOffset();
      int hi = lo + feature.windowLength();
      int bestStart = -1;
      int bestEnd = -1;
      double bestScore = Double.NEGATIVE_INFINITY;
      Integer[] topEnds = top(e, nBest);
      for (int start : top(s, nBest)) {
        if (start < lo || start >= hi || !feature.isMaxContext(start - lo)) {
          continue;
        }
        for (int end : topEnds) {
          if (end < start || end >= hi || end - start + 1 > maxAnswerLength) {
            continue;
          }
          double score = (double) s[start] + (double) e[end];
          if (bestStart < 0 || score > bestScore) {
            bestStart = start;
            bestEnd = end;
            bestScore = score;
          }
        }
      }
      if (bestStart >= 0 && bestScore > best.score()) {
        int[] words = wholeWords(passage, feature.charStart(bestStart - lo),
            feature.charEnd(bestEnd - lo));
        best = new Answer(passage.substring(words[0], words[1]), words[0], words[1], bestScore, f,
            bestStart, bestEnd);
      }
    }
    return best;
  }

  /**
   * Passage offsets {@code [from, to)} widened to the whitespace-delimited words they touch, as
   * {@code {from, to}}: back to the word's first character, on to its last ("numbly," for the
   * "umbly" of its {@code ##} pieces). Whitespace is what the tokenizer splits words at
   * ({@link BertNormalizer#isWhitespace}). An empty span (a piece of a character that normalizes
   * to several, the "1" of "\u00bd") becomes the word holding it.
   */
  static int[] wholeWords(String passage, int from, int to) {
    int start = Math.min(from, to);
    int end = Math.max(from, to);
    while (start > 0 && !BertNormalizer.isWhitespace(passage.codePointBefore(start))) {
      start -= Character.charCount(passage.codePointBefore(start));
    }
    while (end < passage.length() && !BertNormalizer.isWhitespace(passage.codePointAt(end))) {
      end += Character.charCount(passage.codePointAt(end));
    }
    return new int[] {start, end};
  }

  /** Positions of the n largest logits, ties in position order (numpy's stable argsort). */
  static Integer[] top(float[] logits, int n) {
    Integer[] order = new Integer[logits.length];
    for (int i = 0; i < order.length; i++) {
      order[i] = i;
    }
    // Compares values, not Float.compare: -0.0 and 0.0 tie, as they do for numpy.
    Comparator<Integer> descending = (a, b) -> logits[a] > logits[b] ? -1
        : logits[a] < logits[b] ? 1 : 0;
    Arrays.sort(order, descending);  // stable merge sort for objects
    return Arrays.copyOf(order, Math.min(n, order.length));
  }
}
