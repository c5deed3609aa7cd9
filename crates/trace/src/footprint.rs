//! Where a recorded program's instructions are, against 2 MiB eligibility (issue 45 item 5): the
//! cause beside an iTLB miss ratio. A collapse can only cover a 2 MiB range of file text whose
//! address and file offset are both 2 MiB-aligned and which lies wholly inside one executable
//! file mapping (`thp_vma_suitable_order` and the file collapse's range checks,
//! `mm/khugepaged.c`); such a range is "collapsible" here, whatever the era's rule on which
//! files may collapse. Everything else the program fetches stays in 4 KiB pages after any
//! collapse: file text outside those ranges, and anonymous memory (a JIT's code), which only
//! anonymous THPs can cover.
//!
//! The count is over instruction references (not fetch blocks) of the same references a replay
//! pass takes: each thread's first `max_refs_per_thread`, after [`crate::rebase`] moved the
//! libraries asked for.

use crate::program::{Program, merge_ranges};
use crate::rebase::rebase_2m;
use crate::record::RefKind;
use crate::replay::ReplayError;
use serde::Serialize;
use simcore::Bytes;
use std::collections::{BTreeMap, BTreeSet};

/// Instruction references by where they land, and the distinct 4 KiB pages they touch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Footprint {
    pub instructions: u64,
    /// In collapsible 2 MiB ranges of file text.
    pub in_collapsible: u64,
    /// In anonymous memory (no object or file mapping: JIT code, trampolines).
    pub anonymous: u64,
    /// Distinct 4 KiB pages: of file text outside collapsible ranges, of anonymous memory,
    /// and the collapsible 2 MiB ranges touched.
    pub file_pages_outside: u64,
    pub anon_pages: u64,
    pub ranges_2m: u64,
    /// Instruction references per object (file name), in collapsible ranges or not.
    pub per_object: BTreeMap<String, (u64, u64)>,
}

/// Executable file text: `[start, end)`, where file offset 0 would sit, and its name.
struct Text {
    start: u64,
    end: u64,
    origin: u64,
    name: String,
}

fn texts(p: &Program) -> Vec<Text> {
    let mut out = Vec::new();
    for o in &p.objects {
        let name = o.elf.path.rsplit('/').next().unwrap_or(&o.elf.path).to_string();
        for s in o.elf.segments.iter().filter(|s| s.flags & mm::pf::X != 0) {
            if let Some((start, file_end, _)) = s.pages(o.elf.bias) {
                let at = o.elf.bias.as_u64().wrapping_add(s.vaddr.0);
                let origin = at.wrapping_sub(s.offset.as_u64());
                out.push(Text { start: start.0, end: file_end.0, origin, name: name.clone() });
            }
        }
    }
    let exec_files = p.files.iter().filter(|f| f.prot & mm::prot::EXEC != 0);
    out.extend(exec_files.map(|f| Text {
        start: f.start.0,
        end: (f.start + f.len).0,
        origin: f.start.0.wrapping_sub(f.offset.0),
        name: f.path.rsplit('/').next().unwrap_or(&f.path).to_string(),
    }));
    out.sort_by_key(|t| t.start);
    out
}

/// The collapsible 2 MiB ranges of a program's file text, sorted: the replay counts the iTLB
/// misses of fetches inside them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Collapsible {
    ranges: Vec<u64>,
}

impl Collapsible {
    /// The collapsible ranges of `p` (as placed: after any rebase).
    pub fn of(p: &Program) -> Collapsible {
        let pmd = Bytes::PMD.as_u64();
        let mut ranges: Vec<u64> = texts(p)
            .iter()
            .filter(|t| t.origin.is_multiple_of(pmd))
            .flat_map(|t| (t.start.div_ceil(pmd)..t.end / pmd).map(|r| r * pmd))
            .collect();
        ranges.sort_unstable();
        ranges.dedup();
        Collapsible { ranges }
    }

    pub fn contains(&self, addr: u64) -> bool {
        let range = addr & !(Bytes::PMD.as_u64() - 1);
        self.ranges.binary_search(&range).is_ok()
    }
}

/// The footprint of the recorded program `path`'s first `max_refs` references per thread.
pub fn footprint(
    path: &str,
    rebase: &[String],
    max_refs: Option<u64>,
) -> Result<Footprint, ReplayError> {
    let (mut p, data) = Program::open(path).map_err(ReplayError::Input)?;
    let relocation = rebase_2m(&mut p, rebase).map_err(|message| {
        ReplayError::Input(crate::InputError { file: path.to_string(), line: None, message })
    })?;
    let texts = texts(&p);
    let collapsible = Collapsible::of(&p);
    let anon_ranges = merge_ranges(p.anon.iter().map(|m| (m.start.0, m.end.0)).collect());
    let mut f = Footprint::default();
    let (mut outside, mut anon, mut ranges) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for k in 0..p.threads.len() {
        let mut reader = p.thread_trace(path, data, k).map_err(ReplayError::Input)?;
        for _ in 0..max_refs.unwrap_or(u64::MAX) {
            let Some(x) = reader.next_ref().map_err(ReplayError::Input)? else { break };
            if x.kind != RefKind::Instr {
                continue;
            }
            let a = relocation.apply(x.addr).0;
            f.instructions += 1;
            let i = texts.partition_point(|t| t.end <= a);
            match texts.get(i).filter(|t| t.start <= a) {
                Some(t) => {
                    let e = f.per_object.entry(t.name.clone()).or_default();
                    if collapsible.contains(a) {
                        f.in_collapsible += 1;
                        e.0 += 1;
                        ranges.insert(a >> 21);
                    } else {
                        e.1 += 1;
                        outside.insert(a >> 12);
                    }
                }
                None if in_any(&anon_ranges, a) => {
                    f.anonymous += 1;
                    anon.insert(a >> 12);
                }
                None => {
                    outside.insert(a >> 12);
                }
            }
        }
    }
    (f.file_pages_outside, f.anon_pages, f.ranges_2m) =
        (outside.len() as u64, anon.len() as u64, ranges.len() as u64);
    Ok(f)
}

/// Whether `a` lies in one of `ranges` (sorted, disjoint).
fn in_any(ranges: &[(u64, u64)], a: u64) -> bool {
    let i = ranges.partition_point(|&(_, e)| e <= a);
    ranges.get(i).is_some_and(|&(s, _)| s <= a)
}
