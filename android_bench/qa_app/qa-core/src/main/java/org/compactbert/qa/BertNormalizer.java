package org.compactbert.qa;

import java.text.Normalizer;
import java.util.Locale;
import java.util.concurrent.ConcurrentHashMap;

/**
 * BERT's text clean-up, one code point at a time, as the reference BERT tokenizer does it.
 *
 * <p>The same steps, in the same order, as Hugging Face's BertNormalizer and {@code
 * tfmodels/tokenization.py} ({@code normalize_char}), which the Python tests hold to Hugging
 * Face's BertTokenizerFast and Google's BERT:
 *
 * <ol>
 *   <li>NUL, U+FFFD and control, format, private-use and surrogate characters are deleted,
 *       whitespace becomes a space;
 *   <li>with {@code tokenize_chinese_chars}, each CJK ideograph is a word of its own ({@link
 *       #isAlone}; otherwise it is an ordinary word character);
 *   <li>with {@code strip_accents} (by default: when lower-casing), NFD and the non-spacing
 *       marks (accents) dropped;
 *   <li>with {@code do_lower_case}, every code point lower-cased on its own (so no final-sigma
 *       context, {@code ß} stays, ligatures and full-width letters are kept).
 * </ol>
 *
 * <p>Lower-casing without stripping accents keeps them: {@code Résumé} becomes {@code résumé}
 * (precomposed, as typed). Mapping each code point on its own, with offsets kept per code point,
 * is what makes the Java pieces and offsets agree exactly with the Python ones; the golden test
 * checks this for every code point. (Hugging Face's character tables are older than Java 17's
 * and Python's: it keeps a few hundred newer non-spacing marks and format characters that
 * these delete, whatever the settings.)
 */
public final class BertNormalizer {
  private final TokenizerSettings settings;
  private final boolean lowerCase;
  private final boolean stripAccents;
  private final boolean isolateCjk;
  private final String[] ascii = new String[128];
  private final ConcurrentHashMap<Integer, String> cache = new ConcurrentHashMap<>();
  private static final String UNCHANGED = "\u0000unchanged";

  /** @param lowerCase lower-case and strip accents (uncased models); false keeps case. */
  public BertNormalizer(boolean lowerCase) {
    this(TokenizerSettings.of(lowerCase));
  }

  /** A tokenizer's settings: lower-casing, accent stripping, CJK isolation. */
  public BertNormalizer(TokenizerSettings settings) {
    this.settings = settings;
    this.lowerCase = settings.lowerCase();
    this.stripAccents = settings.stripsAccents();
    this.isolateCjk = settings.tokenizeChineseChars();
    for (int c = 0; c < 128; c++) {
      ascii[c] = compute(c);
    }
  }

  public TokenizerSettings settings() {
    return settings;
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

  /**
   * Whether normalized code point {@code c} is a word of its own: punctuation, and with {@code
   * tokenize_chinese_chars} a CJK ideograph.
   */
  public boolean isAlone(int c) {
    return isolateCjk ? isPunctuationOrCjk(c) : isPunctuation(c);
  }

  private String compute(int cp) {
    if (isDeleted(cp)) {
      return "";
    }
    if (isWhitespace(cp)) {
      return cp == ' ' ? null : " ";
    }
    if (!lowerCase && !stripAccents) {
      return null;
    }
    String original = new String(Character.toChars(cp));
    String stripped = original;
    if (stripAccents) {
      String decomposed = Normalizer.normalize(original, Normalizer.Form.NFD);
      StringBuilder out = new StringBuilder(decomposed.length());
      for (int i = 0; i < decomposed.length(); ) {
        int c = decomposed.codePointAt(i);
        i += Character.charCount(c);
        // U+1734 became a spacing mark (Mc) in Unicode 14; Java 17 still has it as Mn.
        if (Character.getType(c) != Character.NON_SPACING_MARK || c == 0x1734) {
          out.appendCodePoint(c);
        }
      }
      stripped = out.toString();
    }
    String result = stripped;
    if (lowerCase) {
      StringBuilder out = new StringBuilder(stripped.length() + 1);
      for (int i = 0; i < stripped.length(); ) {
        int c = stripped.codePointAt(i);
        i += Character.charCount(c);
        out.append(new String(Character.toChars(c)).toLowerCase(Locale.ROOT));
      }
      result = out.toString();
    }
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

  /** A CJK ideograph of BERT's ranges (Google's {@code _is_chinese_char}). */
  public static boolean isCjk(int c) {
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF)
        || (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F)
        || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B820 && c <= 0x2CEAF)
        || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
  }

  /**
   * Punctuation, a word of its own: ASCII symbols such as {@code $ + < = > ^ ` | ~}, and every
   * Unicode punctuation category (P*).
   */
  public static boolean isPunctuation(int c) {
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

  /**
   * A code point that is a word of its own with the default settings: a CJK ideograph ({@link
   * #isCjk}) or punctuation ({@link #isPunctuation}).
   */
  public static boolean isPunctuationOrCjk(int c) {
    return isCjk(c) || isPunctuation(c);
  }
}
