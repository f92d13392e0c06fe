package org.compactbert.qa;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Objects;

/**
 * A BERT tokenizer's settings, by Hugging Face's names: {@code do_lower_case}, {@code
 * strip_accents} (null: strip when lower-casing) and {@code tokenize_chinese_chars} (each CJK
 * ideograph a word of its own). The defaults (true, null, true) are BERT's uncased tokenizer.
 *
 * <p>They travel with the model: when they are not the defaults, {@code convert_tflite} attaches
 * them beside {@code vocab.txt} in the model's metadata zip as {@value #FILE_NAME}, holding those
 * fields of Hugging Face's file of that name ({@code tfmodels.tokenization.TokenizerSettings} is
 * the Python twin).
 *
 * <pre>{@code
 * TokenizerSettings s = TokenizerSettings.ofModel(model, "qa_model.tflite");
 * WordPieceTokenizer tokenizer = new WordPieceTokenizer(vocabulary, s);
 * }</pre>
 */
public final class TokenizerSettings {
  /** The settings' file in a model's metadata zip (and beside a Hugging Face vocab.txt). */
  public static final String FILE_NAME = "tokenizer_config.json";
  /** BERT's uncased tokenizer: lower-case, strip accents, isolate CJK ideographs. */
  public static final TokenizerSettings DEFAULT = new TokenizerSettings(true, null, true);
  /** A settings file larger than this is refused (the Python side's limit for JSON files). */
  public static final int MAX_BYTES = 1 << 20;
  private static final int MAX_DEPTH = 512;

  private final boolean lowerCase;
  private final Boolean stripAccents;
  private final boolean tokenizeChineseChars;

  /** Thrown for a settings file that cannot be used; the message names the file. */
  public static final class SettingsException extends IOException {
    public SettingsException(String message) {
      super(message);
    }
  }

  /**
   * @param lowerCase {@code do_lower_case}: lower-case each code point
   * @param stripAccents {@code strip_accents}: NFD and drop non-spacing marks; null: as {@code
   *     lowerCase}
   * @param tokenizeChineseChars {@code tokenize_chinese_chars}: each CJK ideograph is a word of
   *     its own; false: CJK characters are ordinary word characters
   */
  public TokenizerSettings(boolean lowerCase, Boolean stripAccents, boolean tokenizeChineseChars) {
    this.lowerCase = lowerCase;
    this.stripAccents = stripAccents;
    this.tokenizeChineseChars = tokenizeChineseChars;
  }

  /**
   * What the {@code boolean lowerCase} of the older constructors means: BERT's uncased tokenizer
   * (lower-case and strip accents) or its cased one (neither); CJK isolated either way.
   */
  public static TokenizerSettings of(boolean lowerCase) {
    return lowerCase ? DEFAULT : new TokenizerSettings(false, null, true);
  }

  public boolean lowerCase() {
    return lowerCase;
  }

  /** {@code strip_accents} as given: true, false, or null (follow {@link #lowerCase}). */
  public Boolean stripAccents() {
    return stripAccents;
  }

  /** Whether accents are stripped: {@code strip_accents}, or {@code do_lower_case} when null. */
  public boolean stripsAccents() {
    return stripAccents == null ? lowerCase : stripAccents;
  }

  public boolean tokenizeChineseChars() {
    return tokenizeChineseChars;
  }

  public boolean isDefault() {
    return equals(DEFAULT);
  }

  /** The three fields as {@value #FILE_NAME} holds them (what the converter writes). */
  public String toJson() {
    return "{\"do_lower_case\": " + lowerCase + ", \"strip_accents\": " + stripAccents
        + ", \"tokenize_chinese_chars\": " + tokenizeChineseChars + "}";
  }

  @Override
  public boolean equals(Object o) {
    if (!(o instanceof TokenizerSettings)) {
      return false;
    }
    TokenizerSettings s = (TokenizerSettings) o;
    return lowerCase == s.lowerCase && Objects.equals(stripAccents, s.stripAccents)
        && tokenizeChineseChars == s.tokenizeChineseChars;
  }

  @Override
  public int hashCode() {
    return Objects.hash(lowerCase, stripAccents, tokenizeChineseChars);
  }

  @Override
  public String toString() {
    return "TokenizerSettings(do_lower_case=" + lowerCase + ", strip_accents=" + stripAccents
        + ", tokenize_chinese_chars=" + tokenizeChineseChars + ")";
  }

  // --- reading -------------------------------------------------------------------------------

  /** {@link #fromJson(String, String)} naming the file {@value #FILE_NAME} in messages. */
  public static TokenizerSettings fromJson(String json) throws SettingsException {
    return fromJson(json, FILE_NAME);
  }

  /**
   * The settings of a {@value #FILE_NAME}'s text: a JSON object whose {@code do_lower_case},
   * {@code strip_accents} and {@code tokenize_chinese_chars} fields are read (absent: the
   * defaults; other fields, as Hugging Face writes them, are ignored).
   *
   * @param source names the file in messages
   * @throws SettingsException one line naming {@code source}: not JSON, not an object, or one of
   *     the three fields not a boolean ({@code strip_accents} may also be null)
   */
  public static TokenizerSettings fromJson(String json, String source) throws SettingsException {
    Json parser = new Json(json, source);
    Object[] fields = parser.topLevelFields();
    Object lower = fields[0];
    Object strip = fields[1];
    Object chinese = fields[2];
    check(source, "do_lower_case", lower, false);
    check(source, "strip_accents", strip, true);
    check(source, "tokenize_chinese_chars", chinese, false);
    return new TokenizerSettings(lower == ABSENT ? true : (Boolean) lower,
        strip == ABSENT || strip == NULL ? null : (Boolean) strip,
        chinese == ABSENT ? true : (Boolean) chinese);
  }

  /**
   * The settings a model carries ({@value #FILE_NAME} in its metadata zip, found as {@link
   * ModelVocabulary} finds its vocab.txt), or {@link #DEFAULT} when it carries none.
   *
   * @param model the .tflite file's bytes (a memory-mapped file or asset); its position is kept
   * @param source names the model in messages
   */
  public static TokenizerSettings ofModel(ByteBuffer model, String source) throws IOException {
    byte[] bytes;
    try {
      bytes = ModelVocabulary.associatedFile(model, source, FILE_NAME);
    } catch (Vocabulary.VocabularyException e) {
      throw new SettingsException(e.getMessage());  // its entry is compressed or damaged
    }
    if (bytes == null) {
      return DEFAULT;
    }
    String name = source + ":" + FILE_NAME;
    if (bytes.length > MAX_BYTES) {
      throw new SettingsException(name + ": larger than " + MAX_BYTES
          + " bytes, not a tokenizer's settings");
    }
    String text;
    try {
      text = StandardCharsets.UTF_8.newDecoder()
          .onMalformedInput(CodingErrorAction.REPORT)
          .onUnmappableCharacter(CodingErrorAction.REPORT)
          .decode(ByteBuffer.wrap(bytes)).toString();
    } catch (CharacterCodingException e) {
      throw new SettingsException(name + ": not UTF-8 text");
    }
    return fromJson(text, name);
  }

  /** {@link #ofModel(ByteBuffer, String)} of a model's bytes. */
  public static TokenizerSettings ofModel(byte[] model, String source) throws IOException {
    return ofModel(ByteBuffer.wrap(model), source);
  }

  /** {@link #ofModel(ByteBuffer, String)} of a model file (memory-mapped, not read whole). */
  public static TokenizerSettings ofModel(Path model) throws IOException {
    try (FileChannel channel = FileChannel.open(model, StandardOpenOption.READ)) {
      return ofModel(channel.map(FileChannel.MapMode.READ_ONLY, 0, channel.size()),
          model.toString());
    }
  }

  private static final Object ABSENT = new Object();
  private static final Object NULL = new Object();
  private static final Object OTHER = new Object();

  private static void check(String source, String field, Object value, boolean nullable)
      throws SettingsException {
    if (value == ABSENT || value instanceof Boolean || (nullable && value == NULL)) {
      return;
    }
    String shown = value == NULL ? "null" : (String) value;  // the value's JSON text
    throw new SettingsException(source + ": field '" + field + "' is " + shown + "; give true or "
        + "false" + (nullable ? " or null" : ""));
  }

  /**
   * A strict JSON reader (RFC 8259, plus Python's NaN and Infinity) that keeps only the three
   * fields of the top-level object; a repeated field counts its last value, as Python's json.
   */
  private static final class Json {
    private final String s;
    private final String source;
    private int at;

    Json(String s, String source) {
      this.s = s;
      this.source = source;
    }

    /** do_lower_case, strip_accents, tokenize_chinese_chars: Boolean, NULL, ABSENT, or text. */
    Object[] topLevelFields() throws SettingsException {
      Object[] fields = {ABSENT, ABSENT, ABSENT};
      space();
      if (at >= s.length()) {
        throw error("expected a JSON object");
      }
      if (peek() == '{') {
        object(1, fields);
      } else {
        value(1);  // JSON, but not an object?
        space();
        if (at == s.length()) {
          throw new SettingsException(source + ": top level must be a JSON object");
        }
      }
      space();
      if (at != s.length()) {
        throw error("extra data after the JSON value");
      }
      return fields;
    }

    /** Skips an object; at the top level ({@code fields} not null) keeps the three fields. */
    private void object(int depth, Object[] fields) throws SettingsException {
      at++;  // the '{'
      space();
      if (peek() == '}') {
        at++;
        return;
      }
      while (true) {
        space();
        if (peek() != '"') {
          throw error("expected a field name in double quotes");
        }
        String key = string();
        space();
        expect(':');
        space();
        int valueStart = at;
        Object v = value(depth + 1);
        int index = fields == null ? -1 : key.equals("do_lower_case") ? 0
            : key.equals("strip_accents") ? 1 : key.equals("tokenize_chinese_chars") ? 2 : -1;
        if (index >= 0) {
          fields[index] = v == OTHER ? shorten(s.substring(valueStart, at)) : v;
        }
        space();
        if (peek() == '}') {
          at++;
          return;
        }
        if (peek() != ',') {
          throw error("expected ',' or '}'");
        }
        at++;
      }
    }

    private static String shorten(String text) {
      return text.length() <= 40 ? text : text.substring(0, 37) + "...";
    }

    /** Boolean.TRUE / FALSE, NULL, or OTHER (anything else, skipped over). */
    private Object value(int depth) throws SettingsException {
      if (depth > MAX_DEPTH) {
        throw new SettingsException(source + ": JSON nested too deeply");
      }
      char c = peek();
      switch (c) {
        case '{':
          object(depth, null);
          return OTHER;
        case '[':
          at++;
          space();
          if (peek() == ']') {
            at++;
            return OTHER;
          }
          while (true) {
            space();
            value(depth + 1);
            space();
            if (peek() == ']') {
              at++;
              return OTHER;
            }
            if (peek() != ',') {
              throw error("expected ',' or ']'");
            }
            at++;
          }
        case '"':
          string();
          return OTHER;
        case 't':
          literal("true");
          return Boolean.TRUE;
        case 'f':
          literal("false");
          return Boolean.FALSE;
        case 'n':
          literal("null");
          return NULL;
        case 'N':
          literal("NaN");
          return OTHER;
        case 'I':
          literal("Infinity");
          return OTHER;
        default:
          if (at < s.length() && (c == '-' || (c >= '0' && c <= '9'))) {
            number();
            return OTHER;
          }
          throw error("expected a value");
      }
    }

    private String string() throws SettingsException {
      int begin = at;
      at++;  // the opening quote
      StringBuilder out = new StringBuilder();
      while (true) {
        if (at >= s.length()) {
          at = begin;
          throw error("unterminated string");
        }
        char c = s.charAt(at++);
        if (c == '"') {
          return out.toString();
        }
        if (c < 0x20) {
          at--;
          throw error("control character in a string");
        }
        if (c != '\\') {
          out.append(c);
          continue;
        }
        char e = at < s.length() ? s.charAt(at++) : '\0';
        switch (e) {
          case '"':
          case '\\':
          case '/':
            out.append(e);
            break;
          case 'b':
            out.append('\b');
            break;
          case 'f':
            out.append('\f');
            break;
          case 'n':
            out.append('\n');
            break;
          case 'r':
            out.append('\r');
            break;
          case 't':
            out.append('\t');
            break;
          case 'u':
            if (at + 4 > s.length()) {
              throw error("bad \\u escape");
            }
            int v = 0;
            for (int k = 0; k < 4; k++) {
              int digit = Character.digit(s.charAt(at + k), 16);
              if (digit < 0) {
                throw error("bad \\u escape");
              }
              v = v * 16 + digit;
            }
            at += 4;
            out.append((char) v);
            break;
          default:
            at--;
            throw error("bad escape");
        }
      }
    }

    private void number() throws SettingsException {
      int begin = at;
      if (peek() == '-') {
        at++;
        if (s.startsWith("Infinity", at)) {
          at += "Infinity".length();
          return;
        }
      }
      if (peek() == '0') {
        at++;
      } else if (!digits()) {
        at = begin;
        throw error("expected a value");
      }
      if (peek() == '.') {
        at++;
        if (!digits()) {
          throw error("expected a digit");
        }
      }
      if (peek() == 'e' || peek() == 'E') {
        at++;
        if (peek() == '+' || peek() == '-') {
          at++;
        }
        if (!digits()) {
          throw error("expected a digit");
        }
      }
    }

    private boolean digits() {
      int begin = at;
      while (at < s.length() && s.charAt(at) >= '0' && s.charAt(at) <= '9') {
        at++;
      }
      return at > begin;
    }

    private void literal(String word) throws SettingsException {
      if (!s.startsWith(word, at)) {
        throw error("expected a value");
      }
      at += word.length();
    }

    private void expect(char c) throws SettingsException {
      if (peek() != c) {
        throw error("expected '" + c + "'");
      }
      at++;
    }

    private char peek() {
      return at < s.length() ? s.charAt(at) : '\0';
    }

    private void space() {
      while (at < s.length()) {
        char c = s.charAt(at);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
          return;
        }
        at++;
      }
    }

    /** "not valid JSON (what, line L column C)", lines and columns from 1. */
    private SettingsException error(String what) {
      int line = 1;
      int column = 1;
      for (int i = 0; i < Math.min(at, s.length()); i++) {
        if (s.charAt(i) == '\n') {
          line++;
          column = 1;
        } else {
          column++;
        }
      }
      String where = at >= s.length() ? "at the end" : "line " + line + " column " + column;
      return new SettingsException(source + ": not valid JSON (" + what + ", " + where + ")");
    }
  }
}
