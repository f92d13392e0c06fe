"""When a device counts as hot, and waiting for it to cool before a cell.

    policy = ThermalPolicy(limit_c=40, throttled_status=1, timeout_s=300,
                           poll_s=5)
    wait = wait_until_cool(target.thermal, policy)   # before a cell
    record = cell_record(wait, target.thermal(), policy)  # after it
    cell["thermal"], cell["throttled"] = record, is_throttled(record)

Why: a phone still warm from the previous cell, or one its OS already
throttles, runs the next cell slower, so latencies of different
configurations only compare when each starts from the same thermal state.
Android's thermal service status (0 none, 1 light, 2 moderate, 3 severe,
4 critical, 5 emergency, 6 shutdown) says when the OS throttles; the hottest
zone's temperature catches a device that is warm but not throttled yet. A
wait that times out does not skip the cell: it runs, and its record says it
started hot, so the report can mark it instead of losing it.
"""

import dataclasses
import time

STATUS_NAMES = ("none", "light", "moderate", "severe", "critical",
                "emergency", "shutdown")


@dataclasses.dataclass(frozen=True)
class ThermalPolicy:
  """limit_c None: no waiting, cells are judged by the status alone."""
  limit_c: float = None         # hottest zone must be below this (deg C)
  throttled_status: int = 1     # thermal service status counted as throttled
  timeout_s: float = 300.0      # give up waiting after this long
  poll_s: float = 5.0           # between thermal reads while waiting
  progress_s: float = 30.0      # between "still waiting" lines


def status_name(status):
  return STATUS_NAMES[status] if 0 <= status < len(STATUS_NAMES) else "?"


def hot_reasons(reading, policy):
  """Why a reading (device_info.parse_thermal's dict) counts as hot; [] when
  it is cool or says nothing."""
  reasons = []
  status = (reading or {}).get("status")
  if status is not None and status >= policy.throttled_status:
    reasons.append(f"thermal status {status} ({status_name(status)})")
  max_c = (reading or {}).get("max_c")
  if policy.limit_c is not None and max_c is not None and \
      max_c >= policy.limit_c:
    reasons.append(f"{max_c:g} C >= {policy.limit_c:g} C")
  return reasons


def _describe(reading):
  parts = []
  if (reading or {}).get("max_c") is not None:
    parts.append(f"hottest zone {reading['max_c']:g} C")
  if (reading or {}).get("status") is not None:
    parts.append(f"thermal status {reading['status']}")
  return ", ".join(parts) or "no thermal data"


def wait_until_cool(read, policy, log=print, clock=time.monotonic,
                    sleep=time.sleep):
  """Reads the thermal state until it is cool or policy.timeout_s is spent
  (only when policy.limit_c is set); returns what the wait saw."""
  begin = clock()
  first = reading = read()
  reads = 1
  reasons = hot_reasons(reading, policy)
  cooling = bool(reasons) and policy.limit_c is not None
  if cooling:
    log(f"device hot ({'; '.join(reasons)}): waiting up to "
        f"{policy.timeout_s:g} s for it to cool")
    next_progress = begin + policy.progress_s
    while reasons:
      left = policy.timeout_s - (clock() - begin)
      if left <= 0:
        break
      sleep(min(policy.poll_s, left))
      reading = read()
      reads += 1
      reasons = hot_reasons(reading, policy)
      if reasons and clock() >= next_progress:
        log(f"still hot after {clock() - begin:.0f} s: {_describe(reading)}")
        next_progress += policy.progress_s
  waited = reads > 1
  waited_s = round(clock() - begin, 3) if waited else 0.0
  if cooling:
    log(f"still hot after {waited_s:g} s ({'; '.join(reasons)}): measuring "
        f"anyway, the cell is marked throttled" if reasons else
        f"cooled in {waited_s:g} s: {_describe(reading)}")
  return {"before": reading, "before_wait": first if waited else None,
          "waited_s": waited_s, "reads": reads,
          "wait_timed_out": cooling and bool(reasons),
          "hot_before": reasons}


def cell_record(wait, after, policy):
  """A cell's "thermal" entry: the wait, and the state after the cell
  (after is None when the cell failed before it could be read)."""
  return dict(wait, after=after,
              hot_after=hot_reasons(after, policy) if after else [])


def is_throttled(record):
  """True when the cell started or ended hot; None without thermal data."""
  if not record:
    return None
  if "hot_before" not in record:  # a run from before the policy existed
    statuses = [(record.get(k) or {}).get("status") for k in ("before",
                                                              "after")]
    known = [s for s in statuses if s is not None]
    if not known:
      return None
    return any(s >= ThermalPolicy.throttled_status for s in known)
  return bool(record["hot_before"] or record.get("hot_after"))


def cell_throttled(cell):
  """The cell's recorded verdict, derived from its thermal status in runs
  that predate it; None when nothing says."""
  if "throttled" in cell:
    return cell["throttled"]
  return is_throttled(cell.get("thermal"))
