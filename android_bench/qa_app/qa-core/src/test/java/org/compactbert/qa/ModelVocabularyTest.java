package org.compactbert.qa;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipOutputStream;
import org.junit.jupiter.api.Test;

/** The vocabulary a model carries is found, used when none is given, and holds a given one. */
class ModelVocabularyTest {
  private static final String SPECIALS = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";

  private static Vocabulary vocab(String text) throws IOException {
    return Vocabulary.load(new ByteArrayInputStream(text.getBytes(StandardCharsets.UTF_8)), "v");
  }

  /** Flat-buffer stand-in bytes, then a stored zip whose offsets count from its own start. */
  private static ByteBuffer model(String vocabText) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    out.write("TFL3 not really a flat buffer PK".getBytes(StandardCharsets.UTF_8));
    if (vocabText != null) {
      ZipOutputStream zip = new ZipOutputStream(out);
      byte[] labels = "a\nb\n".getBytes(StandardCharsets.UTF_8);
      for (String name : new String[] {"labels.txt", ModelVocabulary.VOCAB_NAME}) {
        byte[] data = name.equals("labels.txt") ? labels : vocabText.getBytes(StandardCharsets.UTF_8);
        ZipEntry entry = new ZipEntry(name);
        CRC32 crc = new CRC32();
        crc.update(data);
        entry.setMethod(ZipEntry.STORED);
        entry.setSize(data.length);
        entry.setCompressedSize(data.length);
        entry.setCrc(crc.getValue());
        zip.putNextEntry(entry);
        zip.write(data);
        zip.closeEntry();
      }
      zip.close();
    }
    return ByteBuffer.wrap(out.toByteArray());
  }

  @Test
  void theModelsOwnVocabularyIsReadAndUsedWhenNoneIsGiven() throws IOException {
    ByteBuffer m = model(SPECIALS + "river\nstream\n");
    Vocabulary own = ModelVocabulary.read(m, "m.tflite");
    assertEquals(7, own.size());
    assertEquals(5, own.id("river"));
    assertEquals(0, m.position());  // the caller's buffer is left as it was
    assertEquals(7, ModelVocabulary.choose(null, "vocab.txt", m, "m.tflite").size());
    Vocabulary same = vocab(SPECIALS + "river\r\nstream\n\n");  // same tokens, other line ends
    assertSame(same, ModelVocabulary.choose(same, "vocab.txt", m, "m.tflite"));
    assertEquals(own.sha256(), same.sha256());
  }

  @Test
  void anotherVocabularyIsRefusedInOneLineNamingBoth() throws IOException {
    ByteBuffer m = model(SPECIALS + "river\nstream\n");
    Vocabulary swapped = vocab(SPECIALS + "stream\nriver\n");  // same size, other ids
    String message = assertThrows(Vocabulary.VocabularyException.class,
        () -> ModelVocabulary.choose(swapped, "vocab.txt", m, "m.tflite")).getMessage();
    assertTrue(message.startsWith("vocab.txt (7 tokens, sha256 " + swapped.sha256().substring(0, 12)
        + ") is not the vocabulary of m.tflite (7 tokens, sha256 "), message);
    assertTrue(!message.contains("\n"), message);
    Vocabulary larger = vocab(SPECIALS + "river\nstream\nlake\n");
    assertTrue(assertThrows(Vocabulary.VocabularyException.class,
        () -> ModelVocabulary.choose(larger, "vocab.txt", m, "m.tflite")).getMessage()
        .startsWith("vocab.txt (8 tokens, sha256 "));
  }

  @Test
  void aModelWithoutMetadataTakesTheGivenVocabularyOrIsRefused() throws IOException {
    ByteBuffer bare = model(null);
    assertNull(ModelVocabulary.read(bare, "bare.tflite"));
    Vocabulary given = vocab(SPECIALS + "river\n");
    assertSame(given, ModelVocabulary.choose(given, "vocab.txt", bare, "bare.tflite"));
    assertTrue(assertThrows(Vocabulary.VocabularyException.class,
        () -> ModelVocabulary.choose(null, "vocab.txt", bare, "bare.tflite")).getMessage()
        .startsWith("bare.tflite carries no vocab.txt"));
  }

  /** A model convert_tflite's metadata writer made (tests/test_qa_app_java.py passes it). */
  @Test
  void readsTheVocabularyPythonAttached() throws IOException {
    String path = System.getProperty("qa.model");
    assumeTrue(path != null, "qa.model not set (tests/test_qa_app_java.py sets it)");
    ByteBuffer m = ByteBuffer.wrap(Files.readAllBytes(Paths.get(path)));
    Vocabulary own = ModelVocabulary.read(m, path);
    assertEquals(Golden.vocabulary().size(), own.size());
    assertTrue(own.sameTokens(Golden.vocabulary()));
    // Python's record (tfmodels.vocab_record) and Java's hash agree.
    assertEquals(System.getProperty("qa.model.vocab_sha256"), own.sha256());
  }
}
