"""The `adb` client, driven as a subprocess, with errors a harness can act on.

    adb = Adb(binary="adb", serial="R58M123", server_port=5037)
    status, output = adb.shell("getprop ro.product.model", timeout=10)
    adb.push("model.tflite", "/data/local/tmp/model.tflite", timeout=120)

Why a wrapper: every call needs the same `-P port -s serial`, a timeout that
kills the client we started (never other processes), and a way to tell a
failed command from a device that went away. The latter matters because
`adb shell` exits 0 with truncated output when the transport drops mid-command
(the shell protocol's exit packet never arrives), so callers check
`state()` whenever output looks incomplete.
"""

import os
import re
import shutil
import subprocess

from tfmodels.process_lifetime import die_with_parent

CHUNK_SECONDS = 5  # state() and devices() answer locally, from the server


class AdbError(RuntimeError):
  """adb could not do what was asked (one line, for the user)."""


class AdbNotFound(AdbError):
  pass


class NoDevice(AdbError):
  pass


class DeviceGone(AdbError):
  """The device disconnected or went offline."""


class AdbTimeout(AdbError):
  pass


class Adb:
  """One adb server (port) and optionally one device (serial)."""

  def __init__(self, binary="adb", serial=None, server_port=None):
    self.binary = shutil.which(binary) or binary
    self.serial = serial
    self.server_port = server_port

  def _argv(self, args, device=True):
    argv = [self.binary]
    if self.server_port:
      argv += ["-P", str(self.server_port)]
    if device and self.serial:
      argv += ["-s", self.serial]
    return argv + list(args)

  def run(self, args, timeout, device=True):
    """Runs adb; returns (exit status, stdout + stderr).

    Raises AdbTimeout (after killing the client) or AdbNotFound."""
    argv = self._argv(args, device)
    try:
      proc = subprocess.Popen(  # a killed harness takes its client along
          argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
          stderr=subprocess.STDOUT, preexec_fn=die_with_parent)
    except FileNotFoundError as e:
      raise AdbNotFound(f"adb binary not found: {self.binary} (install "
                        f"Android platform-tools or pass --adb)") from e
    try:
      out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
      proc.kill()
      proc.communicate()
      raise AdbTimeout(f"`{' '.join(args[:2])}` timed out after "
                       f"{timeout:g} s") from e
    except BaseException:  # interrupted: the client we started goes too
      proc.kill()
      proc.wait()
      raise
    return proc.returncode, out.decode("utf-8", "replace")

  def version(self):
    status, out = self.run(["version"], CHUNK_SECONDS * 6, device=False)
    if status != 0:
      raise AdbError(f"{self.binary} version failed: {out.strip()}")
    match = re.search(r"Version ([\w.\-]+)", out)
    return match.group(1) if match else out.splitlines()[0]

  def devices(self):
    """`adb devices -l` as dicts: serial, state and the -l key:value fields."""
    status, out = self.run(["devices", "-l"], 60, device=False)
    if status != 0:
      last = (out.strip().splitlines() or [f"exit status {status}"])[-1]
      raise AdbError(f"{self.binary} devices failed: {last}")
    found = []
    for line in out.splitlines():
      if not line.strip() or line.startswith(("List of devices", "*")):
        continue
      fields = line.split()
      if len(fields) < 2:
        continue
      entry = {"serial": fields[0], "state": fields[1]}
      for field in fields[2:]:
        key, _, value = field.partition(":")
        if value:
          entry[key] = value
      found.append(entry)
    return found

  def state(self):
    """'device', 'offline', 'unauthorized'... or None if it is not listed."""
    for entry in self.devices():
      if entry["serial"] == self.serial:
        return entry["state"]
    return None

  def shell(self, command, timeout):
    """Runs a command line on the device; (exit status, stdout + stderr)."""
    return self.run(["shell", command], timeout)

  def push(self, local, remote, timeout):
    # Absolute, so a file named "-x.tflite" is never read as an option.
    status, out = self.run(["push", os.path.abspath(local), remote], timeout)
    if status != 0:
      lines = [l for l in out.strip().splitlines() if "error" in l.lower()]
      raise AdbError(f"adb push {os.path.basename(local)} failed: "
                     f"{(lines or out.strip().splitlines() or ['?'])[-1]}")


def choose_device(adb, serial=None):
  """The serial to use: --serial if attached and ready, else the only one.

  Raises NoDevice with a one-line reason a user can act on.
  """
  devices = adb.devices()
  ready = [d for d in devices if d["state"] == "device"]
  if serial:
    for d in devices:
      if d["serial"] == serial:
        if d["state"] != "device":
          raise NoDevice(f"device {serial} is {d['state']}"
                         + (" (accept the USB debugging prompt on the phone)"
                            if d["state"] == "unauthorized" else ""))
        return serial
    raise NoDevice(f"device {serial} not found (adb devices lists: "
                   f"{', '.join(d['serial'] for d in devices) or 'none'})")
  if not ready:
    others = ", ".join(f"{d['serial']} ({d['state']})" for d in devices)
    raise NoDevice("no device attached: adb devices lists "
                   + (others or "none")
                   + "; connect a phone or emulator, or use --target host")
  if len(ready) > 1:
    raise NoDevice(f"{len(ready)} devices attached "
                   f"({', '.join(d['serial'] for d in ready)}): pick one "
                   f"with --serial")
  return ready[0]["serial"]
