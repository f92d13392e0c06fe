"""The QA app checks' figures in words: the questions as the app runs them
and the shipped files on arm64. Ship's report and the demo's both say
them (no flags here, so both can import it)."""

from tfmodels.markdown import number, table


def fmt(value, digits=1):
  """A report's number: `digits` decimals, thousands grouped, - if none."""
  return number(value, digits, thousands=True)


def app_latency_text(app_result):
  """The app step's figures in words: the questions as the app runs them
  (each window at the length the twin picks) against the default length,
  and dev F1 both ways (one paragraph, or "" for a fixed-length file)."""
  latency, dev = app_result.get("latency") or {}, app_result.get("dev") or {}
  if not latency.get("fixed_median_ms"):
    return ""
  text = (f"As the app runs them (each window at the smallest multiple of 32 "
          f"tokens that holds it), the questions took a median "
          f"**{latency['median_ms']:.2f} ms** of model time, against "
          f"{latency['fixed_median_ms']:.2f} ms at L = {latency['length']} on "
          f"the same file: **{100 * latency['share']:.0f}%** "
          f"({latency['threads']} thread(s), host; the better of two runs "
          f"per question); {latency['same_answers']} answers are the same "
          "both ways.")
  if dev.get("fixed"):
    text += (f" Dev F1 through the twin over {dev['questions']} questions: "
             f"{dev['picked']['f1']:.2f} at the picked lengths, "
             f"{dev['fixed']['f1']:.2f} at L = {latency['length']}.")
  return text


def arm64_lines(result):
  """The arm64 step's figures as Markdown lines (or why it did not run)."""
  if not result:
    return []
  if "not_run" in result:
    return [f"Not run on arm64: {result['not_run']}.", ""]
  lines = [f"Emulated arm64 (qemu-user, `-cpu {result['cpu']}`: the "
           "phone's ARM kernels of XNNPACK, NEON and dot-product; emulated "
           "time is no latency and is not reported as one):", ""]
  rows = []
  for name, r in result["models"].items():
    dev, xnn = r.get("dev") or {}, (r.get("arm64") or {}).get("xnnpack") or {}
    rows.append([
        name, f"{r['windows']} ({'/'.join(map(str, r['lengths']))})",
        f"{r['same_answers']} of {r['questions']}",
        fmt((dev.get("host") or {}).get("f1"), 2),
        fmt((dev.get("arm64") or {}).get("f1"), 2),
        f"{r['max_abs_logit_diff']:.3g}",
        f"{xnn.get('replaced', '-')}/{xnn.get('nodes', '-')}"])
  lines += table(["file", "windows (lengths)", "same answers", "dev F1 host",
                  "dev F1 arm64", "max logit diff", "XNNPACK nodes"], rows)
  counted = result.get("instructions")
  if counted:
    models = result["models"]
    lines += ["", f"Arm64 instructions per inference at L = "
              f"{counted['length']}: {counted['float32']} "
              f"{models[counted['float32']]['instructions_per_inference']:,.0f}"
              f", {counted['int8']} "
              f"{models[counted['int8']]['instructions_per_inference']:,.0f} "
              f"(of which SDOT/UDOT "
              f"{models[counted['int8']]['dot_instructions_per_inference']:,.0f})"
              f": float32 / int8 = **{counted['float32_over_int8']:.2f}**. "
              f"Beside it, MobileBERT's Table 7: LayerNorm + gelu / NoNorm + "
              f"relu latency = {counted['table7_layernorm_gelu_over_nonorm_relu']:.2f}"
              " at the same FLOPs (a different change, the same lesson: the "
              "work a phone does is not the FLOPs)."]
  return lines + [""]
