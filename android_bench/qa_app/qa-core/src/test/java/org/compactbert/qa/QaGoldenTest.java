package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * Windows and answers equal tfmodels.data.squad's (build_features, postprocess) on the golden
 * questions: shipped WordNet QA, long passages of several windows, non-Latin scripts, edges.
 */
class QaGoldenTest {
  private static Golden.Table table;
  private static List<Golden.QaCase> cases;
  private static WordPieceTokenizer tokenizer;
  private static FeatureBuilder builder;
  private static AnswerDecoder decoder;

  @BeforeAll
  static void load() throws IOException {
    table = Golden.read("qa.tsv.gz");
    cases = Golden.cases(table);
    tokenizer = new WordPieceTokenizer(Golden.vocabulary(), table.setting("lower_case") == 1);
    builder = new FeatureBuilder(Golden.vocabulary(), table.setting("sequence_length"),
        table.setting("doc_stride"), table.setting("max_query_length"));
    decoder = new AnswerDecoder(table.setting("n_best_size"), table.setting("max_answer_length"));
  }

  private static List<QaFeature> features(Golden.QaCase c) {
    return builder.build(tokenizer.encode(c.question), tokenizer.encode(c.passage));
  }

  @Test
  void featuresMatchPython() {
    int multiWindow = 0;
    for (Golden.QaCase c : cases) {
      List<QaFeature> features = features(c);
      assertEquals(c.windows.size(), features.size(), c + ": windows");
      multiWindow += features.size() > 1 ? 1 : 0;
      for (int w = 0; w < features.size(); w++) {
        QaFeature f = features.get(w);
        Golden.Window g = c.windows.get(w);
        String where = c + " window " + w;
        assertEquals(g.index, f.windowIndex(), where);
        assertArrayEquals(g.ids, f.inputIds(), where + ": ids");
        assertArrayEquals(g.mask, f.inputMask(), where + ": mask");
        assertArrayEquals(g.segmentIds, f.segmentIds(), where + ": segment ids");
        assertEquals(g.contextOffset, f.contextOffset(), where + ": context offset");
        assertEquals(g.charStart.length, f.windowLength(), where + ": window length");
        for (int k = 0; k < f.windowLength(); k++) {
          int[] span = f.charSpan(f.contextOffset() + k);
          assertEquals(g.charStart[k], c.passage.codePointCount(0, span[0]), where + " @" + k);
          assertEquals(g.charEnd[k], c.passage.codePointCount(0, span[1]), where + " @" + k);
          assertEquals(g.maxContext[k], f.isMaxContext(k), where + ": max context @" + k);
        }
      }
    }
    assertTrue(cases.size() >= 300, cases.size() + " cases");
    assertTrue(multiWindow >= 30, multiWindow + " passages longer than one window");
  }

  @Test
  void answersMatchPython() {
    int nonEmpty = 0;
    for (Golden.QaCase c : cases) {
      float[][] start = new float[c.windows.size()][];
      float[][] end = new float[c.windows.size()][];
      for (int w = 0; w < start.length; w++) {
        start[w] = c.windows.get(w).startLogits;
        end[w] = c.windows.get(w).endLogits;
      }
      Answer answer = decoder.decode(c.passage, features(c), start, end);
      assertEquals(c.answer, answer.text(), c.toString());
      if (!answer.isEmpty()) {
        assertEquals(answer.text(), c.passage.substring(answer.start(), answer.end()));
        nonEmpty += answer.text().isEmpty() ? 0 : 1;
      }
    }
    assertTrue(nonEmpty >= 250, nonEmpty + " non-empty answers");
  }
}
