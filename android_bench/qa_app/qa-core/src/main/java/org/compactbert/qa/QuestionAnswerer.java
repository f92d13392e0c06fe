package org.compactbert.qa;

import java.util.Arrays;
import java.util.List;

/**
 * The whole path from text to answer: tokenize, build windows, run the model on each, decode (the
 * answer is the passage's whole words the best span touches, as the Task Library answers).
 *
 * <pre>{@code
 * QuestionAnswerer qa = new QuestionAnswerer(tokenizer, runner);
 * QuestionAnswerer.Result r = qa.answer(passage, "Who wrote it?");
 * r.answer().text();  r.inferenceNanos();
 * }</pre>
 */
public final class QuestionAnswerer {
  private final WordPieceTokenizer tokenizer;
  private final ModelRunner runner;
  private final FeatureBuilder features;
  private final AnswerDecoder decoder;

  /** Default windows (stride 128, question <= 64 pieces) and decoding (n-best 20, <= 32 pieces). */
  public QuestionAnswerer(WordPieceTokenizer tokenizer, ModelRunner runner) {
    this(tokenizer, runner,
        new FeatureBuilder(tokenizer.vocabulary(), runner.sequenceLength(),
            FeatureBuilder.DEFAULT_DOC_STRIDE, FeatureBuilder.DEFAULT_MAX_QUERY_LENGTH),
        new AnswerDecoder());
  }

  public QuestionAnswerer(WordPieceTokenizer tokenizer, ModelRunner runner,
      FeatureBuilder features, AnswerDecoder decoder) {
    if (features.maxSeqLength() != runner.sequenceLength()) {
      throw new IllegalArgumentException("features of length " + features.maxSeqLength()
          + " for a model of length " + runner.sequenceLength());
    }
    this.tokenizer = tokenizer;
    this.runner = runner;
    this.features = features;
    this.decoder = decoder;
  }

  /** What {@link #answer} found, and how long the model took. */
  public static final class Result {
    private final Answer answer;
    private final int windows;
    private final long inferenceNanos;
    private final long totalNanos;
    private final int[] lengths;

    Result(Answer answer, int windows, long inferenceNanos, long totalNanos, int[] lengths) {
      this.answer = answer;
      this.windows = windows;
      this.inferenceNanos = inferenceNanos;
      this.totalNanos = totalNanos;
      this.lengths = lengths;
    }

    /** The length each window ran at (L on a fixed-length model). */
    public int[] lengths() {
      return lengths.clone();
    }

    public Answer answer() {
      return answer;
    }

    /** How many windows (model runs) the passage needed. */
    public int windows() {
      return windows;
    }

    /** Time inside the model runner, summed over the windows. */
    public long inferenceNanos() {
      return inferenceNanos;
    }

    /** Time of the whole call, tokenization and decoding included. */
    public long totalNanos() {
      return totalNanos;
    }
  }

  public Result answer(String passage, String question) {
    long begin = System.nanoTime();
    List<QaFeature> windows =
        features.build(tokenizer.encode(question), tokenizer.encode(passage));
    int length = runner.sequenceLength();
    float[][] start = new float[windows.size()][length];
    float[][] end = new float[windows.size()][length];
    int[] lengths = new int[windows.size()];
    long inference = 0;
    for (int w = 0; w < windows.size(); w++) {
      QaFeature f = windows.get(w);
      int n = runner.dynamicLength() ? WindowLength.of(WindowLength.tokens(f.inputMask()), length)
          : length;
      lengths[w] = n;
      float[] s = n == length ? start[w] : new float[n];
      float[] e = n == length ? end[w] : new float[n];
      long t = System.nanoTime();
      runner.run(Arrays.copyOf(f.inputIds(), n), Arrays.copyOf(f.inputMask(), n),
          Arrays.copyOf(f.segmentIds(), n), s, e);
      inference += System.nanoTime() - t;
      if (n < length) {  // what the window did not run can never be a start or an end
        System.arraycopy(s, 0, start[w], 0, n);
        System.arraycopy(e, 0, end[w], 0, n);
        Arrays.fill(start[w], n, length, WindowLength.PADDING_LOGIT);
        Arrays.fill(end[w], n, length, WindowLength.PADDING_LOGIT);
      }
    }
    Answer answer = decoder.decode(passage, windows, start, end);
    return new Result(answer, windows.size(), inference, System.nanoTime() - begin, lengths);
  }
}
