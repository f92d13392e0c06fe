package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The pieces on small inputs whose right answers are known by hand. */
class UnitTest {
  private static final String SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";

  private static Vocabulary vocab(String text) throws IOException {
    return Vocabulary.load(new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)), "v");
  }

  @Test
  void vocabularyIsCheckedLikeThePythonOne() throws IOException {
    Vocabulary v = vocab(SPECIALS + "the\r\nquick\n\n\n");
    assertEquals(7, v.size());
    assertEquals(6, v.id("quick"));
    assertEquals(-1, v.id("fox"));
    assertEquals(2, v.clsId());
    assertTrue(assertThrows(IOException.class, () -> vocab("")).getMessage()
        .contains("v: vocabulary is empty"));
    assertTrue(assertThrows(IOException.class, () -> vocab("[PAD]\n[UNK]\n[CLS]\n[SEP]\nthe\n"))
        .getMessage().contains("lacks [MASK]"));
    assertTrue(assertThrows(IOException.class, () -> vocab(SPECIALS + "the\nthe\n"))
        .getMessage().contains("v:7: duplicate token"));
    assertTrue(assertThrows(IOException.class, () -> vocab(SPECIALS + "\nthe\n"))
        .getMessage().contains("v:6: empty token"));
  }

  @Test
  void greedyLongestMatchFirst() throws IOException {
    Vocabulary v = vocab(SPECIALS + "un\nunaff\n##aff\n##able\n##a\n##ble\n!\n");
    WordPieceTokenizer t = new WordPieceTokenizer(v, true);
    assertArrayEquals(new String[] {"unaff", "##able", "!"}, t.tokenize("UNAFFABLE!"));
    // One piece unknown: the whole word is [UNK], its offsets the whole word.
    Encoding e = t.encode("unaffxble ok!");
    assertArrayEquals(new String[] {"[UNK]", "[UNK]", "!"}, e.pieces());
    assertArrayEquals(new int[] {0, 10, 12}, e.starts());
    assertArrayEquals(new int[] {9, 12, 13}, e.ends());
  }

  @Test
  void windowsOverlapByTheStride() {
    List<int[]> w = FeatureBuilder.windows(10, 4, 2);
    assertEquals("[[0, 4], [2, 4], [4, 4], [6, 4]]", toString(w));
    assertEquals("[[0, 0]]", toString(FeatureBuilder.windows(0, 4, 2)));
    assertEquals("[[0, 3]]", toString(FeatureBuilder.windows(3, 4, 2)));
    // A stride longer than the window never skips pieces.
    assertEquals("[[0, 4], [4, 4], [8, 2]]", toString(FeatureBuilder.windows(10, 4, 9)));
    // Piece 3 sits in windows 0..1 (positions 3 and 1): window 0 has no right context.
    int[] best = FeatureBuilder.maxContextWindow(w, 10);
    assertArrayEquals(new int[] {0, 0, 0, 1, 1, 2, 2, 3, 3, 3}, best);
  }

  private static String toString(List<int[]> spans) {
    StringBuilder b = new StringBuilder("[");
    for (int[] s : spans) {
      b.append(b.length() > 1 ? ", " : "").append(Arrays.toString(s));
    }
    return b.append("]").toString();
  }

  @Test
  void featuresFollowTheQaLayout() throws IOException {
    Vocabulary v = vocab(SPECIALS + "what\n?\nw\n");
    WordPieceTokenizer t = new WordPieceTokenizer(v, true);
    FeatureBuilder builder = new FeatureBuilder(v, 10, 2, 64);
    List<QaFeature> f = builder.build(t.encode("what?"), t.encode("w w w w w w w"));
    // [CLS] what ? [SEP] (5 passage pieces) [SEP]; 7 pieces -> windows at 0 and 2.
    assertEquals(2, f.size());
    assertArrayEquals(new int[] {2, 5, 6, 3, 7, 7, 7, 7, 7, 3}, f.get(0).inputIds());
    assertArrayEquals(new int[] {0, 0, 0, 0, 1, 1, 1, 1, 1, 1}, f.get(0).segmentIds());
    assertEquals(4, f.get(1).contextOffset());
    assertEquals(2, f.get(1).windowStart());
    assertArrayEquals(new int[] {4, 5}, f.get(1).charSpan(4));
    assertThrows(IllegalArgumentException.class,
        () -> new FeatureBuilder(v, 5, 2, 64).build(t.encode("what?"), t.encode("w")));
  }

  @Test
  void decoderFiltersAndBreaksTiesLikeNumpy() throws IOException {
    Vocabulary v = vocab(SPECIALS + "q\nw\nx\n");
    WordPieceTokenizer t = new WordPieceTokenizer(v, true);
    String passage = "w x w x";
    List<QaFeature> f = new FeatureBuilder(v, 10, 2, 64).build(t.encode("q"), t.encode(passage));
    // Positions: 0 [CLS], 1 q, 2 [SEP], 3..6 passage, 7 [SEP], 8..9 padding.
    float[] start = {0, 9, 0, 1, 1, 0, 0, 0, 9, 0};
    float[] end = {0, 0, 0, 0, 1, 1, 0, 9, 0, 9};
    Answer a = new AnswerDecoder(20, 32).decode(passage, f, new float[][] {start},
        new float[][] {end});
    // The question, [SEP] and padding are refused; (3, 4), (3, 5), (4, 4), (4, 5) all score
    // 1 + 1: the first start, then the first end, wins.
    assertEquals("w x", a.text());
    assertEquals(3, a.startPosition());
    assertEquals(4, a.endPosition());
    a = new AnswerDecoder(20, 1).decode(passage, f, new float[][] {start}, new float[][] {end});
    assertEquals(4, a.startPosition());  // one-piece answers only
    assertEquals("x", a.text());
    // -0.0 and 0.0 are equal, so position order decides.
    assertArrayEquals(new Integer[] {0, 1, 2},
        AnswerDecoder.top(new float[] {-0.0f, 0.0f, -1}, 3));
    assertArrayEquals(new Integer[] {0, 1},
        AnswerDecoder.top(new float[] {0.0f, -0.0f, -1}, 2));
    assertEquals(Answer.NONE, new AnswerDecoder(1, 1).decode(passage, f,
        new float[][] {{0, 0, 0, 0, 0, 0, 0, 9, 0, 0}}, new float[][] {end}));
  }
}
