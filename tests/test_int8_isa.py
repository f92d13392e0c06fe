"""The CPU's int8 instructions, recorded with every timed result: int8 is as
fast as the CPU's int8 dot products, so a report comparing int8 with
float32 says what the CPU that timed them can show."""

import json
import os
import subprocess
import sys

from android_bench import device_info
from android_bench.device_info import int8_expectation, int8_isa

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ZEN3 = ("processor\t: 0\nmodel name\t: AMD EPYC 7B13\n"
        "flags\t\t: fpu sse sse2 avx avx2 fma bmi2 sha_ni\n")
SAPPHIRE = ("processor\t: 0\nflags\t\t: avx2 avx512f avx512_vnni avx_vnni "
            "amx_int8 amx_tile\n")
CORTEX_A76 = ("processor\t: 0\nBogoMIPS\t: 38.40\nFeatures\t: fp asimd "
              "evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
              "asimdrdm lrcpc dcpop asimddp\n")
CORTEX_A53 = "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid\n"


def test_int8_dot_products_are_read_from_cpuinfo():
  assert int8_isa(ZEN3) == {"instructions": [], "kind": "no_dot_product"}
  assert int8_isa(SAPPHIRE) == {
      "instructions": ["amx_int8", "avx512_vnni", "avx_vnni"],
      "kind": "dot_product"}
  assert int8_isa(CORTEX_A76) == {"instructions": ["asimddp"],
                                  "kind": "dot_product"}
  assert int8_isa(CORTEX_A53) == {"instructions": [],
                                  "kind": "no_dot_product"}
  assert int8_isa("") == int8_isa(None) == {"instructions": [], "kind": None}


def test_the_expectation_names_what_the_cpu_can_show():
  assert "about float32's speed here" in int8_expectation(int8_isa(ZEN3))
  assert "(amx_int8, avx512_vnni, avx_vnni)" in int8_expectation(
      int8_isa(SAPPHIRE))
  assert "a third" in int8_expectation(int8_isa(CORTEX_A76))
  assert int8_expectation(None) == (
      "the CPU's int8 instructions were not recorded")


class _Phone:
  """adb.shell of a phone answering the facts script."""
  serial = "R58M"

  def shell(self, command, timeout):
    assert "grep -m1 -i '^features' /proc/cpuinfo" in command
    sep = device_info._SEPARATOR
    return 0, ("[ro.product.model]: [Pixel 4]\n" + sep + "\n"
               "cpu0 1785600\ncpu7 2841600\n" + sep + "\n" + CORTEX_A76)


def test_a_phones_facts_and_the_hosts_hold_their_int8_instructions():
  phone = device_info.adb_device_facts(_Phone())
  assert phone["model"] == "Pixel 4"
  freqs = phone["cpu_max_freq_khz"]
  assert (len(freqs), freqs[0], freqs[7]) == (8, 1785600, 2841600)
  assert phone["int8_isa"] == {"instructions": ["asimddp"],
                               "kind": "dot_product"}
  with open("/proc/cpuinfo") as f:
    assert device_info.host_facts()["int8_isa"] == int8_isa(f.read())


# experiments.ship.report defines its flags on import: read in a child.
_SPEED_LINES = """
import json, sys
from experiments.ship.report import _int8_speed_lines
summary = json.loads(sys.argv[1])
print(json.dumps(_int8_speed_lines(summary)))
"""


def test_ships_report_says_what_the_host_can_show_of_int8():
  side = {"latency_ms": 59.9, "float32_latency_ms": 58.2}
  summary = {"teacher": {"latency_ms": 135.3, "float32_latency_ms": 138.6},
             "student": dict(side, target="host"),
             "int8_isa": int8_isa(ZEN3)}
  child = subprocess.run([sys.executable, "-c", _SPEED_LINES,
                          json.dumps(summary)], cwd=REPO,
                         capture_output=True, text=True)
  assert child.returncode == 0, child.stderr[-3000:]
  [line, blank] = json.loads(child.stdout.splitlines()[-1])
  assert line == ("int8 / float32 time on the host: teacher 0.98x, student "
                  "1.03x; " + int8_expectation(int8_isa(ZEN3)) + ".")
  assert blank == ""
