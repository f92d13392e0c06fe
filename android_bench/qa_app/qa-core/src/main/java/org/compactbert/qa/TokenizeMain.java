package org.compactbert.qa;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Reader;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Paths;

/**
 * Prints the WordPieces of each stdin line, separated by single spaces, exactly as
 * {@code python -m tfmodels.tokenize_lines} does, so the two tokenizers can be diffed on any text:
 *
 * <pre>
 * java -cp qa-core.jar org.compactbert.qa.TokenizeMain --vocab_file data/vocab/uncased_vocab.txt \
 *     &lt; lines.txt
 * </pre>
 *
 * <p>The tokenizer's settings ({@link TokenizerSettings}), by Hugging Face's names: {@code
 * --do_lower_case=true|false} (default true), {@code --strip_accents=true|false|none} (default
 * none: as {@code --do_lower_case}) and {@code --tokenize_chinese_chars=true|false} (default
 * true). An unknown flag or value is one {@code error:} line on stderr and exit status 1.
 */
public final class TokenizeMain {
  private static final String USAGE = "usage: --vocab_file PATH [--do_lower_case=true|false]"
      + " [--strip_accents=true|false|none] [--tokenize_chinese_chars=true|false]";

  private TokenizeMain() {}

  public static void main(String[] args) throws IOException {
    String vocabFile = null;
    boolean lowerCase = true;
    Boolean stripAccents = null;
    boolean tokenizeChineseChars = true;
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      if (arg.startsWith("--vocab_file=")) {
        vocabFile = arg.substring("--vocab_file=".length());
      } else if (arg.equals("--vocab_file") && i + 1 < args.length) {
        vocabFile = args[++i];  // absl's "--flag value" form
      } else if (arg.equals("--do_lower_case") || arg.equals("--nodo_lower_case")
          || arg.startsWith("--do_lower_case=")) {
        lowerCase = bool(arg, "do_lower_case", false);
      } else if (arg.equals("--strip_accents") || arg.equals("--nostrip_accents")
          || arg.startsWith("--strip_accents=")) {
        stripAccents = bool(arg, "strip_accents", true);
      } else if (arg.equals("--tokenize_chinese_chars") || arg.equals("--notokenize_chinese_chars")
          || arg.startsWith("--tokenize_chinese_chars=")) {
        tokenizeChineseChars = bool(arg, "tokenize_chinese_chars", false);
      } else {
        fail("unexpected argument " + arg + " (" + USAGE + ")");
      }
    }
    if (vocabFile == null) {
      fail("--vocab_file is required");
    }
    Vocabulary vocabulary;
    try {
      vocabulary = Vocabulary.load(Paths.get(vocabFile));
    } catch (IOException e) {
      fail("--vocab_file " + e.getMessage());
      return;
    }
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(vocabulary,
        new TokenizerSettings(lowerCase, stripAccents, tokenizeChineseChars));
    // Malformed UTF-8 becomes U+FFFD, as the Python command's errors="replace".
    Reader in = new InputStreamReader(System.in, StandardCharsets.UTF_8);
    Writer out = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
    StringBuilder line = new StringBuilder();
    char[] buffer = new char[8192];
    int n;
    while ((n = in.read(buffer)) != -1) {
      for (int i = 0; i < n; i++) {
        if (buffer[i] == '\n') {
          emit(tokenizer, line, out);
        } else {
          line.append(buffer[i]);
        }
      }
    }
    if (line.length() > 0) {
      emit(tokenizer, line, out);
    }
    out.flush();
  }

  /** Lines end at '\n' only (a trailing '\r' is dropped), like the Python command. */
  private static void emit(WordPieceTokenizer tokenizer, StringBuilder line, Writer out)
      throws IOException {
    int length = line.length();
    if (length > 0 && line.charAt(length - 1) == '\r') {
      length--;
    }
    out.write(String.join(" ", tokenizer.tokenize(line.substring(0, length))));
    out.write('\n');
    line.setLength(0);
  }

  /**
   * A boolean flag's value: {@code --name} (true), {@code --noname} (false), {@code
   * --name=true|false}, and with {@code orNone} also {@code --name=none} (null).
   */
  private static Boolean bool(String arg, String name, boolean orNone) {
    if (arg.equals("--" + name)) {
      return true;
    }
    if (arg.equals("--no" + name)) {
      return false;
    }
    String value = arg.substring(name.length() + 3);
    switch (value) {
      case "true":
        return true;
      case "false":
        return false;
      case "none":
        if (orNone) {
          return null;
        }
        break;
      default:
        break;
    }
    fail("--" + name + "=" + value + ": give "
        + (orNone ? "true, false or none" : "true or false"));
    return null;
  }

  private static void fail(String message) {
    System.err.println("error: " + message);
    System.exit(1);
  }
}
