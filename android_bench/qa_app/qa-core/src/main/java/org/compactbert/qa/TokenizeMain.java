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
 */
public final class TokenizeMain {
  private TokenizeMain() {}

  public static void main(String[] args) throws IOException {
    String vocabFile = null;
    boolean lowerCase = true;
    for (int i = 0; i < args.length; i++) {
      String arg = args[i];
      if (arg.startsWith("--vocab_file=")) {
        vocabFile = arg.substring("--vocab_file=".length());
      } else if (arg.equals("--vocab_file") && i + 1 < args.length) {
        vocabFile = args[++i];  // absl's "--flag value" form
      } else if (arg.equals("--do_lower_case") || arg.equals("--do_lower_case=true")) {
        lowerCase = true;
      } else if (arg.equals("--nodo_lower_case") || arg.equals("--do_lower_case=false")) {
        lowerCase = false;
      } else {
        fail("unexpected argument " + arg
            + " (usage: --vocab_file PATH [--do_lower_case=true|false])");
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
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(vocabulary, lowerCase);
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

  private static void fail(String message) {
    System.err.println("error: " + message);
    System.exit(1);
  }
}
