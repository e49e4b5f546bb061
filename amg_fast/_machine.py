"""What this machine has for a job about to start: memory available now, free disk space; and how
long this process has run (a budget counts from the command's start, imports included).

psutil is not a dependency: memory is read from the cgroup limit of this process's container
(cgroup v2 `memory.max - memory.current`, or v1 `memory.limit_in_bytes - memory.usage_in_bytes`)
and from the kernel's estimate of memory available without swapping (`MemAvailable` in
/proc/meminfo), the smaller of the two; elsewhere from os.sysconf's free pages. None where none of
these can be read (the caller then skips its check).
"""
from __future__ import annotations

import math
import os
import shutil
import time
from pathlib import Path

__all__ = ["available_memory", "free_disk", "format_bytes", "process_age"]

_CGROUP_FILES = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                 ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"))


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):  # missing, unreadable, or "max" (no limit)
        return None


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


def available_memory() -> tuple[int, str] | None:
    """(bytes this process can still allocate without swapping, where that figure comes from), or None."""
    found = []
    meminfo = _meminfo_available()
    if meminfo is not None:
        found.append((meminfo, "MemAvailable in /proc/meminfo"))
    for limit_file, usage_file in _CGROUP_FILES:
        limit, usage = _read_int(limit_file), _read_int(usage_file)
        if limit is not None and usage is not None and limit < 2**60:  # v1 writes a huge number for "no limit"
            found.append((max(0, limit - usage), f"the cgroup limit {limit_file} less its usage"))
            break
    if not found:
        try:
            found.append((os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"), "free pages (os.sysconf)"))
        except (ValueError, OSError, AttributeError):
            return None
    return min(found)


def free_disk(path) -> int:
    """Free bytes on the file system that holds `path` (or its nearest existing ancestor)."""
    path = Path(path).absolute()
    existing = next(p for p in (path, *path.parents) if p.exists())
    return shutil.disk_usage(existing).free


def format_bytes(n: float) -> str:
    """1.5e9 -> '1.4 GiB' (binary units up to PiB, 3 significant digits)."""
    if abs(n) < 1024:
        return f"{int(n)} B"
    units = ("KiB", "MiB", "GiB", "TiB", "PiB")
    power = min(len(units), int(math.log(abs(n), 1024)))
    value = n / 1024**power
    return f"{value:.3g} {units[power - 1]}" if abs(value) < 999.5 else f"{value:.0f} {units[power - 1]}"


def process_age() -> float:
    """Seconds since this process started (its start time in /proc/self/stat against the time since
    boot); 0.0 where that cannot be read (not Linux)."""
    try:
        fields = Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, starttime, in ticks since boot
        return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)
    except (OSError, ValueError, IndexError, AttributeError):
        return 0.0
