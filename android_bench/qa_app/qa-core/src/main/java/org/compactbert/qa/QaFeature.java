package org.compactbert.qa;

/**
 * One model input: {@code [CLS] question [SEP] window of the passage [SEP]}, padded, plus where
 * the window's pieces sit in the passage ({@code FeatureMeta} in {@code tfmodels/data/squad.py}).
 */
public final class QaFeature {
  private final int windowIndex;
  private final int[] inputIds;
  private final int[] inputMask;
  private final int[] segmentIds;
  private final int contextOffset;
  private final int windowStart;
  private final int[] charStart;
  private final int[] charEnd;
  private final boolean[] isMaxContext;

  QaFeature(int windowIndex, int[] inputIds, int[] inputMask, int[] segmentIds,
      int contextOffset, int windowStart, int[] charStart, int[] charEnd,
      boolean[] isMaxContext) {
    this.windowIndex = windowIndex;
    this.inputIds = inputIds;
    this.inputMask = inputMask;
    this.segmentIds = segmentIds;
    this.contextOffset = contextOffset;
    this.windowStart = windowStart;
    this.charStart = charStart;
    this.charEnd = charEnd;
    this.isMaxContext = isMaxContext;
  }

  public int windowIndex() {
    return windowIndex;
  }

  /** Token ids, {@code [1, L]} input {@code ids} of the model. */
  public int[] inputIds() {
    return inputIds.clone();
  }

  /** 1 for real tokens, 0 for padding: input {@code mask}. */
  public int[] inputMask() {
    return inputMask.clone();
  }

  /** 0 for the question part, 1 for the passage window and its [SEP]: {@code segment_ids}. */
  public int[] segmentIds() {
    return segmentIds.clone();
  }

  public int sequenceLength() {
    return inputIds.length;
  }

  /** Input position of the window's first passage piece. */
  public int contextOffset() {
    return contextOffset;
  }

  /** Index, in the passage's pieces, of the window's first piece. */
  public int windowStart() {
    return windowStart;
  }

  public int windowLength() {
    return charStart.length;
  }

  /** Passage offsets [start, end) of input {@code position}, or null off the passage. */
  public int[] charSpan(int position) {
    int k = position - contextOffset;
    if (k < 0 || k >= charStart.length) {
      return null;
    }
    return new int[] {charStart[k], charEnd[k]};
  }

  /** True when this window is where passage piece {@code k} (window-relative) has most context. */
  public boolean isMaxContext(int k) {
    return isMaxContext[k];
  }

  int charStart(int k) {
    return charStart[k];
  }

  int charEnd(int k) {
    return charEnd[k];
  }
}
