"""The CPU caches as Linux describes them (sysfs: /sys/devices/system/cpu/cpuN/cache/indexM/{level,type,size,
shared_cpu_list}), for the roof per cache level (core/profile/levels). Data and unified caches only: an
instruction cache holds no tensor. A machine that lists none (some containers and VMs) gives an empty tuple,
and the roofs fall back to DRAM's alone."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from orchestrator.core.profile.levels import KIB, MIB, CacheInstance
from orchestrator.io.detect import SYS_CPU, parse_cpulist

_UNITS = {"K": KIB, "M": MIB, "G": 1024 * MIB}


def parse_size(text: str) -> int | None:
    """sysfs's '32K', '1024K', '32768K', '2M' (or plain bytes) in bytes; None when unreadable.

    >>> parse_size("32K"), parse_size("2M"), parse_size("512"), parse_size("big")
    (32768, 2097152, 512, None)
    """
    text = text.strip()
    unit = _UNITS.get(text[-1:].upper(), 1)
    digits = text[:-1] if unit != 1 else text
    return int(digits) * unit if digits.isdigit() else None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cpu_caches(cpus: Iterable[int], sys_cpu: Path = SYS_CPU) -> tuple[CacheInstance, ...]:
    """The data and unified caches serving `cpus`, each instance once (CPUs that share one list it alike)."""
    found: dict[tuple[int, tuple[int, ...]], CacheInstance] = {}
    for cpu in cpus:
        for index in sorted((sys_cpu / f"cpu{cpu}" / "cache").glob("index*")):
            kind, level, size, shared = (_read(index / name) for name in ("type", "level", "size", "shared_cpu_list"))
            if kind not in ("Data", "Unified") or not level or not level.isdigit() or size is None:
                continue
            size_bytes = parse_size(size)
            sharing = parse_cpulist(shared) if shared else (cpu,)
            if size_bytes:
                found.setdefault((int(level), sharing), CacheInstance(int(level), size_bytes, sharing))
    return tuple(found.values())
