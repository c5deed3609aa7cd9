//! `/sys/kernel/debug/lru_gen` (`mm/vmscan.c` `lru_gen_seq_show`, `lru_gen_seq_write`,
//! `run_cmd`, `run_aging`, `run_eviction`; v6.1-v6.18, `Documentation/admin-guide/mm/
//! multigen_lru.rst`): the multi-gen LRU's generations as the kernel shows them, and the two
//! commands that age and evict by hand.
//!
//! **Reading.** Per memory cgroup (in `mem_cgroup_iter`'s order: a pre-order walk of the
//! hierarchy, children in creation order) a `memcg ID PATH` line, per node a ` node NID` line,
//! then a line per generation from the oldest anon one (`min_seq[anon]`) to `max_seq`: its
//! sequence number, its age in milliseconds, and its anon and file pages, each followed by a
//! blank mark (the read-only `lru_gen_full` marks a type's generations below its `min_seq`
//! with `x`; it is not modelled). A memory cgroup's ID is `mem_cgroup_id()`: the root's is 1
//! and each new cgroup takes the lowest free one; cgroups are never removed in the model, so
//! the ID is the creation index plus one.
//!
//! **Writing.** Commands separated by `,`, `;` or newlines, each `+ MEMCG NID SEQ [SWAPPINESS
//! [FORCE_SCAN]]` (aging) or `- MEMCG NID SEQ [SWAPPINESS [NR_TO_RECLAIM]]` (eviction), read
//! as the kernel's `sscanf("%c %u %u %lu %n %u %n %lu %n")`: anything left after the last
//! number is EINVAL, as are an unknown memory cgroup, a node other than 0 and a swappiness
//! above 200 (v6.14: 201, `SWAPPINESS_ANON_ONLY`, which the model does not have and refuses by
//! name, [`unmodelled`]). A missing swappiness is the lruvec's own (`get_swappiness`); a
//! missing fifth number is -1, which aging reads as `force_scan` true and eviction as no
//! limit. Commands run in order and the first error ends the write (earlier ones took effect).
//! - Aging, v6.1-v6.13: a `SEQ` below `max_seq` does nothing, above it is EINVAL; without
//!   `force_scan`, a lruvec that already has `MAX_NR_GENS` generations of the evictable type is
//!   ERANGE; otherwise `try_to_inc_max_seq(max_seq)`, walking every page table when forced.
//!   From v6.14 ("mm/mglru: rework aging feedback", Yu Zhao's December 2024 series; id not
//!   verified) only a `SEQ` above `max_seq` is EINVAL, the lruvec is aged from `max_seq`
//!   whatever `SEQ` was, and a walk someone else already made for that sequence is EEXIST.
//! - Eviction: `SEQ` must leave `MIN_NR_GENS` generations (`SEQ + 2 <= max_seq`, else EINVAL);
//!   `evict_folios` batches run until the oldest evictable generation is past `SEQ`, the
//!   target is met or a batch scans nothing. Pages are counted as direct reclaim
//!   (`pgscan_direct`, `pgsteal_direct`), as the writer is not kswapd.
//!
//! Approximations: one node; ages from the virtual clock in ns, not jiffies; the write holds
//! no `blk_plug` and sets no `PF_MEMALLOC` (nothing here allocates).

use super::{MAX_LRU_BATCH, evict_folios, try_to_inc_max_seq};
use crate::errno::Errno;
use crate::kernel::{Cx, KState};
use crate::memcontrol::lruvec_gen_list;
use crate::types::ids::MemcgId;
use crate::types::mmzone::{MAX_NR_GENS, MIN_NR_GENS};
use crate::vmscan::{Reclaimer, ScanControl, swappiness};
use simcore::Pfn;
use std::fmt::Write as _;

/// The debugfs file's path.
pub const LRU_GEN: &str = "/sys/kernel/debug/lru_gen";

/// `MAX_SWAPPINESS`.
const MAX_SWAPPINESS: u64 = 200;

/// One command of a write, as `sscanf` leaves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cmd {
    cmd: char,
    memcg_id: u32,
    nid: u32,
    seq: u64,
    swappiness: Option<u32>,
    opt: Option<u64>,
}

/// Reads a run of decimal digits after optional white space (`%u`/`%lu`); the value wraps as
/// the kernel's `simple_strtoull` cast does.
fn scan_number(s: &str) -> Option<(u64, &str)> {
    let s = s.trim_start();
    let digits = s.len() - s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    let value =
        s[..digits].bytes().fold(0u64, |v, d| v.wrapping_mul(10).wrapping_add(u64::from(d - b'0')));
    Some((value, &s[digits..]))
}

/// One command (`lru_gen_seq_write`'s `sscanf`): EINVAL when fewer than four numbers or
/// anything after the last one.
fn parse_cmd(cur: &str) -> Result<Cmd, Errno> {
    let mut chars = cur.chars();
    let cmd = chars.next().ok_or(Errno::EINVAL)?;
    let mut rest = chars.as_str();
    let mut fields = [0u64; 5];
    let mut n = 0;
    while n < fields.len() {
        let Some((v, after)) = scan_number(rest) else { break };
        fields[n] = v;
        rest = after;
        n += 1;
    }
    if n < 3 || !rest.trim_start().is_empty() {
        return Err(Errno::EINVAL);
    }
    Ok(Cmd {
        cmd,
        memcg_id: fields[0] as u32,
        nid: fields[1] as u32,
        seq: fields[2],
        swappiness: (n > 3).then_some(fields[3] as u32),
        opt: (n > 4).then_some(fields[4]),
    })
}

/// The commands of a write's text, empty ones skipped.
fn commands(value: &str) -> impl Iterator<Item = Result<Cmd, Errno>> + '_ {
    value.split([',', ';', '\n']).map(str::trim_start).filter(|c| !c.is_empty()).map(parse_cmd)
}

/// Why a write the kernel would take is not modelled (`None` when it is).
pub fn unmodelled(value: &str) -> Option<String> {
    commands(value).flatten().find(|c| c.swappiness == Some(201)).map(|_| {
        "swappiness 201 (SWAPPINESS_ANON_ONLY, v6.14: evict anon only) is not modelled".into()
    })
}

/// A write to `/sys/kernel/debug/lru_gen`.
pub(crate) async fn lru_gen_write(cx: &Cx, value: &str) -> Result<(), Errno> {
    for cmd in commands(value) {
        run_cmd(cx, cmd?).await?;
    }
    Ok(())
}

/// `run_cmd`.
async fn run_cmd(cx: &Cx, c: Cmd) -> Result<(), Errno> {
    let (memcg, own, reworked) = {
        let st = cx.st();
        let memcg = st.mem_cgroup_from_id(u64::from(c.memcg_id)).ok_or(Errno::EINVAL)?;
        (memcg, swappiness(&st), st.lru.lrugen.reworked)
    };
    if c.nid != 0 {
        return Err(Errno::EINVAL);
    }
    let swappiness = match c.swappiness {
        None => own,
        Some(s) if u64::from(s) <= MAX_SWAPPINESS => u64::from(s),
        Some(_) => return Err(Errno::EINVAL),
    };
    match c.cmd {
        '+' => run_aging(cx, memcg, c.seq, swappiness, c.opt != Some(0), reworked).await,
        '-' => run_eviction(cx, memcg, c.seq, swappiness, c.opt.unwrap_or(u64::MAX)).await,
        _ => Err(Errno::EINVAL),
    }
}

/// `run_aging`.
async fn run_aging(
    cx: &Cx,
    memcg: MemcgId,
    seq: u64,
    swappiness: u64,
    force_scan: bool,
    reworked: bool,
) -> Result<(), Errno> {
    let (max_seq, min_seq) = {
        let st = cx.st();
        let g = &st.memcgs[memcg].lruvec.lrugen;
        (g.max_seq, g.min_seq)
    };
    if seq > max_seq {
        return Err(Errno::EINVAL);
    }
    if reworked {
        let aged = try_to_inc_max_seq(cx, memcg, max_seq, swappiness, force_scan).await;
        return if aged { Ok(()) } else { Err(Errno::EEXIST) };
    }
    if seq < max_seq {
        return Ok(());
    }
    let evictable = min_seq[usize::from(swappiness == 0)];
    if !force_scan && evictable + u64::from(MAX_NR_GENS) - 1 <= max_seq {
        return Err(Errno::ERANGE);
    }
    try_to_inc_max_seq(cx, memcg, max_seq, swappiness, force_scan).await;
    Ok(())
}

/// `run_eviction`.
async fn run_eviction(
    cx: &Cx,
    memcg: MemcgId,
    seq: u64,
    swappiness: u64,
    nr_to_reclaim: u64,
) -> Result<(), Errno> {
    if seq + MIN_NR_GENS > cx.st().memcgs[memcg].lruvec.lrugen.max_seq {
        return Err(Errno::EINVAL);
    }
    let mut sc = ScanControl::new(Reclaimer::Direct, crate::memcontrol::ROOT_MEMCG, nr_to_reclaim);
    loop {
        let oldest = cx.st().memcgs[memcg].lruvec.lrugen.evictable_min_seq(swappiness);
        if seq < oldest || sc.nr_reclaimed >= nr_to_reclaim {
            return Ok(());
        }
        let nr = (nr_to_reclaim - sc.nr_reclaimed).min(MAX_LRU_BATCH);
        if evict_folios(cx, memcg, nr, &mut sc, swappiness).await == 0 {
            return Ok(());
        }
    }
}

impl KState {
    /// `mem_cgroup_id()`: the creation index plus one (see the module note).
    pub fn mem_cgroup_id(&self, memcg: MemcgId) -> u64 {
        memcg.0 as u64 + 1
    }

    /// `mem_cgroup_from_id()`.
    fn mem_cgroup_from_id(&self, id: u64) -> Option<MemcgId> {
        let index = usize::try_from(id.checked_sub(1)?).ok()?;
        self.memcgs.iter().map(|(m, _)| m).find(|m| m.0 as usize == index)
    }

    /// `mem_cgroup_iter`'s order: the hierarchy in pre-order, children in creation order.
    fn memcgs_preorder(&self) -> Vec<MemcgId> {
        let mut order = Vec::new();
        let mut stack = vec![crate::memcontrol::ROOT_MEMCG];
        while let Some(m) = stack.pop() {
            order.push(m);
            let children = self.memcgs.iter().filter(|(_, c)| c.parent == Some(m));
            let children: Vec<MemcgId> = children.map(|(id, _)| id).collect();
            stack.extend(children.into_iter().rev());
        }
        order
    }

    /// The pages of generation `seq` of a type in `memcg`'s lruvec (0 outside
    /// `[min_seq[type], max_seq]`).
    pub fn lru_gen_pages(&self, memcg: MemcgId, seq: u64, file: bool) -> u64 {
        let g = &self.memcgs[memcg].lruvec.lrugen;
        if seq < g.min_seq[usize::from(file)] || seq > g.max_seq {
            return 0;
        }
        self.folios.list_pages(lruvec_gen_list(memcg, g.gen_of(seq), file))
    }

    /// The sequence number of the generation a folio is in (its `folio_lru_gen()` read back
    /// against its lruvec's `[min_seq[type], max_seq]`); `None` off the multi-gen lists.
    pub fn folio_lru_seq(&self, head: Pfn) -> Option<u64> {
        let generation = self.folios.lru_gen(head)?;
        let file = self.folio_is_file_lru(head);
        let g = &self.memcgs[self.folio_memcg(head)].lruvec.lrugen;
        (g.min_seq[usize::from(file)]..=g.max_seq).find(|&s| g.gen_of(s) == generation)
    }

    /// `/sys/kernel/debug/lru_gen` (`lru_gen_seq_show`, the read-write file).
    pub fn lru_gen_debugfs(&self, now_ns: u64) -> String {
        let mut out = String::new();
        for memcg in self.memcgs_preorder() {
            let m = &self.memcgs[memcg];
            let _ = writeln!(out, "memcg {:5} {}", self.mem_cgroup_id(memcg), m.path);
            let _ = writeln!(out, " node {:5}", 0);
            let g = &m.lruvec.lrugen;
            for seq in g.min_seq[0]..=g.max_seq {
                let birth = g.timestamps[usize::from(g.gen_of(seq))];
                let age_ms = now_ns.saturating_sub(birth) / 1_000_000;
                let _ = write!(out, " {seq:10} {age_ms:10}");
                for file in [false, true] {
                    let _ = write!(out, " {:10} ", self.lru_gen_pages(memcg, seq, file));
                }
                out.push('\n');
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_as_sscanf_does() {
        let c = parse_cmd("+ 1 0 4").unwrap();
        assert_eq!(
            (c.cmd, c.memcg_id, c.nid, c.seq, c.swappiness, c.opt),
            ('+', 1, 0, 4, None, None)
        );
        let c = parse_cmd("-2 0 3 60 1000  ").unwrap();
        assert_eq!((c.swappiness, c.opt), (Some(60), Some(1000)));
        assert_eq!(parse_cmd("+ 1 0"), Err(Errno::EINVAL));
        assert_eq!(parse_cmd("+ 1 0 4 x"), Err(Errno::EINVAL));
        assert_eq!(parse_cmd("+ 1 0 4 1 1 1"), Err(Errno::EINVAL));
        let all: Vec<_> = commands("+ 1 0 4;\n- 1 0 2,, ").collect();
        assert_eq!(all.len(), 2);
        assert!(unmodelled("- 1 0 2 201").is_some());
        assert!(unmodelled("- 1 0 2 200").is_none());
    }
}
