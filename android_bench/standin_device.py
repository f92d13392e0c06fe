"""A stand-in Android device on loopback that speaks adb's device protocol.

    python -m android_bench.standin_device --sandbox /tmp/phone [--port 0]
    adb connect 127.0.0.1:PORT
    python -m android_bench run --target adb --serial 127.0.0.1:PORT ...

Why it exists: no phone or emulator image can be had on CI, yet the harness
must be tested against the unmodified `adb` client. The adb server connects
to this process exactly as it does to `adbd` over TCP (`adb connect`): the
CNXN handshake (no AUTH asked), then OPEN / OKAY / WRTE / CLSE streams with
adb's flow control (one WRTE in flight per stream), serving

  * `shell:CMD` (raw) and `shell,v2,...:CMD` (shell protocol v2: stdout,
    stderr and exit-code packets, so `adb shell` returns the command's status);
  * `sync:` (STAT, LIST, SEND/DATA/DONE, RECV, QUIT), which `adb push` uses.

Commands run under /bin/sh on the host inside a sandbox directory: the paths
`/data/local/tmp` and `/sys/` in command lines and file transfers are mapped
into it, and `getprop`, `taskset` and `dumpsys` are small shims on its PATH.
The sandbox's `sys/` tree describes a Pixel-4-like SoC (4 little cores, 3 big,
1 prime) and a few thermal zones. Every service the host opens is appended to
`<sandbox>/.standin/services.log` as one JSON line, so a test can check the
exact command line that reached the "device".
"""

import json
import os
import queue
import re
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

from absl import app, flags

A_SYNC = 0x434E5953
A_CNXN = 0x4E584E43
A_OPEN = 0x4E45504F
A_OKAY = 0x59414B4F
A_CLSE = 0x45534C43
A_WRTE = 0x45545257
A_AUTH = 0x48545541
A_VERSION = 0x01000001  # the version that lets both sides skip checksums
MAX_PAYLOAD = 256 * 1024
SYNC_DATA_MAX = 64 * 1024
_HEADER = struct.Struct("<6I")

# Shell protocol v2 packet ids (adb's shell_protocol.h).
SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR = 0, 1, 2
SHELL_EXIT, SHELL_CLOSE_STDIN = 3, 4

MAPPED_PREFIXES = ("/data/local/tmp", "/sys/")

DEFAULT_PROFILE = {
    "props": {
        "ro.product.manufacturer": "Google",
        "ro.product.model": "Pixel 4 (stand-in)",
        "ro.product.name": "standin",
        "ro.product.device": "standin",
        "ro.build.version.release": "13",
        "ro.build.version.sdk": "33",
        "ro.product.cpu.abi": "arm64-v8a",
        "ro.board.platform": "msmnile",
        "ro.serialno": "STANDIN0001",
    },
    # Snapdragon 855: cores 0-3 Cortex-A55, 4-6 A76 gold, 7 A76 prime.
    "cpu_max_freq_khz": [1785600] * 4 + [2419200] * 3 + [2841600],
    "thermal_zones": {"cpu-0-0-usr": 36500, "cpu-1-0-usr": 38200,
                      "battery": 29000, "skin-therm": 31000},
    "thermal_status": 0,
}

_SHIMS = {
    # toybox's getprop: no argument dumps "[key]: [value]" lines.
    "getprop": """#!/bin/sh
props="$(dirname "$0")/../.standin/props"
if [ $# -eq 0 ]; then
  sed 's/^\\([^=]*\\)=\\(.*\\)$/[\\1]: [\\2]/' "$props"
else
  grep -m1 "^$1=" "$props" | cut -d= -f2-
fi
""",
    # toybox's taskset MASK CMD...: the stand-in has no big cores to pin to,
    # so it checks the mask is hex and runs the command.
    "taskset": """#!/bin/sh
case "$1" in
  ''|*[!0-9a-fA-Fx]*) echo "taskset: bad mask '$1'" >&2; exit 1;;
esac
shift
exec "$@"
""",
    "dumpsys": """#!/bin/sh
if [ "$1" = thermalservice ]; then
  echo "IsStatusOverride: false"
  echo "Thermal Status: $(cat "$(dirname "$0")/../.standin/thermal_status")"
else
  echo "Can't find service: $1" >&2; exit 1
fi
""",
}


def prepare_sandbox(root, profile=None):
  """Creates the sandbox tree (idempotent) and returns its absolute path."""
  profile = dict(DEFAULT_PROFILE, **(profile or {}))
  root = os.path.abspath(root)
  for sub in ("data/local/tmp", "bin", ".standin"):
    os.makedirs(os.path.join(root, sub), exist_ok=True)
  with open(os.path.join(root, ".standin", "props"), "w") as f:
    for key, value in profile["props"].items():
      f.write(f"{key}={value}\n")
  with open(os.path.join(root, ".standin", "thermal_status"), "w") as f:
    f.write(f"{profile['thermal_status']}\n")
  freqs = profile["cpu_max_freq_khz"]
  cpu_root = os.path.join(root, "sys", "devices", "system", "cpu")
  for i, khz in enumerate(freqs):
    os.makedirs(os.path.join(cpu_root, f"cpu{i}", "cpufreq"), exist_ok=True)
    with open(os.path.join(cpu_root, f"cpu{i}", "cpufreq",
                           "cpuinfo_max_freq"), "w") as f:
      f.write(f"{khz}\n")
  for name in ("possible", "present", "online"):
    with open(os.path.join(cpu_root, name), "w") as f:
      f.write(f"0-{len(freqs) - 1}\n")
  for i, (kind, millideg) in enumerate(profile["thermal_zones"].items()):
    zone = os.path.join(root, "sys", "class", "thermal", f"thermal_zone{i}")
    os.makedirs(zone, exist_ok=True)
    with open(os.path.join(zone, "type"), "w") as f:
      f.write(kind + "\n")
    with open(os.path.join(zone, "temp"), "w") as f:
      f.write(f"{millideg}\n")
  for name, text in _SHIMS.items():
    path = os.path.join(root, "bin", name)
    with open(path, "w") as f:
      f.write(text)
    os.chmod(path, 0o755)
  return root


def map_paths(text, sandbox):
  """Rewrites device paths in a command line or file name into the sandbox."""
  for prefix in MAPPED_PREFIXES:
    text = re.sub(r"(?<![\w.\-])" + re.escape(prefix),
                  lambda m: sandbox + m.group(0), text)
  return text


class _Stream:
  """One adb stream (a service the host opened) on the device side."""

  def __init__(self, conn, local_id, remote_id):
    self.conn, self.local_id, self.remote_id = conn, local_id, remote_id
    self._acked = threading.Event()
    self._acked.set()
    self._write_lock = threading.Lock()
    self._inbox = queue.Queue()
    self._buffer = b""
    self.closed = threading.Event()

  # Host -> device.
  def deliver(self, data):
    self._inbox.put(data)

  def _next_chunk(self):
    while True:
      try:
        data = self._inbox.get(timeout=0.2)
      except queue.Empty:
        if self.closed.is_set():
          return b""
        continue
      return data or b""

  def read_some(self):
    """Next bytes the host wrote, or b'' once the stream is closed."""
    if self._buffer:
      data, self._buffer = self._buffer, b""
      return data
    return self._next_chunk()

  def read_exact(self, n):
    while len(self._buffer) < n:
      chunk = self._next_chunk()
      if not chunk:
        raise EOFError
      self._buffer += chunk
    data, self._buffer = self._buffer[:n], self._buffer[n:]
    return data

  # Device -> host, one WRTE in flight (adb's flow control before delayed
  # acks): the next waits for the host's OKAY.
  def write(self, data):
    with self._write_lock:
      view = memoryview(data)
      while view:
        size = self.conn.max_payload
        chunk, view = bytes(view[:size]), view[size:]
        while not self._acked.wait(0.2):
          if self.closed.is_set():
            raise EOFError
        if self.closed.is_set():
          raise EOFError
        self._acked.clear()
        self.conn.send(A_WRTE, self.local_id, self.remote_id, chunk)

  def acked(self):
    self._acked.set()

  def close(self):
    """Closes from the device side (the host is told with CLSE)."""
    if not self.closed.is_set():
      self.closed.set()
      self._inbox.put(None)
      self.conn.send(A_CLSE, self.local_id, self.remote_id)
      self.conn.forget(self.local_id)

  def remote_closed(self):
    self.closed.set()
    self._inbox.put(None)


class _Connection:
  """The device end of one transport (one adb server connected to us)."""

  def __init__(self, sock, device):
    self.sock, self.device = sock, device
    self.max_payload = 4096
    self._send_lock = threading.Lock()
    self._streams = {}
    self._next_id = 1
    self._lock = threading.Lock()
    self.alive = True

  def send(self, command, arg0, arg1, data=b""):
    header = _HEADER.pack(command, arg0, arg1, len(data),
                          sum(data) & 0xFFFFFFFF, command ^ 0xFFFFFFFF)
    with self._send_lock:
      try:
        self.sock.sendall(header + data)
      except OSError:
        self.alive = False

  def _recv_exact(self, n):
    data = b""
    while len(data) < n:
      chunk = self.sock.recv(n - len(data))
      if not chunk:
        raise EOFError
      data += chunk
    return data

  def forget(self, local_id):
    with self._lock:
      self._streams.pop(local_id, None)

  def serve(self):
    try:
      while True:
        command, arg0, arg1, length, _, magic = _HEADER.unpack(
            self._recv_exact(_HEADER.size))
        if magic != command ^ 0xFFFFFFFF:
          raise EOFError("bad packet magic")
        data = self._recv_exact(length) if length else b""
        self._handle(command, arg0, arg1, data)
    except (EOFError, OSError):
      pass
    finally:
      self.alive = False
      with self._lock:
        streams = list(self._streams.values())
        self._streams.clear()
      for stream in streams:
        stream.remote_closed()
      try:
        self.sock.close()
      except OSError:
        pass

  def _handle(self, command, arg0, arg1, data):
    if command == A_CNXN:
      self.max_payload = max(4096, min(arg1, MAX_PAYLOAD))
      self.send(A_CNXN, A_VERSION, MAX_PAYLOAD, self.device.banner())
    elif command == A_OPEN:
      service = data.rstrip(b"\0").decode("utf-8", "replace")
      with self._lock:
        local_id = self._next_id
        self._next_id += 1
        stream = _Stream(self, local_id, arg0)
        self._streams[local_id] = stream
      handler = self.device.handler_for(service)
      self.device.log_service(service, accepted=handler is not None)
      if handler is None:
        self.forget(local_id)
        self.send(A_CLSE, 0, arg0)
        return
      self.send(A_OKAY, local_id, arg0)
      threading.Thread(target=self._run_handler, args=(handler, stream),
                       daemon=True).start()
    else:
      with self._lock:
        stream = self._streams.get(arg1)
      if stream is None:
        return
      if command == A_WRTE:
        stream.deliver(data)
        self.send(A_OKAY, stream.local_id, stream.remote_id)
      elif command == A_OKAY:
        stream.acked()
      elif command == A_CLSE:
        stream.remote_closed()
        self.forget(stream.local_id)

  def _run_handler(self, handler, stream):
    try:
      handler(stream)
    except (EOFError, OSError):
      pass
    finally:
      stream.close()


class StandinDevice:
  """Serves adb's device protocol on a TCP port; see the module docstring."""

  def __init__(self, sandbox, port=0, profile=None):
    self.profile = dict(DEFAULT_PROFILE, **(profile or {}))
    self.sandbox = prepare_sandbox(sandbox, self.profile)
    self.tmp = os.path.join(self.sandbox, "data", "local", "tmp")
    self._log_lock = threading.Lock()
    self._server = socket.create_server(("127.0.0.1", port))
    self.port = self._server.getsockname()[1]

  def banner(self):
    props = self.profile["props"]
    return ("device::ro.product.name={};ro.product.model={};"
            "ro.product.device={};features=shell_v2,cmd".format(
                props["ro.product.name"], props["ro.product.model"],
                props["ro.product.device"])).encode()

  def log_service(self, service, accepted):
    record = {"time": time.time(), "service": service, "accepted": accepted}
    with self._log_lock:
      with open(os.path.join(self.sandbox, ".standin", "services.log"),
                "a") as f:
        f.write(json.dumps(record) + "\n")

  def handler_for(self, service):
    if service == "sync:":
      return self._sync
    match = re.match(r"shell(,[^:]*)?:(.*)\Z", service, re.S)
    if match:
      args = (match.group(1) or "").split(",")
      return lambda stream: self._shell(stream, match.group(2), "v2" in args)
    return None

  def serve_forever(self):
    while True:
      sock, _ = self._server.accept()
      sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
      threading.Thread(target=_Connection(sock, self).serve,
                       daemon=True).start()

  # shell: -------------------------------------------------------------------
  def _env(self):
    env = {k: v for k, v in os.environ.items() if not k.startswith("ADB")}
    env["PATH"] = os.path.join(self.sandbox, "bin") + ":/usr/bin:/bin"
    env["ANDROID_DATA"] = "/data"
    return env

  def _shell(self, stream, command, protocol_v2):
    if not command.strip():
      raise EOFError  # interactive shells are not offered
    child = subprocess.Popen(
        ["/bin/sh", "-c", map_paths(command, self.sandbox)], cwd=self.tmp,
        env=self._env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if protocol_v2 else subprocess.STDOUT)

    def pump(pipe, packet_id):
      try:
        for chunk in iter(lambda: os.read(pipe.fileno(), 65536), b""):
          if protocol_v2:
            chunk = struct.pack("<BI", packet_id, len(chunk)) + chunk
          stream.write(chunk)
      except (EOFError, OSError):
        pass

    def feed_stdin():
      # v2 frames the host's stdin; raw shells get it as is.
      buffer = b""
      try:
        while True:
          data = stream.read_some()
          if not data:
            break
          if not protocol_v2:
            child.stdin.write(data)
            child.stdin.flush()
            continue
          buffer += data
          while len(buffer) >= 5:
            packet_id, length = struct.unpack("<BI", buffer[:5])
            if len(buffer) < 5 + length:
              break
            payload, buffer = buffer[5:5 + length], buffer[5 + length:]
            if packet_id == SHELL_STDIN:
              child.stdin.write(payload)
              child.stdin.flush()
            elif packet_id == SHELL_CLOSE_STDIN:
              child.stdin.close()
      except (OSError, ValueError):
        pass
      if stream.closed.is_set() and child.poll() is None:
        child.kill()  # the host hung up: adbd kills the command too

    pumps = [threading.Thread(target=pump, args=(child.stdout, SHELL_STDOUT))]
    if protocol_v2:
      pumps.append(threading.Thread(target=pump,
                                    args=(child.stderr, SHELL_STDERR)))
    for t in pumps:
      t.start()
    threading.Thread(target=feed_stdin, daemon=True).start()
    for t in pumps:
      t.join()
    status = child.wait()
    if protocol_v2:
      code = status if status >= 0 else 128 - status
      stream.write(struct.pack("<BIB", SHELL_EXIT, 1, code & 0xFF))

  # sync: --------------------------------------------------------------------
  def _device_path(self, path):
    if not path.startswith(MAPPED_PREFIXES) and path.rstrip("/") not in (
        p.rstrip("/") for p in MAPPED_PREFIXES):
      return None
    return map_paths(path, self.sandbox)

  def _sync(self, stream):
    def reply(tag, payload=b"", arg=None):
      stream.write(tag + struct.pack("<I", len(payload) if arg is None
                                     else arg) + payload)

    def fail(message):
      reply(b"FAIL", message.encode())

    while True:
      request, length = struct.unpack("<4sI", stream.read_exact(8))
      if request == b"QUIT":
        return
      path_text = stream.read_exact(length).decode("utf-8", "replace")
      if request == b"STAT":
        local = self._device_path(path_text)
        try:
          st = os.stat(local) if local else None
        except OSError:
          st = None
        values = (st.st_mode, st.st_size, int(st.st_mtime)) if st else (0, 0, 0)
        stream.write(b"STAT" + struct.pack("<3I", *values))
      elif request == b"LIST":
        local = self._device_path(path_text)
        names = sorted(os.listdir(local)) if local and os.path.isdir(
            local) else []
        for name in names:
          st = os.lstat(os.path.join(local, name))
          encoded = name.encode()
          stream.write(b"DENT" + struct.pack("<4I", st.st_mode, st.st_size,
                                             int(st.st_mtime), len(encoded))
                       + encoded)
        stream.write(b"DONE" + struct.pack("<4I", 0, 0, 0, 0))
      elif request == b"SEND":
        self._receive_file(stream, path_text, fail, reply)
      elif request == b"RECV":
        local = self._device_path(path_text)
        if not local or not os.path.isfile(local):
          fail(f"remote object '{path_text}' does not exist")
          continue
        with open(local, "rb") as f:
          for chunk in iter(lambda: f.read(SYNC_DATA_MAX), b""):
            reply(b"DATA", chunk)
        reply(b"DONE", arg=0)
      else:
        fail(f"unknown sync request {request!r}")
        return

  def _receive_file(self, stream, spec, fail, reply):
    path, _, mode_text = spec.rpartition(",")
    local = self._device_path(path)
    data = []
    while True:  # the data always follows, even when the path is refused
      tag, arg = struct.unpack("<4sI", stream.read_exact(8))
      if tag == b"DATA":
        data.append(stream.read_exact(arg))
      elif tag == b"DONE":
        mtime = arg
        break
      else:
        fail(f"unexpected {tag!r} in SEND")
        return
    if local is None:
      fail(f"couldn't create file: Permission denied ({path})")
      return
    try:
      os.makedirs(os.path.dirname(local), exist_ok=True)
      temp = local + ".standin-partial"
      with open(temp, "wb") as f:
        f.write(b"".join(data))
      os.chmod(temp, int(mode_text or "644") & 0o7777)
      os.utime(temp, (mtime, mtime))
      os.replace(temp, local)
    except (OSError, ValueError) as e:
      fail(f"couldn't create file: {e}")
      return
    reply(b"OKAY", arg=0)


flags.DEFINE_string("sandbox", None, "Directory standing for the device's "
                    "file system (created if missing).")
flags.DEFINE_integer("port", 0, "TCP port on 127.0.0.1 (0: a free one).")
flags.DEFINE_string("port_file", None, "Write the chosen port here.")
flags.DEFINE_string("profile", None, "JSON file overriding DEFAULT_PROFILE "
                    "keys (props, cpu_max_freq_khz, thermal_zones).")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
  if not flags.FLAGS.sandbox:
    sys.exit("error: --sandbox is required")
  profile = None
  if flags.FLAGS.profile:
    try:
      with open(flags.FLAGS.profile) as f:
        profile = json.load(f)
    except (OSError, ValueError) as e:
      sys.exit(f"error: --profile {flags.FLAGS.profile}: {e}")
  device = StandinDevice(flags.FLAGS.sandbox, flags.FLAGS.port, profile)
  if flags.FLAGS.port_file:
    temp = flags.FLAGS.port_file + ".tmp"
    with open(temp, "w") as f:
      f.write(f"{device.port}\n")
    os.replace(temp, flags.FLAGS.port_file)
  print(f"stand-in device on 127.0.0.1:{device.port}, sandbox "
        f"{shlex.quote(device.sandbox)}", flush=True)
  signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
  device.serve_forever()


def run():
  app.run(main)


if __name__ == "__main__":
  run()
