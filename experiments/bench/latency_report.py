"""What experiments/bench/latency_benchmark.py writes from its rows: the issue's checks,
benchmark.md (the table, Table 7 beside the paper) and benchmark.png.

No absl flags here, so tests and other tools can import it.
"""

import os

from converters.quantize import get_mode, mode_labels, parse_mode_label
from tfmodels.markdown import number, table

VARIANTS = {"layernorm_gelu": ("layer_norm", "gelu"),
            "layernorm_relu": ("layer_norm", "relu"),
            "nonorm_gelu": ("no_norm", "gelu"),
            "nonorm_relu": ("no_norm", "relu")}
PEER = "peer_mobilebert"


def timed_modes():
  """The mode labels Table 7's comparison measures: quantize.mode_labels()
  whose mode is `timed` in quantize.MODES."""
  return tuple(label for label in mode_labels()
               if get_mode(parse_mode_label(label)[0]).timed)


# MobileBERT paper, Table 7 (Pixel 4, 4 threads, L = 128).
PAPER_TABLE7_MS = {"layernorm_gelu": 192.0, "layernorm_relu": 167.0,
                   "nonorm_gelu": 92.0, "nonorm_relu": 62.0}


def _find(rows, **want):
  for row in rows:
    if all(row.get(k) == v for k, v in want.items()):
      return row.get("median_ms")
  return None


def checks(rows, host_cores=None):
  """The issue's done-when comparisons that these rows can decide: a list
  of (statement, passed, numbers). Host rows with more threads than
  `host_cores` are left out: there they time the scheduler, not the model."""
  out = []
  for target in sorted({r["target"] for r in rows}):
    for threads in sorted({r["threads"] for r in rows}):
      if target == "host" and host_cores and threads > host_cores:
        continue
      at = dict(target=target, threads=threads)
      f32 = _find(rows, model="mobilebert", variant="nonorm_relu",
                  mode="float32", **at)
      dyn = _find(rows, model="mobilebert", variant="nonorm_relu",
                  mode="dynamic", **at)
      i8 = _find(rows, model="mobilebert", variant="nonorm_relu",
                 mode="int8", **at)
      peer = _find(rows, model=PEER, variant="nonorm_relu", mode="float32",
                   **at)
      where = f"{target}, {threads} thr"
      if i8 and dyn:
        out.append((f"MobileBERT int8 <= dynamic ({where})", i8 <= dyn,
                    f"{i8:.2f} vs {dyn:.2f} ms"))
      if i8 and f32:
        out.append((f"MobileBERT int8 <= float32 / 2 ({where})",
                    i8 <= f32 / 2, f"{i8:.2f} vs {f32 / 2:.2f} ms"))
      if f32 and peer:
        out.append((f"MobileBERT float32 <= peer float32 ({where})",
                    f32 <= peer, f"{f32:.2f} vs {peer:.2f} ms"))
      for mode in ("float32", "int8"):
        times = {v: _find(rows, model="mobilebert", variant=v, mode=mode,
                          **at) for v in VARIANTS}
        if all(times.values()):
          fastest = min(times, key=times.get)
          out.append((f"NoNorm + relu fastest of the four, {mode} ({where})",
                      fastest == "nonorm_relu",
                      ", ".join(f"{v} {t:.2f}" for v, t in times.items())))
  return out


def _fmt(value, digits=2):
  return number(value, digits)


def markdown(rows, command, notes=()):
  """benchmark.md: the table, Table 7 ratios next to the paper, checks."""
  lines = ["# Latency benchmark (experiments/bench/latency_benchmark.py)", "",
           f"Command: `{command}`", ""]
  lines += list(notes)
  lines += ["", *table(
      ["model", "variant", "mode", "threads", "target", "median ms",
       "p5..p95 ms", "runs", "size MB", "XNNPACK nodes (partitions)"],
      ([r["model"], r["variant"], r["mode"], r["threads"], r["target"],
        _fmt(r["median_ms"]), f"{_fmt(r['p5_ms'])}..{_fmt(r['p95_ms'])}",
        r["runs"] or "-", _fmt(r["size_mb"]),
        f"{r['xnnpack_nodes']} ({r['xnnpack_partitions']})"] for r in rows))]
  table7 = [r for r in rows if r["model"] == "mobilebert"]
  if table7:
    ratios = [["paper (Pixel 4)", 4, "phone", *(
        f"{PAPER_TABLE7_MS[v]:.0f} ms ({PAPER_TABLE7_MS[v] / 192:.2f})"
        for v in VARIANTS)]]
    groups = sorted({(r["mode"], r["threads"], r["target"]) for r in table7})
    for mode, threads, target in groups:
      at = dict(model="mobilebert", mode=mode, threads=threads,
                target=target)
      times = {v: _find(rows, variant=v, **at) for v in VARIANTS}
      base = times.get("layernorm_gelu")
      ratios.append([mode, threads, target, *(
          f"{_fmt(t)} ms ({t / base:.2f})" if t and base else _fmt(t)
          for t in times.values())])
    lines += ["", "## Table 7 (MobileBERT): latency relative to LayerNorm + "
              "gelu", "", *table(["mode", "threads", "target", *VARIANTS],
                                 ratios)]
  cores = os.cpu_count()
  found = checks(rows, cores)
  if found:
    lines += ["", "## Checks", ""]
    if any(r["target"] == "host" and r["threads"] > cores for r in rows):
      lines += [f"Host rows with more threads than the host's {cores} "
                "cores are oversubscribed and left out of the checks.", ""]
    lines += [f"- {'PASS' if ok else 'FAIL'}: {what}: {numbers}"
              for what, ok, numbers in found]
  return "\n".join(lines) + "\n"


def plot(rows, path, seq_length=128):
  """Bars per model x variant, one per mode, for each thread count (a panel
  each); whiskers p5..p95. Returns the number of bars."""
  from android_bench.plotting import pyplot, save_figure
  plt = pyplot()
  rows = [r for r in rows if r["median_ms"] is not None]
  if not rows:
    return 0
  threads = sorted({r["threads"] for r in rows})
  groups = list(dict.fromkeys((r["model"], r["variant"]) for r in rows))
  modes = [m for m in timed_modes() if any(r["mode"] == m for r in rows)]
  fig, axes = plt.subplots(len(threads), 1, squeeze=False, figsize=(
      max(7, 0.9 * len(groups) * max(1, len(modes)) ** 0.5),
      3.2 * len(threads)))
  width = 0.8 / len(modes)
  bars = 0
  for ax, t in zip(axes[:, 0], threads):
    for i, mode in enumerate(modes):
      xs, ys, err = [], [], [[], []]
      for g, (model, variant) in enumerate(groups):
        r = next((r for r in rows if (r["model"], r["variant"], r["mode"],
                                      r["threads"]) == (model, variant, mode,
                                                        t)
                  and r["target"] == "host"), None)
        if r is None:
          continue
        xs.append(g + (i - (len(modes) - 1) / 2) * width)
        ys.append(r["median_ms"])
        err[0].append(max(0.0, r["median_ms"] - (r["p5_ms"] or
                                                 r["median_ms"])))
        err[1].append(max(0.0, (r["p95_ms"] or r["median_ms"]) -
                          r["median_ms"]))
      ax.bar(xs, ys, width, yerr=err, capsize=2, label=mode)
      bars += len(xs)
    ax.set_yscale("log")
    ax.set_ylabel(f"ms, {t} thread{'s' if t > 1 else ''}")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{m}\n{v}" for m, v in groups], fontsize=7)
    ax.legend(fontsize="small")
  axes[0, 0].set_title("LiteRT host latency (median, whiskers p5..p95), "
                       f"L={seq_length}")
  fig.tight_layout()
  save_figure(fig, path)
  return bars
