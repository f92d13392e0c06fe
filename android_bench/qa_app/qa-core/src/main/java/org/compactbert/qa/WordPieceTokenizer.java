package org.compactbert.qa;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * BERT WordPiece tokenization with character offsets, the same pieces and offsets as
 * {@code tfmodels.tokenization.WordPieceTokenizer} and the reference BERT tokenizer.
 *
 * <p>Three steps: {@link BertNormalizer} maps each code point (remembering where every normalized
 * character came from); the normalized text splits into words at whitespace, and every
 * punctuation character (and CJK ideograph, with {@code tokenize_chinese_chars}) is a word of
 * its own; each word becomes the greedy longest-match WordPieces ({@code ##} marks a piece that
 * continues a word), or one {@code [UNK]} when some part of it matches nothing or it is longer
 * than {@code maxCharsPerWord} code points.
 *
 * <pre>{@code
 * WordPieceTokenizer tokenizer = new WordPieceTokenizer(Vocabulary.load(path), true);
 * tokenizer.encode("Unaffable!");  // una ##ffa ##ble !
 * new WordPieceTokenizer(vocabulary, TokenizerSettings.ofModel(model, "qa_model.tflite"));
 * }</pre>
 *
 * <p>The settings ({@link TokenizerSettings}) are Hugging Face's {@code do_lower_case}, {@code
 * strip_accents} and {@code tokenize_chinese_chars}; the {@code boolean lowerCase} constructors
 * mean BERT's uncased (lower-case, strip accents) or cased tokenizer, CJK isolated either way.
 */
public final class WordPieceTokenizer {
  /** Google's BERT's limit: a longer word is one [UNK]. */
  public static final int DEFAULT_MAX_CHARS_PER_WORD = 100;
  private static final String SUFFIX = "##";

  private final Vocabulary vocabulary;
  private final BertNormalizer normalizer;
  private final int maxCharsPerWord;

  /** @param lowerCase lower-case and strip accents (uncased models); false keeps case. */
  public WordPieceTokenizer(Vocabulary vocabulary, boolean lowerCase) {
    this(vocabulary, lowerCase, DEFAULT_MAX_CHARS_PER_WORD);
  }

  public WordPieceTokenizer(Vocabulary vocabulary, boolean lowerCase, int maxCharsPerWord) {
    this(vocabulary, TokenizerSettings.of(lowerCase), maxCharsPerWord);
  }

  /** @param settings the model's ({@link TokenizerSettings#ofModel}) */
  public WordPieceTokenizer(Vocabulary vocabulary, TokenizerSettings settings) {
    this(vocabulary, settings, DEFAULT_MAX_CHARS_PER_WORD);
  }

  public WordPieceTokenizer(Vocabulary vocabulary, TokenizerSettings settings,
      int maxCharsPerWord) {
    this.vocabulary = vocabulary;
    this.normalizer = new BertNormalizer(settings);
    this.maxCharsPerWord = maxCharsPerWord;
  }

  public Vocabulary vocabulary() {
    return vocabulary;
  }

  public TokenizerSettings settings() {
    return normalizer.settings();
  }

  /** The pieces of {@code text}, with offsets into it. */
  public Encoding encode(String text) {
    Normalized norm = normalize(text);
    Output out = new Output();
    String s = norm.text;
    int i = 0;
    while (i < s.length()) {
      int cp = s.codePointAt(i);
      int n = Character.charCount(cp);
      if (BertNormalizer.isWhitespace(cp)) {
        i += n;
      } else if (normalizer.isAlone(cp)) {
        addWord(norm, i, i + n, out);
        i += n;
      } else {
        int j = i + n;
        while (j < s.length()) {
          int c = s.codePointAt(j);
          if (BertNormalizer.isWhitespace(c) || normalizer.isAlone(c)) {
            break;
          }
          j += Character.charCount(c);
        }
        addWord(norm, i, j, out);
        i = j;
      }
    }
    return out.toEncoding();
  }

  /** The piece strings of {@code text} (what {@code python -m tfmodels.tokenize_lines} prints). */
  public String[] tokenize(String text) {
    return encode(text).pieces();
  }

  /** Normalized text, and for each of its UTF-16 units the original code point's span. */
  private static final class Normalized {
    final String text;
    final int[] start;
    final int[] end;

    Normalized(String text, int[] start, int[] end) {
      this.text = text;
      this.start = start;
      this.end = end;
    }
  }

  /**
   * Every unit a code point turns into spans that code point in the original text, so a piece
   * spans the original characters its normalized characters came from: deleted characters and
   * dropped accents belong to no piece, and each jamo piece of a Hangul syllable spans the
   * syllable (as the reference).
   */
  private Normalized normalize(String text) {
    StringBuilder out = new StringBuilder(text.length() + 16);
    int[] start = new int[text.length() + 16];
    int[] end = new int[start.length];
    int size = 0;
    for (int i = 0; i < text.length(); ) {
      int cp = text.codePointAt(i);
      int n = Character.charCount(cp);
      String replacement = normalizer.normalize(cp);
      String units = replacement == null ? text.substring(i, i + n) : replacement;
      if (size + units.length() > start.length) {
        int grown = Math.max(start.length * 2, size + units.length());
        start = Arrays.copyOf(start, grown);
        end = Arrays.copyOf(end, grown);
      }
      out.append(units);
      for (int k = 0; k < units.length(); k++) {
        start[size] = i;
        end[size++] = i + n;
      }
      i += n;
    }
    return new Normalized(out.toString(), start, end);
  }

  /** Greedy longest-match-first WordPieces of normalized text [from, to). */
  private void addWord(Normalized norm, int from, int to, Output out) {
    String word = norm.text.substring(from, to);
    int wordStart = norm.start[from];
    int wordEnd = norm.end[to - 1];
    if (word.codePointCount(0, word.length()) > maxCharsPerWord) {
      out.add(Vocabulary.UNK, vocabulary.unkId(), wordStart, wordEnd);
      return;
    }
    int mark = out.size;
    int pos = 0;
    while (pos < word.length()) {
      int longest = Math.min(word.length(), pos + vocabulary.maxTokenLength());
      int found = -1;
      for (int end = longest; end > pos; end--) {
        if (end < word.length() && Character.isLowSurrogate(word.charAt(end))
            && Character.isHighSurrogate(word.charAt(end - 1))) {
          continue;  // never cut a code point in two
        }
        String candidate = pos == 0 ? word.substring(0, end) : SUFFIX + word.substring(pos, end);
        int id = vocabulary.id(candidate);
        if (id >= 0) {
          found = end;
          out.add(candidate, id, norm.start[from + pos], norm.end[from + end - 1]);
          break;
        }
      }
      if (found < 0) {
        out.truncate(mark);
        out.add(Vocabulary.UNK, vocabulary.unkId(), wordStart, wordEnd);
        return;
      }
      pos = found;
    }
  }

  /** Growable parallel arrays of pieces. */
  private static final class Output {
    String[] pieces = new String[32];
    int[] ids = new int[32];
    int[] start = new int[32];
    int[] end = new int[32];
    int size;

    void add(String piece, int id, int s, int e) {
      if (size == ids.length) {
        int n = size * 2;
        pieces = Arrays.copyOf(pieces, n);
        ids = Arrays.copyOf(ids, n);
        start = Arrays.copyOf(start, n);
        end = Arrays.copyOf(end, n);
      }
      pieces[size] = piece;
      ids[size] = id;
      start[size] = s;
      end[size] = e;
      size++;
    }

    void truncate(int n) {
      size = n;
    }

    Encoding toEncoding() {
      return new Encoding(Arrays.copyOf(pieces, size), Arrays.copyOf(ids, size),
          Arrays.copyOf(start, size), Arrays.copyOf(end, size));
    }
  }
}
