package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The logits a converted span model gave for real questions (recorded by the Python twin) go
 * through the app's whole path, QuestionAnswerer included, and come out as the twin's answers.
 */
class EndToEndTest {

  /**
   * Plays back the recorded logits, after checking it is fed the recorded inputs; a dynamic one
   * (a model of shape signature [1, -1]) checks each window comes cut to WindowLength.of its tokens.
   */
  private static final class ReplayRunner implements ModelRunner {
    private final Golden.QaCase recorded;
    private final int length;
    private final boolean dynamic;
    int calls;

    ReplayRunner(Golden.QaCase recorded, int length, boolean dynamic) {
      this.recorded = recorded;
      this.length = length;
      this.dynamic = dynamic;
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
    public void run(int[] ids, int[] mask, int[] segmentIds, float[] startLogits,
        float[] endLogits) {
      Golden.Window w = recorded.windows.get(calls++);
      int n = dynamic ? WindowLength.of(WindowLength.tokens(w.mask), length) : length;
      assertEquals(n, ids.length, recorded + ": run length of window " + w.index);
      assertArrayEquals(Arrays.copyOf(w.ids, n), ids, recorded + ": ids of window " + w.index);
      assertArrayEquals(Arrays.copyOf(w.mask, n), mask, recorded + ": mask of window " + w.index);
      assertArrayEquals(Arrays.copyOf(w.segmentIds, n), segmentIds,
          recorded + ": segments of window " + w.index);
      System.arraycopy(w.startLogits, 0, startLogits, 0, n);
      System.arraycopy(w.endLogits, 0, endLogits, 0, n);
    }
  }

  @Test
  void recordedModelLogitsDecodeToTheTwinsAnswers() throws IOException {
    answerTheRecordedCases(false);
  }

  /**
   * The same questions on a dynamic-length model: each window runs only its tokens (rounded up to
   * 32), its padding gets PADDING_LOGIT, and the answers stay the twin's.
   */
  @Test
  void aDynamicModelRunsEachWindowAtItsOwnLength() throws IOException {
    answerTheRecordedCases(true);
  }

  @Test
  void windowLengthsAreTheTwinsMultiplesOf32() {
    int[] tokens = {0, 1, 32, 33, 383, 500};
    int[] want = {32, 32, 32, 64, 384, 384};
    for (int i = 0; i < tokens.length; i++) {
      assertEquals(want[i], WindowLength.of(tokens[i], 384), tokens[i] + " tokens");
    }
  }

  private static void answerTheRecordedCases(boolean dynamic) throws IOException {
    Golden.Table table = Golden.read("end_to_end.tsv.gz");
    List<Golden.QaCase> cases = Golden.cases(table);
    WordPieceTokenizer tokenizer =
        new WordPieceTokenizer(Golden.vocabulary(), table.setting("lower_case") == 1);
    int length = table.setting("sequence_length");
    int longest = 0;
    for (Golden.QaCase c : cases) {
      ReplayRunner runner = new ReplayRunner(c, length, dynamic);
      QuestionAnswerer qa = new QuestionAnswerer(tokenizer, runner,
          new FeatureBuilder(Golden.vocabulary(), length, table.setting("doc_stride"),
              table.setting("max_query_length")),
          new AnswerDecoder(table.setting("n_best_size"), table.setting("max_answer_length")));
      QuestionAnswerer.Result result = qa.answer(c.passage, c.question);
      assertEquals(c.windows.size(), runner.calls, c + ": model runs");
      assertEquals(c.windows.size(), result.windows());
      assertEquals(c.answer, result.answer().text(), c.toString());
      assertTrue(result.inferenceNanos() > 0 && result.totalNanos() >= result.inferenceNanos());
      for (int n : result.lengths()) {
        assertTrue(dynamic ? n % WindowLength.STEP == 0 && n <= length : n == length, c + ": " + n);
      }
      longest = Math.max(longest, c.windows.size());
      System.out.println(c + ": '" + result.answer().text() + "' from " + result.windows()
          + " window(s)");
    }
    assertTrue(cases.size() >= 3, cases.size() + " cases");
    assertTrue(longest >= 2, "no passage longer than one window");
    System.out.println("model: " + table.text("model"));
  }
}
