"""Open the project's text files, plain or gzip-compressed, the same way."""

import gzip


def open_text(path):
  """Text file, plain or gzip (told by magic bytes, not the name).

  Only "\\n" ends a line (e-mail text may hold a stray "\\r"), and a UTF-8
  byte-order mark is dropped. A missing file raises ValueError naming it.
  """
  try:
    with open(path, "rb") as f:
      gzipped = f.read(2) == b"\x1f\x8b"
  except OSError as e:
    raise ValueError(f"{path}: cannot open ({e.strerror})") from None
  opener = gzip.open if gzipped else open
  return opener(path, "rt", encoding="utf-8-sig", newline="\n")


def read_lines(path):
  """All lines of a text file, stripped; ValueError naming it if unreadable."""
  try:
    with open_text(path) as f:
      return [line.strip() for line in f]
  except (OSError, EOFError, UnicodeDecodeError) as e:
    raise ValueError(f"{path}: cannot read text ({e})") from None


def read_documents(path):
  """A one-sentence-per-line file as documents (lists of sentences): a
  blank line ends a document, as in BERT's pre-training text format."""
  documents, current = [], []
  for line in read_lines(path):
    if line:
      current.append(line)
    elif current:
      documents.append(current)
      current = []
  if current:
    documents.append(current)
  return documents
