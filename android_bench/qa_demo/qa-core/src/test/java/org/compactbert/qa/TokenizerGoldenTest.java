package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Pieces and offsets equal tensorflow-text's (through tfmodels.tokenization) on real text. */
class TokenizerGoldenTest {

  @Test
  void idsAndOffsetsMatchPythonOnEverySentence() throws IOException {
    Golden.Table table = Golden.read("tokenization.tsv.gz");
    WordPieceTokenizer tokenizer =
        new WordPieceTokenizer(Golden.vocabulary(), table.setting("lower_case") == 1);
    List<String> mismatches = new ArrayList<>();
    int nonAscii = 0;
    int pieces = 0;
    for (String[] r : table.records) {
      String text = Golden.unescape(r[2]);
      Encoding e = tokenizer.encode(text);
      int[] ids = Golden.ints(r[3]);
      int[] starts = Golden.ints(r[4]);
      int[] ends = Golden.ints(r[5]);
      boolean same = Arrays.equals(ids, e.ids())
          && Arrays.equals(starts, Golden.toCodePoints(text, e.starts()))
          && Arrays.equals(ends, Golden.toCodePoints(text, e.ends()));
      if (!same) {
        mismatches.add(Golden.unescape(r[1]) + ": " + text + "\n  python " + Arrays.toString(ids)
            + "\n  java   " + Arrays.toString(e.ids()) + " " + String.join(" ", e.pieces()));
      }
      if (!text.chars().allMatch(c -> c < 128)) {
        nonAscii++;
      }
      pieces += ids.length;
    }
    assertTrue(mismatches.isEmpty(),
        () -> mismatches.size() + " sentence(s) differ, first: " + mismatches.get(0));
    assertTrue(table.records.size() >= 300, "only " + table.records.size() + " sentences");
    assertTrue(nonAscii >= 40, "only " + nonAscii + " non-ASCII sentences");
    assertTrue(pieces >= 10000, "only " + pieces + " pieces");
  }

  @Test
  void wellKnownExamples() throws IOException {
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(Golden.vocabulary(), true);
    assertArrayEquals(new String[] {"una", "##ffa", "##ble", "!"},
        tokenizer.tokenize("Unaffable!"));
    String text = "The Café de Flore, in Paris — 1,234 visitors.";
    Encoding e = tokenizer.encode(text);
    assertEquals("cafe", e.piece(1));
    assertEquals("Café", text.substring(e.start(1), e.end(1)));
    assertEquals("Fl", text.substring(e.start(3), e.end(3)));
    assertEquals("##ore", e.piece(4));
  }

  @Test
  void expandedCharactersGiveEmptySpansButTheLastOne() throws IOException {
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(Golden.vocabulary(), true);
    Encoding e = tokenizer.encode("a\u2026b");  // the ellipsis becomes three dots
    assertArrayEquals(new String[] {"a", ".", ".", ".", "b"}, e.pieces());
    assertArrayEquals(new int[] {0, 1, 1, 1, 2}, e.starts());
    assertArrayEquals(new int[] {1, 1, 1, 2, 3}, e.ends());
  }

  @Test
  void overlongWordsAreUnknownByUtf8BytesAfterNormalization() throws IOException {
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(Golden.vocabulary(), true);
    assertEquals("aaa", tokenizer.tokenize("a".repeat(100))[0]);
    assertArrayEquals(new String[] {"[UNK]", "."}, tokenizer.tokenize("a".repeat(101) + "."));
    // 120 characters, but the accents go: 80 bytes, not unknown.
    assertEquals("aba", tokenizer.tokenize("ab\u0301".repeat(40))[0]);
  }

  @Test
  void supplementaryCharactersKeepUtf16Offsets() throws IOException {
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(Golden.vocabulary(), true);
    String text = "\uD83D\uDE00 ok \uD840\uDC00";  // emoji, CJK extension B
    Encoding e = tokenizer.encode(text);
    assertEquals(3, e.size());
    assertEquals("\uD83D\uDE00", text.substring(e.start(0), e.end(0)));
    assertEquals("ok", text.substring(e.start(1), e.end(1)));
    assertEquals("\uD840\uDC00", text.substring(e.start(2), e.end(2)));
  }

  @Test
  void casedModeKeepsCapitals() throws IOException {
    WordPieceTokenizer cased = new WordPieceTokenizer(Golden.vocabulary(), false);
    // The uncased vocabulary has no capitals.
    assertArrayEquals(new String[] {"hello", "[UNK]"}, cased.tokenize("hello Hello"));
  }
}
