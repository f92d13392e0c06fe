package org.compactbert.qa;

/**
 * The WordPieces of one text. {@code start[i]}/{@code end[i]} are UTF-16 offsets into the
 * original text (what {@link String#substring} takes), so an answer span maps back to the exact
 * characters the user typed, with their case and accents.
 */
public final class Encoding {
  private final String[] pieces;
  private final int[] ids;
  private final int[] start;
  private final int[] end;

  Encoding(String[] pieces, int[] ids, int[] start, int[] end) {
    this.pieces = pieces;
    this.ids = ids;
    this.start = start;
    this.end = end;
  }

  public int size() {
    return ids.length;
  }

  public String piece(int i) {
    return pieces[i];
  }

  public int id(int i) {
    return ids[i];
  }

  public int start(int i) {
    return start[i];
  }

  public int end(int i) {
    return end[i];
  }

  public String[] pieces() {
    return pieces.clone();
  }

  public int[] ids() {
    return ids.clone();
  }

  public int[] starts() {
    return start.clone();
  }

  public int[] ends() {
    return end.clone();
  }
}
