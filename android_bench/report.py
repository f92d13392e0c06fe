"""Reporters: Markdown tables and PNG plots, all read from results objects.

    rows = summarize(run)   # one row per model/runner/delegate/threads/length
    print(markdown_table([run]))
    plot_latency([run], "latency.png")
    plot_lengths([run], "lengths.png")     # a run with --lengths: ms vs L
    table, pairs = compare(run_a, run_b)   # ratio b / a per row
    plot_ratios(pairs, "compare.png", ...)

A row pools its repeats: the latency shown is the median of the cells'
medians (the mean where an old benchmark_model printed no percentiles, marked
with `*`), the spread is p5..p95 of the runs (mean +- std without
percentiles), min and max are over all runs. Comparisons match rows by model
file name, runner, delegate, thread count and length; the ratio is new /
old, so below 1 is faster. `length` is the sequence length a dynamic-length
model ran at (`--lengths`), None for a model run at its own shape.

Thermal: a row counts its cells that ran hot or throttled (`throttled`, of
`thermal_known` cells with a verdict; thermal.cell_throttled) and the time
they spent waiting to cool; tables mark such rows' latency with `!` and
say how many cells it concerns, since a throttled cell measures the
device's thermal state as much as the model.
"""

import statistics

from android_bench import thermal
from android_bench.plotting import pyplot, save_figure
from tfmodels.markdown import table

_KEY = ("model", "runner", "delegate", "threads", "length")


def _ms(value):
  return None if value is None else value / 1e3


def summarize(run):
  """Rows (dicts) of one run, in the order the cells were planned."""
  groups = {}
  for cell in run["cells"]:
    groups.setdefault(tuple(cell.get(k) for k in _KEY), []).append(cell)
  rows = []
  for key, cells in groups.items():
    ok = [c for c in cells if c["status"] == "ok" and c.get("timings_us")]
    row = dict(zip(_KEY, key), cells=len(cells), ok=len(ok),
               statuses=sorted({c["status"] for c in cells}),
               errors=[c["error"] for c in cells if c.get("error")])
    verdicts = [thermal.cell_throttled(c) for c in cells]
    row["throttled"] = sum(v is True for v in verdicts)
    row["thermal_known"] = sum(v is not None for v in verdicts)
    row["cool_wait_s"] = round(sum(
        (c.get("thermal") or {}).get("waited_s") or 0 for c in cells), 3)
    if ok:
      timings = [c["timings_us"] for c in ok]
      has_median = all(t.get("median") is not None for t in timings)
      centrals = [t["median"] if has_median else t["mean"] for t in timings]
      row["estimate"] = "median" if has_median else "mean"
      row["latency_ms"] = _ms(statistics.median(centrals))
      row["mean_ms"] = _ms(statistics.fmean(t["mean"] for t in timings))
      row["std_ms"] = _ms(statistics.fmean(t["std"] or 0 for t in timings))
      row["min_ms"] = _ms(min(t["min"] for t in timings))
      row["max_ms"] = _ms(max(t["max"] for t in timings))
      if all(t.get("p5") is not None for t in timings):
        row["low_ms"] = _ms(statistics.median(t["p5"] for t in timings))
        row["high_ms"] = _ms(statistics.median(t["p95"] for t in timings))
      else:
        row["low_ms"] = row["mean_ms"] - row["std_ms"]
        row["high_ms"] = row["mean_ms"] + row["std_ms"]
      row["runs"] = sum(t["count"] for t in timings)
      inits = [c["init_us"] for c in ok if c.get("init_us") is not None]
      row["init_ms"] = _ms(statistics.median(inits)) if inits else None
      peaks = [(c.get("memory_mb") or {}).get("peak") for c in ok]
      peaks = [p for p in peaks if p is not None]
      row["peak_mb"] = max(peaks) if peaks else None
      coverage = ok[-1].get("delegate_coverage") or []
      row["coverage"] = ", ".join(
          f"{d['replaced_nodes']}/{d['total_nodes']}" for d in coverage) \
          or None
    rows.append(row)
  return rows


def _fmt(value, digits=4):
  """Milliseconds and megabytes to `digits` significant figures."""
  if value is None:
    return "-"
  if isinstance(value, float):
    return f"{value:.{digits}g}"
  return str(value)


def _status(row):
  if row["ok"] == row["cells"]:
    return "ok"
  bad = [s for s in row["statuses"] if s != "ok"]
  return f"{row['ok']}/{row['cells']} ok ({', '.join(bad)})"


def run_label(run):
  device = run.get("device") or {}
  return (run.get("name") or
          f"{run['run_id']} ({device.get('model') or run['target']})")


def markdown_table(runs):
  """One Markdown table over the rows of one or more runs."""
  several = len(runs) > 1
  lengths = any(r.get("length") for run in runs for r in summarize(run))
  header = (["run"] if several else []) + [
      "model", "runner", "delegate", "threads"] + (
          ["length"] if lengths else []) + ["latency ms",
      "p5..p95 ms", "mean ms", "std ms", "min ms", "max ms", "runs",
      "init ms", "peak MB", "delegated nodes", "throttled", "status"]
  rows = []
  mean_note, throttled, judged = False, 0, 0
  for run in runs:
    for row in summarize(run):
      latency = _fmt(row.get("latency_ms"))
      if row.get("estimate") == "mean":
        latency += "*"
        mean_note = True
      if row["throttled"]:
        latency += "!"
      throttled += row["throttled"]
      judged += row["thermal_known"]
      spread = ("-" if row.get("low_ms") is None else
                f"{_fmt(row['low_ms'])}..{_fmt(row['high_ms'])}")
      cells = ([run_label(run)] if several else []) + [
          row["model"], row["runner"], row["delegate"], str(row["threads"])
      ] + ([_fmt(row["length"])] if lengths else []) + [
          latency, spread, _fmt(row.get("mean_ms")), _fmt(row.get("std_ms")),
          _fmt(row.get("min_ms")), _fmt(row.get("max_ms")),
          _fmt(row.get("runs")), _fmt(row.get("init_ms")),
          _fmt(row.get("peak_mb")), row.get("coverage") or "-",
          _throttled(row), _status(row)]
      rows.append(cells)
  notes = ["\\* mean: this benchmark_model build prints no median."] \
      if mean_note else []
  if throttled:
    notes.append(f"! {throttled} of {judged} cells ran hot or throttled "
                 f"(thermal status or hottest zone over the limit, JSON "
                 f"`hot_before` / `hot_after`): their latency may be the "
                 f"device's heat, not the model.")
  return "\n".join(table(header, rows) + notes) + "\n"


def _throttled(row):
  """`-` without thermal data, `no`, or `k/n` cells that ran hot."""
  if not row["thermal_known"]:
    return "-"
  return f"{row['throttled']}/{row['thermal_known']}" if row["throttled"] \
      else "no"


def compare(old, new):
  """Markdown table of two runs side by side, and the matched row pairs."""
  old_rows = {tuple(r[k] for k in _KEY): r for r in summarize(old)}
  new_rows = {tuple(r[k] for k in _KEY): r for r in summarize(new)}
  keys = list(old_rows) + [k for k in new_rows if k not in old_rows]
  lengths = any(k[4] for k in keys)
  header = ["model", "runner", "delegate", "threads"] + (
      ["length"] if lengths else []) + ["A latency ms", "B latency ms",
                                        "B / A"]
  rows, pairs, hot = [], [], False
  for key in keys:
    old_row, new_row = old_rows.get(key) or {}, new_rows.get(key) or {}
    a, b = old_row.get("latency_ms"), new_row.get("latency_ms")
    ratio = b / a if a and b is not None else None
    pairs.append({**dict(zip(_KEY, key)), "a_ms": a, "b_ms": b,
                  "ratio": ratio})
    marks = ["!" if r.get("throttled") else "" for r in (old_row, new_row)]
    hot = hot or any(marks)
    rows.append([*key[:4], *([_fmt(key[4])] if lengths else []),
                 _fmt(a) + marks[0], _fmt(b) + marks[1],
                 "-" if ratio is None else f"{ratio:.3f}"])
  lines = [f"A = {run_label(old)}", f"B = {run_label(new)}", "",
           *table(header, rows)]
  if hot:
    lines.append("! some of the row's cells ran hot or throttled.")
  return "\n".join(lines) + "\n", pairs


def plot_latency(runs, path):
  """Grouped bars: latency per model, one bar per thread count (and
  delegate / runner / run), whiskers from p5 to p95. Returns the number of
  bars drawn; with none, writes nothing."""
  plt = pyplot()
  series, models = {}, []
  for run in runs:
    for row in summarize(run):
      if row.get("latency_ms") is None:
        continue
      if row["model"] not in models:
        models.append(row["model"])
      label = f"{row['threads']} thr, {row['delegate']}"
      if row["runner"] != "benchmark_model":
        label += f", {row['runner']}"
      if row.get("length"):
        label += f", L {row['length']}"
      if len(runs) > 1:
        label = f"{run_label(run)}: {label}"
      series.setdefault(label, {})[row["model"]] = row
  if not series:
    return 0
  fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(models) * max(
      1, len(series)) ** 0.5), 4.5))
  width = 0.8 / max(1, len(series))
  for i, (label, rows) in enumerate(series.items()):
    xs = [m + (i - (len(series) - 1) / 2) * width
          for m, name in enumerate(models) if name in rows]
    values = [rows[n]["latency_ms"] for n in models if n in rows]
    low = [rows[n]["latency_ms"] - rows[n]["low_ms"] for n in models
           if n in rows]
    high = [rows[n]["high_ms"] - rows[n]["latency_ms"] for n in models
            if n in rows]
    ax.bar(xs, values, width, label=label,
           yerr=[[max(0, v) for v in low], [max(0, v) for v in high]],
           capsize=3)
  ax.set_xticks(range(len(models)))
  ax.set_xticklabels(models, rotation=20, ha="right")
  ax.set_ylabel("latency (ms), whiskers p5..p95")
  ax.set_title("benchmark_model latency per model and thread count")
  ax.legend(fontsize="small")
  save_figure(fig, path)
  return sum(len(rows) for rows in series.values())


def plot_lengths(runs, path):
  """Latency against sequence length: one line per model (and thread count,
  delegate, runner, run) over the lengths a `--lengths` run timed, p5..p95
  shaded. Returns the number of lines; with none, writes nothing."""
  series = {}
  for run in runs:
    for row in summarize(run):
      if row.get("latency_ms") is None or not row.get("length"):
        continue
      label = f"{row['model']}, {row['threads']} thr, {row['delegate']}"
      if row["runner"] != "benchmark_model":
        label += f", {row['runner']}"
      if len(runs) > 1:
        label = f"{run_label(run)}: {label}"
      series.setdefault(label, []).append(row)
  if not series:
    return 0
  plt = pyplot()
  fig, ax = plt.subplots(figsize=(7, 4.5))
  for label, rows in series.items():
    rows = sorted(rows, key=lambda r: r["length"])
    xs = [r["length"] for r in rows]
    ax.plot(xs, [r["latency_ms"] for r in rows], marker="o", label=label)
    ax.fill_between(xs, [r["low_ms"] for r in rows],
                    [r["high_ms"] for r in rows], alpha=0.2)
  ax.set_xlabel("sequence length (tokens)")
  ax.set_ylabel("latency (ms), p5..p95 shaded")
  ax.set_title("benchmark_model latency against sequence length")
  ax.grid(alpha=0.3)
  ax.legend(fontsize="small")
  save_figure(fig, path)
  return len(series)


def plot_ratios(pairs, path, title):
  """Horizontal bars of B / A per matched row, with the 1.0 line (nothing
  is written when no row matched)."""
  plt = pyplot()
  pairs = [p for p in pairs if p["ratio"] is not None]
  if not pairs:
    return 0
  fig, ax = plt.subplots(figsize=(7, 1 + 0.4 * max(1, len(pairs))))
  labels = [f"{p['model']} {p['delegate']} {p['threads']} thr"
            + (f" L {p['length']}" if p.get("length") else "") for p in pairs]
  ax.barh(range(len(pairs)), [p["ratio"] for p in pairs],
          color=["tab:green" if p["ratio"] < 1 else "tab:red" for p in pairs])
  ax.axvline(1.0, color="black", linewidth=1)
  ax.set_yticks(range(len(pairs)))
  ax.set_yticklabels(labels)
  ax.invert_yaxis()
  ax.set_xlabel("latency ratio B / A (below 1: B is faster)")
  ax.set_title(title)
  save_figure(fig, path)
  return len(pairs)
