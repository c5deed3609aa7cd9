"""Observables as pandas objects, and the /proc parsers on kernel text."""

import pandas as pd

import mmsim
from mmsim import procfs


def test_vmstat_is_int64_in_kernel_order(machine):
    p = machine.process("p")
    p.touch(p.mmap("64KiB"), "64KiB", "write")
    vmstat = machine.vmstat()
    assert vmstat.dtype == "int64"
    names = [line.split()[0] for line in machine.vmstat_text().splitlines()]
    assert list(vmstat.index) == names
    assert vmstat.index[0] == "nr_free_pages"
    assert vmstat.index.is_unique
    order = list(vmstat.index)
    assert order.index("nr_anon_pages") < order.index("pgfault") < order.index("pgreuse")
    assert vmstat["nr_anon_pages"] == 16
    assert vmstat["pgfault"] == 16


def test_meminfo_status_and_rollup_in_kb(machine):
    p = machine.process("p")
    p.touch(p.mmap("1MiB"), "1MiB", "write")
    meminfo = machine.meminfo()
    assert meminfo.dtype == "int64"
    assert meminfo["MemTotal"] == 512 * 1024
    assert meminfo["AnonPages"] == 1024
    assert machine.status(p)["RssAnon"] == 1024
    rollup = machine.smaps_rollup(p)
    assert rollup["Rss"] == rollup["Private_Dirty"] == 1024
    assert rollup.dtype == "int64"


def test_smaps_columns_and_text(machine):
    machine.create_file("/lib/data", "64KiB")
    p = machine.process("p")
    fd = p.open("/lib/data")
    lib = p.mmap("64KiB", "r", "private", fd=fd, offset="16KiB")
    anon = p.mmap("8KiB")
    smaps = machine.smaps(p)
    assert list(smaps.columns[:7]) == ["start", "end", "perms", "offset", "dev", "inode", "path"]
    assert {"Size", "Rss", "Pss", "Private_Dirty", "Anonymous", "Swap", "VmFlags"} <= set(smaps)
    by_start = smaps.set_index("start")
    assert by_start.loc[lib, "path"] == "/lib/data"
    assert by_start.loc[lib, "offset"] == 16384
    assert by_start.loc[anon, "path"] == ""
    assert by_start.loc[anon, "end"] - anon == 8192
    assert by_start.loc[anon, "VmFlags"].split()[:2] == ["rd", "wr"]
    assert smaps["Rss"].dtype == "int64"
    assert machine.smaps_text(p).count("VmFlags") == len(smaps)
    assert machine.maps_text(p).count("\n") == len(smaps)


def test_pagemap_columns(machine):
    p = machine.process("p")
    buf = p.mmap("16KiB")
    p.touch(buf, "8KiB", "write")
    pages = machine.pagemap(p, buf, 4)
    assert list(pages.index) == [buf + i * 4096 for i in range(4)]
    assert pages.present.tolist() == [True, True, False, False]
    assert pages.exclusive.tolist() == [True, True, False, False]
    assert (pages.pfn[pages.present] > 0).all()
    assert (pages.pfn[~pages.present] == 0).all()
    assert not pages.file.any() and not pages.swapped.any()


def test_time_passes_and_checks_hold(machine):
    start = machine.now_ns
    p = machine.process("p")
    p.touch(p.mmap("64KiB"), "64KiB", "write")
    assert machine.now_ns > start
    machine.check()


def test_parsers_read_real_kernel_text():
    smaps = procfs.parse_smaps(
        "55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]\n"
        "Size:                132 kB\n"
        "Rss:                   8 kB\n"
        "THPeligible:           0\n"
        "ProtectionKey:         0\n"
        "VmFlags: rd wr mr mw me ac \n"
        "7f1c2a000000-7f1c2a021000 r--p 00001000 fd:01 1234  /usr/lib/libc.so.6\n"
        "Size:                132 kB\n"
        "Rss:                 100 kB\n"
        "VmFlags: rd mr mw me \n"
    )
    assert smaps.path.tolist() == ["[heap]", "/usr/lib/libc.so.6"]
    assert smaps.offset.tolist() == [0, 4096]
    assert smaps.Rss.tolist() == [8, 100]
    assert smaps.VmFlags.iloc[1] == "rd mr mw me"
    meminfo = procfs.parse_fields("MemTotal:       16318756 kB\nHugePages_Total:       0\n")
    assert meminfo.to_dict() == {"MemTotal": 16318756, "HugePages_Total": 0}
    status = procfs.parse_fields("Name:\tbash\nVmRSS:\t    5120 kB\n")
    assert status.to_dict() == {"VmRSS": 5120}
    vmstat = procfs.parse_vmstat("nr_free_pages 100\npgfault 7\n")
    assert vmstat.to_dict() == {"nr_free_pages": 100, "pgfault": 7}
    assert procfs.parse_smaps("").empty


def test_a_process_with_no_mappings(machine):
    p = machine.process("empty")
    assert machine.smaps(p).empty
    assert isinstance(machine.smaps_rollup(p), pd.Series)
    assert machine.smaps_rollup(p)["Rss"] == 0
    assert isinstance(mmsim.Machine().vmstat(), pd.Series)


def test_addresses_print_in_hex(machine):
    p = machine.process("hex")
    buf = p.mmap("8KiB")
    smaps = machine.smaps(p)
    start = smaps.start.iloc[0]
    assert repr(start) == f"0x{int(start):x}" and start == int(start)
    assert f"0x{buf:x}" in smaps.to_string()
    assert f"0x{buf:x}" in machine.pagemap(p, buf, 1).to_string()
