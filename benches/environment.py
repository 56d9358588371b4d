"""Where a run happens and what it records about it: a work directory on a real
disk, memory prefaulted, and the machine, its other load and the versions measured."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fs_type(path: Path) -> str:
    best, fstype = "", "?"
    real = os.path.realpath(path)
    with open("/proc/mounts") as f:
        for line in f:
            parts = line.split()
            mnt = parts[1]
            if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
                best, fstype = mnt, parts[2]
    return fstype


def bench_root(requested: str | None) -> Path:
    base = Path(requested) if requested else Path(tempfile.gettempdir())
    if fs_type(base) in ("tmpfs", "ramfs") and not requested:
        base = Path("/var/tmp")
    if fs_type(base) in ("tmpfs", "ramfs"):
        raise SystemExit(f"{base} is in memory ({fs_type(base)}); pass --dir on a real disk")
    return Path(tempfile.mkdtemp(prefix="seglog-bench-", dir=base))


def version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def crc_impl() -> str:
    from kafka.record import util

    return "C crc32c module" if getattr(util, "crc32c_c", None) is not None else "pure Python"


def prefault(gib: float) -> float:
    """Touch ``gib`` GiB of fresh memory and free it; returns the seconds it took.

    On a virtual machine, the first write to a guest page the host has not backed
    yet costs far more than a normal page fault (about 3 ms per MB on a 2-core VM,
    against microseconds): page-cache writes landing on such pages run 5-10x slower
    than on pages used before, which makes write figures swing from run to run. The
    freed pages go back to the kernel's free lists and serve the page cache next.
    """
    if gib <= 0:
        return 0.0
    t0 = time.perf_counter()
    buf = bytearray(int(gib * (1 << 30)))
    view = memoryview(buf)
    for i in range(0, len(buf), 4096):
        view[i] = 1
    del view, buf
    return time.perf_counter() - t0


def cpu_busy(seconds: float = 1.0) -> float:
    """The fraction of all CPUs' time spent busy over ``seconds`` (from /proc/stat)."""

    def sample() -> tuple[int, int]:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields[:8]), idle

    try:
        t0, i0 = sample()
        time.sleep(seconds)
        t1, i1 = sample()
    except OSError:
        return 0.0
    return 1 - (i1 - i0) / max(t1 - t0, 1)


def cpu_ticks() -> tuple[float, float]:
    """(all CPUs' busy seconds so far, the CPU seconds of this process and of its
    children that have exited: brokers, kcat and the other peers are the run's own work)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    busy = sum(fields[:8]) - fields[3] - fields[4]
    t = os.times()
    return busy / os.sysconf("SC_CLK_TCK"), t.user + t.system + t.children_user + t.children_system


def other_cpu(start: tuple[float, float], elapsed: float) -> float:
    """The share of all CPUs' time used outside this process since ``start``
    (kernel threads doing this run's I/O count as outside: a small share is normal)."""
    end = cpu_ticks()
    other = (end[0] - start[0]) - (end[1] - start[1])
    return max(0.0, other / max(elapsed * (os.cpu_count() or 1), 1e-9))


def kcat_version() -> str | None:
    """``kcat 1.7.1 (librdkafka 2.0.2)`` from ``kcat -V``, or None without kcat on PATH."""
    import re
    import shutil
    import subprocess

    path = shutil.which("kcat")
    if path is None:
        return None
    try:
        out = subprocess.run([path, "-V"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return "kcat ?"
    kcat = re.search(r"^Version (\S+)", out, re.MULTILINE)
    rdk = re.search(r"librdkafka (\S+)", out)
    return f"kcat {kcat.group(1) if kcat else '?'} (librdkafka {rdk.group(1) if rdk else '?'})"


def git_rev() -> str:
    import subprocess

    try:
        rev = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return rev + (" + uncommitted changes" if dirty else "")


def mem_gib() -> float:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
