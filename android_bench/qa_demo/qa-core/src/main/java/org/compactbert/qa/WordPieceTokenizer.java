package org.compactbert.qa;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * BERT WordPiece tokenization with character offsets, the same pieces and offsets as
 * {@code tfmodels.tokenization.WordPieceTokenizer} (tensorflow-text's FastBertTokenizer).
 *
 * <p>Three steps: {@link BertNormalizer} maps each code point (remembering where every normalized
 * character came from); the normalized text splits into words at whitespace, and every
 * punctuation or CJK character is a word of its own; each word becomes the greedy longest-match
 * WordPieces ({@code ##} marks a piece that continues a word), or one {@code [UNK]} when some
 * part of it matches nothing or it is longer than {@code maxBytesPerWord} UTF-8 bytes.
 *
 * <pre>{@code
 * WordPieceTokenizer tokenizer = new WordPieceTokenizer(Vocabulary.load(path), true);
 * tokenizer.encode("Unaffable!");  // una ##ffa ##ble !
 * }</pre>
 */
public final class WordPieceTokenizer {
  /** FastBertTokenizer's default limit; Google's BERT counts 100 characters instead. */
  public static final int DEFAULT_MAX_BYTES_PER_WORD = 100;
  private static final String SUFFIX = "##";

  private final Vocabulary vocabulary;
  private final BertNormalizer normalizer;
  private final int maxBytesPerWord;

  public WordPieceTokenizer(Vocabulary vocabulary, boolean lowerCase) {
    this(vocabulary, lowerCase, DEFAULT_MAX_BYTES_PER_WORD);
  }

  public WordPieceTokenizer(Vocabulary vocabulary, boolean lowerCase, int maxBytesPerWord) {
    this.vocabulary = vocabulary;
    this.normalizer = new BertNormalizer(lowerCase);
    this.maxBytesPerWord = maxBytesPerWord;
  }

  public Vocabulary vocabulary() {
    return vocabulary;
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
      } else if (BertNormalizer.isPunctuationOrCjk(cp)) {
        addWord(norm, i, i + n, out);
        i += n;
      } else {
        int j = i + n;
        while (j < s.length()) {
          int c = s.codePointAt(j);
          if (BertNormalizer.isWhitespace(c) || BertNormalizer.isPunctuationOrCjk(c)) {
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

  /** Normalized text, and for each of its UTF-16 units (and its end) an original offset. */
  private static final class Normalized {
    final String text;
    final int[] toOriginal;

    Normalized(String text, int[] toOriginal) {
      this.text = text;
      this.toOriginal = toOriginal;
    }
  }

  /**
   * Unchanged characters keep their own offsets; every unit a changed code point turns into maps
   * to that code point's start. So a piece's end is where the next normalized character came
   * from, as in tensorflow-text (of the three dots an ellipsis becomes, the first two have empty
   * spans).
   */
  private Normalized normalize(String text) {
    StringBuilder out = new StringBuilder(text.length() + 16);
    int[] map = new int[text.length() + 17];
    int size = 0;
    for (int i = 0; i < text.length(); ) {
      int cp = text.codePointAt(i);
      int n = Character.charCount(cp);
      String replacement = normalizer.normalize(cp);
      int grow = replacement == null ? n : replacement.length();
      if (size + grow + 1 > map.length) {
        map = Arrays.copyOf(map, Math.max(map.length * 2, size + grow + 1));
      }
      if (replacement == null) {
        for (int k = 0; k < n; k++) {
          out.append(text.charAt(i + k));
          map[size++] = i + k;
        }
      } else {
        out.append(replacement);
        for (int k = 0; k < replacement.length(); k++) {
          map[size++] = i;
        }
      }
      i += n;
    }
    map[size] = text.length();
    return new Normalized(out.toString(), map);
  }

  /** Greedy longest-match-first WordPieces of normalized text [from, to). */
  private void addWord(Normalized norm, int from, int to, Output out) {
    String word = norm.text.substring(from, to);
    int[] map = norm.toOriginal;
    if (word.getBytes(StandardCharsets.UTF_8).length > maxBytesPerWord) {
      out.add(Vocabulary.UNK, vocabulary.unkId(), map[from], map[to]);
      return;
    }
    int mark = out.size;
    int pos = 0;
    while (pos < word.length()) {
      int longest = Math.min(word.length(), pos + vocabulary.maxTokenLength());
      int found = -1;
      String piece = null;
      for (int end = longest; end > pos; end--) {
        if (end < word.length() && Character.isLowSurrogate(word.charAt(end))
            && Character.isHighSurrogate(word.charAt(end - 1))) {
          continue;  // never cut a code point in two
        }
        String candidate = pos == 0 ? word.substring(0, end) : SUFFIX + word.substring(pos, end);
        int id = vocabulary.id(candidate);
        if (id >= 0) {
          found = end;
          piece = candidate;
          out.add(piece, id, map[from + pos], map[from + end]);
          break;
        }
      }
      if (found < 0) {
        out.truncate(mark);
        out.add(Vocabulary.UNK, vocabulary.unkId(), map[from], map[to]);
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
