"""Timing whole processes in paired, interleaved rounds (shared by the ingest benchmarks).

Each measurement starts one process as a user would (``python -m forensics ingest ...``, a
baseline script, ``cat``) and reads the kernel's accounting of that child alone: wall seconds,
CPU seconds (user + system, all its threads and waited-for children) and peak RSS. The child is
started by a minimal Python proxy (``python -S``, about 10 MiB) that reads ``RUSAGE_CHILDREN``:
Linux counts the RSS a process had when it forked into its child's peak (``exec`` keeps the old
image's high-water mark), so a child forked straight from this script would report at least
this script's RSS; through the proxy the floor is the proxy's ~10 MiB.
A round runs every method once, in an order rotated each round so no method always goes first
(page cache, neighbours); the medians over rounds are reported. On a shared machine wall time
also measures the neighbours: CPU-time ratios are the robust figures.

Not a module of the package: imported by the scripts beside it.
"""
from __future__ import annotations

import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence


@dataclasses.dataclass(frozen=True)
class Sample:
    wall: float
    cpu: float
    rss_mib: float
    stdout: str


@dataclasses.dataclass
class Method:
    """A named command line; ``prepare`` runs before each measurement (not timed), e.g. to
    remove the previous output."""

    name: str
    argv: Sequence[str]
    env: dict[str, str] | None = None
    prepare: Callable[[], None] | None = None
    samples: list[Sample] = dataclasses.field(default_factory=list)

    def median(self, attr: str) -> float:
        return statistics.median(getattr(s, attr) for s in self.samples)


_PROXY = """
import resource, subprocess, sys, time
t = time.perf_counter()
p = subprocess.run(sys.argv[2:])
wall = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    f.write(f"{wall} {ru.ru_utime} {ru.ru_stime} {ru.ru_maxrss}")
sys.exit(p.returncode)
"""


@dataclasses.dataclass(frozen=True)
class HostTimes:
    """The whole machine's CPU seconds since boot, summed over its CPUs (``/proc/stat``'s
    ``cpu`` line): ``busy``, every state but idle, iowait and steal; ``steal``, time the
    hypervisor gave a CPU of this machine to someone else while it had work. The difference of
    two readings around a measured process says whether it was alone: others' ``busy`` (the
    difference less the process's own CPU) and ``steal`` should both be near 0 on a quiet
    machine. On a virtual machine (this one is Firecracker) steal moves a pipe-bound process
    such as ``zstd -dc | wc -l`` far more than a compute-bound one."""

    busy: float
    steal: float

    def __sub__(self, other: "HostTimes") -> "HostTimes":
        return HostTimes(busy=self.busy - other.busy, steal=self.steal - other.steal)


def parse_proc_stat(text: str, ticks_per_second: int) -> HostTimes:
    """:class:`HostTimes` of the text of ``/proc/stat`` (its first ``cpu`` line: user, nice,
    system, idle, iowait, irq, softirq, steal, ...; guest time is inside user already)."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            v = [int(x) for x in parts[1:9]] + [0] * max(0, 9 - len(parts))
            user, nice, system, _idle, _iowait, irq, softirq, steal = v[:8]
            return HostTimes(busy=(user + nice + system + irq + softirq) / ticks_per_second,
                             steal=steal / ticks_per_second)
    raise ValueError("no 'cpu' line in /proc/stat")


#: A measured process saw a quiet machine when the hypervisor took at most this many seconds
#: of its CPUs meanwhile (``HostTimes.steal``); steal comes in bursts of 1-6 s here.
QUIET_STEAL = 0.3


def quiet_ratios(ours: Sequence[tuple[float, float]], floor: Sequence[tuple[float, float]],
                 steal_limit: float = QUIET_STEAL) -> list[float]:
    """Our wall over the floor's, round by round, of the rounds in which neither process saw
    more than ``steal_limit`` seconds of steal: ``ours`` and ``floor`` are (wall, steal) per
    round, paired by position. The reading "on a quiet machine" of a paired benchmark."""
    if len(ours) != len(floor):
        raise ValueError(f"{len(ours)} rounds of ours against {len(floor)} of the floor")
    return [o[0] / f[0] for o, f in zip(ours, floor)
            if o[1] <= steal_limit and f[1] <= steal_limit and f[0] > 0]


def host_times() -> HostTimes | None:
    """This machine's :class:`HostTimes` now, or None where there is no ``/proc/stat``."""
    try:
        with open("/proc/stat") as f:
            return parse_proc_stat(f.read(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, AttributeError):
        return None


def warm_bytecode(env: dict[str, str], cache: str | os.PathLike) -> dict[str, str]:
    """``env`` with compiled bytecode kept, in ``cache`` (``PYTHONPYCACHEPREFIX``): what an
    installed package's second run has. An environment with ``PYTHONDONTWRITEBYTECODE`` set
    (this one is) would compile every module of the checkout on every run, ~0.1-0.2 s CPU a
    user never pays; no ``__pycache__`` is written into the checkout. A warm-up run fills it."""
    out = dict(env, PYTHONPYCACHEPREFIX=str(cache))
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def ready_scanners(env: dict[str, str] | None = None) -> None:
    """Load the compiled scanners once in a process of ``env``, compiling them there when the
    cache holds none: a cold cache would otherwise build them in the background during the
    first timed runs, which would read with the reference reader meanwhile."""
    subprocess.run([sys.executable, "-c", "from forensics.readers import json_scan, native_scan\n"
                    "assert native_scan.kernel() is not None and json_scan.kernel() is not None"],
                   env=env, check=True, capture_output=True)


def measure(argv: Sequence[str], env: dict[str, str] | None = None,
            cwd: str | None = None) -> Sample:
    """One run of ``argv``: its wall time, CPU time and peak RSS (raises on a non-zero exit)."""
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "rusage")
        p = subprocess.run([sys.executable, "-S", "-c", _PROXY, report, *argv],
                           capture_output=True, env=env, cwd=cwd)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}:\n"
                               f"{p.stderr.decode(errors='replace')[-3000:]}")
        with open(report) as f:
            wall, user, system, maxrss_kib = f.read().split()
    return Sample(wall=float(wall), cpu=float(user) + float(system), rss_mib=int(maxrss_kib) / 1024,
                  stdout=p.stdout.decode(errors="replace"))


def run_rounds(methods: list[Method], rounds: int, cwd: str | None = None,
               progress: Callable[[str], None] = print) -> None:
    """``rounds`` paired rounds over ``methods``, rotating the order each round."""
    for r in range(rounds):
        k = r % len(methods)
        for m in methods[k:] + methods[:k]:
            if m.prepare is not None:
                m.prepare()
            s = measure(m.argv, m.env, cwd)
            m.samples.append(s)
            progress(f"  round {r + 1}: {m.name:<22s} {s.wall:7.2f} s wall {s.cpu:7.2f} s cpu "
                     f"{s.rss_mib:7.0f} MiB")


def table(methods: list[Method], mb: float | None, ours: str = "ours") -> str:
    """Medians per method (MB/s of CPU time when ``mb`` is given), then each other method's CPU
    and wall ratio to ``ours`` (> 1: ours is cheaper)."""
    head = f"{'method':<22s} {'wall s':>8s} {'cpu s':>8s}"
    lines = [head + (f" {'MB/s cpu':>9s}" if mb is not None else "") + f" {'peak MiB':>9s}"]
    for m in methods:
        cpu = m.median("cpu")
        rate = "" if mb is None else f" {mb / cpu if cpu else float('inf'):9.1f}"
        lines.append(f"{m.name:<22s} {m.median('wall'):8.3f} {cpu:8.3f}{rate} "
                     f"{m.median('rss_mib'):9.0f}")
    base = next((m for m in methods if m.name == ours), None)
    if base is not None:
        lines.append(f"ratios to {ours} (medians of {len(base.samples)} paired rounds; "
                     "> 1 means ours is cheaper):")
        for m in methods:
            if m is not base:
                lines.append(f"  {m.name:<20s} cpu {m.median('cpu') / base.median('cpu'):6.2f}x"
                             f"   wall {m.median('wall') / base.median('wall'):6.2f}x")
    return "\n".join(lines)
