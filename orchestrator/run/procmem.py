"""A process's memory as orch measures and plans it: its **private** memory, and the **shared** pages of the
files it maps (its libraries), counted once per node.

    private = resident set − file-backed pages   (RssAnon + RssShmem of /proc/PID/status)
    shared  = file-backed pages                  (RssFile: torch's libraries, the interpreter, libc, ...)

Why these and not the unique set size (USS): USS counts a page as the process's own only while no other
process maps it, so a rank's USS falls by the size of torch's libraries (a few hundred MiB) whenever another
torch process runs on the machine (a sweep's other ranks, a notebook, another sweep), and rises again when it
ends. Anonymous pages (the heap, tensors,
stacks, the libraries' relocated data) and shared-memory segments are made by the process itself: no other
process changes how many it holds. A file's pages are the only ones another process can share by mapping the
same file, and the ranks of one node do share them: a node holds them once, whatever its ranks count.
(Shared-memory segments are counted as private: they are made by the rank or its own workers, so a figure that
counts them is never short; oneCCL's transport between the ranks of a node is the case it overstates.)

The peak: the kernel keeps the high-water mark of the whole resident set (VmHWM), not of its private part, so
the private peak is VmHWM less the file-backed pages mapped now, kept as the largest seen at any read. A
process's file-backed pages grow as it loads its libraries and stay (they are not freed as a heap's pages are),
so that is exact at a peak reached after the imports; a file unmapped after the peak (or whose pages the kernel
reclaimed under memory pressure) is counted in the peak as private: too high, never too low.

Cheap: /proc/PID/status reads the kernel's counters; it walks no mapping (smaps does, under the process's mmap
lock, which cost a RetinaNet rank ~1.5% of its throughput read every second).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

KIB_PER_MIB = 1024
_KEYS = ("VmHWM", "VmRSS", "RssAnon", "RssFile", "RssShmem")


@dataclass(frozen=True, slots=True)
class ProcMemory:
    """One read of a process's memory counters, MiB.

    >>> m = ProcMemory(hwm_mib=1000.0, rss_mib=900.0, file_mib=330.0)
    >>> m.private_mib, m.peak_private_mib
    (570.0, 670.0)
    """

    hwm_mib: float       # the high-water mark of the resident set (VmHWM)
    rss_mib: float       # resident now (VmRSS)
    file_mib: float      # of which file-backed (RssFile): the libraries, shared by the node's processes

    @property
    def private_mib(self) -> float:
        """Resident now and not file-backed: anonymous and shared-memory pages (RssAnon + RssShmem)."""
        return max(0.0, self.rss_mib - self.file_mib)

    @property
    def peak_private_mib(self) -> float:
        """The private peak as far as this read tells: VmHWM less the file-backed pages mapped now."""
        return max(self.private_mib, self.hwm_mib - self.file_mib)


def parse_status(text: str) -> ProcMemory | None:
    """The counters of a /proc/PID/status text; None where it has none (a kernel thread, a zombie).

    >>> parse_status("VmHWM:\\t 2048 kB\\nVmRSS:\\t 1024 kB\\nRssAnon:\\t 512 kB\\nRssFile:\\t 512 kB\\n")
    ProcMemory(hwm_mib=2.0, rss_mib=1.0, file_mib=0.5)
    """
    kib: dict[str, int] = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in _KEYS:
            kib[name] = int(value.split()[0])
    if "VmRSS" not in kib or "RssFile" not in kib:
        return None
    return ProcMemory(hwm_mib=kib.get("VmHWM", kib["VmRSS"]) / KIB_PER_MIB, rss_mib=kib["VmRSS"] / KIB_PER_MIB,
                      file_mib=kib["RssFile"] / KIB_PER_MIB)


def read_memory(proc: Path | int = Path("/proc/self")) -> ProcMemory | None:
    """The counters of a process (`proc`: its /proc folder or its pid); None where it is gone or /proc cannot
    tell."""
    folder = Path(f"/proc/{proc}") if isinstance(proc, int) else proc
    try:
        return parse_status((folder / "status").read_text())
    except (OSError, ValueError, IndexError):
        return None
