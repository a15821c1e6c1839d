"""The quiet gate of the PostgreSQL benches (`bench_write.py`, `bench_peers.py`): a timed run starts
only when the rest of the machine is quiet, measured from /proc/stat while the bench is idle.
"""

from __future__ import annotations

import os
import time


def _cpu_jiffies() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot, from /proc/stat."""
    with open("/proc/stat") as fh:
        fields = [int(x) for x in fh.readline().split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq + steal
    return busy, busy + idle + iowait


def other_cpu(seconds: float) -> float:
    """CPUs kept busy by everything else during `seconds` while this benchmark is idle (0 .. nproc)."""
    busy0, total0 = _cpu_jiffies()
    time.sleep(seconds)
    busy1, total1 = _cpu_jiffies()
    return (busy1 - busy0) / max(1, total1 - total0) * (os.cpu_count() or 1)


class QuietGate:
    """Start a timed run only when the rest of the machine is quiet: sample the CPU use of other
    processes for a moment while the benchmark is idle, and wait while it is above `limit` CPUs.
    Waits are bounded per run and in total, so a busy machine slows the benchmark, never stalls it."""

    def __init__(self, limit: float, sample: float, max_wait: float, budget: float) -> None:
        self.limit, self.sample, self.max_wait, self.budget = limit, sample, max_wait, budget
        self.waited = 0.0
        self.gave_up = 0
        self.samples: list[float] = []

    def wait(self) -> float:
        """Block until quiet (or out of patience); return the last sample (CPUs used by others)."""
        if self.limit <= 0:
            return float("nan")
        start = time.perf_counter()
        while True:
            used = other_cpu(self.sample)
            waited = time.perf_counter() - start
            if used <= self.limit:
                break
            if waited >= self.max_wait or self.waited + waited >= self.budget:
                self.gave_up += 1
                break
        self.waited += max(0.0, time.perf_counter() - start - self.sample)
        self.samples.append(used)
        return used
