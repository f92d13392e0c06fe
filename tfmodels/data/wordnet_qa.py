"""An extractive QA set in SQuAD v1.1 JSON, derived from WordNet.

Derived, not human-written: for a synset with an example sentence that
contains one of its lemmas, the question asks for the word with the synset's
definition ("Which word means: a tangible and visible entity?"), the answer is
that lemma's span in the example sentence, and the context is the example
sentence among 3 to 5 example sentences of other synsets (distractors that do
not contain the answer). Synsets are split between train and dev by their
definition, so no question is seen in both; a synset whose definition holds
the answer word is left out.
"""

import hashlib
import random
import re

QUESTION = "Which word means: {definition}?"
_POS_NAMES = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective",
              "r": "adverb"}


def _find_lemma(lemmas, sentence):
  """(lemma as written in sentence, char start) of the first lemma found."""
  for lemma in sorted(lemmas, key=len, reverse=True):
    m = re.search(r"(?<![\w-])" + re.escape(lemma) + r"(?![\w-])", sentence,
                  re.IGNORECASE)
    if m:
      return m.group(0), m.start()
  return None


def as_sentence(example):
  """WordNet examples are lower-case fragments: capitalise and end them."""
  example = example.strip()
  if example[-1:] not in (".", "!", "?"):
    example += "."
  return example[:1].upper() + example[1:]


def in_dev_split(synset, dev_fraction):
  """By definition text: synsets sharing a definition share a split."""
  digest = hashlib.md5(synset.definition.encode("utf-8")).digest()
  return digest[0] / 256.0 < dev_fraction


def build_squad(synsets, seed=0, dev_fraction=0.1, max_train=None,
                max_dev=None):
  """(train, dev) SQuAD v1.1 dicts; one paragraph and question per synset."""
  rng = random.Random(seed)
  pool = [(s, as_sentence(e)) for s in synsets for e in s.examples]
  splits = {"train": [], "dev": []}
  for synset in synsets:
    if not synset.definition:
      continue
    for sentence in map(as_sentence, synset.examples):
      found = _find_lemma(synset.lemmas, sentence)
      if found:
        break
    else:
      continue
    answer, start = found
    if _find_lemma([answer], synset.definition):
      continue  # the question would contain its answer
    wanted, distractors = rng.randint(3, 5), []
    for _ in range(100 * wanted):
      if len(distractors) == wanted:
        break
      other, text = pool[rng.randrange(len(pool))]
      if other is synset or _find_lemma([answer], text) or text in distractors:
        continue
      distractors.append(text)
    sentences = distractors + [sentence]
    rng.shuffle(sentences)
    offset = sum(len(s) + 1 for s in sentences[:sentences.index(sentence)])
    context = " ".join(sentences)
    assert context[offset + start:offset + start + len(answer)] == answer
    split = "dev" if in_dev_split(synset, dev_fraction) else "train"
    splits[split].append({
        "title": f"wordnet-{_POS_NAMES[synset.pos]}-{synset.offset}",
        "paragraphs": [{
            "context": context,
            "qas": [{
                "id": f"wn-{synset.pos}{synset.offset}",
                "question": QUESTION.format(definition=synset.definition),
                "answers": [{"text": answer, "answer_start": offset + start}],
            }],
        }],
    })
  for split, limit in (("train", max_train), ("dev", max_dev)):
    rng.shuffle(splits[split])
    splits[split] = splits[split][:limit]
  return ({"version": "1.1", "data": splits["train"]},
          {"version": "1.1", "data": splits["dev"]})
