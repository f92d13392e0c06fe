import gzip
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO
from tfmodels.data.squad import (SquadExample, build_features,
                                 parse_squad, postprocess, read_squad,
                                 recover_answer_spans)
from tfmodels.data.squad_metrics import evaluate, normalize_answer


EIFFEL = ("The Eiffel Tower is in Paris. It was completed in 1889 by "
          "Gustave Eiffel's company.")
GATE = "The Golden Gate Bridge opened in 1937 in San Francisco."
CAFE = "They met at the Café de Flore, in Paris."


def answer(context, text):
  return {"text": text, "answer_start": context.index(text)}


def squad_file(version, context, qas):
  return {"version": version,
          "data": [{"title": "t", "paragraphs": [{"context": context,
                                                  "qas": qas}]}]}


V1 = squad_file("1.1", EIFFEL, [
    {"id": "q1", "question": "Where is the tower?",
     "answers": [answer(EIFFEL, "Paris")]},
    {"id": "q2", "question": "When was it completed?",
     "answers": [answer(EIFFEL, "1889")]},
    {"id": "q3", "question": "What is in Paris?",
     "answers": [answer(EIFFEL, "The Eiffel Tower")]},
    {"id": "q4", "question": "Who built it?",
     "answers": [answer(EIFFEL, "Gustave Eiffel's company")]},
    {"id": "q5", "question": "When?",
     "answers": [answer(EIFFEL, "in 1889"), answer(EIFFEL, "1889")]},
])
V1_PREDICTIONS = {
    "q1": "Paris",              # EM 1, F1 1
    "q2": "in 1889",            # EM 0; 1 of 2 tokens shared with [1889]:
                                # P 1/2, R 1, F1 = 2*(1/2)/(3/2) = 2/3
    "q3": "eiffel tower!",      # "the" and "!" normalise away: EM 1, F1 1
    "q4": "Paris",              # EM 0, F1 0
    "q5": "completed in 1889",  # vs "in 1889": P 2/3, R 1, F1 4/5; vs "1889":
                                # P 1/3, R 1, F1 1/2; max: EM 0, F1 4/5
}
# EM = 2/5 = 40%; F1 = (1 + 2/3 + 1 + 0 + 4/5) / 5 = (52/15) / 5 = 52/75.
V1_EM, V1_F1 = 40.0, 100 * 52 / 75

V2 = squad_file("v2.0", GATE, [
    {"id": "a1", "question": "Where is the bridge?", "is_impossible": False,
     "answers": [answer(GATE, "San Francisco")]},
    {"id": "a2", "question": "When did it close?", "is_impossible": True,
     "answers": []},
    {"id": "a3", "question": "Who painted it?", "is_impossible": True,
     "answers": []},
    {"id": "a4", "question": "When did it open?", "is_impossible": False,
     "answers": [answer(GATE, "in 1937")]},
])
V2_PREDICTIONS = {
    "a1": "San Francisco",  # EM 1, F1 1
    "a2": "",               # no answer, predicted none: EM 1, F1 1
    "a3": "Picasso",        # no answer, predicted one: EM 0, F1 0
    "a4": "1937",           # P 1, R 1/2: EM 0, F1 2/3
}
# All: EM 2/4 = 50%, F1 (1 + 1 + 0 + 2/3) / 4 = 2/3.
# HasAns (a1, a4): EM 1/2, F1 (1 + 2/3) / 2 = 5/6. NoAns (a2, a3): 1/2, 1/2.

# A long context for windowing: 100 single-piece words, the answer at 50-51.
FILLER = "the old man walked by the river and saw a stone near his house"
WORDS = [FILLER.split()[i % 14] for i in range(100)]
WORDS[50:52] = ["Golden", "Bridge"]
LONG = " ".join(WORDS)
LONG_QUESTION = ("what is the name of the golden bridge over the river in "
                 "this story")
LONG_EXAMPLE = SquadExample("long", LONG_QUESTION, LONG, "Golden Bridge",
                            LONG.index("Golden"), False, ("Golden Bridge",))
SMALL = dict(max_seq_length=48, doc_stride=16, max_query_length=4)
# Query 4 pieces -> 48 - 4 - 3 = 41 context pieces per window, offset 6;
# windows start at 0, 16, 32, 48, 64 (the last one 36 long).


def write(tmp_path, name, obj):
  path = tmp_path / name
  raw = json.dumps(obj).encode("utf-8")
  path.write_bytes(gzip.compress(raw) if name.endswith(".gz") else raw)
  return str(path)


def test_reader_reads_v1_v2_and_gzip(tmp_path):
  v1 = read_squad(write(tmp_path, "v1.json", V1), is_training=True)
  assert v1.version == "1.1" and v1.mismatched == []
  assert [e.qas_id for e in v1.examples] == ["q1", "q2", "q3", "q4", "q5"]
  q5 = v1.examples[4]
  assert (q5.answer_text, q5.answer_start) == ("in 1889", 47)
  assert q5.all_answers == ("in 1889", "1889") and not q5.is_impossible
  assert q5.context[q5.answer_start:q5.answer_end] == "in 1889"
  assert read_squad(write(tmp_path, "v1.json.gz", V1)) == read_squad(
      write(tmp_path, "again.json", V1))
  v2 = read_squad(write(tmp_path, "v2.json.gz", V2), is_training=True)
  a2 = v2.examples[1]
  assert (a2.is_impossible, a2.answer_text, a2.answer_start,
          a2.all_answers) == (True, "", -1, ())


def test_reader_names_file_and_question_on_bad_input(tmp_path):
  missing = json.loads(json.dumps(V1))
  del missing["data"][0]["paragraphs"][0]["qas"][1]["question"]
  path = write(tmp_path, "missing.json", missing)
  with pytest.raises(ValueError, match=r"missing\.json: question 'q2'.*"
                     r"'question'"):
    read_squad(path)
  shifted = json.loads(json.dumps(V1))
  shifted["data"][0]["paragraphs"][0]["qas"][0]["answers"][0][
      "answer_start"] += 1
  path = write(tmp_path, "shifted.json", shifted)
  with pytest.raises(ValueError, match=r"shifted\.json: question 'q1'.*"
                     r"'Paris'.*'aris\.'"):
    read_squad(path, is_training=True)
  # Not strict: counted; dropped for training, kept (text only) for scoring.
  train = read_squad(path, is_training=True, strict=False)
  assert train.mismatched == ["q1"] and len(train.examples) == 4
  assert len(read_squad(path, strict=False).examples) == 5
  (tmp_path / "broken.json").write_text("{")
  with pytest.raises(ValueError, match=r"broken\.json"):
    read_squad(str(tmp_path / "broken.json"))
  twice = json.loads(json.dumps(V1))
  twice["data"].append(twice["data"][0])
  with pytest.raises(ValueError, match="'q1': duplicate id"):
    parse_squad(twice)
  with pytest.raises(ValueError, match="'x'.*no answers"):
    parse_squad(squad_file("1.1", "c", [{"id": "x", "question": "?",
                                         "answers": []}]))


def test_v1_scores_equal_the_hand_computed_ones(tmp_path):
  result = evaluate(V1, V1_PREDICTIONS)
  assert result == {"exact_match": pytest.approx(V1_EM),
                    "f1": pytest.approx(V1_F1), "total": 5}
  # Same from examples; a missing prediction scores 0 (F1 loses q1's 1/5).
  examples = read_squad(write(tmp_path, "v1.json", V1)).examples
  assert evaluate(examples, V1_PREDICTIONS) == result
  partial = {k: v for k, v in V1_PREDICTIONS.items() if k != "q1"}
  assert evaluate(examples, partial)["f1"] == pytest.approx(V1_F1 - 20)
  assert normalize_answer("  The  Eiffel-Tower, a  sight! ") == (
      "eiffeltower sight")


def test_v2_scores_no_answers_and_breakdowns():
  result = evaluate(V2, V2_PREDICTIONS)
  expected = {"exact": 50.0, "f1": 100 * 2 / 3, "total": 4,
              "HasAns_exact": 50.0, "HasAns_f1": 100 * 5 / 6,
              "HasAns_total": 2,
              "NoAns_exact": 50.0, "NoAns_f1": 50.0, "NoAns_total": 2}
  assert result == pytest.approx(expected)


def run_metrics(*args):
  return subprocess.run(
      [sys.executable, "-m", "tfmodels.data.squad_metrics", *args],
      capture_output=True, text=True, cwd=REPO)


def test_metrics_cli(tmp_path):
  data = write(tmp_path, "v1.json", V1)
  done = run_metrics(data, write(tmp_path, "pred.json", V1_PREDICTIONS))
  assert done.returncode == 0, done.stderr
  assert json.loads(done.stdout) == pytest.approx(
      {"exact_match": V1_EM, "f1": V1_F1, "total": 5})
  bad = write(tmp_path, "bad_pred.json", {"q1": 3})
  done = run_metrics(data, bad)
  assert done.returncode != 0
  assert done.stderr.strip().count("\n") == 0 and bad in done.stderr


def test_windows_positions_and_segments(tokenizer):
  arrays, metas = build_features([LONG_EXAMPLE], tokenizer, is_training=True,
                                 **SMALL)
  doc = tokenizer.encode(LONG).ids
  assert len(doc) == 100
  assert [m.window_index for m in metas] == [0, 1, 2, 3, 4]
  assert {m.example_index for m in metas} == {0}
  starts, lengths = [0, 16, 32, 48, 64], [41, 41, 41, 41, 36]
  assert [m.window_length for m in metas] == lengths
  for key in arrays:
    assert arrays[key].dtype == np.int32
  assert arrays["input_ids"].shape == (5, 48)
  query = tokenizer.convert_tokens_to_ids(["what", "is", "the", "name"])
  for w, (start, length) in enumerate(zip(starts, lengths)):
    ids = arrays["input_ids"][w]
    assert list(ids[:6]) == [tokenizer.cls_id, *query, tokenizer.sep_id]
    assert list(ids[6:6 + length]) == doc[start:start + length]
    assert ids[6 + length] == tokenizer.sep_id
    assert not ids[7 + length:].any()
    assert list(arrays["segment_ids"][w]) == (
        [0] * 6 + [1] * (length + 1) + [0] * (41 - length))
    assert list(arrays["input_mask"][w]) == (
        [1] * (7 + length) + [0] * (41 - length))
  # Words 50-51 lie in windows 1-3, at 6 + 50 - start.
  assert list(arrays["start_positions"]) == [0, 40, 24, 8, 0]
  assert list(arrays["end_positions"]) == [0, 41, 25, 9, 0]
  # Word 50: min(left, right) is 6 / 18 / 2 in windows 1 / 2 / 3.
  assert [m.is_max_context[50 - s] for m, s in zip(metas[1:4], starts[1:4])
          ] == [False, True, False]
  counts = np.zeros(100, int)
  for m, s in zip(metas, starts):
    counts[s:s + m.window_length] += m.is_max_context
  assert (counts == 1).all()  # every piece is scored by exactly one window
  assert metas[2].char_span(24) == (LONG.index("Golden"),
                                    LONG.index("Golden") + 6)
  assert metas[2].char_span(5) is None


def test_impossible_and_accented_answers(tokenizer):
  impossible = SquadExample("n", "Who?", CAFE, "", -1, True, ())
  cafe = SquadExample("c", "Where did they meet?", CAFE, "Café de Flore",
                      CAFE.index("Café"), False, ("Café de Flore",))
  arrays, metas = build_features([impossible, cafe], tokenizer,
                                 is_training=True)
  assert [m.example_index for m in metas] == [0, 1]
  # The context starts at 7 (CLS + 5 query pieces + SEP); "cafe" is its 5th.
  assert list(arrays["start_positions"]) == [0, 11]
  assert list(arrays["end_positions"]) == [0, 14]
  assert tokenizer.convert_ids_to_tokens(arrays["input_ids"][1, 11:15]) == [
      "cafe", "de", "fl", "##ore"]
  arrays, _ = build_features([cafe], tokenizer)
  assert "start_positions" not in arrays


def test_recover_answer_spans_from_offsets(tokenizer):
  def example(qas_id, text):
    return SquadExample(qas_id, "?", CAFE, text, CAFE.index(text), False,
                        (text,))
  examples = [example("cafe", "Café"), example("name", "Café de Flore"),
              example("punct", "Flore, in Paris."),
              example("part", "Flor"),  # inside the piece pair fl ##ore
              SquadExample("none", "?", CAFE, "", -1, True, ())]
  result = recover_answer_spans(examples, tokenizer)
  assert (result.total, result.exact, result.not_exact) == (4, 3, 1)
  assert [tuple(f) for f in result.failures] == [("part", "Flor", "Flore")]


def test_postprocess_picks_best_valid_span_across_windows(tokenizer):
  _, metas = build_features([LONG_EXAMPLE], tokenizer, **SMALL)
  start = np.full([5, 48], -10.0)
  end = np.full([5, 48], -10.0)
  start[:, 0] = end[:, 0] = 5.0  # [CLS]: null score 10 in every window
  start[0, 2] = end[0, 3] = 30.0  # query pieces: not context
  start[1, 42] = end[1, 43] = 9.0  # words 52-53, not max context in window 1
  start[2, 24] = end[2, 25] = 4.0  # words 50-51 in window 2: score 8
  start[3, 28] = end[3, 29] = 3.0  # words 70-71, max context: score 6
  answers = postprocess([LONG_EXAMPLE], metas, start, end)
  assert answers == {"long": "Golden Bridge"}
  # v2: null 10 - best 8 = 2 exceeds threshold 0 but not 3.
  kwargs = dict(version_2_with_negative=True)
  assert postprocess([LONG_EXAMPLE], metas, start, end, **kwargs) == {
      "long": ""}
  assert postprocess([LONG_EXAMPLE], metas, start, end,
                     null_score_diff_threshold=3.0, **kwargs) == {
                         "long": "Golden Bridge"}
  # Without words 50-51 the max-context span in window 3 wins.
  start[2, 24] = end[2, 25] = -10.0
  assert postprocess([LONG_EXAMPLE], metas, start, end) == {
      "long": " ".join(WORDS[70:72])}


def test_n_best_in_context_ignores_what_the_padding_holds(tokenizer):
  """Evaluation's n-best: a Keras model run up to its batch's longest row
  (zeros after it) and the .tflite file (its own logits there) answer
  alike. BERT's n-best over every position lets zeros outside the context
  crowd a context of negative logits out: no answer at all."""
  _, metas = build_features([LONG_EXAMPLE], tokenizer, **SMALL)
  start = np.full([5, 48], -10.0)
  end = np.full([5, 48], -10.0)
  start[2, 24], end[2, 25] = -1.0, -2.0  # words 50-51: the best span
  zeroed = start.copy(), end.copy()
  for row, meta in enumerate(metas):
    outside = np.ones(48, bool)
    outside[meta.context_offset:meta.context_offset + meta.window_length] = 0
    assert outside[1:].sum() >= 5  # enough to fill an n-best of 5
    for logits in zeroed:
      logits[row, 1:][outside[1:]] = 0.0
  answers = [postprocess([LONG_EXAMPLE], metas, *logits, n_best_size=5,
                         n_best_in_context=True)
             for logits in ((start, end), zeroed)]
  assert answers == [{"long": "Golden Bridge"}] * 2
  # BERT's rule on the same logits: the zeros take the n-best.
  assert postprocess([LONG_EXAMPLE], metas, *zeroed, n_best_size=5) == {
      "long": ""}
