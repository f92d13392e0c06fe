package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.GZIPInputStream;

/**
 * Reads the golden vectors {@code python tests/fixtures/qa_app/golden.py} writes
 * (tests/fixtures/qa_app): gzip'd tab-separated records, escaped text, space-separated lists.
 * The fixture directory and the vocabulary come from the system properties {@code qa.fixtures}
 * and {@code qa.vocab}; a missing one fails the test rather than skipping it.
 */
final class Golden {
  private Golden() {}

  static Path fixtures() {
    return requiredPath("qa.fixtures");
  }

  static Path vocabPath() {
    return requiredPath("qa.vocab");
  }

  private static Path requiredPath(String property) {
    String value = System.getProperty(property);
    if (value == null || value.isEmpty()) {
      fail("system property " + property + " is not set (see tests/test_qa_app_java.py)");
    }
    Path path = Paths.get(value);
    if (!Files.exists(path)) {
      fail(property + "=" + path + " does not exist");
    }
    return path;
  }

  private static Vocabulary vocabulary;

  static synchronized Vocabulary vocabulary() throws IOException {
    if (vocabulary == null) {
      vocabulary = Vocabulary.load(vocabPath());
    }
    return vocabulary;
  }

  /** A fixture file: its {@code @key=value} settings and its records (fields split). */
  static final class Table {
    final Map<String, String> settings = new HashMap<>();
    final List<String[]> records = new ArrayList<>();

    int setting(String key) {
      String value = settings.get(key);
      if (value == null) {
        fail("fixture lacks @" + key);
      }
      return Integer.parseInt(value);
    }

    String text(String key) {
      String value = settings.get(key);
      if (value == null) {
        fail("fixture lacks @" + key);
      }
      return value;
    }
  }

  static Table read(String name) throws IOException {
    Table table = new Table();
    try (InputStream in = new GZIPInputStream(Files.newInputStream(fixtures().resolve(name)));
        BufferedReader reader =
            new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
      String line;
      while ((line = reader.readLine()) != null) {
        if (line.startsWith("#") || line.isEmpty()) {
          continue;
        }
        if (line.startsWith("@")) {
          int eq = line.indexOf('=');
          table.settings.put(line.substring(1, eq), line.substring(eq + 1));
        } else {
          table.records.add(line.split("\t", -1));
        }
      }
    }
    return table;
  }

  static String unescape(String field) {
    StringBuilder out = new StringBuilder(field.length());
    for (int i = 0; i < field.length(); i++) {
      char c = field.charAt(i);
      if (c != '\\') {
        out.append(c);
        continue;
      }
      char next = field.charAt(++i);
      switch (next) {
        case 't':
          out.append('\t');
          break;
        case 'n':
          out.append('\n');
          break;
        case 'r':
          out.append('\r');
          break;
        case '\\':
          out.append('\\');
          break;
        default:
          throw new IllegalArgumentException("bad escape \\" + next + " in " + field);
      }
    }
    return out.toString();
  }

  static int[] ints(String field) {
    if (field.isEmpty()) {
      return new int[0];
    }
    String[] parts = field.split(" ");
    int[] out = new int[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = Integer.parseInt(parts[i]);
    }
    return out;
  }

  static float[] floats(String field) {
    if (field.isEmpty()) {
      return new float[0];
    }
    String[] parts = field.split(" ");
    float[] out = new float[parts.length];
    for (int i = 0; i < parts.length; i++) {
      out[i] = Float.parseFloat(parts[i]);
    }
    return out;
  }

  /** Python's string indices are code points; Java's are UTF-16 units. */
  static int[] toCodePoints(String text, int[] utf16Offsets) {
    int[] out = new int[utf16Offsets.length];
    for (int i = 0; i < out.length; i++) {
      out[i] = text.codePointCount(0, utf16Offsets[i]);
    }
    return out;
  }

  /** One question of qa.tsv.gz / end_to_end.tsv.gz with its windows. */
  static final class QaCase {
    String id;
    String source;
    String question;
    String passage;
    String answer;
    final List<Window> windows = new ArrayList<>();

    @Override
    public String toString() {
      return id + " (" + source + ")";
    }
  }

  static final class Window {
    int index;
    int contextOffset;
    int[] ids;
    int[] mask;
    int[] segmentIds;
    int[] charStart;
    int[] charEnd;
    boolean[] maxContext;
    float[] startLogits;
    float[] endLogits;
  }

  static List<QaCase> cases(Table table) {
    List<QaCase> cases = new ArrayList<>();
    for (int r = 0; r < table.records.size(); ) {
      String[] q = table.records.get(r++);
      if (!q[0].equals("Q")) {
        fail("expected a Q record, got " + q[0]);
      }
      QaCase c = new QaCase();
      c.id = unescape(q[1]);
      c.source = unescape(q[2]);
      c.question = unescape(q[3]);
      c.passage = unescape(q[4]);
      c.answer = unescape(q[5]);
      int windows = Integer.parseInt(q[6]);
      for (int w = 0; w < windows; w++) {
        String[] f = table.records.get(r++);
        Window window = new Window();
        window.index = Integer.parseInt(f[1]);
        window.contextOffset = Integer.parseInt(f[2]);
        window.ids = ints(f[3]);
        window.mask = ints(f[4]);
        window.segmentIds = ints(f[5]);
        window.charStart = ints(f[6]);
        window.charEnd = ints(f[7]);
        window.maxContext = new boolean[f[8].length()];
        for (int k = 0; k < f[8].length(); k++) {
          window.maxContext[k] = f[8].charAt(k) == '1';
        }
        window.startLogits = floats(f[9]);
        window.endLogits = floats(f[10]);
        c.windows.add(window);
      }
      cases.add(c);
    }
    return cases;
  }
}
