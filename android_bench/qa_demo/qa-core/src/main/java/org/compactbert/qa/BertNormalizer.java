package org.compactbert.qa;

import java.text.Normalizer;
import java.util.concurrent.ConcurrentHashMap;

/**
 * BERT's text clean-up, one code point at a time, as tensorflow-text's FastBertNormalizer does it.
 *
 * <p>The Python side ({@code tfmodels/tokenization.py}) tokenizes with FastBertTokenizer, which
 * maps every code point on its own (no context): with lower-casing it applies NFKC_Casefold, then
 * NFD, drops non-spacing marks (accents), and finally turns control and format characters into
 * spaces. Doing the same per code point here, with offsets kept per code point, is what makes the
 * Java pieces and offsets agree exactly with the Python ones.
 *
 * <p>Java has NFKC and case mappings but no NFKC_Casefold, so {@link #foldCase} builds it from
 * them; the golden test checks this against tensorflow-text for every code point.
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

  /** The text code point {@code cp} becomes, or null when it stays as it is. */
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
    String original = new String(Character.toChars(cp));
    String s = original;
    if (lowerCase) {
      s = stripMarks(Normalizer.normalize(foldCase(s), Normalizer.Form.NFD));
    }
    StringBuilder out = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); ) {
      int c = s.codePointAt(i);
      i += Character.charCount(c);
      int type = Character.getType(c);
      // Cc and Cf become spaces; a lone surrogate (invalid UTF-16) too, as tensorflow-text does
      // with invalid UTF-8.
      if (type == Character.CONTROL || type == Character.FORMAT || type == Character.SURROGATE) {
        out.append(' ');
      } else {
        out.appendCodePoint(c);
      }
    }
    String result = out.toString();
    return result.equals(original) ? null : result;
  }

  /**
   * NFKC_Casefold of one code point: NFKC, full case folding, NFKC again, without default
   * ignorable code points (zero-width spaces, soft hyphens, variation selectors ...).
   */
  static String foldCase(String s) {
    String t = Normalizer.normalize(s, Normalizer.Form.NFKC);
    StringBuilder folded = new StringBuilder(t.length() + 2);
    for (int i = 0; i < t.length(); ) {
      int c = t.codePointAt(i);
      i += Character.charCount(c);
      folded.append(foldCodePoint(c));
    }
    String u = Normalizer.normalize(folded, Normalizer.Form.NFKC);
    StringBuilder out = new StringBuilder(u.length());
    for (int i = 0; i < u.length(); ) {
      int c = u.codePointAt(i);
      i += Character.charCount(c);
      if (!isDefaultIgnorable(c)) {
        out.appendCodePoint(c);
      }
    }
    return out.toString();
  }

  /**
   * Full case folding of one code point. Java has only case mappings; lower(upper(lower(c)))
   * equals the folding except where the Unicode folding deliberately differs from lower-casing.
   */
  static String foldCodePoint(int c) {
    // Cherokee folds to the capital letters (they were encoded first), unlike every other script.
    if ((c >= 0x13A0 && c <= 0x13F5) || (c >= 0x13F8 && c <= 0x13FD)
        || (c >= 0xAB70 && c <= 0xABBF)) {
      return new String(Character.toChars(Character.toUpperCase(c)));
    }
    // Dotless i has no folding (its upper case I folds to dotted i).
    if (c == 0x0131) {
      return "\u0131";
    }
    String one = new String(Character.toChars(c));
    // Per code point, so the context-dependent final-sigma rule of toLowerCase never applies.
    String lower = lowerEach(one);
    String upper = lower.toUpperCase(java.util.Locale.ROOT);
    return lowerEach(upper);
  }

  private static String lowerEach(String s) {
    StringBuilder out = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); ) {
      int c = s.codePointAt(i);
      i += Character.charCount(c);
      out.append(new String(Character.toChars(c)).toLowerCase(java.util.Locale.ROOT));
    }
    return out.toString();
  }

  /** Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt). */
  static boolean isDefaultIgnorable(int c) {
    return c == 0x00AD || c == 0x034F || c == 0x061C || (c >= 0x115F && c <= 0x1160)
        || (c >= 0x17B4 && c <= 0x17B5) || (c >= 0x180B && c <= 0x180F)
        || (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E)
        || (c >= 0x2060 && c <= 0x206F) || c == 0x3164 || (c >= 0xFE00 && c <= 0xFE0F)
        || c == 0xFEFF || c == 0xFFA0 || (c >= 0xFFF0 && c <= 0xFFF8)
        || (c >= 0x1BCA0 && c <= 0x1BCA3) || (c >= 0x1D173 && c <= 0x1D17A)
        || (c >= 0xE0000 && c <= 0xE0FFF);
  }

  private static String stripMarks(String s) {
    StringBuilder out = new StringBuilder(s.length());
    for (int i = 0; i < s.length(); ) {
      int c = s.codePointAt(i);
      i += Character.charCount(c);
      // U+1734 became a spacing mark (Mc) in Unicode 14; Java 17 still has it as Mn.
      if (Character.getType(c) != Character.NON_SPACING_MARK || c == 0x1734) {
        out.appendCodePoint(c);
      }
    }
    return out.toString();
  }

  /** ICU's u_isUWhiteSpace (the White_Space property), the word separator of the tokenizer. */
  public static boolean isWhitespace(int c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680
        || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F
        || c == 0x205F || c == 0x3000;
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
