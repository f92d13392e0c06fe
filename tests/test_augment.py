"""tfmodels.data.augment: TinyBERT's word replacement with the teacher's own
word table for neighbours; QA answers still where their spans say."""

import json
import os
import random
import subprocess
import sys

import numpy as np

from tfmodels.data import augment

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB = os.path.join(REPO, "data", "vocab", "student_vocab.txt")


def test_nearest_words_are_the_cosine_nearest_and_never_the_word_itself():
  rng = np.random.default_rng(0)
  table = rng.normal(size=(40, 8)).astype(np.float32)
  table[7] = table[3] * 5  # the same direction, another length
  words = {f"w{i}": i for i in range(40)}
  found = augment.nearest_words(table, words, ["w3", "w10", "nope"], 4,
                                block=1)
  assert set(found) == {"w3", "w10"}
  unit = table / np.linalg.norm(table, axis=1, keepdims=True)
  for word in found:
    row = words[word]
    cosine = unit @ unit[row]
    cosine[row] = -np.inf
    assert found[word] == [f"w{i}" for i in np.argsort(-cosine)[:4]]
  assert found["w3"][0] == "w7"


def test_whole_words_are_letters_only_pieces():
  vocab = ["[PAD]", "[UNK]", "the", "##ing", "a", "run", "3d", "café", "Big"]
  assert augment.whole_words(vocab) == {"the": 2, "run": 5, "Big": 8}


def test_replacement_keeps_case_and_protected_spans_and_maps_offsets():
  neighbours = {"quick": ["speedy"], "fox": ["wolf"], "dog": ["hound"],
                "lazy": ["idle"]}
  text = "The Quick brown fox jumps over the lazy dog."
  keep = [(text.index("fox"), text.index("fox") + 3)]
  new, moved = augment.replaced(text, neighbours, 1.0, random.Random(0),
                                keep)
  assert new == "The Speedy brown fox jumps over the idle hound."
  assert len(moved) == len(text) + 1
  fox = text.index("fox")
  assert new[moved[fox]:moved[fox] + 3] == "fox"
  assert moved[len(text)] == len(new)
  # Nothing replaced at share 0: the identity.
  same, ident = augment.replaced(text, neighbours, 0.0, random.Random(0))
  assert same == text and ident == list(range(len(text) + 1))


def _squad(n):
  articles = []
  for i in range(n):
    context = (f"A lazy dog slept near quick foxes. The answer{i} lies "
               f"here and the lazy cat waits.")
    start = context.index(f"answer{i}")
    articles.append({"title": f"t{i}", "paragraphs": [{
        "context": context, "qas": [
            {"id": f"q{i}", "question": "Which quick word is here?",
             "answers": [{"text": f"answer{i} lies", "answer_start": start}]},
            {"id": f"p{i}", "question": "What does the lazy dog do?",
             "answers": [{"text": "lazy dog slept", "answer_start": 2}]}]}]})
  return {"version": "1.1", "data": articles}


def test_every_augmented_answer_is_where_its_span_points():
  neighbours = {"lazy": ["idle", "sluggish"], "quick": ["fast", "rapid"],
                "slept": ["dozed"], "near": ["beside"], "cat": ["kitten"],
                "waits": ["lingers"], "here": ["there"]}
  data = augment.augment_squad(_squad(5), 3, neighbours, 0.9,
                               random.Random(1))
  assert len(data["data"]) == 20
  changed = 0
  for article in data["data"]:
    for paragraph in article["paragraphs"]:
      context = paragraph["context"]
      for qa in paragraph["qas"]:
        for answer in qa["answers"]:
          start = answer["answer_start"]
          assert context[start:start + len(answer["text"])] == answer["text"]
      changed += context != _squad(1)["data"][0]["paragraphs"][0][
          "context"].replace("answer0", "answer" + article["title"][1])
  assert changed >= 10  # the copies differ from their originals
  ids = [qa["id"] for a in data["data"] for p in a["paragraphs"]
         for qa in p["qas"]]
  assert len(ids) == len(set(ids)) == 40 and "q4#aug3" in ids


def test_spam_copies_keep_their_labels():
  lines = ["sentence\tlabel\n", "win a quick prize now\t1\n",
           "the meeting moved\t0\n"]
  text = augment.augment_rows(lines, 2, {"quick": ["fast"], "meeting":
                                         ["session"]}, 1.0, random.Random(0))
  assert text.splitlines() == [
      "sentence\tlabel", "win a quick prize now\t1", "the meeting moved\t0",
      "win a fast prize now\t1", "the session moved\t0",
      "win a fast prize now\t1", "the session moved\t0"]


def test_conll_copies_keep_tags_labels_and_one_word_per_token():
  text = ("# label = news\nThe\tat\nquick\tjj\nfox\tnn\n\n"
          "# label = talk\nlazy\tjj B-x\ndogs\tnns\n")
  out, before, after = augment.augment_conll(
      text, 1, {"quick": ["fast"], "lazy": ["idle"], "the": ["a"]}, 1.0,
      random.Random(0))
  assert (before, after) == (2, 4)
  assert out.split("\n\n")[2:] == [
      "# label = news\nA\tat\nfast\tjj\nfox\tnn",
      "# label = talk\nidle\tjj B-x\ndogs\tnns\n"]


def test_command_augments_train_from_the_teachers_table_and_copies_dev(
    tmp_path):
  from tfmodels.checkpoints.model_dir import Head, build_model, save_model_dir
  from tfmodels.configs import load_config
  pieces = sum(1 for _ in open(VOCAB))
  config = load_config("tiny_bert").replace(vocab_size=pieces)
  teacher = tmp_path / "teacher"
  save_model_dir(build_model(config, Head("span")), config, Head("span"),
                 str(teacher))
  data = tmp_path / "qa"
  data.mkdir()
  (data / "train.json").write_text(json.dumps(_squad(4)))
  (data / "dev.json").write_text(json.dumps(_squad(1)))
  (data / "heldout.json").write_text(json.dumps(_squad(2)))
  out = tmp_path / "out"

  def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "tfmodels.data.augment", "--task", "squad",
         "--data_dir", str(data), "--teacher_dir", str(teacher),
         "--vocab_file", VOCAB, "--output_dir", str(out), *map(str, args)],
        capture_output=True, text=True, cwd=REPO)

  done = run("--copies", 2, "--neighbours", 3)
  assert done.returncode == 0, done.stderr[-2000:]
  facts = json.loads((out / "augment.json").read_text())
  assert done.stdout.strip() == (
      f"{out}: 8 -> 24 training examples (squad; "
      f"{facts['words_with_neighbours']} of {facts['words']} words have "
      "neighbours)")
  assert facts["copies"] == 2 and facts["words_with_neighbours"] > 5
  train = json.loads((out / "train.json").read_text())
  assert train["data"][:4] == _squad(4)["data"]
  assert train["data"][4:] != _squad(4)["data"] * 2
  for name in ("dev.json", "heldout.json"):
    assert (out / name).read_text() == (data / name).read_text()
  refused = run("--copies", 0)
  assert refused.returncode == 1
  assert refused.stderr.strip().splitlines()[-1] == (
      "error: --copies must be >= 1, got 0")
