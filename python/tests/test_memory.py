"""Syscalls and memory accesses through the Python API, checked on the observables."""

import errno

import mmsim
import pytest

GIB_KB = 1 << 20


def test_zero_page_read_maps_nothing_then_write_populates():
    m = mmsim.Machine(memory="2GiB")
    p = m.process("reader")
    buf = p.mmap("1GiB")

    p.touch(buf, "1GiB", "read")
    vma = m.smaps(p).set_index("start").loc[buf]
    assert vma["Size"] == GIB_KB
    assert vma["Rss"] == 0, "reads of untouched anonymous memory map the shared zero page"
    assert m.pagemap(p, buf, 4).zero_page.all()
    assert m.vmstat()["nr_anon_pages"] == 0

    p.touch(buf, "1GiB", "write")
    vma = m.smaps(p).set_index("start").loc[buf]
    assert vma["Rss"] == GIB_KB
    assert vma["Anonymous"] == GIB_KB
    assert vma["Private_Dirty"] == GIB_KB
    assert m.vmstat()["nr_anon_pages"] == GIB_KB // 4
    assert not m.pagemap(p, buf, 4).zero_page.any()
    m.check()


def test_fork_copies_on_write_and_reuses_the_last_copy(machine):
    p = machine.process("parent")
    buf = p.mmap("64KiB")
    p.write_bytes(buf, b"parent data")
    p.touch(buf, "64KiB", "write")
    child = p.fork()
    assert child.pid != p.pid
    shared = machine.smaps(p).iloc[0]
    assert (shared.Rss, shared.Shared_Dirty, shared.Pss) == (64, 64, 32)

    before = machine.vmstat()
    child.write_bytes(buf, b"child data!")
    assert machine.vmstat()["nr_anon_pages"] - before["nr_anon_pages"] == 1, "one page copied"
    assert child.read_bytes(buf, 11) == b"child data!"
    assert p.read_bytes(buf, 11) == b"parent data"

    # The parent's page is now mapped once: anon_exclusive reuses it instead of copying.
    reused = machine.vmstat()["pgreuse"]
    p.write_bytes(buf, b"PARENT")
    assert machine.vmstat()["pgreuse"] == reused + 1
    assert p.read_bytes(buf, 11) == b"PARENT data"
    assert child.read_bytes(buf, 11) == b"child data!"
    pages = machine.pagemap(p, buf, 2)
    assert pages.exclusive.tolist() == [True, False]
    assert machine.pagemap(child, buf, 1).pfn.iloc[0] != pages.pfn.iloc[0]
    machine.check()


def test_shared_file_mapping_is_seen_by_another_process(machine):
    machine.create_file("/data/log", "64KiB")
    writer, reader = machine.process("writer"), machine.process("reader")
    wfd = writer.open("/data/log", "rdwr")
    wmap = writer.mmap("64KiB", "rw", "shared", fd=wfd)
    writer.write_bytes(wmap + 4096, b"shared hello")
    assert machine.vmstat()["nr_dirty"] == 1

    rfd = reader.open("/data/log")
    view = reader.mmap("64KiB", "r", "shared", fd=rfd)
    assert reader.read_bytes(view + 4096, 12) == b"shared hello"
    assert reader.read(rfd, 12, offset=4096) == 12
    assert machine.pagemap(reader, view + 4096, 1).file.iloc[0]
    assert machine.smaps(reader).iloc[0].path == "/data/log"

    writer.fsync(wfd)
    assert machine.vmstat()["nr_dirty"] == 0
    machine.check()


def test_file_io_into_user_memory_and_descriptors(machine):
    machine.create_file("/f", "16KiB", content="pattern:7")
    p = machine.process("p")
    fd = p.open("/f", "rdwr")
    buf = p.mmap("16KiB")
    assert p.read(fd, "8KiB", buf=buf) == 8192
    assert p.read(fd, "16KiB") == 8192, "the file position advanced; the rest of the file"
    other = machine.process("q")
    ofd = other.open("/f")
    ref = other.mmap("8KiB")
    other.read(ofd, 8192, buf=ref)
    assert p.read_bytes(buf, 8192) == other.read_bytes(ref, 8192), "same pattern, same bytes"

    assert p.write(fd, b"xyz", offset=10) == 3
    copy = p.dup(fd)
    assert copy != fd
    p.close(fd)
    assert p.read(copy, 3, buf=buf, offset=10) == 3
    assert p.read_bytes(buf, 3) == b"xyz"
    p.ftruncate(copy, 4096)
    assert p.read(copy, "16KiB", offset=0) == 4096
    p.truncate("/f", 0)
    assert p.read(copy, 10, offset=0) == 0


def test_exec_lays_out_segments_and_denies_writes(machine):
    machine.create_file("/bin/app", "4MiB", content="pattern:1")
    p = machine.process("app")
    layout = p.exec("/bin/app", data="128KiB")
    assert list(layout) == ["text", "data", "bss", "stack_top"]
    smaps = machine.smaps(p).set_index("start")
    assert smaps.loc[layout["text"], "perms"] == "r-xp"
    assert smaps.loc[layout["data"], "Size"] == 128
    p.touch(layout["text"], "2MiB", "exec")
    assert machine.smaps(p).set_index("start").loc[layout["text"], "Rss"] == 2048


def test_mprotect_munmap_madvise(machine):
    p = machine.process("p")
    buf = p.mmap("16KiB")
    p.touch(buf, "16KiB", "write")
    p.madvise(buf, "16KiB", "dontneed")
    assert machine.smaps(p).iloc[0].Rss == 0
    p.mprotect(buf, "16KiB", "r")
    assert machine.smaps(p).iloc[0].perms == "r--p"
    p.munmap(buf, "16KiB")
    assert len(machine.smaps(p)) == 0


def test_mseal_refuses_unmapping_from_v6_10():
    m = mmsim.Machine(kernel="v6.12")
    p = m.process("p")
    buf = p.mmap("8KiB", prot="r")
    p.mseal(buf, "8KiB")
    assert "sl" in m.smaps(p).iloc[0].VmFlags.split()
    with pytest.raises(OSError) as e:
        p.munmap(buf, "8KiB")
    assert e.value.errno == errno.EPERM
    with pytest.raises(OSError) as e:
        mmsim.Machine(kernel="v6.8").process("q").mseal(buf, "8KiB")
    assert e.value.errno == errno.ENOSYS


def test_cpu_keyword_runs_the_call_on_that_cpu(machine):
    p = machine.process("p")
    buf = p.mmap("4KiB", cpu=3)
    p.write_bytes(buf, b"x", cpu=2)
    assert p.read_bytes(buf, 1, cpu=1) == b"x"


def test_fadvise_willneed_reads_and_dontneed_drops(machine):
    machine.create_file("/f", "64KiB", content="pattern:3")
    p = machine.process("p")
    fd = p.open("/f")
    p.fadvise(fd, "willneed")
    assert machine.vmstat()["nr_file_pages"] == 16
    p.fadvise(fd, "dontneed", offset="16KiB")
    assert machine.vmstat()["nr_file_pages"] == 4
    p.fadvise(fd, "noreuse")
    machine.check()


def test_thp_knobs_by_sysfs_path_and_madv_hugepage():
    enabled = "/sys/kernel/mm/transparent_hugepage/enabled"
    m = mmsim.Machine(sysfs={enabled: "madvise"})
    p = m.process("p")
    buf = p.mmap("8MiB")
    p.madvise(buf, "8MiB", "hugepage")
    p.touch(buf, "8MiB", "write")
    vma = m.smaps(p).set_index("start").loc[buf]
    assert vma["AnonHugePages"] >= 4096, "every whole aligned 2 MiB range is a THP"
    assert m.vmstat()["thp_fault_alloc"] == vma["AnonHugePages"] // 2048
    m.check()

    try:
        mmsim.Machine(sysfs={enabled: "sometimes"})
    except mmsim.ConfigError as e:
        assert "always, madvise, never" in str(e)
    else:
        raise AssertionError("a value the knob refuses is a configuration error")


def test_prctl_sysfs_and_sleep_let_ksmd_place_zero_pages():
    m = mmsim.Machine(kernel="v6.12")
    p = m.process("p")
    assert p.prctl("PR_GET_MEMORY_MERGE") == 0
    p.sysfs_write("/sys/kernel/mm/ksm/use_zero_pages", "1")
    buf = p.mmap("64KiB")
    p.write_bytes(buf, bytes(64 << 10))
    assert p.prctl("PR_SET_MEMORY_MERGE", 1) is None
    assert p.prctl("PR_GET_MEMORY_MERGE") == 1
    p.sysfs_write("/sys/kernel/mm/ksm/sleep_millisecs", "0")
    p.sysfs_write("/sys/kernel/mm/ksm/run", "1")
    p.sleep("20ms")
    assert p.sysfs_read("/proc/self/ksm_stat", field="ksm_zero_pages") == 16
    assert p.sysfs_read("/sys/kernel/mm/ksm/ksm_zero_pages") == 16
    assert m.pagemap(p, buf, 16).zero_page.all()
    with pytest.raises(OSError) as e:
        mmsim.Machine(kernel="v6.1").process("q").sysfs_read("/proc/self/ksm_stat", field="ksm_zero_pages")
    assert e.value.errno == errno.ENOENT
    with pytest.raises(ValueError, match="option"):
        p.prctl("PR_SET_NAME")
    with pytest.raises(ValueError, match="duration"):
        p.sleep("forever")
    m.check()
