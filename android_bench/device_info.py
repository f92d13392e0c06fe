"""Facts about the machine a run measures: phone, emulator or host.

    facts = adb_device_facts(adb)      # model, Android version, ABI, cores...
    mask = big_core_mask(facts["cpu_max_freq_khz"])   # e.g. "f0"
    thermal = adb_thermal(adb)         # before and after each benchmark

Why per-core frequencies: phones mix little and big cores, and a 4-thread
benchmark lands wherever the scheduler puts it unless pinned with `taskset`.
The "big" cores are those faster than the slowest cluster (Pixel 4: cores
4-7, mask f0); on a homogeneous CPU every core counts. Thermal state is read
from /sys/class/thermal and `dumpsys thermalservice` (Android 10+: status
0 = none ... 6 = shutdown) so throttled runs can be spotted afterwards.

Why the int8 instruction sets (`int8_isa`): int8 is only as fast as the
CPU's int8 dot products. XNNPACK's int8 kernels on an x86 host with AVX-512
VNNI or AVX-VNNI run at about a third of float32's time, as a phone's
ARMv8.2 dot-product kernels do (docs/results.md, "Int8 against float32 on
each kind of CPU"); on AVX2 alone (no
VNNI: most CI machines, AMD Zen 3) int8 runs at about float32's speed,
whatever the model. A host figure comparing int8 with float32 says which.
"""

import os
import platform
import re

_SEPARATOR = "___android_bench___"
FACTS_SCRIPT = (
    "getprop; echo " + _SEPARATOR + "; "
    "for c in /sys/devices/system/cpu/cpu[0-9]*; do "
    "echo \"${c##*/} $(cat $c/cpufreq/cpuinfo_max_freq 2>/dev/null)\"; done;"
    " echo " + _SEPARATOR + "; grep -m1 -i '^features' /proc/cpuinfo")
# int8 dot-product instructions, as /proc/cpuinfo names them (x86 "flags",
# arm64 "Features"), fastest first.
INT8_INSTRUCTIONS = ("amx_int8", "avx512_vnni", "avx_vnni", "i8mm", "asimddp")
INT8_FALLBACKS = ("avx2", "asimd")
THERMAL_SCRIPT = (
    "for z in /sys/class/thermal/thermal_zone*; do "
    "echo \"${z##*/} $(cat $z/type 2>/dev/null) $(cat $z/temp 2>/dev/null)\";"
    " done; dumpsys thermalservice 2>/dev/null | grep -m1 'Thermal Status'")
_PROP = re.compile(r"^\[([^\]]+)\]: \[(.*)\]$")


def parse_getprop(text):
  return {m.group(1): m.group(2) for m in map(_PROP.match, text.splitlines())
          if m}


def parse_cpu_freqs(text):
  """`cpuN KHZ` lines -> list of max kHz by core index (None if unknown)."""
  freqs = {}
  for line in text.splitlines():
    match = re.match(r"^cpu(\d+)\s*(\d*)\s*$", line.strip())
    if match:
      freqs[int(match.group(1))] = int(match.group(2)) if match.group(2) \
          else None
  return [freqs.get(i) for i in range(max(freqs) + 1)] if freqs else []


def big_cores(freqs):
  """Indices of the cores faster than the slowest cluster (all if uniform)."""
  known = [f for f in freqs if f]
  if not known:
    return list(range(len(freqs)))
  slowest = min(known)
  big = [i for i, f in enumerate(freqs) if f and f > slowest]
  return big or [i for i, f in enumerate(freqs) if f]


def core_mask(cores):
  """Hex affinity mask (taskset's format, no 0x) of core indices."""
  return format(sum(1 << c for c in cores), "x")


def big_core_mask(freqs):
  return core_mask(big_cores(freqs))


def parse_mask(mask):
  """Core indices of a hex mask; ValueError if it is not one."""
  value = int(mask, 16)
  if value <= 0:
    raise ValueError(f"empty CPU mask {mask}")
  return [i for i in range(value.bit_length()) if value >> i & 1]


def parse_thermal(text):
  """Zone temperatures (degrees C) and the thermal service's status."""
  zones, status = {}, None
  for line in text.splitlines():
    match = re.match(r"^Thermal Status:\s*(\d+)", line.strip())
    if match:
      status = int(match.group(1))
      continue
    fields = line.split()
    if len(fields) == 3 and fields[0].startswith("thermal_zone"):
      try:
        value = float(fields[2])
      except ValueError:
        continue
      name = fields[1]
      if name in zones:
        name = f"{name}/{fields[0]}"
      zones[name] = round(value / 1000.0 if abs(value) >= 200 else value, 2)
  return {"status": status, "zones_c": zones,
          "max_c": max(zones.values()) if zones else None}


def _shell_ok(adb, command, timeout):
  status, out = adb.shell(command, timeout)
  return out if status == 0 or out.strip() else ""


def int8_isa(cpuinfo):
  """What the CPU's int8 kernels can use, from /proc/cpuinfo's text:
  {"instructions": the int8 dot-product sets it has (INT8_INSTRUCTIONS),
  "kind": "dot_product" (any of them), "no_dot_product" (AVX2 or NEON
  without them), or None (not told)}."""
  flags = set()
  for line in (cpuinfo or "").splitlines():
    name, _, value = line.partition(":")
    if name.strip().lower() in ("flags", "features"):
      flags.update(value.split())
  have = [i for i in INT8_INSTRUCTIONS if i in flags]
  kind = ("dot_product" if have else "no_dot_product"
          if flags & set(INT8_FALLBACKS) else None)
  return {"instructions": have, "kind": kind}


def int8_expectation(isa):
  """One sentence: what int8 against float32 timed on this CPU shows."""
  kind = (isa or {}).get("kind")
  if kind == "dot_product":
    return (f"this CPU has int8 dot products ({', '.join(isa['instructions'])}"
            "): int8 runs at about a third of float32's time, as on a "
            "phone's dot-product cores")
  if kind == "no_dot_product":
    return ("this CPU has no int8 dot products (AVX2 / NEON without VNNI or "
            "the dot-product extension): int8 runs at about float32's speed "
            "here, whatever the model; a phone's dot-product cores run it "
            "at about a third (time it there, or on emulated arm64)")
  return "the CPU's int8 instructions were not recorded"


def adb_device_facts(adb, timeout=30):
  """Model, Android version, ABI, cores, per-core max frequency and the
  int8 instructions."""
  out = _shell_ok(adb, FACTS_SCRIPT, timeout)
  props_text, _, cpu_text = out.partition(_SEPARATOR)
  cpu_text, _, features = cpu_text.partition(_SEPARATOR)
  props = parse_getprop(props_text)
  freqs = parse_cpu_freqs(cpu_text)
  facts = {
      "kind": "emulator" if props.get("ro.kernel.qemu") == "1" or
              adb.serial.startswith("emulator-") else "device",
      "serial": adb.serial,
      "manufacturer": props.get("ro.product.manufacturer"),
      "model": props.get("ro.product.model"),
      "device": props.get("ro.product.device"),
      "android_version": props.get("ro.build.version.release"),
      "sdk": props.get("ro.build.version.sdk"),
      "abi": props.get("ro.product.cpu.abi"),
      "soc": props.get("ro.soc.model") or props.get("ro.board.platform"),
      "build": props.get("ro.build.fingerprint"),
      "cores": len(freqs) or None,
      "cpu_max_freq_khz": freqs,
      "int8_isa": int8_isa(features),
  }
  facts["big_cores"] = big_cores(freqs) if freqs else []
  facts["big_core_mask"] = core_mask(facts["big_cores"]) if freqs else None
  return facts


def adb_thermal(adb, timeout=20):
  return parse_thermal(_shell_ok(adb, THERMAL_SCRIPT, timeout))


def _read(path):
  try:
    with open(path) as f:
      return f.read().strip()
  except OSError:
    return None


def host_facts():
  """The host's counterpart of adb_device_facts."""
  cpu_model, cpuinfo = None, _read("/proc/cpuinfo")
  for line in (cpuinfo or "").splitlines():
    if line.lower().startswith(("model name", "hardware")):
      cpu_model = line.split(":", 1)[1].strip()
      break
  cores = os.cpu_count() or 0
  freqs = []
  for i in range(cores):
    value = _read(f"/sys/devices/system/cpu/cpu{i}/cpufreq/cpuinfo_max_freq")
    freqs.append(int(value) if value and value.isdigit() else None)
  try:
    from importlib.metadata import version
    litert_version = version("ai-edge-litert")
  except Exception:  # pylint: disable=broad-except
    litert_version = None
  usable = sorted(os.sched_getaffinity(0)) if hasattr(
      os, "sched_getaffinity") else list(range(cores))
  return {
      "kind": "host", "serial": None, "hostname": platform.node(),
      "model": cpu_model or platform.processor() or platform.machine(),
      "os": f"{platform.system()} {platform.release()}",
      "abi": platform.machine(), "cores": cores, "usable_cores": usable,
      "cpu_max_freq_khz": freqs if any(freqs) else [],
      "big_cores": big_cores(freqs) if any(freqs) else usable,
      "python": platform.python_version(), "ai_edge_litert": litert_version,
      "int8_isa": int8_isa(cpuinfo),
  }


def host_thermal():
  lines = []
  base = "/sys/class/thermal"
  for zone in sorted(os.listdir(base)) if os.path.isdir(base) else []:
    if zone.startswith("thermal_zone"):
      lines.append(f"{zone} {_read(os.path.join(base, zone, 'type'))} "
                   f"{_read(os.path.join(base, zone, 'temp'))}")
  return parse_thermal("\n".join(lines))
