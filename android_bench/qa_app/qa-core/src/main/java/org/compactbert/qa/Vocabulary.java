package org.compactbert.qa;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A BERT {@code vocab.txt}: one WordPiece per line, the line number (from 0) is its id.
 *
 * <p>Checked like {@code tfmodels.tokenization.load_vocab}, so a file one side refuses the other
 * refuses too: not empty, the five special tokens present, no empty or repeated token.
 */
public final class Vocabulary {
  public static final String PAD = "[PAD]";
  public static final String UNK = "[UNK]";
  public static final String CLS = "[CLS]";
  public static final String SEP = "[SEP]";
  public static final String MASK = "[MASK]";

  private final List<String> tokens;
  private final Map<String, Integer> ids;
  private final int maxTokenLength;

  /** Thrown for a file that is not a usable vocabulary; the message names the file. */
  public static final class VocabularyException extends IOException {
    public VocabularyException(String message) {
      super(message);
    }
  }

  private Vocabulary(List<String> tokens, String source) throws VocabularyException {
    while (!tokens.isEmpty() && tokens.get(tokens.size() - 1).isEmpty()) {
      tokens.remove(tokens.size() - 1);
    }
    if (tokens.isEmpty()) {
      throw new VocabularyException(source + ": vocabulary is empty");
    }
    Map<String, Integer> index = new HashMap<>(tokens.size() * 2);
    int longest = 0;
    for (int i = 0; i < tokens.size(); i++) {
      String token = tokens.get(i);
      if (token.isEmpty()) {
        throw new VocabularyException(source + ":" + (i + 1) + ": empty token");
      }
      if (index.putIfAbsent(token, i) != null) {
        throw new VocabularyException(source + ":" + (i + 1) + ": duplicate token '" + token + "'");
      }
      longest = Math.max(longest, token.length());
    }
    List<String> missing = new ArrayList<>();
    for (String special : new String[] {PAD, UNK, CLS, SEP, MASK}) {
      if (!index.containsKey(special)) {
        missing.add(special);
      }
    }
    if (!missing.isEmpty()) {
      throw new VocabularyException(
          source + ": vocabulary lacks " + String.join(", ", missing));
    }
    this.tokens = Collections.unmodifiableList(tokens);
    this.ids = index;
    this.maxTokenLength = longest;
  }

  /** Reads a UTF-8 {@code vocab.txt}. */
  public static Vocabulary load(Path path) throws IOException {
    try (InputStream in = Files.newInputStream(path)) {
      return load(in, path.toString());
    } catch (VocabularyException e) {
      throw e;
    } catch (IOException e) {
      throw new VocabularyException(path + ": cannot read vocabulary (" + e.getMessage() + ")");
    }
  }

  /** Reads a UTF-8 vocabulary from a stream (an Android asset); {@code source} names it. */
  public static Vocabulary load(InputStream in, String source) throws IOException {
    List<String> tokens = new ArrayList<>();
    BufferedReader reader = new BufferedReader(new InputStreamReader(in,
        StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT)));
    try {
      // readLine splits at \n, \r and \r\n: Python's universal newlines, as load_vocab reads.
      String line;
      while ((line = reader.readLine()) != null) {
        tokens.add(line);
      }
    } catch (CharacterCodingException e) {
      throw new VocabularyException(source + ": cannot read vocabulary (not UTF-8)");
    }
    return new Vocabulary(tokens, source);
  }

  public int size() {
    return tokens.size();
  }

  /**
   * SHA-256 (hex) of the tokens, each followed by {@code "\n"}: what {@code
   * tfmodels.vocab_record} records, {@code sha256sum vocab.txt} for an ordinary file.
   */
  public String sha256() {
    MessageDigest digest;
    try {
      digest = MessageDigest.getInstance("SHA-256");
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException(e);  // every Java platform has SHA-256
    }
    for (String token : tokens) {
      digest.update((token + "\n").getBytes(StandardCharsets.UTF_8));
    }
    StringBuilder hex = new StringBuilder();
    for (byte b : digest.digest()) {
      hex.append(String.format("%02x", b));
    }
    return hex.toString();
  }

  /** "N tokens, sha256 0123456789ab", as the Python commands name a vocabulary. */
  public String describe() {
    return size() + " tokens, sha256 " + sha256().substring(0, 12);
  }

  /** Same tokens in the same order (so the same ids). */
  public boolean sameTokens(Vocabulary other) {
    return tokens.equals(other.tokens);
  }

  public String token(int id) {
    return tokens.get(id);
  }

  /** The id of {@code token}, or -1 when the vocabulary lacks it. */
  public int id(String token) {
    Integer id = ids.get(token);
    return id == null ? -1 : id;
  }

  /** Length in UTF-16 units of the longest token (bounds the WordPiece search). */
  public int maxTokenLength() {
    return maxTokenLength;
  }

  public int padId() {
    return ids.get(PAD);
  }

  public int unkId() {
    return ids.get(UNK);
  }

  public int clsId() {
    return ids.get(CLS);
  }

  public int sepId() {
    return ids.get(SEP);
  }
}
