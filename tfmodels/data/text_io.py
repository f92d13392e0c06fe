"""Open the project's text files, plain or gzip-compressed, the same way."""

import gzip


def open_text(path):
  """Text file, plain or gzip (told by magic bytes, not the name).

  Only "\\n" ends a line (e-mail text may hold a stray "\\r"), and a UTF-8
  byte-order mark is dropped.
  """
  with open(path, "rb") as f:
    gzipped = f.read(2) == b"\x1f\x8b"
  opener = gzip.open if gzipped else open
  return opener(path, "rt", encoding="utf-8-sig", newline="\n")
