package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** tokenizer_config.json's three fields, read from its text and from a model's metadata zip. */
class TokenizerSettingsTest {
  private static final String SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";

  private static String message(String json) {
    String m = assertThrows(TokenizerSettings.SettingsException.class,
        () -> TokenizerSettings.fromJson(json)).getMessage();
    assertFalse(m.contains("\n"), m);
    return m;
  }

  @Test
  void theThreeFieldsAreReadAndAbsentOnesAreTheDefaults() throws IOException {
    assertEquals(TokenizerSettings.DEFAULT, TokenizerSettings.fromJson("{}"));
    assertEquals(TokenizerSettings.DEFAULT, TokenizerSettings.fromJson(" \n{ } \r\n"));
    assertEquals(TokenizerSettings.DEFAULT, TokenizerSettings.fromJson("{\"strip_accents\": null}"));
    TokenizerSettings s = TokenizerSettings.fromJson(
        "{\"do_lower_case\": true, \"strip_accents\": false, \"tokenize_chinese_chars\": false}");
    assertEquals(new TokenizerSettings(true, false, false), s);
    assertTrue(s.lowerCase());
    assertEquals(Boolean.FALSE, s.stripAccents());
    assertFalse(s.stripsAccents());
    assertFalse(s.tokenizeChineseChars());
    assertFalse(s.isDefault());
    assertTrue(TokenizerSettings.DEFAULT.isDefault());
    assertNull(TokenizerSettings.DEFAULT.stripAccents());
    assertEquals(new TokenizerSettings(false, null, true),
        TokenizerSettings.fromJson("{\"do_lower_case\": false}"));
    // A repeated field counts its last value, as Python's json.
    assertEquals(new TokenizerSettings(true, true, true),
        TokenizerSettings.fromJson("{\"strip_accents\": false, \"strip_accents\": true}"));
  }

  @Test
  void everyCombinationSurvivesItsJson() throws IOException {
    for (boolean lower : new boolean[] {true, false}) {
      for (Boolean strip : new Boolean[] {null, true, false}) {
        for (boolean chinese : new boolean[] {true, false}) {
          TokenizerSettings s = new TokenizerSettings(lower, strip, chinese);
          assertEquals(s, TokenizerSettings.fromJson(s.toJson()), s.toJson());
          assertEquals(s.hashCode(), TokenizerSettings.fromJson(s.toJson()).hashCode());
        }
      }
    }
  }

  @Test
  void aHuggingFaceConfigWithItsOtherFieldsIsRead() throws IOException {
    String json = "{\n"
        + "  \"added_tokens_decoder\": {\"0\": {\"content\": \"[PAD]\", \"lstrip\": false,"
        + " \"normalized\": false, \"rstrip\": false, \"single_word\": false,"
        + " \"special\": true}},\n"
        + "  \"clean_up_tokenization_spaces\": true,\n"
        + "  \"cls_token\": \"[CLS]\",\n"
        + "  \"do_basic_tokenize\": true,\n"
        + "  \"do_lower_case\": false,\n"
        + "  \"extra_special_tokens\": {},\n"
        + "  \"model_max_length\": 1000000000000000019884624838656,\n"
        + "  \"never_split\": null,\n"
        + "  \"note\": \"esc \\\" \\\\ \\/ \\b\\f\\n\\r\\t \\u00e9 \\ud83d\\ude00 {[,:\",\n"
        + "  \"numbers\": [-0.5e-3, 0, 12.25E+2, [], [[true]], NaN, -Infinity],\n"
        + "  \"strip_accents\": true,\n"
        + "  \"tokenize_chinese_chars\": false,\n"
        + "  \"tokenizer_class\": \"BertTokenizer\"\n"
        + "}\n";
    assertEquals(new TokenizerSettings(false, true, false), TokenizerSettings.fromJson(json));
  }

  @Test
  void aFieldOfTheWrongTypeIsRefusedNamingTheFileAndField() {
    assertEquals("tokenizer_config.json: field 'strip_accents' is \"yes\"; give true or false"
        + " or null", message("{\"strip_accents\": \"yes\"}"));
    assertEquals("tokenizer_config.json: field 'do_lower_case' is null; give true or false",
        message("{\"do_lower_case\": null}"));
    assertEquals("tokenizer_config.json: field 'tokenize_chinese_chars' is 1; give true or false",
        message("{\"tokenize_chinese_chars\": 1}"));
    assertTrue(message("{\"do_lower_case\": [true]}").contains("'do_lower_case' is [true];"));
    String named = assertThrows(TokenizerSettings.SettingsException.class,
        () -> TokenizerSettings.fromJson("{\"do_lower_case\": \"True\"}",
            "m.tflite:tokenizer_config.json")).getMessage();
    assertTrue(named.startsWith("m.tflite:tokenizer_config.json: field 'do_lower_case'"), named);
  }

  @Test
  void malformedJsonIsRefusedNamingTheFile() {
    String[] bad = {"", "   ", "{", "{\"do_lower_case\": true,}", "{\"do_lower_case\": tru}",
        "{\"do_lower_case\": true} x", "{do_lower_case: true}", "{'do_lower_case': true}",
        "{\"a\": \"unterminated}", "{\"a\": 01}", "{\"a\": 1.}", "{\"a\" 1}", "{\"a\": [1 2]}",
        "{\"a\": \"\\x\"}", "{\"a\": \"tab\there\"}", "\ufeff{}", "{\"a\": True}",
        "{\"do_lower_case\": true}}"};
    for (String json : bad) {
      String m = message(json);
      assertTrue(m.startsWith("tokenizer_config.json: not valid JSON ("), json + " -> " + m);
    }
    assertEquals("tokenizer_config.json: not valid JSON (expected ',' or '}', line 2 column 3)",
        message("{\"do_lower_case\": true\n  \"strip_accents\": true}"));
    for (String json : new String[] {"[true]", "true", "\"do_lower_case\"", "null", " 3 "}) {
      assertEquals("tokenizer_config.json: top level must be a JSON object", message(json));
    }
    String deep = "{\"a\": " + "[".repeat(100_000) + "]".repeat(100_000) + "}";
    assertEquals("tokenizer_config.json: JSON nested too deeply", message(deep));
    String fine = "{\"a\": " + "[".repeat(200) + "]".repeat(200) + "}";
    assertEquals(TokenizerSettings.DEFAULT,
        assertDoesNotThrowSettings(fine));
  }

  private static TokenizerSettings assertDoesNotThrowSettings(String json) {
    try {
      return TokenizerSettings.fromJson(json);
    } catch (TokenizerSettings.SettingsException e) {
      throw new AssertionError(e.getMessage(), e);
    }
  }

  // --- in a model -----------------------------------------------------------------------------

  /** Flat-buffer stand-in bytes, then a zip of {@code files} (stored unless {@code deflated}). */
  private static byte[] model(Map<String, byte[]> files, boolean deflated) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write("TFL3 not really a flat buffer PK".getBytes(StandardCharsets.UTF_8));
    if (files != null) {
      ZipOutputStream zip = new ZipOutputStream(out);
      for (Map.Entry<String, byte[]> f : files.entrySet()) {
        ZipEntry entry = new ZipEntry(f.getKey());
        if (!deflated) {
          CRC32 crc = new CRC32();
          crc.update(f.getValue());
          entry.setMethod(ZipEntry.STORED);
          entry.setSize(f.getValue().length);
          entry.setCompressedSize(f.getValue().length);
          entry.setCrc(crc.getValue());
        }
        zip.putNextEntry(entry);
        zip.write(f.getValue());
        zip.closeEntry();
      }
      zip.close();
    }
    return out.toByteArray();
  }

  private static Map<String, byte[]> files(String settingsJson) {
    Map<String, byte[]> files = new LinkedHashMap<>();
    files.put(ModelVocabulary.VOCAB_NAME,
        (SPECIALS + "résumé\nresume\n").getBytes(StandardCharsets.UTF_8));
    if (settingsJson != null) {
      files.put(TokenizerSettings.FILE_NAME, settingsJson.getBytes(StandardCharsets.UTF_8));
    }
    return files;
  }

  @Test
  void theModelsSettingsAreReadBesideItsVocabulary(@TempDir Path dir) throws IOException {
    byte[] bytes = model(files("{\"do_lower_case\": true, \"strip_accents\": false,"
        + " \"tokenize_chinese_chars\": false}"), false);
    TokenizerSettings expected = new TokenizerSettings(true, false, false);
    ByteBuffer m = ByteBuffer.wrap(bytes);
    assertEquals(expected, TokenizerSettings.ofModel(m, "m.tflite"));
    assertEquals(0, m.position());  // the caller's buffer is left as it was
    assertEquals(expected, TokenizerSettings.ofModel(bytes, "m.tflite"));
    Path file = dir.resolve("m.tflite");
    Files.write(file, bytes);
    assertEquals(expected, TokenizerSettings.ofModel(file));
    // The app's way: the model's vocabulary, tokenized with the model's settings.
    WordPieceTokenizer tokenizer = new WordPieceTokenizer(
        ModelVocabulary.read(m, "m.tflite"), TokenizerSettings.ofModel(m, "m.tflite"));
    assertArrayEquals(new String[] {"résumé"}, tokenizer.tokenize("Résumé"));
    assertArrayEquals(new String[] {"resume"},
        new WordPieceTokenizer(ModelVocabulary.read(m, "m.tflite"), true).tokenize("Résumé"));
  }

  @Test
  void aModelWithoutSettingsHasTheDefaults(@TempDir Path dir) throws IOException {
    assertEquals(TokenizerSettings.DEFAULT,
        TokenizerSettings.ofModel(model(files(null), false), "m.tflite"));
    assertEquals(TokenizerSettings.DEFAULT, TokenizerSettings.ofModel(model(null, false), "m"));
    assertEquals(TokenizerSettings.DEFAULT, TokenizerSettings.ofModel(new byte[0], "empty"));
    Path file = dir.resolve("bare.tflite");
    Files.write(file, model(null, false));
    assertEquals(TokenizerSettings.DEFAULT, TokenizerSettings.ofModel(file));
  }

  @Test
  void badSettingsInAModelAreRefusedNamingTheModel() throws IOException {
    String m = assertThrows(TokenizerSettings.SettingsException.class,
        () -> TokenizerSettings.ofModel(model(files("{\"strip_accents\": 0}"), false),
            "m.tflite")).getMessage();
    assertEquals("m.tflite:tokenizer_config.json: field 'strip_accents' is 0; give true or false"
        + " or null", m);
    m = assertThrows(TokenizerSettings.SettingsException.class,
        () -> TokenizerSettings.ofModel(model(files("{\"strip_accents\""), false),
            "m.tflite")).getMessage();
    assertTrue(m.startsWith("m.tflite:tokenizer_config.json: not valid JSON ("), m);
    Map<String, byte[]> latin1 = files(null);
    latin1.put(TokenizerSettings.FILE_NAME, new byte[] {'{', '"', (byte) 0xE9, '"', ':', '1', '}'});
    m = assertThrows(TokenizerSettings.SettingsException.class,
        () -> TokenizerSettings.ofModel(model(latin1, false), "m.tflite")).getMessage();
    assertEquals("m.tflite:tokenizer_config.json: not UTF-8 text", m);
    m = assertThrows(TokenizerSettings.SettingsException.class,
        () -> TokenizerSettings.ofModel(model(files("{}"), true), "m.tflite")).getMessage();
    assertTrue(m.startsWith("m.tflite: its tokenizer_config.json is compressed"), m);
  }
}
