package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Every code point normalizes and splits words as the Python tokenizer does (below the
 * private-use planes 15 and 16, which the table leaves out). Code points Java 17 does not know
 * (assigned after Unicode 13) are counted, not compared: Java has no data for them.
 */
class CodePointTest {
  private static final int LIMIT = 0xF0000;

  private static String hex(String s) {
    StringBuilder b = new StringBuilder();
    s.codePoints().forEach(c -> b.append(String.format("%X ", c)));
    return b.toString().trim();
  }

  private static Map<Integer, String> table(Golden.Table t, boolean lower) {
    Map<Integer, String> out = new HashMap<>();
    for (String[] r : t.records) {
      if (r[0].equals("N") && r[1].equals(lower ? "1" : "0")) {
        StringBuilder s = new StringBuilder();
        for (String h : r[3].isEmpty() ? new String[0] : r[3].split(" ")) {
          s.appendCodePoint(Integer.parseInt(h, 16));
        }
        out.put(Integer.parseInt(r[2], 16), s.toString());
      }
    }
    return out;
  }

  private static void checkNormalization(boolean lower) throws IOException {
    Map<Integer, String> expected = table(Golden.read("codepoints.tsv.gz"), lower);
    assertTrue(expected.size() > (lower ? 20000 : 200), "table of " + expected.size());
    BertNormalizer normalizer = new BertNormalizer(lower);
    List<String> mismatches = new ArrayList<>();
    int unknown = 0;
    for (int cp = 0; cp < LIMIT; cp++) {
      if (cp >= 0xD800 && cp <= 0xDFFF) {
        continue;
      }
      String self = new String(Character.toChars(cp));
      String want = expected.getOrDefault(cp, self);
      String got = normalizer.normalize(cp);
      got = got == null ? self : got;
      if (!Character.isDefined(cp)) {
        unknown += want.equals(got) ? 0 : 1;
        continue;
      }
      if (!want.equals(got)) {
        mismatches.add(String.format("U+%04X %s: python [%s] java [%s]", cp,
            Character.getName(cp), hex(want), hex(got)));
      }
    }
    assertTrue(mismatches.isEmpty(), () -> mismatches.size() + " code points differ: "
        + String.join("; ", mismatches.subList(0, Math.min(5, mismatches.size()))));
    // The only differences: characters newer than Java 17's Unicode 13.
    assertTrue(unknown < 1000, unknown + " differences on code points Java lacks");
    System.out.println("normalization (lower_case=" + lower + "): every code point Java knows"
        + " agrees; " + unknown + " newer ones differ");
  }

  @Test
  void normalizationMatchesPythonLowerCased() throws IOException {
    checkNormalization(true);
  }

  @Test
  void normalizationMatchesPythonCased() throws IOException {
    checkNormalization(false);
  }

  @Test
  void wordSplittingClassesMatch() throws IOException {
    Golden.Table t = Golden.read("codepoints.tsv.gz");
    Map<Integer, String> changed = table(t, true);
    String[] kind = new String[LIMIT];
    for (String[] r : t.records) {
      if (r[0].equals("C")) {
        for (int c = Integer.parseInt(r[2], 16); c <= Integer.parseInt(r[3], 16); c++) {
          kind[c] = r[1];
        }
      }
    }
    List<String> mismatches = new ArrayList<>();
    int spaces = 0;
    int punct = 0;
    for (int cp = 0; cp < LIMIT; cp++) {
      if ((cp >= 0xD800 && cp <= 0xDFFF) || changed.containsKey(cp) || !Character.isDefined(cp)) {
        continue;  // classes are read off unchanged code points only
      }
      String want = kind[cp] == null ? "word" : kind[cp];
      String got = BertNormalizer.isWhitespace(cp) ? "space"
          : BertNormalizer.isPunctuationOrCjk(cp) ? "punct" : "word";
      spaces += got.equals("space") ? 1 : 0;
      punct += got.equals("punct") ? 1 : 0;
      if (!want.equals(got)) {
        mismatches.add(String.format("U+%04X %s: python %s java %s", cp, Character.getName(cp),
            want, got));
      }
    }
    assertTrue(mismatches.isEmpty(), () -> mismatches.size() + " code points differ: "
        + String.join("; ", mismatches.subList(0, Math.min(5, mismatches.size()))));
    // Every other whitespace character becomes U+0020, so it is not in this loop.
    assertEquals(1, spaces, "U+0020 is the one whitespace the normalizer leaves alone");
    // CJK unified ideographs (and extensions A to E) and Unicode's P* categories.
    assertTrue(punct > 80000, punct + " punctuation / CJK code points");
  }
}
