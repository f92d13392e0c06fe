package org.compactbert.qa;

import java.text.Normalizer;
import java.util.concurrent.ConcurrentHashMap;

/**
 * BERT's text clean-up, one code point at a time, as the reference BERT tokenizer does it.
 *
 * <p>The same steps as {@code tfmodels/tokenization.py} ({@code normalize_char}), which the Python
 * tests hold to Hugging Face's BertTokenizerFast and Google's BERT: NUL, U+FFFD and control,
 * format, private-use and surrogate characters are deleted, whitespace becomes a space, and with
 * lower-casing each code point is NFD-decomposed, its non-spacing marks (accents) dropped and
 * every remaining code point lower-cased on its own (so no final-sigma context, {@code ß} stays,
 * ligatures and full-width letters are kept). Mapping each code point on its own, with offsets
 * kept per code point, is what makes the Java pieces and offsets agree exactly with the Python
 * ones; the golden test checks this for every code point.
 */
public final class BertNormalizer {
  private final boolean lowerCase;
  private final String[] ascii = new String[128];
  private final ConcurrentHashMap<Integer, String> cache = new ConcurrentHashMap<>();
  private static final String UNCHANGED = "\u0000unchanged";

  /** @param lowerCase lower-case and strip accents (uncased models); false keeps case. */
  public BertNormalizer(boolean lowerCase) {
    this.lowerCase = lowerCase;
    for (int c = 0; c < 128; c++) {
      ascii[c] = compute(c);
    }
  }

  public boolean lowerCase() {
    return lowerCase;
  }

  /** The text code point {@code cp} becomes ("" when deleted), or null when it stays as it is. */
  public String normalize(int cp) {
    if (cp < 128) {
      return ascii[cp];
    }
    String cached = cache.get(cp);
    if (cached == null) {
      String computed = compute(cp);
      cached = computed == null ? UNCHANGED : computed;
      cache.put(cp, cached);
    }
    return cached == UNCHANGED ? null : cached;
  }

  private String compute(int cp) {
    if (isDeleted(cp)) {
      return "";
    }
    if (isWhitespace(cp)) {
      return cp == ' ' ? null : " ";
    }
    if (!lowerCase) {
      return null;
    }
    String original = new String(Character.toChars(cp));
    String decomposed = Normalizer.normalize(original, Normalizer.Form.NFD);
    StringBuilder out = new StringBuilder(decomposed.length() + 1);
    for (int i = 0; i < decomposed.length(); ) {
      int c = decomposed.codePointAt(i);
      i += Character.charCount(c);
      // U+1734 became a spacing mark (Mc) in Unicode 14; Java 17 still has it as Mn.
      if (Character.getType(c) != Character.NON_SPACING_MARK || c == 0x1734) {
        out.append(new String(Character.toChars(c)).toLowerCase(java.util.Locale.ROOT));
      }
    }
    String result = out.toString();
    return result.equals(original) ? null : result;
  }

  /** NUL, U+FFFD, and Cc (but tab, LF, CR), Cf, Co, Cs: deleted. Unassigned ones stay. */
  static boolean isDeleted(int c) {
    if (c == 0 || c == 0xFFFD) {
      return true;
    }
    if (c == '\t' || c == '\n' || c == '\r') {
      return false;
    }
    switch (Character.getType(c)) {
      case Character.CONTROL:
      case Character.FORMAT:
      case Character.PRIVATE_USE:
      case Character.SURROGATE:
        return true;
      default:
        return false;
    }
  }

  /** Whitespace (tab, LF, CR and the Z* categories), a word separator: becomes a space. */
  public static boolean isWhitespace(int c) {
    if (c == '\t' || c == '\n' || c == '\r') {
      return true;
    }
    int type = Character.getType(c);
    return type == Character.SPACE_SEPARATOR || type == Character.LINE_SEPARATOR
        || type == Character.PARAGRAPH_SEPARATOR;
  }

  /**
   * A code point that is a word of its own: CJK ideographs (BERT's ranges), ASCII symbols such as
   * {@code $ + < = > ^ ` | ~}, and every Unicode punctuation category (P*).
   */
  public static boolean isPunctuationOrCjk(int c) {
    if ((c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF)
        || (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F)
        || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF)
        || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F)) {
      return true;
    }
    if ((c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96)
        || (c >= 123 && c <= 126)) {
      return true;
    }
    switch (Character.getType(c)) {
      case Character.CONNECTOR_PUNCTUATION:
      case Character.DASH_PUNCTUATION:
      case Character.START_PUNCTUATION:
      case Character.END_PUNCTUATION:
      case Character.INITIAL_QUOTE_PUNCTUATION:
      case Character.FINAL_QUOTE_PUNCTUATION:
      case Character.OTHER_PUNCTUATION:
        return true;
      default:
        return false;
    }
  }
}
