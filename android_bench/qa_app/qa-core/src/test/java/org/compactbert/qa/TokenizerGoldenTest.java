package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;

/** Pieces and offsets equal tfmodels.tokenization's (the reference BERT tokenizer's) on real text. */
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
  void piecesSpanTheOriginalCharactersTheyCameFrom() throws IOException {
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(Golden.vocabulary(), true);
    // Hangul syllables decompose into jamo: every jamo piece spans its syllable.
    Encoding hangul = tokenizer.encode("\uD55C\uAD6D");
    assertTrue(hangul.size() > 2);
    for (int k = 0; k < hangul.size(); k++) {
      assertEquals(1, hangul.end(k) - hangul.start(k), "piece " + k);
    }
    // A dropped accent and a deleted zero-width space belong to no piece.
    Encoding accent = tokenizer.encode("cafe\u0301 x");
    assertEquals("cafe", accent.piece(0));
    assertEquals(0, accent.start(0));
    assertEquals(4, accent.end(0));
    Encoding joined = tokenizer.encode("zero\u200Bwidth.");
    assertArrayEquals(tokenizer.tokenize("zerowidth."), joined.pieces());
    assertEquals(".", "zero\u200Bwidth.".substring(joined.start(joined.size() - 1),
        joined.end(joined.size() - 1)));
  }

  @Test
  void overlongWordsAreUnknownByCharactersAfterNormalization() throws IOException {
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(Golden.vocabulary(), true);
    assertEquals("aaa", tokenizer.tokenize("a".repeat(100))[0]);
    assertArrayEquals(new String[] {"[UNK]", "."}, tokenizer.tokenize("a".repeat(101) + "."));
    // 100 Cyrillic letters are 200 UTF-8 bytes, still a word.
    assertNotEquals("[UNK]", tokenizer.tokenize("\u0436".repeat(100))[0]);
    // 120 characters, but the accents go: 80 left, not unknown.
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
