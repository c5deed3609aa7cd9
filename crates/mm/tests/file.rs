//! File-backed memory: the page cache, shared and private mappings, read/write, truncate, exec.

mod common;

use common::{machine, run_in, smaps_field, vmstat};
use mm::{Access, Errno, ExecImage, FileSpec, MmapArgs, OpenFlags, Signal, map, prot};
use simcore::{Bytes, VirtAddr};

fn map_file(fd: i32, len: Bytes, prot: u32, flags: u32) -> MmapArgs {
    MmapArgs { addr: None, len, prot, flags, fd: Some(fd), offset: 0 }
}

/// Given a file mapped shared by two processes, when one writes through its mapping, then the
/// other sees the bytes through its own mapping and through read(), and fsync stores them.
#[test]
fn shared_file_writes_reach_the_file_and_other_processes() {
    let mut m = machine(Bytes::mib(64));
    m.create_file("/data/shared", &FileSpec::zeros(Bytes::kib(64))).unwrap();
    let (a, b) = (m.new_process("a").unwrap(), m.new_process("b").unwrap());
    let (a_addr, a_fd) = run_in(&mut m, a, |t| async move {
        let fd = t.open("/data/shared", OpenFlags::RDWR).await.unwrap();
        let addr = t
            .mmap(map_file(fd, Bytes::kib(64), prot::READ | prot::WRITE, map::SHARED))
            .await
            .unwrap();
        t.write_bytes(addr + Bytes(4096 + 10), b"hello from a").await.unwrap();
        (addr, fd)
    });
    assert_eq!(vmstat(&m, "nr_dirty"), 1);
    let seen = run_in(&mut m, b, |t| async move {
        let fd = t.open("/data/shared", OpenFlags::RDONLY).await.unwrap();
        let addr = t.mmap(map_file(fd, Bytes::kib(64), prot::READ, map::SHARED)).await.unwrap();
        let mapped = t.read_bytes(addr + Bytes(4096 + 10), 12).await.unwrap();
        let buf = t.mmap_anon(Bytes::PAGE, prot::READ | prot::WRITE).await.unwrap();
        let n = t.pread(fd, Some(buf), 12, 4096 + 10).await.unwrap();
        (mapped, n, t.read_bytes(buf, 12).await.unwrap())
    });
    assert_eq!(seen, (b"hello from a".to_vec(), 12, b"hello from a".to_vec()));
    // Both processes map the same page: it is shared in both smaps.
    assert_eq!(smaps_field(&m, a, a_addr.0, "Shared_Dirty"), 4);
    run_in(&mut m, a, move |t| async move { t.fsync(a_fd).await.unwrap() });
    assert_eq!(vmstat(&m, "nr_dirty"), 0);
    assert_eq!(vmstat(&m, "nr_written"), 1);
    let inode = *m.kernel().state().paths.get("/data/shared").unwrap();
    let mut buf = [0u8; 12];
    mm::sim::content::Content::read(
        m.kernel().state().inodes[inode].backing.read(1).as_ref(),
        10,
        &mut buf,
    );
    assert_eq!(&buf, b"hello from a", "the block device holds the data");
}

/// Given a file mapped privately, when the process writes, then it gets an anonymous copy and the
/// file (and another mapper) is unchanged.
#[test]
fn private_file_writes_stay_private() {
    let mut m = machine(Bytes::mib(64));
    m.create_file(
        "/data/lib.so",
        &FileSpec { pattern: Some(42), ..FileSpec::zeros(Bytes::kib(32)) },
    )
    .unwrap();
    let (a, b) = (m.new_process("a").unwrap(), m.new_process("b").unwrap());
    let original = run_in(&mut m, b, |t| async move {
        let fd = t.open("/data/lib.so", OpenFlags::RDONLY).await.unwrap();
        let addr = t.mmap(map_file(fd, Bytes::kib(32), prot::READ, map::PRIVATE)).await.unwrap();
        t.read_bytes(addr + Bytes(8192), 16).await.unwrap()
    });
    assert_ne!(original, vec![0; 16], "the pattern is visible");
    let addr = run_in(&mut m, a, |t| async move {
        let fd = t.open("/data/lib.so", OpenFlags::RDONLY).await.unwrap();
        let addr = t
            .mmap(map_file(fd, Bytes::kib(32), prot::READ | prot::WRITE, map::PRIVATE))
            .await
            .unwrap();
        t.write_bytes(addr + Bytes(8192), b"patched").await.unwrap();
        let mine = t.read_bytes(addr + Bytes(8192), 16).await.unwrap();
        assert_eq!(&mine[..7], b"patched");
        assert_eq!(&mine[7..], &original_tail()[..], "the rest of the page was copied");
        addr
    });
    let after = run_in(&mut m, b, |t| async move {
        let fd = t.open("/data/lib.so", OpenFlags::RDONLY).await.unwrap();
        let buf = t.mmap_anon(Bytes::PAGE, prot::READ | prot::WRITE).await.unwrap();
        t.pread(fd, Some(buf), 16, 8192).await.unwrap();
        t.read_bytes(buf, 16).await.unwrap()
    });
    assert_eq!(after, original);
    assert_eq!(vmstat(&m, "nr_dirty"), 0);
    assert_eq!(smaps_field(&m, a, addr.0, "Anonymous"), 4);
}

/// Bytes 7..16 of page 2 of the pattern-42 file (helper for the private-write test).
fn original_tail() -> Vec<u8> {
    let content = mm::types::fs::Backing { pattern: Some(42), ..Default::default() }.read(2);
    let mut buf = [0u8; 9];
    mm::sim::content::Content::read(content.as_ref(), 7, &mut buf);
    buf.to_vec()
}

/// Reading a mapped file faults pages in through readahead and maps the pages around the fault
/// (fault-around); counters and smaps show it.
#[test]
fn file_read_faults_use_readahead_and_fault_around() {
    let mut m = machine(Bytes::mib(64));
    m.create_file("/data/big", &FileSpec::zeros(Bytes::mib(1))).unwrap();
    let pid = m.new_process("p").unwrap();
    let addr = run_in(&mut m, pid, |t| async move {
        let fd = t.open("/data/big", OpenFlags::RDONLY).await.unwrap();
        // A 64 KiB-aligned hint, so that the fault-around window is the first 16 pages.
        let hint = MmapArgs {
            addr: Some(VirtAddr(0x1000_0000)),
            ..map_file(fd, Bytes::mib(1), prot::READ, map::PRIVATE)
        };
        let addr = t.mmap(hint).await.unwrap();
        assert_eq!(addr, VirtAddr(0x1000_0000));
        t.touch(addr, Bytes::PAGE, Access::Read).await.unwrap();
        addr
    });
    // Read-around of 32 pages centred on page 0 brings pages 0..32 in with one major fault,
    // which maps only the faulting page (fault-around runs before the page is read).
    assert_eq!(vmstat(&m, "pgmajfault"), 1);
    assert_eq!(vmstat(&m, "nr_file_pages"), 32);
    assert_eq!(vmstat(&m, "pgpgin"), 128);
    assert_eq!(smaps_field(&m, pid, addr.0, "Rss"), 4);
    assert_eq!(vmstat(&m, "nr_inactive_file"), 32);
    // The next fault finds the pages cached: fault-around maps the whole 64 KiB window.
    run_in(&mut m, pid, move |t| async move {
        t.touch(addr + Bytes::PAGE, Bytes::PAGE, Access::Read).await.unwrap()
    });
    assert_eq!(vmstat(&m, "pgmajfault"), 1);
    assert_eq!(vmstat(&m, "pgfault"), 2);
    assert_eq!(smaps_field(&m, pid, addr.0, "Rss"), 64);
    assert_eq!(vmstat(&m, "nr_mapped"), 16);
}

/// Truncating a mapped file makes accesses beyond the new end raise SIGBUS; the pages are gone.
#[test]
fn truncate_unmaps_and_sigbus_beyond_eof() {
    let mut m = machine(Bytes::mib(64));
    m.create_file("/data/t", &FileSpec::zeros(Bytes::kib(64))).unwrap();
    let pid = m.new_process("p").unwrap();
    run_in(&mut m, pid, |t| async move {
        let fd = t.open("/data/t", OpenFlags::RDWR).await.unwrap();
        let addr = t
            .mmap(map_file(fd, Bytes::kib(64), prot::READ | prot::WRITE, map::SHARED))
            .await
            .unwrap();
        t.touch(addr, Bytes::kib(64), Access::Write).await.unwrap();
        t.ftruncate(fd, 5000).await.unwrap();
        assert_eq!(t.read_bytes(addr + Bytes(3 * 4096), 1).await, Err(Signal::SIGBUS));
        // The partial last page stays, with its tail beyond EOF reading zeros.
        assert_eq!(t.read_bytes(addr + Bytes(4096), 1).await, Ok(vec![0]));
        t.write_bytes(addr + Bytes(10), b"kept").await.unwrap();
    });
    assert_eq!(vmstat(&m, "nr_file_pages"), 2);
    assert_eq!(vmstat(&m, "nr_mapped"), 2);
}

/// A running executable cannot be opened for write (ETXTBSY), and vice versa.
#[test]
fn exec_denies_write_and_maps_segments() {
    let mut m = machine(Bytes::mib(64));
    m.create_file("/bin/app", &FileSpec { pattern: Some(7), ..FileSpec::zeros(Bytes::mib(3)) })
        .unwrap();
    let pid = m.new_process("shell").unwrap();
    let layout = run_in(&mut m, pid, |t| async move {
        let layout = t.exec("/bin/app", ExecImage::default()).await.unwrap();
        assert_eq!(t.open("/bin/app", OpenFlags::RDWR).await, Err(Errno::ETXTBSY));
        t.touch(layout.text, Bytes::PAGE, Access::Exec).await.unwrap();
        assert_eq!(t.touch(layout.data, Bytes::PAGE, Access::Exec).await, Err(Signal::SIGSEGV));
        t.touch(layout.data, Bytes::PAGE, Access::Write).await.unwrap();
        layout
    });
    let maps = m.maps(pid);
    assert!(
        maps.contains(&format!(
            "{:08x}-{:08x} r-xp 00000000 08:01 1000",
            layout.text.0,
            layout.text.0 + (2 << 20)
        )),
        "{maps}"
    );
    assert!(maps.contains("[stack]"), "{maps}");
    assert!(m.smaps(pid).contains("VmFlags: rd ex mr mw me dw sd"), "{}", m.smaps(pid));
    let other = m.new_process("writer").unwrap();
    run_in(&mut m, other, |t| async move {
        assert_eq!(t.open("/bin/app", OpenFlags::WRONLY).await, Err(Errno::ETXTBSY));
    });
    run_in(&mut m, pid, |t| async move { t.exit().await.unwrap() });
    run_in(&mut m, other, |t| async move {
        let fd = t.open("/bin/app", OpenFlags::WRONLY).await.unwrap();
        assert_eq!(t.exec("/bin/app", ExecImage::default()).await, Err(Errno::ETXTBSY));
        t.close(fd).await.unwrap();
    });
}

/// read() twice of the same page activates it (the classic two-touch rule).
#[test]
fn buffered_reads_mark_pages_accessed() {
    let mut m = machine(Bytes::mib(64));
    m.create_file("/data/r", &FileSpec::zeros(Bytes::kib(16))).unwrap();
    let pid = m.new_process("p").unwrap();
    run_in(&mut m, pid, |t| async move {
        let fd = t.open("/data/r", OpenFlags::RDONLY).await.unwrap();
        assert_eq!(t.pread(fd, None, 4096, 0).await, Ok(4096));
        assert_eq!(t.pread(fd, None, 4096, 0).await, Ok(4096));
        assert_eq!(t.read(fd, None, 100_000).await, Ok(16384), "short read at end of file");
        assert_eq!(t.read(fd, None, 10).await, Ok(0));
    });
    assert_eq!(vmstat(&m, "pgactivate"), 1);
    assert_eq!(vmstat(&m, "nr_active_file"), 1);
    assert_eq!(vmstat(&m, "nr_inactive_file"), 3);
}

/// The ELF loader maps an executable's `PT_LOAD` segments at its bias, and its interpreter's:
/// `VM_DENYWRITE` on both before v5.15 ("mm: remove VM_DENYWRITE"), on neither after; the bss
/// beyond the file contents is anonymous.
#[test]
fn the_elf_loader_maps_segments_deny_write_by_era() {
    use mm::{ElfExec, ElfObject, KernelVersion, LoadSegment, MachineConfig, Profile, pf};
    let seg = |vaddr: u64, offset: u64, filesz: u64, memsz: u64, flags: u32| LoadSegment {
        vaddr: VirtAddr(vaddr),
        offset: Bytes(offset),
        filesz: Bytes(filesz),
        memsz: Bytes(memsz),
        flags,
        align: Bytes::PMD,
    };
    let object = |path: &str, bias: u64| ElfObject {
        path: path.into(),
        bias: Bytes(bias),
        segments: vec![
            seg(0, 0, 0x1800, 0x1800, pf::R | pf::X),
            seg(0x20_2000, 0x2000, 0x100, 0x3000, pf::R | pf::W),
        ],
    };
    for (kernel, dw) in [(KernelVersion::new(5, 12), " dw"), (KernelVersion::new(5, 15), "")] {
        let profile = Profile::named("tiny").unwrap();
        let mut m = mm::Machine::new(MachineConfig::new(profile, kernel)).unwrap();
        for path in ["/bin/app", "/lib/ld.so"] {
            m.create_file(path, &FileSpec::zeros(Bytes::kib(16))).unwrap();
        }
        let pid = m.new_process("shell").unwrap();
        let image = ElfExec {
            exe: object("/bin/app", 0x40_0000),
            interp: Some(object("/lib/ld.so", 0x7f00_0000_0000)),
            stack_top: VirtAddr(0x7ff0_0000_0000),
            stack: Bytes::kib(132),
        };
        run_in(&mut m, pid, move |t| async move {
            t.exec_elf(&image).await.unwrap();
            t.touch(VirtAddr(0x40_1000), Bytes::PAGE, Access::Exec).await.unwrap();
            t.touch(VirtAddr(0x60_4000), Bytes::PAGE, Access::Write).await.unwrap();
        });
        let (maps, smaps) = (m.maps(pid), m.smaps(pid));
        assert!(maps.contains("00400000-00402000 r-xp 00000000"), "{maps}");
        assert!(maps.contains("00602000-00603000 rw-p 00002000"), "{maps}");
        assert!(maps.contains("00603000-00605000 rw-p 00000000 00:00 0"), "{maps}");
        assert!(maps.contains("7f0000000000-7f0000002000 r-xp 00000000"), "{maps}");
        let text_flags = format!("VmFlags: rd ex mr mw me{dw} sd");
        assert_eq!(smaps.matches(&text_flags).count(), 2, "{kernel}: {smaps}");
    }
}

/// The break starts after the bss; `/proc/PID/maps` names the bss `[heap]` while the heap is
/// empty only up to v6.6 (touching ranges), and the grown heap on every kernel; a forked child
/// has the parent's break.
#[test]
fn brk_grows_the_bss_and_maps_names_the_heap() {
    for (kernel, empty_heap_named) in [((6, 6), true), ((6, 7), false)] {
        let version = mm::KernelVersion::new(kernel.0, kernel.1);
        let profile = mm::Profile::named("tiny").unwrap().resized(None, Some(Bytes::mib(64)));
        let mut m = mm::Machine::new(mm::MachineConfig::new(profile.unwrap(), version)).unwrap();
        m.create_file("/bin/app", &FileSpec::zeros(Bytes::mib(3))).unwrap();
        let pid = m.new_process("shell").unwrap();
        let (layout, start) = run_in(&mut m, pid, |t| async move {
            let layout = t.exec("/bin/app", ExecImage::default()).await.unwrap();
            (layout, t.brk(VirtAddr(0)).await.unwrap())
        });
        assert_eq!(start, layout.bss + Bytes::kib(64));
        assert_eq!(m.maps(pid).contains("[heap]"), empty_heap_named, "{}", m.maps(pid));
        let child = run_in(&mut m, pid, move |t| async move {
            assert_eq!(t.brk(start + Bytes::kib(8)).await, Ok(start + Bytes::kib(8)));
            t.fork().await.unwrap()
        });
        let line = format!("{:08x}-{:08x} rw-p", layout.bss.0, (start + Bytes::kib(8)).0);
        assert!(m.maps(pid).contains(&line) && m.maps(pid).contains("[heap]"), "{}", m.maps(pid));
        run_in(&mut m, child, move |t| async move {
            assert_eq!(t.brk(VirtAddr(0)).await, Ok(start + Bytes::kib(8)));
        });
    }
}
