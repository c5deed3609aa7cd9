//! Memory cgroups and their lruvecs (`mm/memcontrol.c`, `mm/page_counter.c`,
//! `include/linux/memcontrol.h`; cgroup v2 interface files, Linux v6.8).
//!
//! - A tree of memory cgroups under the root. Each has `memory.max` (in pages; none for the
//!   root), a hierarchical page counter (`memory.current`: the pages charged to it and its
//!   descendants), event counters (`memory.stat`'s `workingset_*`, `pgscan`, `pgsteal`, ...,
//!   `memory.events`' `max` and `oom_kill`) and its lruvec on the machine's one node.
//! - A task belongs to one memory cgroup (`cgroup.procs`); a forked child joins its parent's.
//!   A new folio is charged to the allocating task's cgroup before it is allocated
//!   (`mem_cgroup_charge` → `try_charge`): when the charge would push any ancestor over its
//!   `memory.max`, that cgroup is reclaimed (`try_to_free_mem_cgroup_pages`) and the charge is
//!   retried, up to `MAX_RECLAIM_RETRIES` (16) attempts without progress, then the allocation
//!   fails with an out-of-memory (the kernel's memcg OOM killer picks a victim; here the
//!   faulting task gets `VM_FAULT_OOM`). A freed folio is uncharged.
//! - The lruvec: the classic lists (`lists[NR_LRU_LISTS]`), the multi-gen LRU state
//!   ([`crate::types::mmzone::LruGen`]), `nonresident_age` and the refault snapshot that reclaim's
//!   file-deactivation rule compares (`lruvec->refaults`). The lists themselves are
//!   [`crate::folio::Folios`] lists at [`lruvec_list`] indexes.
//!
//! Approximations: one node; the root cgroup's charge is not counted (cgroup v2 has no root
//! `memory.current`); no `memory.low`/`memory.min`/`memory.high`, no swap limit; swap-ins are
//! charged to the faulting task's cgroup rather than the one recorded for the swap entry;
//! `memory.stat`'s memory amounts are recounted from the lruvec's lists, so folios isolated by
//! reclaim at that instant are missed.

use crate::folio::{ListIdx, LruList, Mapping, pg};
use crate::kernel::KState;
use crate::types::ids::MemcgId;
use crate::types::ids::Pid;
use crate::types::memcontrol::{Lruvec, MemCgroup};
use crate::types::mmzone::LruGen;
use crate::vmstat::{VmStat, VmStats};
use simcore::Pfn;
use std::fmt::Write as _;

/// The root memory cgroup.
pub const ROOT_MEMCG: MemcgId = MemcgId(0);

/// Lists per lruvec: the five classic lists, then the multi-gen LRU's
/// `MAX_NR_GENS x ANON_AND_FILE` generation lists (one zone).
pub const LISTS_PER_LRUVEC: u32 = 5 + 2 * crate::types::mmzone::MAX_NR_GENS as u32;

/// The list of `memcg`'s lruvec that holds classic list `lru`.
pub fn lruvec_list(memcg: MemcgId, lru: LruList) -> ListIdx {
    ListIdx(memcg.0 * LISTS_PER_LRUVEC + lru as u32)
}

/// The generation list `generation` of type `file` of `memcg`'s lruvec (`lrugen->folios[generation][type]`).
pub fn lruvec_gen_list(memcg: MemcgId, generation: u8, file: bool) -> ListIdx {
    ListIdx(memcg.0 * LISTS_PER_LRUVEC + 5 + u32::from(generation) * 2 + u32::from(file))
}

/// `MAX_RECLAIM_RETRIES`.
pub const MAX_RECLAIM_RETRIES: u32 = 16;

impl MemCgroup {
    pub(crate) fn new(path: String, parent: Option<MemcgId>) -> MemCgroup {
        MemCgroup {
            path,
            parent,
            max: None,
            usage: 0,
            stat: VmStats::new(),
            events_max: 0,
            events_oom: 0,
            lruvec: Lruvec::default(),
        }
    }
}

impl KState {
    /// Creates a memory cgroup under `parent` (`mkdir`); its lists are created empty.
    pub fn mem_cgroup_create(
        &mut self,
        name: &str,
        parent: MemcgId,
        now_ns: u64,
    ) -> Result<MemcgId, String> {
        if name.is_empty() || name.contains('/') {
            return Err(format!("cgroup name `{name}`: expected one path component"));
        }
        let base = &self.memcgs[parent].path;
        let path = if base == "/" { format!("/{name}") } else { format!("{base}/{name}") };
        if self.memcgs.iter().any(|(_, m)| m.path == path) {
            return Err(format!("cgroup `{path}` exists"));
        }
        if self.memcgs.len() >= 1 << 16 {
            return Err("more than 65536 memory cgroups".into());
        }
        let mut m = MemCgroup::new(path, Some(parent));
        m.lruvec.lrugen = LruGen::new(now_ns);
        let id = self.memcgs.push(m);
        self.folios.grow_lists(self.memcgs.len() * LISTS_PER_LRUVEC as usize);
        Ok(id)
    }

    /// The cgroup of a path (`/`, `/a`, `/a/b`).
    pub fn mem_cgroup_by_path(&self, path: &str) -> Option<MemcgId> {
        self.memcgs.iter().find(|(_, m)| m.path == path).map(|(id, _)| id)
    }

    /// The memory cgroup a task charges to (`get_mem_cgroup_from_mm`).
    pub fn task_memcg(&self, pid: Option<Pid>) -> MemcgId {
        pid.and_then(|p| self.task_memcg.get(&p).copied()).unwrap_or(ROOT_MEMCG)
    }

    /// Moves a process into `memcg` (a write to `cgroup.procs`); its existing charges stay where
    /// they are, as cgroup v2 does.
    pub fn mem_cgroup_attach(&mut self, pid: Pid, memcg: MemcgId) {
        if memcg == ROOT_MEMCG {
            self.task_memcg.remove(&pid);
        } else {
            self.task_memcg.insert(pid, memcg);
        }
    }

    /// A forked child starts in its parent's cgroup (`cgroup_post_fork`).
    pub(crate) fn mem_cgroup_fork(&mut self, parent: Pid, child: Pid) {
        let m = self.task_memcg(Some(parent));
        self.mem_cgroup_attach(child, m);
    }

    /// The memory cgroup a folio is charged to.
    pub fn folio_memcg(&self, head: Pfn) -> MemcgId {
        MemcgId(u32::from(self.folios.memcg_raw(head)))
    }

    /// `memcg` and its ancestors up to, not including, the root.
    pub fn memcg_ancestors(&self, memcg: MemcgId) -> impl Iterator<Item = MemcgId> + '_ {
        std::iter::successors(Some(memcg), |&m| self.memcgs[m].parent)
            .take_while(|&m| m != ROOT_MEMCG)
    }

    /// Applies `f` to `memcg` and each of its ancestors up to, not including, the root.
    pub(crate) fn memcg_for_each_ancestor(
        &mut self,
        memcg: MemcgId,
        mut f: impl FnMut(MemcgId, &mut MemCgroup),
    ) {
        let mut cur = Some(memcg);
        while let Some(m) = cur.filter(|&m| m != ROOT_MEMCG) {
            f(m, &mut self.memcgs[m]);
            cur = self.memcgs[m].parent;
        }
    }

    /// Whether `id` is `memcg` or one of its descendants.
    pub fn memcg_in_subtree(&self, id: MemcgId, memcg: MemcgId) -> bool {
        std::iter::successors(Some(id), |&m| self.memcgs[m].parent).any(|m| m == memcg)
    }

    /// `memcg` and its descendants, in creation order (`mem_cgroup_iter` over a subtree).
    pub fn memcg_subtree(&self, memcg: MemcgId) -> impl Iterator<Item = MemcgId> + '_ {
        self.memcgs.iter().map(|(id, _)| id).filter(move |&id| self.memcg_in_subtree(id, memcg))
    }

    /// The first cgroup from `memcg` upwards that `nr` more pages would push over its
    /// `memory.max`, or `None` when the charge fits (`page_counter_try_charge`).
    pub(crate) fn memcg_over_limit(&self, memcg: MemcgId, nr: u64) -> Option<MemcgId> {
        self.memcg_ancestors(memcg)
            .find(|&m| self.memcgs[m].max.is_some_and(|max| self.memcgs[m].usage + nr > max))
    }

    /// Adds `nr` pages to the counters of `memcg` and its ancestors.
    pub(crate) fn memcg_charge_pages(&mut self, memcg: MemcgId, nr: u64) {
        self.memcg_for_each_ancestor(memcg, |_, m| m.usage += nr);
    }

    /// Removes `nr` pages from the counters of `memcg` and its ancestors.
    pub(crate) fn memcg_uncharge_pages(&mut self, memcg: MemcgId, nr: u64) {
        self.memcg_for_each_ancestor(memcg, |id, m| {
            let u = &mut m.usage;
            *u = u.checked_sub(nr).unwrap_or_else(|| panic!("memcg {id} uncharged below zero"));
        });
    }

    /// Counts an event in the global `/proc/vmstat` and in `memcg`'s `memory.stat`
    /// (`count_memcg_events` with `__count_vm_events`, or `mod_lruvec_state`).
    pub(crate) fn count_event(&mut self, memcg: MemcgId, key: VmStat, n: u64) {
        self.vmstat.add(key, n);
        self.memcgs[memcg].stat.add(key, n);
    }

    /// Counts an event in `memcg`'s `memory.stat` only (`count_memcg_events` for cgroup
    /// reclaim, which the global counters leave out).
    pub(crate) fn count_memcg_only(&mut self, memcg: MemcgId, key: VmStat, n: u64) {
        self.memcgs[memcg].stat.add(key, n);
    }

    /// Pages on `memcg`'s lruvec per classic list (for the multi-gen LRU, the two youngest
    /// generations count as active, `lru_gen_is_active`).
    pub fn lruvec_lru_pages(&self, memcg: MemcgId, lru: LruList) -> u64 {
        if lru == LruList::Unevictable || !self.lru.reclaim.lru_gen_enabled() {
            return self.folios.list_pages(lruvec_list(memcg, lru));
        }
        let file = matches!(lru, LruList::InactiveFile | LruList::ActiveFile);
        let active = matches!(lru, LruList::ActiveAnon | LruList::ActiveFile);
        let g = &self.memcgs[memcg].lruvec.lrugen;
        (g.min_seq[usize::from(file)]..=g.max_seq)
            .filter(|&seq| (seq + 1 >= g.max_seq) == active)
            .map(|seq| self.folios.list_pages(lruvec_gen_list(memcg, g.gen_of(seq), file)))
            .sum()
    }

    /// Pages on every lruvec's `lru` (the node's `NR_*` LRU counters).
    pub fn lru_pages(&self, lru: LruList) -> u64 {
        self.memcgs.iter().map(|(m, _)| self.lruvec_lru_pages(m, lru)).sum()
    }

    /// `memory.stat` of `memcg` (cgroup v2, the entries the model keeps; amounts in bytes).
    pub fn memory_stat(&self, memcg: MemcgId) -> String {
        let mut out = String::new();
        let subtree: Vec<MemcgId> = self.memcg_subtree(memcg).collect();
        let (mut anon, mut file, mut shmem, mut mapped, mut dirty, mut swapcached) =
            (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
        for &m in &subtree {
            for list in self.lruvec_all_lists(m) {
                for head in self.folios.list_iter(list) {
                    let nr = self.folios.order(head).pages();
                    // Neither: a shmem folio `shmem_writepage` moved to the swap cache.
                    let in_file = matches!(self.folios.mapping(head), Mapping::File(_));
                    anon += nr * u64::from(self.folios.is_anon(head));
                    file += nr * u64::from(in_file);
                    if self.folios.test(head, pg::SWAPBACKED) && in_file {
                        shmem += nr;
                    }
                    if self.folios.folio_mapcount(head) > 0 && in_file {
                        mapped += nr;
                    }
                    if self.folios.test(head, pg::DIRTY) && in_file {
                        dirty += nr;
                    }
                    if self.folios.test(head, pg::SWAPCACHE) {
                        swapcached += nr;
                    }
                }
            }
        }
        let lru = |l: LruList| subtree.iter().map(|&m| self.lruvec_lru_pages(m, l)).sum::<u64>();
        for (name, pages) in [
            ("anon", anon),
            ("file", file),
            ("shmem", shmem),
            ("file_mapped", mapped),
            ("file_dirty", dirty),
            ("swapcached", swapcached),
            ("inactive_anon", lru(LruList::InactiveAnon)),
            ("active_anon", lru(LruList::ActiveAnon)),
            ("inactive_file", lru(LruList::InactiveFile)),
            ("active_file", lru(LruList::ActiveFile)),
            ("unevictable", lru(LruList::Unevictable)),
        ] {
            let _ = writeln!(out, "{name} {}", pages * 4096);
        }
        let ev = |k: VmStat| subtree.iter().map(|&m| self.memcgs[m].stat.get(k)).sum::<u64>();
        for (name, keys) in [
            ("workingset_refault_anon", &[VmStat::WorkingsetRefaultAnon][..]),
            ("workingset_refault_file", &[VmStat::WorkingsetRefaultFile]),
            ("workingset_activate_anon", &[VmStat::WorkingsetActivateAnon]),
            ("workingset_activate_file", &[VmStat::WorkingsetActivateFile]),
            ("workingset_restore_anon", &[VmStat::WorkingsetRestoreAnon]),
            ("workingset_restore_file", &[VmStat::WorkingsetRestoreFile]),
            ("pgscan", &[VmStat::PgscanKswapd, VmStat::PgscanDirect]),
            ("pgsteal", &[VmStat::PgstealKswapd, VmStat::PgstealDirect]),
            ("pgscan_kswapd", &[VmStat::PgscanKswapd]),
            ("pgscan_direct", &[VmStat::PgscanDirect]),
            ("pgsteal_kswapd", &[VmStat::PgstealKswapd]),
            ("pgsteal_direct", &[VmStat::PgstealDirect]),
            ("pgmajfault", &[VmStat::Pgmajfault]),
            ("pgactivate", &[VmStat::Pgactivate]),
            ("pgdeactivate", &[VmStat::Pgdeactivate]),
        ] {
            let v: u64 = keys.iter().map(|&k| ev(k)).sum();
            let _ = writeln!(out, "{name} {v}");
        }
        out
    }

    /// `memory.current`, `memory.max` and `memory.events` of a non-root cgroup, as one text.
    pub fn memory_files(&self, memcg: MemcgId) -> String {
        let m = &self.memcgs[memcg];
        let max = m.max.map_or("max".to_string(), |p| (p * 4096).to_string());
        format!(
            "memory.current {}\nmemory.max {max}\nmemory.events max {}\nmemory.events oom_kill {}\n",
            m.usage * 4096,
            m.events_max,
            m.events_oom
        )
    }

    /// Every list of `memcg`'s lruvec (classic, then generations).
    pub(crate) fn lruvec_all_lists(&self, memcg: MemcgId) -> impl Iterator<Item = ListIdx> {
        (0..LISTS_PER_LRUVEC).map(move |i| ListIdx(memcg.0 * LISTS_PER_LRUVEC + i))
    }
}
