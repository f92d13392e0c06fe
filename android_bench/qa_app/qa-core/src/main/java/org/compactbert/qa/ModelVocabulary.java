package org.compactbert.qa;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The vocabulary a converted model carries, and the check that a vocabulary given beside it is
 * that one.
 *
 * <p>{@code convert_tflite} attaches the {@code vocab.txt} the model was trained with as TFLite
 * metadata: an uncompressed zip appended to the flat buffer (what the Task Library reads). Token
 * ids index the model's word table, so another vocabulary crashes the model (a larger one) or
 * answers confident nonsense (one of the same size); {@link #choose} refuses it instead.
 *
 * <pre>{@code
 * Vocabulary v = ModelVocabulary.choose(pushedOrNull, "vocab.txt", model, "qa_model.tflite");
 * }</pre>
 */
public final class ModelVocabulary {
  public static final String VOCAB_NAME = "vocab.txt";
  private static final int END_OF_DIRECTORY = 0x06054b50;
  private static final int DIRECTORY_ENTRY = 0x02014b50;
  private static final int LOCAL_HEADER = 0x04034b50;
  private static final int STORED = 0;

  private ModelVocabulary() {}

  /**
   * The model's own {@code vocab.txt}, or null when it carries none (a model without metadata).
   *
   * @param model the .tflite file's bytes (a memory-mapped file or asset); its position is kept
   * @param source names the model in messages
   */
  public static Vocabulary read(ByteBuffer model, String source) throws IOException {
    byte[] bytes = associatedFile(model, source, VOCAB_NAME);
    return bytes == null ? null
        : Vocabulary.load(new ByteArrayInputStream(bytes), source + ":" + VOCAB_NAME);
  }

  /**
   * The bytes of the associated file {@code name} in the model's metadata zip, or null when the
   * model carries no such file (or no zip at all). {@link TokenizerSettings#ofModel} reads the
   * model's {@value TokenizerSettings#FILE_NAME} with it.
   *
   * @param model the .tflite file's bytes; its position is kept
   * @param source names the model in messages
   * @throws Vocabulary.VocabularyException the entry is compressed, damaged or truncated
   */
  static byte[] associatedFile(ByteBuffer model, String source, String name) throws IOException {
    ByteBuffer b = model.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    int limit = b.limit();
    // The end-of-directory record: 22 bytes plus a comment of at most 65535, at the very end.
    int end = -1;
    for (int i = limit - 22; i >= Math.max(0, limit - 22 - 0xFFFF); i--) {
      if (b.getInt(i) == END_OF_DIRECTORY && i + 22 + (b.getShort(i + 20) & 0xFFFF) == limit) {
        end = i;
        break;
      }
    }
    if (end < 0) {
      return null;
    }
    int entries = b.getShort(end + 10) & 0xFFFF;
    long size = b.getInt(end + 12) & 0xFFFFFFFFL;
    long offset = b.getInt(end + 16) & 0xFFFFFFFFL;
    // Offsets count from the zip's start; bytes before it (the flat buffer) shift them, unless
    // the writer counted them in already (Python's zipfile does): shift = where it is - where
    // it says it is.
    long shift = end - size - offset;
    if (shift < 0) {
      return null;
    }
    long at = offset + shift;
    for (int e = 0; e < entries; e++) {
      if (at + 46 > end || b.getInt((int) at) != DIRECTORY_ENTRY) {
        return null;  // not a zip after all
      }
      int method = b.getShort((int) at + 10) & 0xFFFF;
      long length = b.getInt((int) at + 20) & 0xFFFFFFFFL;
      int nameLength = b.getShort((int) at + 28) & 0xFFFF;
      if (at + 46 + nameLength > end) {
        return null;
      }
      int extraLength = b.getShort((int) at + 30) & 0xFFFF;
      int commentLength = b.getShort((int) at + 32) & 0xFFFF;
      long header = (b.getInt((int) at + 42) & 0xFFFFFFFFL) + shift;
      String entryName = string(b, (int) at + 46, nameLength);
      if (entryName.equals(name)) {
        if (method != STORED) {
          throw new Vocabulary.VocabularyException(source + ": its " + name
              + " is compressed (method " + method + "); convert_tflite stores it uncompressed");
        }
        if (header + 30 > end || b.getInt((int) header) != LOCAL_HEADER) {
          throw new Vocabulary.VocabularyException(source + ": its " + name
              + " entry is damaged");
        }
        long data = header + 30 + (b.getShort((int) header + 26) & 0xFFFF)
            + (b.getShort((int) header + 28) & 0xFFFF);
        if (data + length > end) {
          throw new Vocabulary.VocabularyException(source + ": its " + name
              + " entry is truncated");
        }
        byte[] bytes = new byte[(int) length];
        b.position((int) data);
        b.get(bytes);
        return bytes;
      }
      at += 46 + nameLength + extraLength + commentLength;
    }
    return null;
  }

  /**
   * The vocabulary to tokenize for {@code model} with: {@code given} if it is the model's own
   * (same tokens in the same order), the model's own if {@code given} is null; a model without
   * metadata takes {@code given} as it is.
   *
   * @throws Vocabulary.VocabularyException one line naming both when {@code given} is another
   *     vocabulary, or when neither exists
   */
  public static Vocabulary choose(Vocabulary given, String givenSource, ByteBuffer model,
      String modelSource) throws IOException {
    Vocabulary own = read(model, modelSource);
    if (given == null) {
      if (own == null) {
        throw new Vocabulary.VocabularyException(modelSource + " carries no " + VOCAB_NAME
            + " (no metadata) and none was given beside it");
      }
      return own;
    }
    if (own != null && !own.sameTokens(given)) {
      throw new Vocabulary.VocabularyException(givenSource + " (" + given.describe()
          + ") is not the vocabulary of " + modelSource + " (" + own.describe()
          + "); remove it to use the model's own");
    }
    return given;
  }

  private static String string(ByteBuffer b, int at, int length) {
    byte[] bytes = new byte[length];
    for (int i = 0; i < length; i++) {
      bytes[i] = b.get(at + i);
    }
    return new String(bytes, StandardCharsets.UTF_8);
  }
}
