"""The CPU caches from a sysfs tree written here as Linux lays it out (a 2-core Zen 4 VM: a private L1d, L1i and
L2 per core, one L3 for both), and from this machine's own: each data or unified instance once, with the CPUs
it serves."""

from pathlib import Path

from orchestrator.core.profile.levels import KIB, MIB, CacheInstance, capacities
from orchestrator.io.caches import cpu_caches

ZEN4_VM = {0: [(1, "Data", "32K", "0"), (1, "Instruction", "32K", "0"), (2, "Unified", "1024K", "0"),
               (3, "Unified", "32768K", "0-1")],
           1: [(1, "Data", "32K", "1"), (1, "Instruction", "32K", "1"), (2, "Unified", "1024K", "1"),
               (3, "Unified", "32768K", "0-1")]}


def _sysfs(root: Path, cpus: dict) -> Path:
    for cpu, indexes in cpus.items():
        for i, (level, kind, size, shared) in enumerate(indexes):
            folder = root / f"cpu{cpu}" / "cache" / f"index{i}"
            folder.mkdir(parents=True)
            for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
                (folder / name).write_text(f"{value}\n")
    return root


def test_each_instance_once_without_instruction_caches(tmp_path):
    sys_cpu = _sysfs(tmp_path, ZEN4_VM)
    assert cpu_caches([0, 1], sys_cpu) == (
        CacheInstance(1, 32 * KIB, (0,)), CacheInstance(2, MIB, (0,)), CacheInstance(3, 32 * MIB, (0, 1)),
        CacheInstance(1, 32 * KIB, (1,)), CacheInstance(2, MIB, (1,)))
    one = capacities(cpu_caches([1], sys_cpu), [1])
    assert [(c.level, c.fits_bytes, c.share_bytes) for c in one] == [
        ("L1", 32 * KIB, 32 * KIB), ("L2", 32 * KIB + MIB, MIB), ("L3", 32 * KIB + 33 * MIB, 16 * MIB)]


def test_a_machine_that_lists_no_caches_gives_none(tmp_path):
    (tmp_path / "cpu0").mkdir()
    assert cpu_caches([0], tmp_path) == ()
    bad = _sysfs(tmp_path / "bad", {0: [(2, "Unified", "lots", "0"), ("x", "Data", "32K", "0")]})
    assert cpu_caches([0], bad) == ()


def test_this_machine_s_caches_are_read_where_sysfs_lists_them():
    found = cpu_caches([0])
    if Path("/sys/devices/system/cpu/cpu0/cache/index0").is_dir():
        assert found and all(c.size_bytes > 0 and 0 in c.cpus for c in found)
