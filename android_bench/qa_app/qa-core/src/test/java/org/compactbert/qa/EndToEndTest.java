package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The logits a converted span model gave for real questions (recorded by the Python twin) go
 * through the app's whole path, QuestionAnswerer included, and come out as the twin's answers.
 */
class EndToEndTest {

  /** Plays back the recorded logits, after checking it is fed the recorded inputs. */
  private static final class ReplayRunner implements ModelRunner {
    private final Golden.QaCase recorded;
    private final int length;
    int calls;

    ReplayRunner(Golden.QaCase recorded, int length) {
      this.recorded = recorded;
      this.length = length;
    }

    @Override
    public int sequenceLength() {
      return length;
    }

    @Override
    public void run(int[] ids, int[] mask, int[] segmentIds, float[] startLogits,
        float[] endLogits) {
      Golden.Window w = recorded.windows.get(calls++);
      assertArrayEquals(w.ids, ids, recorded + ": ids of window " + w.index);
      assertArrayEquals(w.mask, mask, recorded + ": mask of window " + w.index);
      assertArrayEquals(w.segmentIds, segmentIds, recorded + ": segments of window " + w.index);
      System.arraycopy(w.startLogits, 0, startLogits, 0, length);
      System.arraycopy(w.endLogits, 0, endLogits, 0, length);
    }
  }

  @Test
  void recordedModelLogitsDecodeToTheTwinsAnswers() throws IOException {
    Golden.Table table = Golden.read("end_to_end.tsv.gz");
    List<Golden.QaCase> cases = Golden.cases(table);
    WordPieceTokenizer tokenizer =
        new WordPieceTokenizer(Golden.vocabulary(), table.setting("lower_case") == 1);
    int length = table.setting("sequence_length");
    int longest = 0;
    for (Golden.QaCase c : cases) {
      ReplayRunner runner = new ReplayRunner(c, length);
      QuestionAnswerer qa = new QuestionAnswerer(tokenizer, runner,
          new FeatureBuilder(Golden.vocabulary(), length, table.setting("doc_stride"),
              table.setting("max_query_length")),
          new AnswerDecoder(table.setting("n_best_size"), table.setting("max_answer_length")));
      QuestionAnswerer.Result result = qa.answer(c.passage, c.question);
      assertEquals(c.windows.size(), runner.calls, c + ": model runs");
      assertEquals(c.windows.size(), result.windows());
      assertEquals(c.answer, result.answer().text(), c.toString());
      assertTrue(result.inferenceNanos() > 0 && result.totalNanos() >= result.inferenceNanos());
      longest = Math.max(longest, c.windows.size());
      System.out.println(c + ": '" + result.answer().text() + "' from " + result.windows()
          + " window(s)");
    }
    assertTrue(cases.size() >= 3, cases.size() + " cases");
    assertTrue(longest >= 2, "no passage longer than one window");
    System.out.println("model: " + table.text("model"));
  }
}
