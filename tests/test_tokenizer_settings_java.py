"""The Java core's tokenizer under each BERT tokenizer setting, held to
Hugging Face `tokenizers` (BertNormalizer + BertPreTokenizer + WordPiece).

`do_lower_case`, `strip_accents` (None: as do_lower_case) and
`tokenize_chinese_chars` are TokenizeMain's flags and the fields of the
`tokenizer_config.json` a converted model carries when its settings are not
the defaults; TokenizerSettings.ofModel reads that file from the model the
converter's metadata writer made.

Every combination (both do_lower_case values, strip_accents None / True /
False, tokenize_chinese_chars True / False) tokenizes multilingual lines as
Hugging Face does, and the normalizer agrees with Hugging Face's code point
by code point wherever the defaults do.
"""

import itertools
import json
import subprocess
import sys

import pytest

# qa-core compiled once for this module, as tests/test_qa_app_java.py does.
from test_qa_app_java import FIXTURES, MAIN, _tool, classes  # noqa: F401

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PIECES = [
    # Latin, with and without accents, cased and not.
    "re", "##s", "##u", "##m", "##e", "##é", "café", "cafe", "caf", "résumé",
    "resume", "Résumé", "Café", "ü", "ber", "##ber", "über", "uber", "Über",
    "na", "##i", "##ï", "##ve", "naive", "e", "é", "##\u0301", "i", "##\u0307",
    "the", "price", "ecole", "école", "##s", "straße", "strasse",
    # CJK and Japanese.
    "東", "京", "東京", "##京", "北", "北京", "大", "学", "##大", "##学",
    "##大学", "日", "本", "日本", "の", "は", "首", "都", "です",
    # Greek, Cyrillic, Arabic, Hangul, emoji.
    "οδυσσευσ", "οδυσσευς", "ὀδυσσεύς", "καλημερα", "καλημέρα", "москва",
    "привет", "##ет", "прив", "ёлка", "елка", "مرحبا", "بالعالم", "한", "##국",
    "##어", "\u1112", "##\u1161", "##\u11ab", "😀", "❤", "##\ufe0f",
    # So that every line has pieces, under each setting.
    "istanbul", "i\u0307stanbul", "ǆemal", "ﬁnal", "ｆｕｌｌ", "tieng", "tiếng",
    "viet", "việt", "co", "có", "dau", "dấu", "हिन्दी", "हिनदी", "ａ", "##𝐁",
    "𠀀", "㐀", "豈", "\u8c48", "丽", "ひらがな", "カタカナ", "タワー", "##タワー",
    "السلام", "عليكم", "السَّلَامُ", "عَلَيْكُمْ", "👍", "##🏽", "🇫", "##🇷",
    "quotes", "smart", "dash", "parens", "brackets", "braces", "que", "qué",
    "si", "sí", "a", "b", "c", "##00", "50", "n", "##\u0303", "##\u030a",
    "\u0301", "alone", "##alone", "hangul", "Hangul", "tab", "here", "nbsp",
    "zero", "##width", "soft", "##hyphen", "йод", "иод", "emoji", "ok",
    # Digits and punctuation.
    "1", "##0", ",", ".", "!", "?", "'", "-", "(", ")", ":", ";", "\"", "$",
    "/", "\\", "«", "»", "“", "”", "—", "–", "¿", "¡", "…", "。", "、", "！",
    "،", "[", "]", "{", "}",
]
LINES = [
    "Résumé café Über naïve",
    "RÉSUMÉ, Café! über-naïve? (cafe) résumé's École ecole",
    "東京 北京大学",
    "東京都は日本の首都です。北京大学！日本",
    "ΟΔΥΣΣΕΥΣ Ὀδυσσεύς καλημέρα ΚΑΛΗΜΕΡΑ",
    "Москва ПРИВЕТ ёлка Ёлка йод",
    "مرحبا بالعالم، السَّلَامُ عَلَيْكُمْ",
    "emoji 😀 👍🏽 ❤️ 🇫🇷 ❤",
    "«quotes» “smart” — dash – (parens) [brackets] {braces} ¿qué? ¡sí! "
    "1,000.50$ a/b\\c … 、",
    "e\u0301 E\u0301cole cafe\u0301 n\u0303 a\u030a\u0301 \u0301alone",
    "한국어 한 Hangul",
    "tab\there\u00a0nbsp zero\u200bwidth soft\u00adhyphen",
    "İstanbul ǅemal STRAẞE straße ﬁnal ＦＵＬＬ",
    "Tiếng Việt có dấu हिन्दी",
    "Ａ𝐁 𠀀 㐀 豈 丽 \U0002f800",
    "ひらがな カタカナ 東京タワー",
    "",
    "x" * 101 + " ok résumé",
]
COMBINATIONS = [
    (lower, strip, chinese)
    for lower, strip, chinese in itertools.product(
        (True, False), (None, True, False), (True, False))]


@pytest.fixture(scope="module")
def vocab_file(tmp_path_factory):
  pieces = list(dict.fromkeys(SPECIALS + PIECES))
  path = tmp_path_factory.mktemp("settings_vocab") / "vocab.txt"
  path.write_text("".join(p + "\n" for p in pieces), encoding="utf-8")
  return str(path)


def _hf_pieces(vocab_file, lower, strip, chinese):
  from tokenizers import Tokenizer, normalizers, pre_tokenizers
  from tokenizers.models import WordPiece
  with open(vocab_file, encoding="utf-8") as f:
    vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
  tokenizer = Tokenizer(WordPiece(vocab, unk_token="[UNK]",
                                  max_input_chars_per_word=100))
  tokenizer.normalizer = normalizers.BertNormalizer(
      clean_text=True, handle_chinese_chars=chinese, strip_accents=strip,
      lowercase=lower)
  tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
  return [" ".join(tokenizer.encode(line).tokens) for line in LINES]


def _flag(value):
  return "none" if value is None else str(value).lower()


def _java(main, *args, text=""):
  return subprocess.run(
      [_tool("java"), "-cp", str(main), MAIN, *args],
      input=text.encode("utf-8"), capture_output=True)


def test_every_setting_tokenizes_as_hugging_face(classes, vocab_file):
  main, _ = classes
  text = "".join(line + "\n" for line in LINES)
  outputs = {}
  for lower, strip, chinese in COMBINATIONS:
    flags = [f"--do_lower_case={_flag(lower)}",
             f"--strip_accents={_flag(strip)}",
             f"--tokenize_chinese_chars={_flag(chinese)}"]
    result = _java(main, "--vocab_file", vocab_file, *flags, text=text)
    assert result.returncode == 0, result.stderr.decode()
    java = result.stdout.decode("utf-8").split("\n")
    assert java[-1] == "" and len(java) == len(LINES) + 1, flags
    hf = _hf_pieces(vocab_file, lower, strip, chinese)
    differ = [(line, j, h) for line, j, h in zip(LINES, java, hf) if j != h]
    assert not differ, (flags, differ[:3])
    outputs[lower, strip, chinese] = java
  # Each different setting (strip_accents None is do_lower_case's value)
  # tokenizes these lines differently.
  assert len({tuple(o) for o in outputs.values()}) == len(
      {(lower, lower if strip is None else strip, chinese)
       for lower, strip, chinese in COMBINATIONS}) == 8
  uncased = outputs[True, None, True]
  assert uncased[0] == "resume cafe uber naive"
  assert outputs[True, False, True][0] == "résumé café über na ##ï ##ve"
  assert uncased[2] == "東 京 北 京 大 学"
  assert outputs[True, None, False][2] == "東京 北京 ##大学"
  # Few unknown words: the pieces, not [UNK]s, are compared.
  unknown = sum(o.count("[UNK]") for o in uncased)
  assert unknown < 20 and sum(len(o.split()) for o in uncased) > 10 * unknown
  # No flags: BERT's uncased defaults.
  default = _java(main, "--vocab_file", vocab_file, text=text)
  assert default.stdout.decode("utf-8").split("\n") == uncased


@pytest.mark.parametrize("flag, message", [
    ("--strip_accents=maybe",
     "error: --strip_accents=maybe: give true, false or none"),
    ("--strip_accents=None",
     "error: --strip_accents=None: give true, false or none"),
    ("--tokenize_chinese_chars=none",
     "error: --tokenize_chinese_chars=none: give true or false"),
    ("--do_lower_case=yes", "error: --do_lower_case=yes: give true or false"),
    ("--strip_accent=true", "error: unexpected argument --strip_accent=true"),
])
def test_tokenize_command_refuses_unknown_values(classes, vocab_file, flag,
                                                 message):
  main, _ = classes
  result = _java(main, "--vocab_file", vocab_file, flag, text="x\n")
  assert result.returncode == 1
  stderr = result.stderr.decode()
  assert stderr.startswith(message), stderr
  assert stderr.count("\n") == 1 and stderr.endswith("\n")
  assert result.stdout == b""


# For each setting "lower,strip" given, the code points below the
# private-use planes that BertNormalizer changes ("S lower strip", then
# "cp<TAB>hex hex..." lines, hexadecimal), after the ranges of code points
# Java 17 does not know ("U first last").
_DUMP_NORMALIZER = r"""
import java.io.BufferedWriter;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import org.compactbert.qa.BertNormalizer;
import org.compactbert.qa.TokenizerSettings;

public class DumpNormalizer {
  public static void main(String[] args) throws Exception {
    Writer w = new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8));
    int first = -1;
    for (int cp = 0; cp <= 0xF0000; cp++) {
      boolean unknown = cp < 0xF0000 && !Character.isDefined(cp);
      if (unknown && first < 0) {
        first = cp;
      } else if (!unknown && first >= 0) {
        w.write("U " + Integer.toHexString(first) + " " + Integer.toHexString(cp - 1) + "\n");
        first = -1;
      }
    }
    for (String arg : args) {
      String[] s = arg.split(",");
      BertNormalizer n = new BertNormalizer(new TokenizerSettings(
          Boolean.parseBoolean(s[0]), Boolean.parseBoolean(s[1]), true));
      w.write("S " + s[0] + " " + s[1] + "\n");
      for (int cp = 0; cp < 0xF0000; cp++) {
        boolean compared = Character.isDefined(cp) && (cp < 0xD800 || cp > 0xDFFF);
        String out = compared ? n.normalize(cp) : null;
        if (out != null) {
          StringBuilder b = new StringBuilder();
          out.codePoints().forEach(c -> b.append(' ').append(Integer.toHexString(c)));
          w.write(Integer.toHexString(cp) + "\t" + b.toString().trim() + "\n");
        }
      }
    }
    w.flush();
  }
}
"""


def test_every_code_point_normalizes_as_hugging_face(classes, tmp_path):
  """Lower-casing and accent stripping, each on or off, code point by code
  point. Hugging Face's own Unicode tables are of several ages (its
  category tables older than Java 17's and Python's, its lower-casing
  newer): the differences they make are those of the defaults, which
  tests/test_qa_app_java.py holds to the Python tokenizer; no setting adds
  one."""
  from tokenizers import normalizers
  main, _ = classes
  source = tmp_path / "DumpNormalizer.java"
  source.write_text(_DUMP_NORMALIZER)
  settings = [(True, True), (True, False), (False, True), (False, False)]
  result = subprocess.run(
      [_tool("java"), "-cp", str(main), str(source),
       *(f"{_flag(lower)},{_flag(strip)}" for lower, strip in settings)],
      capture_output=True)
  assert result.returncode == 0, result.stderr.decode()
  unknown, changed = set(), {}
  for line in result.stdout.decode("utf-8").splitlines():
    if line.startswith("U "):
      first, last = (int(x, 16) for x in line.split()[1:])
      unknown.update(range(first, last + 1))
    elif line.startswith("S "):
      table = changed[tuple(x == "true" for x in line.split()[1:])] = {}
    else:
      cp, out = line.split("\t")
      table[int(cp, 16)] = "".join(chr(int(h, 16)) for h in out.split())
  known = [chr(cp) for cp in range(0xF0000)
           if cp not in unknown and not 0xD800 <= cp <= 0xDFFF]
  assert len(known) > 140000
  differ = {}
  for lower, strip in settings:
    hf = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=False, strip_accents=strip,
        lowercase=lower)
    java = changed[lower, strip]
    differ[lower, strip] = {
        ord(c) for c in known
        if hf.normalize_str(c) != java.get(ord(c), c)}
  defaults = differ[True, True]
  # Newer non-spacing marks and format characters than Hugging Face's
  # tables know (Java and Python delete them), and a few more.
  assert len(defaults) < 400
  for setting, codepoints in differ.items():
    assert codepoints <= defaults, (setting, sorted(
        f"U+{cp:04X}" for cp in codepoints - defaults)[:10])
  # Without stripping, only the format characters differ: lower-casing
  # agrees on every code point Java knows.
  assert all(changed[True, False].get(cp) == "" for cp in differ[True, False])


# Reads a model's settings and tokenizes with its own vocabulary, as the
# app does (run by Java's source launcher against the compiled core).
_READ_MODEL = """
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import org.compactbert.qa.ModelVocabulary;
import org.compactbert.qa.TokenizerSettings;
import org.compactbert.qa.WordPieceTokenizer;

public class ReadModel {
  public static void main(String[] args) throws Exception {
    ByteBuffer model = ByteBuffer.wrap(Files.readAllBytes(Paths.get(args[0])));
    String text = Files.readString(Paths.get(args[1]), StandardCharsets.UTF_8);
    TokenizerSettings settings = TokenizerSettings.ofModel(model, args[0]);
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    out.println(settings.lowerCase() + " " + settings.stripAccents() + " "
        + settings.tokenizeChineseChars());
    out.println(String.join(" ", new WordPieceTokenizer(
        ModelVocabulary.read(model, args[0]), settings).tokenize(text)));
  }
}
"""


def test_the_core_reads_the_settings_the_converter_attaches(
    classes, vocab_file, tmp_path):
  sys.path.insert(0, FIXTURES)
  from converters.metadata import attach
  from tiny_model import export_stub_span_model
  from tfmodels.tokenization import TokenizerSettings
  main, _ = classes
  with open(export_stub_span_model(str(tmp_path / "stub.tflite")),
            "rb") as f:
    stub = f.read()
  source = tmp_path / "ReadModel.java"
  source.write_text(_READ_MODEL)
  line = tmp_path / "line.txt"
  line.write_text("Résumé 東京", encoding="utf-8")
  for settings, expected in [
      (TokenizerSettings(), "true null true\nresume 東 京\n"),
      (TokenizerSettings(lower_case=True, strip_accents=False,
                         tokenize_chinese_chars=False),
       "true false false\nrésumé 東京\n"),
      (TokenizerSettings(lower_case=False, strip_accents=True),
       "false true true\n[UNK] 東 京\n")]:
    model = tmp_path / "model.tflite"
    model.write_bytes(attach(stub, head="span", vocab_file=vocab_file,
                             settings=settings))
    result = subprocess.run(
        [_tool("java"), "-cp", str(main), str(source), str(model), str(line)],
        capture_output=True)
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode("utf-8") == expected, settings
    # The defaults travel as no file at all.
    with open(model, "rb") as f:
      carried = b"tokenizer_config.json" in f.read()
    assert carried == (not settings.is_default())
    if carried:
      assert json.loads(
          _zip_entry(model.read_bytes(), "tokenizer_config.json")) == {
              "do_lower_case": settings.lower_case,
              "strip_accents": settings.strip_accents,
              "tokenize_chinese_chars": settings.tokenize_chinese_chars}


def _zip_entry(data, name):
  import io
  import zipfile
  with zipfile.ZipFile(io.BytesIO(data)) as z:
    return z.read(name)
