"""Parse what LiteRT's `benchmark_model` prints into one plain dict.

    parsed = parse_output(open("run.log").read())
    parsed["timings"]["avg"], parsed["summary"]["init_us"], parsed["memory"]

Why a tolerant line parser rather than one regular expression: the same tool
prints through stderr, `INFO: ` / `VERBOSE: ` prefixed loggers and logcat
(`07-14 13:14:52.097 22838 22838 I tflite  : ...` or `I/tflite  (22838): ...`),
old builds omit the percentiles and older ones name the memory line
and the summary line differently, numbers switch to scientific notation
above 1e6, and op profiling adds tables: tab-separated or, with a CSV
formatter, comma-separated; under a "Profiling Info for ..." line or, in
old builds, bare; split per subgraph and "Delegate internal" in new ones.
Every line is stripped of its prefixes and matched
against the known shapes; whatever matches nothing is kept in `unparsed`,
never dropped. Units are the tool's: timings in microseconds, memory in MB,
`init_ms` in milliseconds.

A log holding several runs (logcat history, concatenated files) is split at
the tool's `STARTING!` banner by `split_sessions`.
"""

import re

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"

# Logcat formats: threadtime (the default), time/year, and brief/process.
_LOGCAT = re.compile(
    r"^(?:\d{4}-)?\d\d-\d\d\s+\d\d:\d\d:\d\d\.\d+\s+"
    r"(?:\d+\s+\d+\s+([VDIWEF])\s+[^:]*?\s*:\s?|([VDIWEF])/[^(:]*\(\s*\d+\):\s?)"
    r"|^([VDIWEF])/[^(:]*\(\s*\d+\):\s?"
    r"|^([VDIWEF])\s+[\w.\-]+\s*:\s")
_LEVEL = re.compile(r"^(INFO|WARN|WARNING|ERROR|VERBOSE|DEBUG|FATAL):\s?")
_LOGCAT_LEVELS = {"V": "VERBOSE", "D": "DEBUG", "I": "INFO", "W": "WARNING",
                  "E": "ERROR", "F": "FATAL"}

_PARAM = re.compile(r"^([#A-Za-z][^:\[\]]*?): \[(.*)\]$")
_LOADED = re.compile(r"^Loaded model (.+)$")
_MODEL_SIZE = re.compile(rf"^The input model file size \(MB\): ({_NUM})$")
_INIT_SESSION = re.compile(rf"^Initialized session in ({_NUM})\s*ms\.?$")
_RUNNING = re.compile(
    rf"^Running benchmark for at least (\d+) iterations and at least ({_NUM}) "
    rf"seconds(?: but terminate if exceeding ({_NUM}) seconds)?\.?$")
_STAT = re.compile(r"^count=")
_KEY_VALUE = re.compile(rf"(\w+)=({_NUM})(?=\s|$)")
_SUMMARY = re.compile(
    rf"^Inference timings in us: Init: ({_NUM}), First inference: ({_NUM}), "
    rf"Warmup \(avg\): ({_NUM}), Inference \(avg\): ({_NUM})")
# Builds before the first inference was reported separately.
_OLD_SUMMARY = re.compile(
    rf"^Average inference timings in us: Warmup: ({_NUM}), Init: ({_NUM}), "
    rf"Inference: ({_NUM})")
_MEMORY_DELTA = re.compile(
    rf"^(?:Memory footprint delta from the start of the tool|Peak memory "
    rf"footprint) \(MB\): init=({_NUM}) overall=({_NUM})$")
_PEAK = re.compile(
    rf"^Overall peak memory footprint \(MB\) via periodic monitoring: ({_NUM})$")
_MEMORY_STATUS = re.compile(r"^Memory status at the end of exe\w*ution:?$")
_MEMORY_STATUS_ITEM = re.compile(rf"^[-+] (.+?)\s*: ({_NUM}) MB$")
_REPLACING = re.compile(
    r"Replacing (\d+) out of (\d+) node\(s\) with delegate \(([^)]+)\) node, "
    r"yielding (\d+) partitions?(?: for (?:subgraph (\d+)|the whole graph))?")
_CREATED_DELEGATE = re.compile(
    r"^Created TensorFlow Lite (?:(\S+) )?delegate(?: for (\w+))?")
_KNOWN = re.compile(
    r"^(?:STARTING!|Note: as the benchmark tool itself affects memory|"
    r"Initialized TensorFlow Lite runtime|Explicitly applied |Though .* "
    r"delegate is explicitly applied|Going to apply \d+ delegates|"
    r"The input model file size|Benchmarking finished|Log parameter values|"
    r"resolved reporter$)")

# Op profiling.
_PROFILE_START = re.compile(r"^(?:Operator-wise )?Profiling Info for (.+?):?$")
_TABLE_TITLE = re.compile(r"^=+ (.+?) =+$")
_TABLE_HEADER = re.compile(r"^\s*(?:\[[^\]]+\]\s*)+$")
_CSV_HEADER = re.compile(r"^node type,( [^,]+,)+ [^,]+$")
# Tables an old build prints with no "Profiling Info for ..." line before
# them: those of the regular runs.
_BARE_TABLES = ("run_order", "top_by_computation_time", "top_by_memory_use",
                "summary_by_node_type")
_SUBGRAPH = re.compile(
    r"^(?:Primary graph|Subgraph) \((?:index: (\d+), )?name: ([^)]*)\) "
    r"(?:profile|summary):$")
_DELEGATE_INTERNAL = re.compile(r"^Delegate internal:$")
_NODES_EXECUTED = re.compile(r"^Number of nodes executed: (\d+)$")
_NODES_OBSERVED = re.compile(r"^(\d+) nodes observed$")
_PROFILE_TIMINGS = re.compile(
    r"^(?:Subgraph \(index: \d+, name: [^)]*\) )?Timings \(microseconds\): "
    r"(count=.*)$")
_PROFILE_MEMORY = re.compile(r"^Memory \(bytes\): (count=.*)$")

_TEXT_COLUMNS = ("node_type", "name")
_COLUMN_NAMES = {"node type": "node_type", "start": "start_ms",
                 "first": "first_ms", "avg ms": "avg_ms", "%": "percent",
                 "cdf%": "cdf_percent", "avg %": "percent",
                 "cdf %": "cdf_percent", "mem kb": "mem_kb",
                 "times called": "times_called", "name": "name",
                 "count": "count"}


def _number(text):
  value = float(text)
  return int(value) if value.is_integer() and "e" not in text.lower() and \
      "." not in text else value


def strip_prefixes(line):
  """Returns (level or None, message) with logcat and logger prefixes gone."""
  line = line.rstrip("\r\n")
  level = None
  match = _LOGCAT.match(line)
  if match:
    letter = next(g for g in match.groups() if g)
    level = _LOGCAT_LEVELS[letter]
    line = line[match.end():]
  match = _LEVEL.match(line)
  if match:
    level = match.group(1)
    line = line[match.end():]
  return level, line


def split_sessions(text):
  """Splits a log holding several benchmark_model runs at `STARTING!`."""
  sessions, current = [], []
  for line in text.splitlines(keepends=True):
    if strip_prefixes(line)[1].strip() == "STARTING!" and any(
        strip_prefixes(x)[1].strip() for x in current):
      sessions.append("".join(current))
      current = []
    current.append(line)
  if current or not sessions:
    sessions.append("".join(current))
  return sessions


def parse_stat(text):
  """`count=50 first=.. avg=2.95e+06 std=.. p5=..` -> dict of numbers."""
  return {key: _number(value) for key, value in _KEY_VALUE.findall(text)}


class _ProfileParser:
  """Collects the op-profiling tables of one log.

  `sections` maps "init" / "regular" to the primary graph's tables and
  summaries, with other subgraphs under "subgraphs" (the index as text, as
  JSON keeps it -> the same, plus "name") and the delegate's own profile
  under "delegate_internal".
  """

  def __init__(self):
    self.sections = {}
    self.section = None  # the current "Profiling Info for ..." section
    self.target = None  # where its tables go: the section or a subgraph
    self.table = None
    self.columns = None
    self.csv = False

  def _section_key(self, title):
    title = title.lower()
    if "initialization" in title:
      return "init"
    if "regular" in title:
      return "regular"
    return re.sub(r"\W+", "_", title).strip("_")

  def _open(self, key):
    self.section = self.target = self.sections.setdefault(key, {})
    self.table = self.columns = None

  def feed(self, message):
    """True if the line belonged to a profile."""
    stripped = message.strip()
    match = _PROFILE_START.match(stripped)
    if match:
      self._open(self._section_key(match.group(1)))
      return True
    match = _TABLE_TITLE.match(stripped)
    title = match and re.sub(r"\W+", "_", match.group(1).lower()).strip("_")
    if self.section is None:
      if title in _BARE_TABLES or _NODES_EXECUTED.match(stripped):
        self._open("regular")
      else:
        return False
    if title:
      self.table = self.target.setdefault(title, [])
      self.columns = None
      return True
    match = _SUBGRAPH.match(stripped)
    if match:
      index, name = match.groups()
      self.target = self.section if index in (None, "0") else \
          self.section.setdefault("subgraphs", {}).setdefault(
              str(int(index)), {"name": name})
      self.table = self.columns = None
      return True
    if _DELEGATE_INTERNAL.match(stripped):
      self.target = self.section.setdefault("delegate_internal", {})
      self.table = self.columns = None
      return True
    if self.table is not None and _TABLE_HEADER.match(message):
      self._set_columns(re.findall(r"\[([^\]]+)\]", message), csv=False)
      return True
    if self.table is not None and _CSV_HEADER.match(stripped):
      self._set_columns(stripped.split(","), csv=True)
      return True
    for pattern, key in ((_NODES_EXECUTED, "nodes_executed"),
                         (_NODES_OBSERVED, "nodes_observed")):
      match = pattern.match(stripped)
      if match:
        self.target[key] = int(match.group(1))
        self.table = self.columns = None
        return True
    for pattern, key in ((_PROFILE_TIMINGS, "timings_us"),
                         (_PROFILE_MEMORY, "memory_bytes")):
      match = pattern.match(stripped)
      if match:
        self.target[key] = parse_stat(match.group(1))
        return True
    if not stripped:
      return True
    # Rows are tab-indented (or comma-separated); anything else ends the
    # table.
    if self.columns and (self.csv or message[:1] in ("\t", " ")):
      row = self._row(stripped if self.csv else message)
      if row is not None:
        self.table.append(row)
        return True
    self.table = self.columns = None
    return False

  def _set_columns(self, names, csv):
    self.columns = [_COLUMN_NAMES.get(c.strip().lower(), re.sub(
        r"\W+", "_", c.strip().lower())) for c in names]
    self.csv = csv

  def _csv_cells(self, message):
    """Unquoted CSV whose text cells (node type first, name last) may hold
    commas themselves (XNNPACK's "Fully Connected (NC, QS8) GEMM"): the
    numeric cells between them fix the split."""
    cells = [c.strip() for c in message.split(",")]
    numeric = len([c for c in self.columns if c not in _TEXT_COLUMNS])
    has_name = self.columns[-1] == "name"
    for start in range(1, len(cells) - numeric + 1):
      middle = cells[start:start + numeric]
      if (has_name or start + numeric == len(cells)) and all(
          re.fullmatch(_NUM, c.rstrip("%")) for c in middle):
        return ([", ".join(cells[:start])] + middle +
                ([", ".join(cells[start + numeric:])] if has_name else []))
    return None

  def _row(self, message):
    if self.csv:
      cells = self._csv_cells(message)
      if cells is None:
        return None
    else:
      cells = [c.strip() for c in message.split("\t") if c.strip()]
    if len(cells) != len(self.columns):
      cells = message.split()
      if len(cells) < len(self.columns):
        return None
      cells = cells[:len(self.columns) - 1] + [
          " ".join(cells[len(self.columns) - 1:])]
    row = {}
    for column, cell in zip(self.columns, cells):
      text = cell.rstrip("%")
      try:
        row[column] = _number(text) if column not in _TEXT_COLUMNS \
            else cell
      except ValueError:
        row[column] = cell
    return row


def parse_output(text):
  """Parses one benchmark_model run's output; see the module docstring."""
  result = {
      "params": {}, "model_path": None, "model_size_mb": None,
      "init_ms": None, "runs": [], "warmup": None, "timings": None,
      "summary": None, "memory": {}, "delegates": [],
      "delegates_created": [], "op_profile": {}, "errors": [],
      "unparsed": [],
  }
  stats = []
  profile = _ProfileParser()
  in_memory_status = False
  for raw_line in text.splitlines():
    level, message = strip_prefixes(raw_line)
    stripped = message.strip()
    if level in ("ERROR", "FATAL") or stripped.startswith(("ERROR:", "Error")):
      result["errors"].append(stripped)
    if _delegation_line(stripped, result):  # anywhere in the line
      continue
    if in_memory_status:
      if _memory_status_item(stripped, result):
        continue
      in_memory_status = False
    if profile.feed(message) or not stripped:
      continue
    if _STAT.match(stripped):
      stats.append(parse_stat(stripped))
    elif _MEMORY_STATUS.match(stripped):  # its items follow
      in_memory_status = True
    elif not _fact_line(stripped, result) and not _KNOWN.match(stripped):
      result["unparsed"].append(raw_line.rstrip("\r\n"))
  _place_stats(stats, result)
  result["op_profile"] = profile.sections
  result["complete"] = result["summary"] is not None
  return result


def _delegation_line(line, result):
  """True if `line` says how many nodes a delegate took (into
  result["delegates"])."""
  match = _REPLACING.search(line)
  if match:
    result["delegates"].append({
        "delegate": match.group(3), "replaced_nodes": int(match.group(1)),
        "total_nodes": int(match.group(2)),
        "partitions": int(match.group(4)),
        "subgraph": int(match.group(5)) if match.group(5) else None})
  return bool(match)


def _memory_status_item(line, result):
  """True if `line` is an item of the "Memory status at the end of
  execution" block (into result["memory"]["status_mb"])."""
  match = _MEMORY_STATUS_ITEM.match(line)
  if match:
    result["memory"].setdefault("status_mb", {})[
        match.group(1).strip()] = _number(match.group(2))
  return bool(match)


# The lines that state one fact each: what each sets in the result.
def _summary(match, result):
  result["summary"] = dict(zip(
      ("init_us", "first_inference_us", "warmup_avg_us", "inference_avg_us"),
      (_number(g) for g in match.groups())))


def _old_summary(match, result):
  warmup, init, inference = (_number(g) for g in match.groups())
  result["summary"] = {"init_us": init, "first_inference_us": None,
                       "warmup_avg_us": warmup, "inference_avg_us": inference}


def _memory_delta(match, result):
  result["memory"]["init_mb"] = _number(match.group(1))
  result["memory"]["overall_mb"] = _number(match.group(2))


def _peak(match, result):
  result["memory"]["peak_mb"] = _number(match.group(1))


def _model_size(match, result):
  result["model_size_mb"] = _number(match.group(1))


def _init_session(match, result):
  result["init_ms"] = _number(match.group(1))


def _running(match, result):
  result["runs"].append({"min_runs": int(match.group(1)),
                         "min_secs": _number(match.group(2)),
                         "max_secs": match.group(3) and _number(
                             match.group(3))})


def _loaded(match, result):
  result["model_path"] = match.group(1).strip()


def _created_delegate(match, result):
  result["delegates_created"].append(match.group(1) or match.group(2))


def _param(match, result):
  result["params"][match.group(1)] = match.group(2)
  if match.group(1) == "Graph" and not result["model_path"]:
    result["model_path"] = match.group(2)


# In this order: a parameter line (`Name: [value]`) is the catch-all.
_FACTS = ((_SUMMARY, _summary), (_OLD_SUMMARY, _old_summary),
          (_MEMORY_DELTA, _memory_delta), (_PEAK, _peak),
          (_MODEL_SIZE, _model_size), (_INIT_SESSION, _init_session),
          (_RUNNING, _running), (_LOADED, _loaded),
          (_CREATED_DELEGATE, _created_delegate), (_PARAM, _param))


def _fact_line(line, result):
  """True if `line` states one of the `_FACTS` (set into `result`)."""
  for pattern, record in _FACTS:
    match = pattern.match(line)
    if match:
      record(match, result)
      return True
  return False


def _place_stats(stats, result):
  """The `count=` lines as result["warmup"] and result["timings"]: the
  tool measures warm-up first, then the regular runs, each with one such
  line. A single one is the warm-up of a run cut short (the tool's banner
  is there but no summary), else a trimmed paste of the regular runs'
  line."""
  if len(stats) > 1:
    result["warmup"], result["timings"] = stats[0], stats[-1]
  elif stats and result["runs"] and result["summary"] is None:
    result["warmup"] = stats[0]
  elif stats:
    result["timings"] = stats[0]
