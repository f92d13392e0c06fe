package org.compactbert.qa;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * Question + passage to model inputs, the algorithm of {@code tfmodels.data.squad.build_features}.
 *
 * <p>The question keeps its first {@code maxQueryLength} pieces. A passage longer than what is
 * left of {@code maxSeqLength} is cut into windows that start {@code docStride} pieces apart, so
 * no part of it is lost (the official example truncates instead). Each passage piece is scored
 * by the window where it has the most context on both sides (BERT's max-context rule), so the
 * decoder takes each answer start from one window only.
 */
public final class FeatureBuilder {
  public static final int DEFAULT_MAX_SEQ_LENGTH = 384;
  public static final int DEFAULT_DOC_STRIDE = 128;
  public static final int DEFAULT_MAX_QUERY_LENGTH = 64;

  private final int clsId;
  private final int sepId;
  private final int maxSeqLength;
  private final int docStride;
  private final int maxQueryLength;

  public FeatureBuilder(Vocabulary vocabulary) {
    this(vocabulary, DEFAULT_MAX_SEQ_LENGTH, DEFAULT_DOC_STRIDE, DEFAULT_MAX_QUERY_LENGTH);
  }

  public FeatureBuilder(Vocabulary vocabulary, int maxSeqLength, int docStride,
      int maxQueryLength) {
    if (docStride <= 0) {
      throw new IllegalArgumentException("doc stride must be positive, got " + docStride);
    }
    if (maxQueryLength < 0) {
      throw new IllegalArgumentException("max query length must be >= 0, got " + maxQueryLength);
    }
    this.clsId = vocabulary.clsId();
    this.sepId = vocabulary.sepId();
    this.maxSeqLength = maxSeqLength;
    this.docStride = docStride;
    this.maxQueryLength = maxQueryLength;
  }

  public int maxSeqLength() {
    return maxSeqLength;
  }

  /** One feature per window of {@code passage}; at least one, even for an empty passage. */
  public List<QaFeature> build(Encoding question, Encoding passage) {
    int queryLength = Math.min(question.size(), maxQueryLength);
    int maxPieces = maxSeqLength - queryLength - 3;
    if (maxPieces <= 0) {
      throw new IllegalArgumentException("sequence length " + maxSeqLength
          + " leaves no room for the passage after a " + queryLength + "-piece question");
    }
    int numPieces = passage.size();
    List<int[]> windows = windows(numPieces, maxPieces, docStride);
    int[] bestWindow = maxContextWindow(windows, numPieces);
    int offset = queryLength + 2;
    List<QaFeature> features = new ArrayList<>(windows.size());
    for (int w = 0; w < windows.size(); w++) {
      int start = windows.get(w)[0];
      int length = windows.get(w)[1];
      int[] ids = new int[maxSeqLength];
      int[] mask = new int[maxSeqLength];
      int[] segments = new int[maxSeqLength];
      int n = 0;
      ids[n++] = clsId;
      for (int i = 0; i < queryLength; i++) {
        ids[n++] = question.id(i);
      }
      ids[n++] = sepId;
      int[] charStart = new int[length];
      int[] charEnd = new int[length];
      boolean[] maxContext = new boolean[length];
      for (int k = 0; k < length; k++) {
        ids[n++] = passage.id(start + k);
        charStart[k] = passage.start(start + k);
        charEnd[k] = passage.end(start + k);
        maxContext[k] = bestWindow[start + k] == w;
      }
      ids[n++] = sepId;
      Arrays.fill(mask, 0, n, 1);
      Arrays.fill(segments, offset, n, 1);
      features.add(new QaFeature(w, ids, mask, segments, offset, start, charStart, charEnd,
          maxContext));
    }
    return features;
  }

  /** BERT's doc spans {start, length}; one empty span for an empty passage. */
  static List<int[]> windows(int numPieces, int maxPieces, int docStride) {
    List<int[]> spans = new ArrayList<>();
    int start = 0;
    while (start < numPieces) {
      int length = Math.min(numPieces - start, maxPieces);
      spans.add(new int[] {start, length});
      if (start + length == numPieces) {
        break;
      }
      start += Math.min(length, docStride);
    }
    if (spans.isEmpty()) {
      spans.add(new int[] {0, 0});
    }
    return spans;
  }

  /**
   * Per passage piece, the window where min(left, right context) + 0.01 * window length is
   * highest; the first window wins ties (the same double arithmetic as the numpy version).
   */
  static int[] maxContextWindow(List<int[]> spans, int numPieces) {
    int[] best = new int[numPieces];
    double[] bestScore = new double[numPieces];
    Arrays.fill(best, -1);
    Arrays.fill(bestScore, Double.NEGATIVE_INFINITY);
    for (int w = 0; w < spans.size(); w++) {
      int start = spans.get(w)[0];
      int length = spans.get(w)[1];
      int end = start + length - 1;
      for (int p = start; p <= end; p++) {
        double score = Math.min(p - start, end - p) + 0.01 * length;
        if (score > bestScore[p]) {
          bestScore[p] = score;
          best[p] = w;
        }
      }
    }
    return best;
  }
}
