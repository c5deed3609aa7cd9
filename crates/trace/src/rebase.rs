//! Placing a recorded shared library at a 2 MiB base (issue 45 item 3): the replay's answer to
//! "what if this library had been linked with `-z max-page-size=0x200000`", the recipe the
//! seed's measurement used for the program's own runtime and compiler libraries.
//!
//! Such a library gets `p_align` 2 MiB on its segments, and glibc 2.35+'s `_dl_map_segment`
//! reserves its span at a 2 MiB-aligned address (`ld_so`'s note); the kernel then finds its text
//! at addresses and file offsets that agree modulo 2 MiB wherever they agreed modulo the base
//! before. Here the library keeps its recorded program headers (a real relink would also pad
//! its segments to 2 MiB file offsets; a library whose text has `p_vaddr == p_offset`, as
//! Debian's `libjvm.so` has, needs no padding for its text to line up) and moves to the lowest
//! 2 MiB-aligned base at or above its recorded one whose span overlaps no other recorded
//! mapping; every recorded reference inside its old span moves by the same delta. Other
//! objects stay where they were recorded.
//!
//! Approximation: pointers are not rewritten (a reference's address moves, not the data it
//! loads), and the layout around the library is the recorded one rather than what a loader
//! reserving a 2 MiB-aligned span would have produced.

use crate::program::{Loader, Program};
use simcore::{Bytes, VirtAddr};

/// The references one moved library's old span maps to its new one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Moved {
    pub start: u64,
    pub end: u64,
    pub delta: u64,
}

/// Every moved library's span; a reference outside them stays.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Relocation {
    pub moved: Vec<Moved>,
}

impl Relocation {
    /// `addr` as the replay sees it.
    pub fn apply(&self, addr: VirtAddr) -> VirtAddr {
        for m in &self.moved {
            if (m.start..m.end).contains(&addr.0) {
                return VirtAddr(addr.0.wrapping_add(m.delta));
            }
        }
        addr
    }
}

/// The page span of object `k`'s segments.
fn span(p: &Program, k: usize) -> Option<(u64, u64)> {
    let o = &p.objects[k];
    let pages = o.elf.segments.iter().filter_map(|s| s.pages(o.elf.bias));
    pages.fold(None, |acc, (s, _, e)| {
        let (lo, hi) = acc.unwrap_or((s.0, e.0));
        Some((lo.min(s.0), hi.max(e.0)))
    })
}

/// Moves each library of `p` whose file name is in `names` to a 2 MiB base (see the module
/// note); returns how references move. A name that matches no library, or a library with no
/// free 2 MiB-aligned base above it, is an error naming it.
pub fn rebase_2m(p: &mut Program, names: &[String]) -> Result<Relocation, String> {
    let mut relocation = Relocation::default();
    for name in names {
        let k = p
            .objects
            .iter()
            .position(|o| o.loader == Loader::Lib && o.elf.path.rsplit('/').next() == Some(name))
            .ok_or_else(|| format!("rebase: no shared library named `{name}` in the recording"))?;
        let (start, end) = span(p, k).ok_or_else(|| format!("rebase: `{name}` has no segments"))?;
        let others = {
            let saved = std::mem::take(&mut p.objects[k].elf.segments);
            let ranges = p.mapped_ranges(0);
            p.objects[k].elf.segments = saved;
            ranges
        };
        let size = end - start;
        let free = |base: u64| others.iter().all(|&(s, e)| e <= base || s >= base + size);
        let pmd = Bytes::PMD.as_u64();
        let first = start.div_ceil(pmd) * pmd;
        let base = (0..1u64 << 20)
            .map(|i| first + i * pmd)
            .take_while(|&b| b.checked_add(size).is_some_and(|t| t <= mm::pgtable::TASK_SIZE))
            .find(|&b| free(b))
            .ok_or_else(|| format!("rebase: no free 2 MiB-aligned base for `{name}`"))?;
        let delta = base.wrapping_sub(start);
        let o = &mut p.objects[k];
        o.elf.bias = Bytes(o.elf.bias.as_u64().wrapping_add(delta));
        relocation.moved.push(Moved { start, end, delta });
    }
    Ok(relocation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::{AnonMap, Object};
    use mm::{ElfObject, LoadSegment};

    fn lib(path: &str, bias: u64) -> Object {
        let seg = |vaddr: u64, len: u64| LoadSegment {
            vaddr: VirtAddr(vaddr),
            offset: Bytes(vaddr),
            filesz: Bytes(len),
            memsz: Bytes(len),
            flags: mm::pf::R | mm::pf::X,
            align: Bytes::PAGE,
        };
        let segments = vec![seg(0, 0x1000), seg(0x1000, 0x3f_f000)];
        Object {
            loader: Loader::Lib,
            elf: ElfObject { path: path.into(), bias: Bytes(bias), segments },
            size: Bytes(0x40_0000),
        }
    }

    /// Given a 4 MiB library recorded at an unaligned base with anonymous memory right above
    /// it, when it is rebased, then it moves to the first 2 MiB base past that memory and its
    /// references move with it; an address elsewhere stays.
    #[test]
    fn a_library_moves_to_a_free_2m_base_and_its_references_follow() {
        let mut p = Program {
            objects: vec![lib("/usr/lib/libjvm.so", 0x40_0012_3000)],
            anon: vec![AnonMap {
                start: VirtAddr(0x40_0052_3000),
                end: VirtAddr(0x40_0060_0000),
                prot: 3,
            }],
            ..Program::default()
        };
        let r = rebase_2m(&mut p, &["libjvm.so".to_string()]).unwrap();
        assert_eq!(p.objects[0].elf.bias, Bytes(0x40_0060_0000));
        assert_eq!(r.apply(VirtAddr(0x40_0012_3010)), VirtAddr(0x40_0060_0010));
        assert_eq!(r.apply(VirtAddr(0x40_0052_3000)), VirtAddr(0x40_0052_3000));
        let e = rebase_2m(&mut p, &["libnone.so".to_string()]).unwrap_err();
        assert!(e.contains("libnone.so"), "{e}");
    }
}
