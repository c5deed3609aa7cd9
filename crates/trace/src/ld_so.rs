//! The dynamic linker's model: how glibc's `ld.so` maps a shared library (glibc 2.36, Debian
//! 12's, as `elf/dl-map-segments.h` `_dl_map_segments` and `_dl_map_segment` read since glibc
//! 2.35, "elf: Properly align PT_LOAD segments").
//!
//! The library is mapped by user space with `mmap`: the kernel never sets `VM_DENYWRITE` on
//! these mappings (it ignored `MAP_DENYWRITE` from user space in every era), so under the
//! `denywrite` file-THP rule a library's text is never eligible for collapse, while under
//! `exec_not_written` it is whenever the file is not open for write and the text sits at a
//! PMD-aligned address with a PMD-aligned file offset.
//!
//! Placement: glibc 2.35+ reserves the library's whole span at an address aligned to the largest
//! `p_align` of its `PT_LOAD` segments (mapping `length + align` and trimming both ends), so a
//! library linked with `-z max-page-size=0x200000` (rustc's `librustc_driver` and `libLLVM`
//! text) lands on a 2 MiB boundary and its aligned segments keep their alignment in memory;
//! glibc 2.34 and earlier aligned only to the page. The model places each library at the base
//! recorded on the real machine (its ASLR draw) and checks that base against this rule: a
//! library whose recorded base is not aligned to its largest `p_align` is reported.
//!
//! Then each segment is mapped `MAP_FIXED|MAP_PRIVATE` from its page-aligned file offset with
//! the protection of its `p_flags`, and its bss (`p_memsz` beyond `p_filesz`, past the page that
//! holds the end of the file contents) as anonymous zero pages. With `advise_hugepage` the model
//! also advises `MADV_HUGEPAGE` on every segment whose `p_align` is at least 2 MiB, which a
//! linker or loader patch would do on a system whose THP `enabled` is `madvise` (glibc 2.36
//! itself does not).
//!
//! Approximations: no `PROT_NONE` holes between segments (glibc `mprotect`s the reserved gaps;
//! nothing references them), no relocation writes (RELRO pages are read, not copied on write),
//! no TLS.

use crate::program::Object;
use mm::{Errno, MmapArgs, OpenFlags, Thread, map, pf, prot};
use simcore::{Bytes, VirtAddr};

/// `prot` bits of a segment's `p_flags`.
fn segment_prot(flags: u32) -> u32 {
    let mut p = 0;
    for (bit, pr) in [(pf::R, prot::READ), (pf::W, prot::WRITE), (pf::X, prot::EXEC)] {
        if flags & bit != 0 {
            p |= pr;
        }
    }
    p
}

/// Whether glibc ≥ 2.35 would have put `lib` where it was recorded: at a base aligned to its
/// largest `p_align`.
pub fn base_is_aligned(lib: &Object) -> bool {
    lib.elf.bias.as_u64().is_multiple_of(lib.elf.max_align().as_u64())
}

/// Maps `lib` as ld.so does (`_dl_map_segments`), advising `MADV_HUGEPAGE` on its 2 MiB-aligned
/// segments when `advise_hugepage`.
pub async fn map_library(t: &Thread, lib: &Object, advise_hugepage: bool) -> Result<(), Errno> {
    let fd = t.open(&lib.elf.path, OpenFlags::RDONLY).await?;
    let mut result = Ok(());
    for s in &lib.elf.segments {
        let Some((start, file_end, mem_end)) = s.pages(lib.elf.bias) else {
            result = Err(Errno::ENOMEM);
            break;
        };
        let p = segment_prot(s.flags);
        let file = MmapArgs {
            addr: Some(start),
            len: file_end.offset_from(start),
            prot: p,
            flags: map::FIXED | map::PRIVATE,
            fd: Some(fd),
            offset: s.offset.as_u64() & !(Bytes::PAGE.as_u64() - 1),
        };
        result = t.mmap(file).await.map(drop);
        if result.is_ok() && mem_end > file_end {
            result = map_bss(t, file_end, mem_end, p).await;
        }
        if result.is_ok() && advise_hugepage && s.align >= Bytes::PMD {
            result = t.madvise(start, file_end.offset_from(start), mm::madv::HUGEPAGE).await;
        }
        if result.is_err() {
            break;
        }
    }
    t.close(fd).await?;
    result
}

/// Anonymous zero pages from `start` to `end`.
async fn map_bss(t: &Thread, start: VirtAddr, end: VirtAddr, p: u32) -> Result<(), Errno> {
    let args = MmapArgs {
        addr: Some(start),
        len: end.offset_from(start),
        prot: p,
        flags: map::FIXED | map::PRIVATE | map::ANONYMOUS,
        fd: None,
        offset: 0,
    };
    t.mmap(args).await.map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::Loader;
    use mm::{ElfObject, LoadSegment};

    #[test]
    fn alignment_follows_the_largest_p_align() {
        let seg = |align| LoadSegment {
            vaddr: VirtAddr(0),
            offset: Bytes(0),
            filesz: Bytes(1),
            memsz: Bytes(1),
            flags: pf::R | pf::X,
            align,
        };
        let lib = |bias| Object {
            loader: Loader::Lib,
            elf: ElfObject {
                path: "/l.so".into(),
                bias: Bytes(bias),
                segments: vec![seg(Bytes::PAGE), seg(Bytes::PMD)],
            },
            size: Bytes(1),
        };
        assert!(base_is_aligned(&lib(0x40_0c00_0000)));
        assert!(!base_is_aligned(&lib(0x40_0c00_1000)));
        assert_eq!(segment_prot(pf::R | pf::X), prot::READ | prot::EXEC);
    }
}
