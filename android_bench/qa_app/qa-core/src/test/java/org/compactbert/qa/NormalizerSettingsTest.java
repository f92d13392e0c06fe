package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/**
 * The normalizer and tokenizer under each of Hugging Face's settings: lower-case, strip accents
 * (null: as lower-case), isolate CJK ideographs; in BertNormalizer's order (strip, then lower).
 */
class NormalizerSettingsTest {
  private static final String SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  private static final TokenizerSettings UNCASED = TokenizerSettings.DEFAULT;
  private static final TokenizerSettings LOWER_KEEP_ACCENTS =
      new TokenizerSettings(true, false, true);
  private static final TokenizerSettings STRIP_ONLY = new TokenizerSettings(false, true, true);
  private static final TokenizerSettings CASED = new TokenizerSettings(false, null, true);
  private static final TokenizerSettings NO_CJK = new TokenizerSettings(true, null, false);

  /** The whole text normalized code point by code point, as the tokenizer does it. */
  private static String normalized(TokenizerSettings settings, String text) {
    BertNormalizer n = new BertNormalizer(settings);
    StringBuilder out = new StringBuilder();
    text.codePoints().forEach(cp -> {
      String s = n.normalize(cp);
      out.append(s == null ? new String(Character.toChars(cp)) : s);
    });
    return out.toString();
  }

  private static WordPieceTokenizer tokenizer(TokenizerSettings settings) throws IOException {
    String pieces = "résumé\nresume\nRésumé\ncafé\ncafe\n##s\n東\n京\n大\n学\n東京\n##大\n"
        + "##学\n。\n!\nüber\nuber\nü\n##ber\nber\n";
    Vocabulary v = Vocabulary.load(new ByteArrayInputStream(
        (SPECIALS + pieces).getBytes(StandardCharsets.UTF_8)), "v");
    return new WordPieceTokenizer(v, settings);
  }

  @Test
  void settingsFollowHuggingFacesDefaults() {
    assertTrue(UNCASED.stripsAccents());
    assertFalse(CASED.stripsAccents());
    assertTrue(STRIP_ONLY.stripsAccents());
    assertFalse(LOWER_KEEP_ACCENTS.stripsAccents());
    // The boolean constructors keep their meaning: uncased, or cased, CJK isolated either way.
    assertEquals(UNCASED, TokenizerSettings.of(true));
    assertEquals(CASED, TokenizerSettings.of(false));
    assertEquals(UNCASED, new BertNormalizer(true).settings());
    assertEquals(CASED, new WordPieceTokenizer(tokenizerVocabulary(), false).settings());
  }

  private static Vocabulary tokenizerVocabulary() {
    try {
      return tokenizer(UNCASED).vocabulary();
    } catch (IOException e) {
      throw new AssertionError(e);
    }
  }

  @Test
  void accentedLatin() throws IOException {
    String text = "Résumé Café ÜBER naïve";
    assertEquals("resume cafe uber naive", normalized(UNCASED, text));
    // Lower-case without NFD: the precomposed letters stay as they are.
    assertEquals("résumé café über naïve", normalized(LOWER_KEEP_ACCENTS, text));
    assertEquals("Resume Cafe UBER naive", normalized(STRIP_ONLY, text));
    assertEquals(text, normalized(CASED, text));
    assertArrayEquals(new String[] {"resume", "cafe", "uber", "[UNK]"},
        tokenizer(UNCASED).tokenize(text));
    assertArrayEquals(new String[] {"résumé", "café", "über", "[UNK]"},
        tokenizer(LOWER_KEEP_ACCENTS).tokenize(text));
    assertArrayEquals(new String[] {"Résumé", "[UNK]", "[UNK]", "[UNK]"},
        tokenizer(CASED).tokenize(text));
    assertArrayEquals(new String[] {"über", "##s"},
        tokenizer(LOWER_KEEP_ACCENTS).tokenize("Übers"));
    assertArrayEquals(new String[] {"uber", "##s"}, tokenizer(UNCASED).tokenize("Übers"));
    // Offsets index the original text in every setting.
    Encoding e = tokenizer(LOWER_KEEP_ACCENTS).encode("x Résumés");
    assertArrayEquals(new String[] {"[UNK]", "résumé", "##s"}, e.pieces());
    assertArrayEquals(new int[] {0, 2, 8}, e.starts());
    assertArrayEquals(new int[] {1, 8, 9}, e.ends());
  }

  @Test
  void combiningMarksAreDroppedOnlyWhenStrippingAccents() throws IOException {
    String decomposed = "cafe\u0301 Re\u0301sume\u0301";
    assertEquals("cafe resume", normalized(UNCASED, decomposed));
    assertEquals("cafe\u0301 re\u0301sume\u0301", normalized(LOWER_KEEP_ACCENTS, decomposed));
    // A mark is a word character: the decomposed word is one word, not in the vocabulary.
    assertArrayEquals(new String[] {"[UNK]", "[UNK]"},
        tokenizer(LOWER_KEEP_ACCENTS).tokenize(decomposed));
    Encoding e = tokenizer(UNCASED).encode(decomposed);
    assertArrayEquals(new String[] {"cafe", "resume"}, e.pieces());
    // The dropped accent belongs to no piece.
    assertArrayEquals(new int[] {0, 6}, e.starts());
    assertArrayEquals(new int[] {4, 13}, e.ends());
    // Lower-casing is per code point, after stripping: İ is i + U+0307 when accents stay.
    assertEquals("i", normalized(UNCASED, "\u0130"));
    assertEquals("i\u0307", normalized(LOWER_KEEP_ACCENTS, "\u0130"));
    assertEquals("I", normalized(STRIP_ONLY, "\u0130"));
    // Hangul syllables decompose to jamo (Lo, kept) when stripping.
    assertEquals("\u1112\u1161\u11ab", normalized(UNCASED, "\ud55c"));
    assertEquals("\ud55c", normalized(LOWER_KEEP_ACCENTS, "\ud55c"));
  }

  @Test
  void greek() {
    String text = "ΟΔΥΣΣΕΥΣ Ὀδυσσεύς";
    // Code point by code point: no final sigma.
    assertEquals("οδυσσευσ οδυσσευς", normalized(UNCASED, text));
    assertEquals("οδυσσευσ ὀδυσσεύς", normalized(LOWER_KEEP_ACCENTS, text));
    assertEquals("ΟΔΥΣΣΕΥΣ Οδυσσευς", normalized(STRIP_ONLY, text));
    assertEquals(text, normalized(CASED, text));
  }

  @Test
  void cjkIdeographsAreWordsOfTheirOwnOnlyWhenAsked() throws IOException {
    String text = "東京大学。東";
    assertArrayEquals(new String[] {"東", "京", "大", "学", "。", "東"},
        tokenizer(UNCASED).tokenize(text));
    // Ordinary word characters: one word, split by WordPiece; punctuation still splits.
    Encoding e = tokenizer(NO_CJK).encode(text);
    assertArrayEquals(new String[] {"東京", "##大", "##学", "。", "東"}, e.pieces());
    assertArrayEquals(new int[] {0, 2, 3, 4, 5}, e.starts());
    assertArrayEquals(new int[] {2, 3, 4, 5, 6}, e.ends());
    BertNormalizer isolating = new BertNormalizer(UNCASED);
    BertNormalizer not = new BertNormalizer(NO_CJK);
    for (int cp : new int[] {'東', 0x3400, 0x20000, 0xF900, 0x2F800}) {
      assertTrue(isolating.isAlone(cp));
      assertFalse(not.isAlone(cp));
      assertTrue(BertNormalizer.isCjk(cp));
    }
    for (int cp : new int[] {'。', '!', '$', '«'}) {
      assertTrue(isolating.isAlone(cp));
      assertTrue(not.isAlone(cp));
    }
    // Kana and Hangul are not CJK ideographs: words either way.
    assertFalse(isolating.isAlone('の'));
    assertFalse(isolating.isAlone(0xD55C));
  }

  @Test
  void cleaningIsTheSameInEverySetting() {
    for (TokenizerSettings s : new TokenizerSettings[] {UNCASED, LOWER_KEEP_ACCENTS, STRIP_ONLY,
        CASED, NO_CJK}) {
      assertEquals("a b c d", normalized(s, "a\tb\u00a0c\u200b\u0000\ufffd d"), s.toString());
    }
  }
}
