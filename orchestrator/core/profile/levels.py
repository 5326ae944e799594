"""A roof per memory level: which cache level a primitive's working set fits in, on a rank's cores, and the
working sets that measure each level's bandwidth. Pure: the caches come in as `CacheInstance`s (io/caches reads
them from sysfs), the bandwidths as measured by run/profile_replay.

One bandwidth roof (DRAM's STREAM triad) is not a roof for data that stays in cache: a 3×3 convolution on a 1×1
input re-reads 2.4 MB of weights and ran at 60 GFLOP/s against a 34.8 GFLOP/s DRAM roof. So:

- a level's capacity for a rank is every cache instance of that level (and of the levels below it: AMD's L3 is a
  victim of L2, so the two hold different lines) that serves one of the rank's CPUs, in full: the most the rank's
  data could find there, so a working set is never put below the level it could sit in;
- a primitive's working set (the bytes of its tensors, roofline.Cost.bytes) sits in the first level that holds
  it; in L1 it is bounded by the compute roof alone (no bandwidth is measured there: a torch call's own
  overhead is longer than an L1-sized triad);
- a level's bandwidth is measured with a working set that fits in the rank's share of it (instances shared with
  CPUs outside the rank count in proportion to the rank's CPUs: other ranks measure at the same time), half of
  it so the triad stays inside.

>>> caches = (CacheInstance(1, 32 * KIB, (0,)), CacheInstance(1, 32 * KIB, (1,)), CacheInstance(2, 1024 * KIB, (0,)),
...           CacheInstance(2, 1024 * KIB, (1,)), CacheInstance(3, 32768 * KIB, (0, 1)))
>>> [(c.level, c.fits_bytes // KIB) for c in capacities(caches, cpus=(0,))]
[('L1', 32), ('L2', 1056), ('L3', 33824)]
>>> roofs = [LevelRoof("L2", 1_081_344, 110.0), LevelRoof("L3", 34_635_776, 75.0), LevelRoof("DRAM", 0, 33.0)]
>>> level_of(2_400_000, roofs)      # 2.4 MB of weights: in L3, not in DRAM
LevelRoof(level='L3', fits_bytes=34635776, gbs=75.0)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

KIB = 1024
MIB = 1024 * KIB
DRAM = "DRAM"
DRAM_MIN_BYTES = 96 * MIB          # the DRAM triad's working set at least (3 arrays of 32 MiB) ...
DRAM_OVER_CACHES = 4               # ... and at least this many times every cache of the rank's CPUs together


@dataclass(frozen=True, slots=True)
class CacheInstance:
    """One data or unified cache: its level, size and the CPUs it serves (sysfs cpu*/cache/index*)."""

    level: int
    size_bytes: int
    cpus: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Capacity:
    """A level's capacity for a rank: `fits_bytes` (cumulative, in full) places working sets; `share_bytes`
    (this level's instances, in proportion to the rank's CPUs) sizes the triad that measures it."""

    level: str
    fits_bytes: int
    share_bytes: int
    instances: int


@dataclass(frozen=True, slots=True)
class LevelRoof:
    """A level's bandwidth roof: a working set up to `fits_bytes` sits here (DRAM: 0, no limit); `gbs` None for
    a level whose bandwidth is not measured (L1: only the compute roof bounds it)."""

    level: str
    fits_bytes: int
    gbs: float | None


def _instances(caches: Iterable[CacheInstance], level: int, cpus: set[int]) -> list[CacheInstance]:
    """The distinct instances of `level` that serve one of `cpus` (every CPU lists the ones it shares)."""
    seen: dict[tuple[int, ...], CacheInstance] = {}
    for c in caches:
        if c.level == level and cpus & set(c.cpus):
            seen.setdefault(tuple(sorted(c.cpus)), c)
    return list(seen.values())


def capacities(caches: Iterable[CacheInstance], cpus: Sequence[int]) -> list[Capacity]:
    """Per level present, L1 up: the rank's capacity (cumulative, in full) and its share of the level."""
    caches, wanted = list(caches), set(cpus)
    out: list[Capacity] = []
    below = 0
    for level in sorted({c.level for c in caches}):
        found = _instances(caches, level, wanted)
        if not found:
            continue
        full = sum(c.size_bytes for c in found)
        share = sum(c.size_bytes * len(wanted & set(c.cpus)) // len(c.cpus) for c in found)
        below += full
        out.append(Capacity(f"L{level}", below, share, len(found)))
    return out


def dram_triad_bytes(caps: Sequence[Capacity]) -> int:
    """The DRAM triad's working set: DRAM_MIN_BYTES, or DRAM_OVER_CACHES × every cache of the rank's CPUs.

    >>> dram_triad_bytes([Capacity("L3", 64 * MIB, 32 * MIB, 2)]) // MIB
    256
    """
    return max(DRAM_MIN_BYTES, DRAM_OVER_CACHES * max((c.fits_bytes for c in caps), default=0))


def level_of(bytes_: float, roofs: Sequence[LevelRoof]) -> LevelRoof | None:
    """The first roof (smallest level first) whose level holds `bytes_`; DRAM (fits_bytes 0) holds anything.
    None without roofs."""
    for roof in roofs:
        if roof.level == DRAM or bytes_ <= roof.fits_bytes:
            return roof
    return None
