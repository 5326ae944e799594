"""How a probe rank reads its own peak unique memory from /proc (run.kinds.probe.own_peak_uss_mib), on
hand-made /proc files: the kernel's high-water mark, less the pages shared now, except the libraries a rank
loads (counted as its own: a rank alone on its node owns them). No torch, no process."""

from __future__ import annotations

from orchestrator.run.kinds.probe import _mappings, library_dirs, own_peak_uss_mib

SITE = "/venv/lib/python3.11/site-packages/"
STATUS = "Name:\tpython\nVmPeak:\t 9000000 kB\nVmHWM:\t  1048576 kB\nVmRSS:\t   921600 kB\n"


def mapping(path: str, rss_kib: int, private_clean: int, private_dirty: int) -> str:
    return (f"7f0000000000-7f0000100000 r-xp 00000000 08:01 1234 {path}\n"
            f"Size:  {rss_kib} kB\nRss:  {rss_kib} kB\nPss:  {rss_kib} kB\n"
            f"Shared_Clean:  {rss_kib - private_clean - private_dirty} kB\nPrivate_Clean:  {private_clean} kB\n"
            f"Private_Dirty:  {private_dirty} kB\nSwap:  0 kB\n")


SMAPS = (mapping("", 600 * 1024, 0, 600 * 1024)                                         # the heap: private
         + mapping(f"{SITE}torch/lib/libtorch_cpu.so", 200 * 1024, 50 * 1024, 0)         # torch: 150 MiB shared now
         + mapping(f"{SITE}nvidia/cu13/lib/libcublasLt.so.13", 60 * 1024, 0, 0)          # loaded by torch: shared
         + mapping("/usr/lib/x86_64-linux-gnu/libc.so.6", 40 * 1024, 0, 0)               # every process's
         + mapping("/usr/lib/python3.11/libpython3.11.so.1.0", 20 * 1024, 4 * 1024, 0))  # the interpreter's


def test_the_peak_counts_the_libraries_a_rank_loads_as_its_own_and_nothing_else_shared(tmp_path):
    (tmp_path / "status").write_text(STATUS)
    (tmp_path / "smaps").write_text(SMAPS)
    peak, libraries = own_peak_uss_mib(tmp_path, (SITE,))
    # VmHWM 1,024 MiB less what is shared and not the environment's libraries: libc 40 and libpython 16
    assert peak == 1024 - 40 - 16
    assert libraries == 200 + 60      # the libraries' resident pages, shared or not
    # without the libraries rule it would be the peak less everything shared now: lower by the 210 MiB of torch's
    # and cuBLAS's pages that another torch process happened to map
    assert own_peak_uss_mib(tmp_path, ("/nowhere/",))[0] == 1024 - 40 - 16 - 150 - 60


def test_without_proc_there_is_no_figure(tmp_path):
    assert own_peak_uss_mib(tmp_path / "missing") == (None, 0.0)


def test_mappings_are_read_with_their_resident_and_private_sizes():
    assert _mappings(SMAPS)[:2] == [("", 600 * 1024, 600 * 1024),
                                    (f"{SITE}torch/lib/libtorch_cpu.so", 200 * 1024, 50 * 1024)]


def test_the_library_folders_are_the_installed_packages_folders():
    dirs = library_dirs()
    assert dirs and all(d.endswith("/") for d in dirs)
    assert any(d.rstrip("/").endswith("site-packages") for d in dirs)
