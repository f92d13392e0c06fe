package org.compactbert.qa;

/**
 * The decoded answer: its text (the passage's whole words the best span touches), where it sits in
 * the passage (UTF-16 offsets of those words, for highlighting), its score (start logit + end
 * logit) and which window and input positions (its first and last piece) it came from.
 */
public final class Answer {
  /** No span passed the filters (empty passage, or every candidate was invalid). */
  public static final Answer NONE = new Answer("", -1, -1, Double.NEGATIVE_INFINITY, -1, -1, -1);

  private final String text;
  private final int start;
  private final int end;
  private final double score;
  private final int featureIndex;
  private final int startPosition;
  private final int endPosition;

  Answer(String text, int start, int end, double score, int featureIndex, int startPosition,
      int endPosition) {
    this.text = text;
    this.start = start;
    this.end = end;
    this.score = score;
    this.featureIndex = featureIndex;
    this.startPosition = startPosition;
    this.endPosition = endPosition;
  }

  public String text() {
    return text;
  }

  /** First passage offset of the answer, -1 for {@link #NONE}. */
  public int start() {
    return start;
  }

  /** Passage offset just after the answer, -1 for {@link #NONE}. */
  public int end() {
    return end;
  }

  public double score() {
    return score;
  }

  public boolean isEmpty() {
    return start < 0;
  }

  public int featureIndex() {
    return featureIndex;
  }

  public int startPosition() {
    return startPosition;
  }

  public int endPosition() {
    return endPosition;
  }

  @Override
  public String toString() {
    return "Answer{'" + text + "' [" + start + ", " + end + ") score=" + score + " window="
        + featureIndex + "}";
  }
}
