//! Read-only file THPs for executable text, made by `MADV_COLLAPSE` (`collapse_file`): PMD
//! mappings of exec'd text, their split by a partial munmap, and their removal when the file is
//! opened for write.

mod common;

use common::{run_in, smaps_field, vmstat};
use mm::arch::tlb::TlbEvent;
use mm::{
    Access, Errno, ExecImage, FileSpec, KernelVersion, Machine, MachineConfig, MmapArgs, OpenFlags,
    Profile, Signal, Thread, madv, map, prot,
};
use simcore::{Bytes, VirtAddr};

fn machine() -> Machine {
    let profile = Profile::named("tiny").unwrap().resized(None, Some(Bytes::mib(64))).unwrap();
    let config = MachineConfig::new(profile, KernelVersion::DEFAULT);
    let mut m = Machine::new(config).unwrap();
    let spec = FileSpec { pattern: Some(5), ..FileSpec::zeros(Bytes::mib(5)) };
    m.create_file("/bin/app", &spec).unwrap();
    m
}

fn image() -> ExecImage {
    ExecImage { text: Bytes::mib(4) + Bytes::kib(512), ..ExecImage::default() }
}

/// Collapses `[addr, addr + len)` with `MADV_COLLAPSE` (every whole 2 MiB range in it).
async fn collapse(t: &Thread, addr: VirtAddr, len: Bytes) {
    t.madvise(addr, len, madv::COLLAPSE).await.unwrap();
}

/// iTLB walks of CPU 0 so far.
fn itlb_walks(t: &Thread) -> u64 {
    t.cx().kernel().state().tlb.stats(0).get(TlbEvent::ItlbWalks)
}

/// The `/proc/meminfo` value of `field`, in kB.
fn meminfo(m: &Machine, field: &str) -> u64 {
    let text = m.meminfo();
    let line = text.lines().find(|l| l.starts_with(&format!("{field}:"))).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Given exec'd text of 4.5 MiB at a 2 MiB-aligned address whose pages a first run fetched and
/// (or not) collapsed with `MADV_COLLAPSE` before exiting, when a second run fetches every text
/// page, then after the collapse its two aligned 2 MiB ranges fault in as PMD-mapped file THPs
/// (FilePmdMapped 4096 kB, the last 512 KiB in 4 KiB pages) and its fetches walk far less than
/// without, whose text is all 4 KiB pages.
#[test]
fn collapsed_exec_text_is_pmd_mapped() {
    let mut walks = Vec::new();
    for (huge, pmd_kb, thps) in [(false, 0, 0), (true, 4096, 2)] {
        let mut m = machine();
        let first = m.new_process("first").unwrap();
        run_in(&mut m, first, move |t| async move {
            let layout = t.exec("/bin/app", image()).await.unwrap();
            t.touch(layout.text, image().text, Access::Exec).await.unwrap();
            if huge {
                collapse(&t, layout.text, image().text).await;
            }
            t.exit().await.unwrap();
        });
        let pid = m.new_process("app").unwrap();
        let (text, w) = run_in(&mut m, pid, move |t| async move {
            let before = itlb_walks(&t);
            let layout = t.exec("/bin/app", image()).await.unwrap();
            t.touch(layout.text, image().text, Access::Exec).await.unwrap();
            (layout.text, itlb_walks(&t) - before)
        });
        assert!(text.is_aligned(Bytes::PMD));
        assert_eq!(smaps_field(&m, pid, text.0, "Rss"), 4608, "{huge}");
        assert_eq!(smaps_field(&m, pid, text.0, "FilePmdMapped"), pmd_kb, "{huge}");
        assert_eq!(smaps_field(&m, pid, text.0, "Private_Clean"), 4608, "{huge}");
        assert_eq!(vmstat(&m, "nr_file_hugepages"), thps, "{huge}");
        assert_eq!(vmstat(&m, "nr_file_pmdmapped"), thps, "{huge}");
        assert_eq!(
            vmstat(&m, "thp_file_mapped"),
            2 * thps,
            "{huge}: by the collapse, then the faults"
        );
        assert_eq!(vmstat(&m, "thp_collapse_alloc"), thps, "{huge}");
        assert_eq!(meminfo(&m, "FileHugePages"), pmd_kb, "{huge}");
        assert_eq!(meminfo(&m, "FilePmdMapped"), pmd_kb, "{huge}");
        assert_eq!(vmstat(&m, "nr_mapped"), 1152, "{huge}: every text page is mapped once");
        walks.push(w);
        if huge {
            let st = m.kernel().state();
            let inode = *st.paths.get("/bin/app").unwrap();
            assert_eq!(st.inodes[inode].mapping.nr_thps, 2);
        }
    }
    assert!(walks[1] * 5 < walks[0], "iTLB walks 4 KiB {} vs 2 MiB {}", walks[0], walks[1]);
}

/// Given PMD-mapped text, when the second half of the first 2 MiB is unmapped, then that PMD is
/// split (cleared): its THP stays cached, the remaining first half refaults with 4 KiB PTEs onto
/// the THP's pages, the unmapped half raises SIGSEGV, the second PMD is untouched, and every
/// checker holds.
#[test]
fn munmap_of_half_a_pmd_splits_it() {
    let mut m = machine();
    let pid = m.new_process("app").unwrap();
    let text = run_in(&mut m, pid, |t| async move {
        let layout = t.exec("/bin/app", image()).await.unwrap();
        t.touch(layout.text, Bytes::mib(4), Access::Exec).await.unwrap();
        collapse(&t, layout.text, Bytes::mib(4)).await;
        t.munmap(layout.text + Bytes::mib(1), Bytes::mib(1)).await.unwrap();
        layout.text
    });
    assert_eq!(smaps_field(&m, pid, text.0, "Rss"), 0, "the split PMD mapped everything");
    assert_eq!(smaps_field(&m, pid, text.0, "FilePmdMapped"), 0);
    let second = text + Bytes::mib(2);
    assert_eq!(smaps_field(&m, pid, second.0, "FilePmdMapped"), 2048);
    assert_eq!(vmstat(&m, "nr_file_pmdmapped"), 1);
    assert_eq!(vmstat(&m, "nr_file_hugepages"), 2, "the THP stays in the page cache");
    let (fault, gone) = run_in(&mut m, pid, move |t| async move {
        t.touch(text, Bytes::mib(1), Access::Exec).await.unwrap();
        let gone = t.touch(text + Bytes::mib(1), Bytes::PAGE, Access::Read).await;
        (t.touch(text, Bytes::PAGE, Access::Exec).await, gone)
    });
    assert_eq!((fault, gone), (Ok(()), Err(Signal::SIGSEGV)));
    assert_eq!(smaps_field(&m, pid, text.0, "Rss"), 1024);
    assert_eq!(smaps_field(&m, pid, text.0, "FilePmdMapped"), 0);
    assert_eq!(vmstat(&m, "nr_file_hugepages"), 2);
    let pm = m.pagemap(pid, text, 1).unwrap()[0];
    let st = m.kernel().state();
    let inode = *st.paths.get("/bin/app").unwrap();
    let head = st.page_cache_get(inode, 0).unwrap();
    assert_eq!(pm & mm::fs::proc::PM_PFN_MASK, head.0, "a PTE maps the THP's first page");
    assert_eq!(st.folios.entire_mapcount(head), 0);
    assert_eq!(st.folios.page_mapcount(head), 1);
}

/// Given a file mapped r-x from a read-only descriptor with its text THP in the page cache, when
/// the file is opened for write, then its page cache is dropped (`nr_file_hugepages` back to 0,
/// the PMD unmapped) and later faults map 4 KiB pages; a running executable cannot be opened
/// for write at all.
#[test]
fn opening_the_file_for_write_drops_its_thps() {
    let mut m = machine();
    let pid = m.new_process("app").unwrap();
    let at = VirtAddr(0x4000_0000);
    run_in(&mut m, pid, move |t| async move {
        let fd = t.open("/bin/app", OpenFlags::RDONLY).await.unwrap();
        let args = MmapArgs {
            addr: Some(at),
            len: Bytes::mib(2),
            prot: prot::READ | prot::EXEC,
            flags: map::PRIVATE | map::FIXED,
            fd: Some(fd),
            offset: 0,
        };
        t.mmap(args).await.unwrap();
        t.close(fd).await.unwrap();
        t.touch(at, Bytes::PAGE, Access::Exec).await.unwrap();
        collapse(&t, at, Bytes::mib(2)).await;
    });
    assert_eq!(vmstat(&m, "nr_file_hugepages"), 1);
    assert_eq!(smaps_field(&m, pid, at.0, "FilePmdMapped"), 2048);
    run_in(&mut m, pid, move |t| async move {
        let fd = t.open("/bin/app", OpenFlags::RDWR).await.unwrap();
        assert_eq!(t.cx().kernel().state().vmstat.get(mm::vmstat::VmStat::NrFileHugepages), 0);
        t.touch(at, Bytes::mib(2), Access::Exec).await.unwrap();
        t.close(fd).await.unwrap();
    });
    assert_eq!(vmstat(&m, "nr_file_hugepages"), 0);
    assert_eq!(vmstat(&m, "nr_file_pmdmapped"), 0);
    assert_eq!(smaps_field(&m, pid, at.0, "FilePmdMapped"), 0);
    assert_eq!(smaps_field(&m, pid, at.0, "Rss"), 2048, "refaulted as 4 KiB pages");
    let exe = m.new_process("exe").unwrap();
    let denied = run_in(&mut m, exe, |t| async move {
        t.exec("/bin/app", image()).await.unwrap();
        t.open("/bin/app", OpenFlags::WRONLY).await
    });
    assert_eq!(denied, Err(Errno::ETXTBSY));
}
