//! Kernel samepage merging (`mm/ksm.c`: `ksm_madvise`, `__ksm_enter`, `ksm_scan_thread`,
//! `ksm_do_scan`, `scan_get_next_rmap_item`, `get_next_rmap_item`, `cmp_and_merge_page`,
//! `stable_tree_search`, `unstable_tree_search_insert`, `try_to_merge_two_pages`,
//! `try_to_merge_with_ksm_page`, `try_to_merge_one_page`, `write_protect_page`, `replace_page`,
//! `break_ksm`, `unmerge_and_remove_all_rmap_items`, `rmap_walk_ksm`; read in the v5.8-era
//! text and checked against v6.8 for the eras below).
//!
//! `MADV_MERGEABLE` sets `VM_MERGEABLE` (smaps `mg`) on private VMAs and registers the mm with
//! ksmd (`__ksm_enter`, `MMF_VM_MERGEABLE`; a forked child of a registered mm is registered too,
//! `ksm_fork`). Like the kernel, `ksm_madvise` silently ignores (returns 0 for) VMAs that are
//! `VM_SHARED`, `VM_MAYSHARE`, `VM_PFNMAP`, `VM_IO`, `VM_DONTEXPAND`, `VM_HUGETLB`,
//! `VM_MIXEDMAP` or DAX: the advice succeeds and the flag stays off. `MADV_UNMERGEABLE`
//! unshares the range's KSM pages first (`unmerge_ksm_pages`: `break_ksm` write-faults each KSM
//! page, so COW gives the mapping its own copy), then clears the flag.
//!
//! ksmd (`ksm_scan_thread`) runs while `run` has `KSM_RUN_MERGE` and an mm is registered: each
//! round (`ksm_do_scan`) looks at up to `pages_to_scan` present anonymous pages of the mergeable
//! VMAs that have an anon_vma, from a cursor going round the registered mms in order (holes and
//! file pages do not count), and sleeps `sleep_millisecs` between rounds. Reaching the end of the
//! list ends the round and counts a full scan (`ksm_scan.seqnr`, shown as `full_scans`); the
//! next pass starts with an empty unstable tree. An mm that exited, or whose mergeable VMAs are
//! gone, leaves the list when the cursor reaches it, its rmap_items freed; rmap_items of
//! addresses the scan no longer finds are freed as it passes (`get_next_rmap_item`,
//! `remove_trailing_rmap_items`).
//!
//! One page (`cmp_and_merge_page`), first match wins: a KSM page already counted at this address
//! is left alone; otherwise the item leaves whatever tree it was in. (1) The stable tree: a KSM
//! page with the same content that still has a mapping counted (`is_page_sharing_candidate`) is
//! mapped here in place of the page. (2) The page's checksum must equal the one recorded at the
//! previous visit, else it is recorded and the page is volatile. (3) With `use_zero_pages`
//! (v4.11, e86c59b1b12d) a page of zeros is replaced by the shared zero page. (4) The unstable
//! tree: a page at another address with the same content is merged with this one
//! (`try_to_merge_two_pages`: this page becomes the KSM page, `PageKsm` with a new stable node,
//! then the other is replaced by it; if the second half fails, `break_cow` unshares the first);
//! otherwise the page enters the unstable tree.
//!
//! `write_protect_page`: under the PTE lock, a writable or dirty PTE is cleared and flushed, then
//! the page must have no reference beyond its mappings and the swap cache (`page_mapcount + 1 +
//! swapped != page_count`, the +1 being ksmd's own, which the model does not take): a GUP pin
//! or any other holder refuses the merge and the PTE is put back. From v5.19 the page's
//! PageAnonExclusive is cleared (`page_try_share_anon_rmap`, refused if maybe pinned). KSM pages
//! are never PageAnonExclusive. `replace_page` maps the KSM page read-only (or the zero page,
//! special, out of the anon RSS) and drops the old page's mapping and reference.
//!
//! `rmap_walk_ksm` looks only at the VMAs of the anon_vmas its rmap_items were merged under
//! (first the item's own mm, then forks of it made since), in every era. A page still
//! COW-shared with a fork parent when the child's mergeable VMA merges it keeps the parent's
//! read-only mapping, which that walk never visits (the parent's VMA is not in the child's
//! anon_vma): reclaim and migration cannot unmap it there. The model walks the same way, and the
//! checker's `rmap_finds_every_mapping` allows exactly that blind spot
//! ([`KState::ksm_rmap_blind_spot`]; found by the swarm, `scenarios/regressions/ksm-cow-parent.toml`).
//!
//! A write to a KSM page (`do_wp_page`, `cow.rs`, `fault.rs`) copies it, with one era of
//! exception: from v5.1 ("mm: reuse only-pte-mapped KSM page in do_wp_page()" 52d1e606ee73) to
//! v5.8, `reuse_ksm_page` reuses a KSM page whose only reference is the faulting PTE (not in the
//! swap cache, refcount frozen at 1): it becomes an ordinary anonymous page of the faulting VMA
//! (`page_move_anon_rmap`). v5.9 removed it with the `page_count` rule ("mm/ksm: Remove
//! reuse_ksm_page()" 1a0cf26323c8); `wp_can_reuse_anon_folio` (v5.19+) refuses KSM folios.
//! With `cow_reuse = mapcount` (the seed, which reverts 1a0cf26323c8) it is restored.
//!
//! Smart scan (v6.7+, "mm/ksm: add "smart" page scanning mode", 5e924ff54d08, and the
//! `pages_skipped` counter, e5a689912689; `era::has_ksm_smart_scan`) is modelled as the kernel
//! has it (`should_skip_rmap_item`, `skip_age`, the same in v6.8, v6.12 and v6.18): on by
//! default, the knob `smart_scan` (0 or 1) turns it off. Each rmap_item that is not a KSM page
//! ages by one per scan; from its fourth scan on it is looked at once, then skipped for 1, 2, 4
//! and then 8 scans as it ages, and a skipped item leaves its tree, so `pages_unshared` and
//! `pages_volatile` depend on how many full scans have run (checked against Debian's 6.12: 9
//! full scans left 3 skips and the page back in the unstable tree, as here). A skipped page
//! costs the scan nothing and does not count against `pages_to_scan`. Before v6.7 both files are
//! absent (ENOENT).
//!
//! At the start of each full scan ksmd drains every CPU's LRU batches (`lru_add_drain_all`,
//! `lru.rs`), so that a page `MADV_FREE` left in a per-CPU batch does not carry the batch's
//! reference into `write_protect_page`'s check.
//!
//! Counters, as the kernel keeps them, lazily: `pages_shared` counts stable nodes with at least
//! one rmap_item, `pages_sharing` the further rmap_items on them, `pages_unshared` the items
//! flagged as in the unstable tree, `pages_volatile` the rest; an item leaves its tree only when
//! the scan visits it again, so a COW of a KSM page shows in `pages_sharing` after ksmd's next
//! pass. `run`: 0 stops, 1 merges, 2 unmerges every KSM page of every registered mm and frees
//! all rmap_items (`unmerge_and_remove_all_rmap_items`, in the writer's context, then
//! `full_scans` restarts at 0). `merge_across_nodes` is accepted (0 or 1) and changes nothing on
//! the model's one node.
//!
//! Approximations: trees are ordered maps keyed by a 64-bit checksum of the contents (the kernel
//! orders by `memcmp` and checksums with xxhash, jhash2 before v5.1), every match confirmed by a
//! full comparison (stable-node chains past `max_page_sharing`: `ksm/chain.rs`); no NUMA
//! trees, no scan-time advisor (`advisor_mode`, in v6.8's source); pages of large folios are
//! skipped (the kernel splits them); reclaim never picks a KSM page (`vmscan.rs` keeps it
//! active: `rmap_walk_ksm` is modelled for the checkers and `folio_referenced`, swapping KSM
//! pages out is not); an exiting mm's rmap_items are freed when the cursor reaches it;
//! `break_ksm` is a write fault in every era (v6.4 made it an unshare fault, 6cce3314b928, not
//! verified: the copy would be mapped read-only); a checksum or compare costs `CopyPage4k`,
//! the walk to each address of a populated page table `PteUpdate`, page or not (the kernel's
//! `folio_walk_start` per address; without it a round over merged pages took no time, and with
//! `sleep_millisecs` 0 ksmd spun without virtual time passing); empty page tables are passed
//! for nothing. KSM-placed zero pages (v6.6): `ksm/zero.rs`; the per-process files:
//! `ksm/proc.rs`.

mod chain;
mod merge_any;
mod proc;
mod zero;

pub use merge_any::MMF_VM_MERGE_ANY;
pub(crate) use merge_any::{
    exec_keeps_merge_any, ksm_execve, ksm_vma_flags, prctl_get_memory_merge, prctl_set_memory_merge,
};
pub(crate) use proc::proc_read;
pub use proc::{PROC_SELF_KSM_STAT, PROC_SELF_MERGING_PAGES};

use crate::arch::tlbflush::flush_tlb_page;
use crate::era::KernelVersion;
use crate::errno::Errno;
use crate::folio::{Mapping, pg};
use crate::kernel::{Cx, KState, Kernel};
use crate::memory::{FaultKind, pte_bits, vm_normal_page};
use crate::mm_struct::MmCounter;
use crate::pgtable::Pte;
use crate::sim::cost::Cost;
use crate::types::ids::MmId;
use crate::types::ids::StableNodeId;
use crate::types::ids::VmaId;
use crate::types::ksm::{ItemState, Ksm, RmapItem, StableNode};
use crate::vma::VmFlags;
use chain::Entry;
use simcore::{Bytes, Pfn, SimDuration, VirtAddr};
use std::collections::{BTreeMap, BTreeSet};

/// `MMF_VM_MERGEABLE`: the mm is on ksmd's list.
pub const MMF_VM_MERGEABLE: u32 = 1 << 3;

/// The directory of KSM's sysfs files.
pub const SYSFS_DIR: &str = "/sys/kernel/mm/ksm/";

impl Default for Ksm {
    fn default() -> Self {
        Ksm {
            run: 0,
            pages_to_scan: 100,
            sleep_millisecs: 20,
            merge_across_nodes: 1,
            use_zero_pages: false,
            smart_scan: true,
            pages_skipped: 0,
            pages_scanned: 0,
            zero_pages: 0,
            walked: 0,
            max_page_sharing: chain::MAX_PAGE_SHARING,
            chains_prune_millisecs: chain::CHAINS_PRUNE_MILLISECS,
            chains: BTreeMap::new(),
            next_chain: 0,
            mm_slots: Vec::new(),
            cursor: None,
            seqnr: 0,
            items: BTreeMap::new(),
            nodes: BTreeMap::new(),
            next_node: 0,
            stable: BTreeSet::new(),
            unstable: BTreeSet::new(),
            wait: None,
            thread_mutex: None,
        }
    }
}

impl Ksm {
    /// `(pages_shared, pages_sharing, pages_unshared, pages_volatile)`.
    fn counts(&self) -> (u64, u64, u64, u64) {
        let used = self.nodes.values().filter(|n| !n.items.is_empty());
        let shared = used.clone().count() as u64;
        let sharing: u64 = used.map(|n| n.items.len() as u64 - 1).sum();
        let unshared =
            self.items.values().filter(|i| i.state == ItemState::Unstable).count() as u64;
        let volatile = self.items.len() as u64 - shared - sharing - unshared;
        (shared, sharing, unshared, volatile)
    }

    /// The value a KSM sysfs file shows on kernel `k`, `None` for one the model (or `k`) lacks.
    pub(crate) fn show(&self, name: &str, k: KernelVersion) -> Option<u64> {
        let (shared, sharing, unshared, volatile) = self.counts();
        let smart = crate::era::has_ksm_smart_scan(k);
        let chains = crate::era::has_ksm_max_page_sharing(k);
        let (nr_chains, nr_dups) = self.chain_counts();
        Some(match name {
            "run" => self.run,
            "pages_to_scan" => self.pages_to_scan,
            "sleep_millisecs" => self.sleep_millisecs,
            "merge_across_nodes" => self.merge_across_nodes,
            "use_zero_pages" if crate::era::has_ksm_use_zero_pages(k) => {
                u64::from(self.use_zero_pages)
            }
            "smart_scan" if smart => u64::from(self.smart_scan),
            "pages_skipped" if smart => self.pages_skipped,
            "pages_scanned" if crate::era::has_ksm_pages_scanned(k) => self.pages_scanned,
            "ksm_zero_pages" if crate::era::has_ksm_zero_pages(k) => self.zero_pages,
            "max_page_sharing" if chains => self.max_page_sharing,
            "stable_node_chains_prune_millisecs" if chains => self.chains_prune_millisecs,
            "stable_node_chains" if chains => nr_chains,
            "stable_node_dups" if chains => nr_dups,
            "pages_shared" => shared,
            "pages_sharing" => sharing,
            "pages_unshared" => unshared,
            "pages_volatile" => volatile,
            "full_scans" => self.seqnr,
            _ => return None,
        })
    }

    /// A write to a KSM knob on kernel `k`: ENOENT for a file the model (or `k`) lacks, EINVAL
    /// for a value it refuses (`run` above 2, `pages_to_scan` or `sleep_millisecs` out of `u32`,
    /// `merge_across_nodes`, `use_zero_pages` and `smart_scan` other than 0 and 1; the kernel
    /// parses `smart_scan` with `kstrtobool`, which also takes words the model's numeric writes
    /// do not carry).
    pub(crate) fn store(&mut self, name: &str, v: u64, k: KernelVersion) -> Result<(), Errno> {
        let bool_knob = |v: u64| if v > 1 { Err(Errno::EINVAL) } else { Ok(v) };
        let zero_pages_knob = crate::era::has_ksm_use_zero_pages(k);
        let chains = crate::era::has_ksm_max_page_sharing(k);
        match name {
            // Applied by `sysfs_stored`, under `ksm_thread_mutex` as `run_store` does.
            "run" if v <= 2 => {}
            "pages_to_scan" | "sleep_millisecs" if v > u64::from(u32::MAX) => {
                return Err(Errno::EINVAL);
            }
            "pages_to_scan" => self.pages_to_scan = v,
            // `kstrtoint`'s range, then at least 2; applied by `sysfs_stored`.
            "max_page_sharing" if chains && v > i32::MAX as u64 => return Err(Errno::ERANGE),
            "max_page_sharing" if chains && v < 2 => return Err(Errno::EINVAL),
            "max_page_sharing" if chains => {}
            "stable_node_chains_prune_millisecs" if chains && v > u64::from(u32::MAX) => {
                return Err(Errno::EINVAL);
            }
            "stable_node_chains_prune_millisecs" if chains => self.chains_prune_millisecs = v,
            "sleep_millisecs" => self.sleep_millisecs = v,
            "merge_across_nodes" => self.merge_across_nodes = bool_knob(v)?,
            "use_zero_pages" if zero_pages_knob => self.use_zero_pages = bool_knob(v)? == 1,
            "smart_scan" if crate::era::has_ksm_smart_scan(k) => {
                self.smart_scan = bool_knob(v)? == 1;
            }
            "run" => return Err(Errno::EINVAL),
            n if self.show(n, k).is_some() => return Err(Errno::EACCES),
            _ => return Err(Errno::ENOENT),
        }
        Ok(())
    }

    /// Adds what ksmd's future depends on to a state fingerprint.
    pub(crate) fn fingerprint(&self, d: &mut simcore::Digest) {
        d.write_u64(self.run ^ self.seqnr.rotate_left(8) ^ self.pages_to_scan.rotate_left(24));
        d.write_u64(u64::from(self.smart_scan) | self.max_page_sharing << 1);
        for (id, c) in &self.chains {
            d.write_u64(u64::from(id.0) ^ c.prune_time.as_ns().rotate_left(20));
            for n in &c.dups {
                d.write_u64(u64::from(n.0));
            }
        }
        d.write_u64(self.cursor.map_or(0, |(s, a)| a.0 ^ (s as u64 + 1).rotate_left(48)));
        for (&(mm, a), item) in &self.items {
            let state = match item.state {
                ItemState::Volatile => 0,
                ItemState::Unstable => 1,
                ItemState::Stable(n) => 2 | u64::from(n.0) << 2,
            };
            d.write_u64(a.0 ^ u64::from(mm.0).rotate_left(48) ^ item.oldchecksum.rotate_left(7));
            let smart = u64::from(item.age) | u64::from(item.remaining_skips) << 8;
            d.write_u64(state | smart << 48);
        }
        for (id, n) in &self.nodes {
            d.write_u64(n.kpfn.0 ^ u64::from(id.0).rotate_left(40) ^ n.items.len() as u64);
        }
    }
}

/// Whether `path` is one of KSM's sysfs files (by name below [`SYSFS_DIR`]).
pub(crate) fn sysfs_name(path: &str) -> Option<&str> {
    path.strip_prefix(SYSFS_DIR)
}

impl KState {
    /// `rmap_walk_ksm`'s candidates for the KSM page of `node`: every VMA covering a counted
    /// address in the anon_vma it was merged under (forks of it included).
    pub(crate) fn rmap_walk_ksm(&self, node: StableNodeId) -> Vec<(MmId, VmaId, VirtAddr)> {
        let Some(n) = self.ksm.nodes.get(&node) else { return Vec::new() };
        let mut out = Vec::new();
        for &(_, addr, av) in n.items.iter().chain(&n.mapped) {
            for &v in &self.anon_vmas[av].vmas {
                let vma = self.vma(v);
                if vma.contains(addr) && !out.contains(&(vma.mm, v, addr)) {
                    out.push((vma.mm, v, addr));
                }
            }
        }
        out
    }

    /// Whether a mapping of `node`'s KSM page at `addr` of `mm` lies where `rmap_walk_ksm`
    /// cannot look by construction: no rmap_item of the node is at that address of that mm,
    /// and the VMA there is in none of the items' anon_vma trees. That is a COW-shared page
    /// merged through one sharer's mergeable VMA while another (a fork parent, which is never
    /// in its child's anon_vma) keeps mapping it read-only: `write_protect_page` lets such a
    /// page merge (its mapcount accounts for the other mapping), and the kernel's walk misses
    /// that mapping too, so it neither unmaps nor ages it.
    pub(crate) fn ksm_rmap_blind_spot(&self, node: StableNodeId, mm: MmId, addr: VirtAddr) -> bool {
        let Some(n) = self.ksm.nodes.get(&node) else { return false };
        let Some(vma) = self.find_vma(mm, addr) else { return false };
        let mut items = n.items.iter().chain(&n.mapped);
        items.all(|&(imm, iaddr, av)| {
            (imm, iaddr) != (mm, addr) && !self.anon_vmas[av].vmas.contains(&vma)
        })
    }

    /// The page mapped at `addr` of `mm` that ksmd may look at: a present small anonymous page
    /// (KSM pages included), not the zero page.
    fn ksm_page_at(&self, mm: MmId, addr: VirtAddr) -> Option<Pfn> {
        let (t, i) = self.pt.pte_slot(self.mm(mm).pgd, addr)?;
        let page = vm_normal_page(self.pt.pte(t, i))?;
        let head = self.folios.head(page);
        (self.folios.is_anon(head) && self.folios.large(head).is_none()).then_some(page)
    }

    /// `get_ksm_page`: the KSM page of `node` if it still is one, else the node is stale and
    /// leaves the tree (`remove_node_from_stable_tree`, its items back to volatile).
    fn get_ksm_page(&mut self, node: StableNodeId) -> Option<Pfn> {
        let n = self.ksm.nodes.get(&node)?;
        let kpfn = n.kpfn;
        if self.folios.refcount(kpfn) > 0 && self.folios.mapping(kpfn) == Mapping::Ksm(node) {
            return Some(kpfn);
        }
        let n = self.ksm.nodes.remove(&node).expect("looked up above");
        self.ksm.stable.remove(&(n.checksum, node));
        self.chain_forget(node, n.chain);
        for (mm, a, _) in n.items {
            if let Some(item) = self.ksm.items.get_mut(&(mm, a)) {
                item.state = ItemState::Volatile;
            }
        }
        None
    }

    /// `remove_rmap_item_from_tree`.
    fn remove_rmap_item_from_tree(&mut self, mm: MmId, addr: VirtAddr) {
        let Some(item) = self.ksm.items.get_mut(&(mm, addr)) else { return };
        if let ItemState::Stable(node) = item.state
            && let Some(n) = self.ksm.nodes.get_mut(&node)
        {
            n.items.retain(|&(m, a, _)| (m, a) != (mm, addr));
        }
        // An unstable item sits in the tree under the checksum it was inserted with, which is
        // its `oldchecksum` until it leaves (only this pass's tree holds it).
        if item.state == ItemState::Unstable {
            self.ksm.unstable.remove(&(item.oldchecksum, mm, addr));
        }
        item.state = ItemState::Volatile;
    }

    /// Frees the rmap_items of `mm` in `[from, to)` (`get_next_rmap_item` passing them,
    /// `remove_trailing_rmap_items`).
    fn remove_rmap_items(&mut self, mm: MmId, from: VirtAddr, to: VirtAddr) {
        let keys: Vec<_> = self.ksm.items.range((mm, from)..(mm, to)).map(|(&k, _)| k).collect();
        for (m, a) in keys {
            self.remove_rmap_item_from_tree(m, a);
            self.ksm.items.remove(&(m, a));
        }
    }

    /// The first page ksmd may look at in `mm` from `addr`: its address, or `None` with whether
    /// the mm still has a mergeable VMA.
    fn next_mergeable_page(&mut self, mm: MmId, addr: VirtAddr) -> Result<VirtAddr, bool> {
        let (found, walked) = self.find_mergeable_page(mm, addr);
        self.ksm.walked += walked;
        found
    }

    /// [`KState::next_mergeable_page`]'s search, with the addresses of populated page tables it
    /// walked.
    fn find_mergeable_page(&self, mm: MmId, mut addr: VirtAddr) -> (Result<VirtAddr, bool>, u64) {
        let (mut any, mut walked) = (false, 0);
        for &v in self.mm(mm).vmas.values() {
            let vma = self.vma(v);
            if !vma.flags.has(VmFlags::MERGEABLE) {
                continue;
            }
            any = true;
            if vma.end <= addr || vma.anon_vma.is_none() {
                continue;
            }
            addr = addr.max(vma.start);
            let pgd = self.mm(mm).pgd;
            while addr < vma.end {
                if self.pt.pte_slot(pgd, addr).is_none() {
                    addr = self.pt.skip_empty(pgd, addr).min(vma.end);
                    continue;
                }
                walked += 1;
                if self.ksm_page_at(mm, addr).is_some() {
                    return (Ok(addr), walked);
                }
                addr = addr + Bytes::PAGE;
            }
        }
        (Err(any), walked)
    }

    /// Leaves the cursor's mm (slot `slot`): its rmap_items past the scan are freed, and the mm
    /// leaves the list if it exited or has no mergeable VMA. Returns whether a full scan ended.
    fn ksm_next_mm(&mut self, slot: usize, from: VirtAddr, keep: bool) -> bool {
        let mm = self.ksm.mm_slots[slot];
        self.remove_rmap_items(mm, from, VirtAddr(u64::MAX));
        if !keep {
            self.ksm.mm_slots.remove(slot);
            if let Some(Some(m)) = self.mms.get_mut(mm) {
                m.flags &= !MMF_VM_MERGEABLE;
            }
        }
        let next = if keep { slot + 1 } else { slot };
        if next < self.ksm.mm_slots.len() {
            self.ksm.cursor = Some((next, VirtAddr(0)));
            false
        } else {
            self.ksm.cursor = None;
            self.ksm.seqnr += 1;
            true
        }
    }
}

/// `__ksm_enter`: puts `mm` on ksmd's list (behind the cursor, or at the end while unmerging),
/// starting the daemon on the first registration and waking it.
pub(crate) fn ksm_enter(cx: &Cx, mm: MmId) {
    let start = {
        let mut st = cx.st();
        st.mm_mut(mm).flags |= MMF_VM_MERGEABLE;
        let k = &mut st.ksm;
        match k.cursor {
            Some((slot, _)) if k.run & 2 == 0 => {
                k.mm_slots.insert(slot, mm);
                k.cursor = Some((slot + 1, k.cursor.expect("matched").1));
            }
            _ => k.mm_slots.push(mm),
        }
        k.wait.is_none()
    };
    if start {
        let handle: &engine::Handle = cx;
        let wait = handle.wait_queue("ksm_thread_wait");
        let mutex = handle.mutex("ksm_thread_mutex");
        let mut st = cx.st();
        st.ksm.wait = Some(wait);
        st.ksm.thread_mutex = Some(mutex);
        drop(st);
        cx.spawn_kernel_daemon("ksmd", ksm_scan_thread);
    }
    wake_ksmd(cx);
}

fn wake_ksmd(cx: &Cx) {
    if let Some(wait) = cx.st().ksm.wait {
        wait.wake_up_all(cx);
    }
}

/// `ksmd_should_run`.
fn ksmd_should_run(st: &KState) -> bool {
    st.ksm.run & 1 != 0 && !st.ksm.mm_slots.is_empty()
}

/// The body of ksmd (`ksm_scan_thread`).
async fn ksm_scan_thread(cx: Cx) {
    loop {
        while !ksmd_should_run(&cx.st()) {
            let wait = cx.st().ksm.wait.expect("started with its wait queue");
            wait.wait(&cx).await;
        }
        let mutex = cx.st().ksm.thread_mutex.expect("started with its mutex");
        let guard = mutex.lock(&cx).await;
        if ksmd_should_run(&cx.st()) {
            ksm_do_scan(&cx).await;
        }
        drop(guard);
        if ksmd_should_run(&cx.st()) {
            let ms = cx.st().ksm.sleep_millisecs;
            cx.sleep(SimDuration::from_ms(ms)).await;
        }
    }
}

/// `ksm_do_scan`: up to `pages_to_scan` pages, ending early at the end of a full scan. The
/// walk to each page visited (`folio_walk_start`, `get_next_rmap_item`), which the kernel pays
/// for every page, merged or not, is charged once for the round at its end (one at least).
async fn ksm_do_scan(cx: &Cx) {
    let pages = cx.st().ksm.pages_to_scan;
    cx.st().ksm.walked = 0;
    for _ in 0..pages {
        cx.preempt_point().await;
        let Some((mm, addr)) = scan_get_next_rmap_item(cx).await else { break };
        cmp_and_merge_page(cx, mm, addr).await;
        cx.st().ksm.pages_scanned += 1;
    }
    // A round that finds no page still walks the mm list: time passes whatever it found.
    let walked = cx.st().ksm.walked;
    cx.charge_n(Cost::PteUpdate, walked.max(1)).await;
}

/// `scan_get_next_rmap_item`: the next page from the cursor, with its rmap_item made; `None`
/// at the end of a full scan (or with no mm registered).
async fn scan_get_next_rmap_item(cx: &Cx) -> Option<(MmId, VirtAddr)> {
    loop {
        let (slot, from) = {
            let mut st = cx.st();
            if st.ksm.mm_slots.is_empty() {
                return None;
            }
            if st.ksm.cursor.is_none() {
                // A full scan begins (`ksm_scan.mm_slot == &ksm_mm_head`): every CPU's LRU
                // batches are drained first, so that no page waits there with the batch's
                // reference, which `write_protect_page` would refuse (`lru_add_drain_all`), and
                // the unstable tree starts empty.
                st.lru_add_drain_all();
                st.ksm.unstable.clear();
                st.ksm.cursor = Some((0, VirtAddr(0)));
            }
            st.ksm.cursor.expect("set above")
        };
        let mm = cx.st().ksm.mm_slots[slot];
        let lock = cx.st().live_mmap_lock(mm);
        let Some(lock) = lock else {
            if cx.st().ksm_next_mm(slot, VirtAddr(0), false) {
                return None;
            }
            continue;
        };
        let _g = lock.read(cx).await;
        let mut st = cx.st();
        match st.ksm_next_item(slot, mm, from) {
            Ok(addr) => return Some((mm, addr)),
            Err((any, end)) => {
                if st.ksm_next_mm(slot, end, any) {
                    return None;
                }
            }
        }
    }
}

/// `skip_age`: how many scans smart scan skips an rmap_item of `age` scans before it looks at
/// it again (v6.7+, 5e924ff54d08; the same in v6.8, v6.12 and v6.18): 1 up to age 3, 2 up to 5,
/// 4 up to 8, then 8.
fn skip_age(age: u8) -> u8 {
    match age {
        0..=3 => 1,
        4..=5 => 2,
        6..=8 => 4,
        _ => 8,
    }
}

impl KState {
    /// The next page ksmd looks at in the cursor's mm (in slot `slot`) from `from`, with its
    /// rmap_item made and the items it passed freed (`scan_get_next_rmap_item`'s walk of one
    /// mm, `get_next_rmap_item`), smart scan's skips passed over. `Err` with whether the mm
    /// still has a mergeable VMA and where the walk of it ended (items past it are freed).
    fn ksm_next_item(
        &mut self,
        slot: usize,
        mm: MmId,
        mut from: VirtAddr,
    ) -> Result<VirtAddr, (bool, VirtAddr)> {
        loop {
            let addr = self.next_mergeable_page(mm, from).map_err(|any| (any, from))?;
            self.remove_rmap_items(mm, from, addr);
            let item =
                RmapItem { oldchecksum: 0, state: ItemState::Volatile, age: 0, remaining_skips: 0 };
            self.ksm.items.entry((mm, addr)).or_insert(item);
            from = addr + Bytes::PAGE;
            self.ksm.cursor = Some((slot, from));
            if !self.should_skip_rmap_item(mm, addr) {
                return Ok(addr);
            }
        }
    }

    /// `should_skip_rmap_item` (smart scan, v6.7+, while `smart_scan` is 1): the item at `addr`
    /// of `mm` ages by one scan; past its third, it is looked at once and then skipped for
    /// `skip_age` scans, taken out of its tree each time it is skipped. A KSM page is never
    /// skipped.
    fn should_skip_rmap_item(&mut self, mm: MmId, addr: VirtAddr) -> bool {
        let page = self.ksm_page_at(mm, addr).expect("the scan found a page here");
        let smart = self.ksm.smart_scan && crate::era::has_ksm_smart_scan(self.thp.kernel);
        if !smart || self.folios.is_ksm(page) {
            return false;
        }
        let item = self.ksm.items.get_mut(&(mm, addr)).expect("made by the scan");
        let age = item.age;
        item.age = age.saturating_add(1);
        if age < 3 {
            return false;
        }
        if item.remaining_skips == 0 {
            item.remaining_skips = skip_age(age);
            return false;
        }
        item.remaining_skips -= 1;
        self.ksm.pages_skipped += 1;
        self.remove_rmap_item_from_tree(mm, addr);
        true
    }
}

/// `calc_checksum`, charged as a page read.
async fn calc_checksum(cx: &Cx, page: Pfn) -> u64 {
    cx.charge(Cost::CopyPage4k).await;
    cx.st().mem.checksum(page.0)
}

/// `cmp_and_merge_page` for the rmap_item at `addr` of `mm` (the module note has the order).
async fn cmp_and_merge_page(cx: &Cx, mm: MmId, addr: VirtAddr) {
    let Some(page) = cx.st().ksm_page_at(mm, addr) else { return };
    {
        let mut st = cx.st();
        let item = st.ksm.items[&(mm, addr)];
        if let (Mapping::Ksm(node), ItemState::Stable(at)) = (st.folios.mapping(page), item.state)
            && node == at
        {
            return;
        }
        st.remove_rmap_item_from_tree(mm, addr);
    }
    let checksum = calc_checksum(cx, page).await;
    if let Some((node, kpage)) = stable_tree_search(cx, page, checksum).await {
        if try_to_merge_with_ksm_page(cx, mm, addr, page, Some(kpage)).await {
            stable_tree_append(&mut cx.st(), node, mm, addr);
        }
        return;
    }
    {
        let mut st = cx.st();
        let item = st.ksm.items.get_mut(&(mm, addr)).expect("made by the scan");
        if item.oldchecksum != checksum {
            item.oldchecksum = checksum;
            return;
        }
    }
    let zero_pfn = cx.st().zero_pfn;
    if cx.st().ksm.use_zero_pages
        && checksum == cx.st().mem.checksum(zero_pfn.0)
        && try_to_merge_with_ksm_page(cx, mm, addr, page, Some(zero_pfn)).await
    {
        return;
    }
    let Some((tmm, taddr, tpage)) = unstable_tree_search_insert(cx, mm, addr, page, checksum).await
    else {
        return;
    };
    try_to_merge_two_pages(cx, (mm, addr, page), (tmm, taddr, tpage), checksum).await;
}

/// `stable_tree_search`: the KSM page with `page`'s contents that may take one more mapping
/// (the candidate dup of a chain, `ksm/chain.rs`); `page` itself when it is a KSM page (forked);
/// `None` when the KSM page with those contents is full or has no mapping counted.
async fn stable_tree_search(cx: &Cx, page: Pfn, checksum: u64) -> Option<(StableNodeId, Pfn)> {
    let mapping = cx.st().folios.mapping(page);
    if let Mapping::Ksm(node) = mapping
        && cx.st().ksm.nodes.contains_key(&node)
    {
        return Some((node, page));
    }
    let now = cx.now();
    let limit = crate::era::has_ksm_max_page_sharing(cx.kernel().version);
    let entries = cx.st().ksm.entries(checksum, None);
    for entry in entries {
        let found = match entry {
            Entry::Plain(n) => cx.st().get_ksm_page(n).map(|p| (n, p)),
            Entry::Chain(c) => cx.st().stable_node_dup(c, true, now),
        };
        let Some((node, kpage)) = found else { continue };
        cx.charge(Cost::CopyPage4k).await;
        if !cx.st().mem.same(kpage.0, page.0) {
            continue;
        }
        return cx.st().ksm.sharing_candidate(node, 0, limit).then_some((node, kpage));
    }
    None
}

/// `stable_tree_append`.
fn stable_tree_append(st: &mut KState, node: StableNodeId, mm: MmId, addr: VirtAddr) {
    let Some(vma) = st.find_vma(mm, addr) else { return };
    let av = st.vma(vma).anon_vma.expect("a merged page's VMA has an anon_vma");
    let n = st.ksm.nodes.get_mut(&node).expect("live node");
    n.mapped.retain(|&(m, a, _)| (m, a) != (mm, addr));
    n.items.push((mm, addr, av));
    st.ksm.items.get_mut(&(mm, addr)).expect("scanned item").state = ItemState::Stable(node);
}

/// `unstable_tree_search_insert`: another address whose page has `page`'s contents now, or
/// `page` enters the unstable tree.
async fn unstable_tree_search_insert(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    page: Pfn,
    checksum: u64,
) -> Option<(MmId, VirtAddr, Pfn)> {
    let candidates: Vec<(MmId, VirtAddr)> = cx
        .st()
        .ksm
        .unstable
        .range((checksum, MmId(0), VirtAddr(0))..)
        .take_while(|(c, _, _)| *c == checksum)
        .map(|&(_, m, a)| (m, a))
        .collect();
    for (tmm, taddr) in candidates {
        let tree_page = {
            let st = cx.st();
            let live = st.mms.get(tmm).is_some_and(|m| m.is_some());
            if !live { None } else { st.ksm_page_at(tmm, taddr) }
        };
        let Some(tree_page) = tree_page else { continue };
        if tree_page == page {
            return None;
        }
        cx.charge(Cost::CopyPage4k).await;
        if cx.st().mem.same(tree_page.0, page.0) {
            return Some((tmm, taddr, tree_page));
        }
    }
    let mut st = cx.st();
    st.ksm.unstable.insert((checksum, mm, addr));
    st.ksm.items.get_mut(&(mm, addr)).expect("scanned item").state = ItemState::Unstable;
    None
}

/// `try_to_merge_two_pages` and the stable-tree insertion that follows it.
async fn try_to_merge_two_pages(
    cx: &Cx,
    (mm, addr, page): (MmId, VirtAddr, Pfn),
    (tmm, taddr, tpage): (MmId, VirtAddr, Pfn),
    checksum: u64,
) {
    if !try_to_merge_with_ksm_page(cx, mm, addr, page, None).await {
        return;
    }
    let node = match cx.st().folios.mapping(page) {
        Mapping::Ksm(n) => n,
        m => panic!("a page made KSM has mapping {m:?}"),
    };
    if !try_to_merge_with_ksm_page(cx, tmm, taddr, tpage, Some(page)).await {
        break_cow(cx, mm, addr).await;
        return;
    }
    let now = cx.now();
    let mut st = cx.st();
    st.ksm.stable.insert((checksum, node));
    // The tree's item leaves the unstable tree before both are counted on the new node.
    st.remove_rmap_item_from_tree(tmm, taddr);
    if crate::era::has_ksm_max_page_sharing(st.thp.kernel) {
        st.stable_tree_insert_chained(node, now);
    }
    stable_tree_append(&mut st, node, tmm, taddr);
    stable_tree_append(&mut st, node, mm, addr);
}

/// `try_to_merge_with_ksm_page` / `try_to_merge_one_page`: under `mm`'s `mmap_lock` for read,
/// write-protects `page` at `addr` and maps `kpage` there instead (same contents), or with
/// `None` turns `page` into a KSM page with a new stable node. Returns whether it merged.
async fn try_to_merge_with_ksm_page(
    cx: &Cx,
    mm: MmId,
    addr: VirtAddr,
    page: Pfn,
    kpage: Option<Pfn>,
) -> bool {
    if kpage == Some(page) {
        return true; // a KSM page forked
    }
    let lock = cx.st().live_mmap_lock(mm);
    let Some(lock) = lock else { return false };
    let _g = lock.read(cx).await;
    let vma = {
        let st = cx.st();
        st.find_vma(mm, addr).filter(|&v| st.vma(v).flags.has(VmFlags::MERGEABLE))
    };
    let Some(vma) = vma else { return false };
    if !crate::folio::folio_trylock(&mut cx.st().folios, page) {
        return false;
    }
    let merged = match write_protect_page(cx, mm, addr, page).await {
        None => false,
        Some(_) if kpage.is_none() => {
            let mut st = cx.st();
            let node = StableNodeId(st.ksm.next_node);
            st.ksm.next_node += 1;
            let av = st.vma(vma).anon_vma.expect("a mergeable page's VMA has an anon_vma");
            let checksum = st.mem.checksum(page.0);
            let n = StableNode {
                kpfn: page,
                checksum,
                mapped: vec![(mm, addr, av)],
                items: Vec::new(),
                chain: None,
            };
            st.ksm.nodes.insert(node, n);
            st.folios.set_mapping(page, Mapping::Ksm(node), 0);
            st.folio_mark_accessed(page);
            st.folios.set(page, pg::DIRTY);
            true
        }
        Some(orig) => {
            let kpage = kpage.expect("matched None above");
            cx.charge(Cost::CopyPage4k).await;
            let same = cx.st().mem.same(page.0, kpage.0);
            same && replace_page(cx, mm, vma, addr, page, kpage, orig).await
        }
    };
    cx.st().folios.clear_flag(page, pg::LOCKED);
    merged
}

/// `write_protect_page`: the PTE at `addr` made read-only and clean if it was writable or
/// dirty, refused when `page` has references beyond its mappings and the swap cache; returns
/// the PTE it leaves.
async fn write_protect_page(cx: &Cx, mm: MmId, addr: VirtAddr, page: Pfn) -> Option<Pte> {
    let slot = {
        let st = cx.st();
        st.pt.pte_slot(st.mm(mm).pgd, addr)
    };
    let (table, idx) = slot?;
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    cx.charge(Cost::PteUpdate).await;
    let tracks_exclusive = cx.kernel().switches.cow_reuse.tracks_anon_exclusive();
    let (pte, flush) = {
        let mut st = cx.st();
        let pte = st.pt.pte(table, idx);
        if !st.pt.is_live(table) || !pte.is_present() || pte.pfn() != page {
            return None;
        }
        if !(pte.write() || pte.dirty()) {
            (pte, false)
        } else {
            let swapped = u32::from(st.folios.test(page, pg::SWAPCACHE));
            let f = &st.folios;
            if f.page_mapcount(page) + swapped != f.refcount(page)
                || (tracks_exclusive && f.maybe_dma_pinned(page))
            {
                return None;
            }
            if pte.dirty() {
                st.folios.set(page, pg::DIRTY);
            }
            let new = pte.without(Pte::RW | Pte::DIRTY);
            st.pt.set_pte(table, idx, new);
            (new, true)
        }
    };
    cx.st().folios.clear_flag(page, pg::ANON_EXCLUSIVE);
    if flush {
        flush_tlb_page(cx, mm, addr).await;
    }
    Some(pte)
}

/// `replace_page`: maps `kpage` (a KSM page, or the zero page) at `addr` in place of `page`,
/// if the PTE is still `orig`.
async fn replace_page(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    addr: VirtAddr,
    page: Pfn,
    kpage: Pfn,
    orig: Pte,
) -> bool {
    let slot = {
        let st = cx.st();
        st.pt.pte_slot(st.mm(mm).pgd, addr)
    };
    let Some((table, idx)) = slot else { return false };
    let ptl = cx.st().pt.ptl(table);
    let _g = ptl.lock(cx).await;
    cx.charge(Cost::PteInstall).await;
    {
        let mut st = cx.st();
        if !st.pt.is_live(table) || st.pt.pte(table, idx) != orig {
            return false;
        }
        let flags = st.vma(vma).flags;
        let new = if kpage == st.zero_pfn {
            st.mm_mut(mm).sub_rss(MmCounter::AnonPages, 1);
            st.ksm_map_zero_page(mm);
            let ksm = st.ksm_zero_pte_bits();
            Pte::new(kpage, pte_bits(flags, false, false) & !Pte::ACCESSED | Pte::SPECIAL | ksm)
        } else {
            if let Mapping::Ksm(node) = st.folios.mapping(kpage) {
                let av = st.vma(vma).anon_vma.expect("a mergeable page's VMA has an anon_vma");
                let n = st.ksm.nodes.get_mut(&node).expect("a KSM page's node");
                n.mapped.push((mm, addr, av));
            }
            st.folios.get(kpage, 1);
            st.rmap_add_pte(kpage);
            Pte::new(kpage, pte_bits(flags, false, false) & !Pte::ACCESSED)
        };
        st.pt.set_pte(table, idx, new);
        st.rmap_remove_pte(page);
        if st.folios.page_mapcount(page) == 0
            && st.folios.test(page, pg::SWAPCACHE)
            && !st.folios.test(page, pg::WRITEBACK)
        {
            st.folio_free_swap(page);
        }
        st.put_folio(page, 1);
    }
    flush_tlb_page(cx, mm, addr).await;
    true
}

/// `break_cow`: unshares the KSM page at `addr` of `mm` after a failed pair merge.
async fn break_cow(cx: &Cx, mm: MmId, addr: VirtAddr) {
    let lock = cx.st().live_mmap_lock(mm);
    let Some(lock) = lock else { return };
    let _g = lock.read(cx).await;
    let vma = cx.st().find_vma(mm, addr);
    if let Some(vma) = vma {
        // An error leaves the page shared, as the kernel's break_cow ignores it.
        let _ = break_ksm(cx, mm, vma, addr).await;
    }
}

/// `break_ksm`: while a KSM page is mapped at `addr`, write-fault it (the caller holds
/// `mmap_lock`); ENOMEM when the fault fails.
async fn break_ksm(cx: &Cx, mm: MmId, vma: VmaId, addr: VirtAddr) -> Result<(), Errno> {
    loop {
        let ksm = {
            let st = cx.st();
            st.ksm_page_at(mm, addr).is_some_and(|p| st.folios.is_ksm(p))
                || st
                    .pt
                    .pte_slot(st.mm(mm).pgd, addr)
                    .is_some_and(|(t, i)| st.is_ksm_zero_pte(st.pt.pte(t, i)))
        };
        if !ksm {
            return Ok(());
        }
        let acct = crate::fault::FaultAcct::Remote;
        crate::fault::handle_mm_fault(cx, mm, vma, addr, FaultKind::Write, acct)
            .await
            .map_err(|_| Errno::ENOMEM)?;
    }
}

/// `unmerge_ksm_pages` over `[start, end)` of `vma`.
async fn unmerge_ksm_pages(
    cx: &Cx,
    mm: MmId,
    vma: VmaId,
    start: VirtAddr,
    end: VirtAddr,
) -> Result<(), Errno> {
    let mut addr = start;
    while addr < end {
        let next = {
            let st = cx.st();
            let pgd = st.mm(mm).pgd;
            match st.pt.pte_slot(pgd, addr) {
                Some(_) => addr + Bytes::PAGE,
                None => st.pt.skip_empty(pgd, addr).min(end),
            }
        };
        if next == addr + Bytes::PAGE {
            break_ksm(cx, mm, vma, addr).await?;
        }
        addr = next;
    }
    Ok(())
}

/// `__ksm_should_add_vma`: whether a VMA with `flags` (`dax`: a DAX file) becomes mergeable
/// when asked (`MADV_MERGEABLE`, `PR_SET_MEMORY_MERGE`): not mergeable yet, and compatible.
fn ksm_should_add_vma(flags: VmFlags, dax: bool) -> bool {
    !flags.has(VmFlags::MERGEABLE) && !ksm_incompatible(flags, dax)
}

/// Whether `ksm_madvise` ignores `MADV_MERGEABLE` on a VMA with `flags` (`dax`: a DAX file).
fn ksm_incompatible(flags: VmFlags, dax: bool) -> bool {
    dax || flags.has(
        VmFlags::SHARED
            | VmFlags::MAYSHARE
            | VmFlags::PFNMAP
            | VmFlags::IO
            | VmFlags::DONTEXPAND
            | VmFlags::HUGETLB
            | VmFlags::MIXEDMAP,
    )
}

/// `madvise(MADV_MERGEABLE / MADV_UNMERGEABLE)` over `[start, end)` of `mm`, under `mmap_lock`
/// for write (`ksm_madvise` per VMA, then `madvise_update_vma`, which splits only a VMA whose
/// flags change).
pub(crate) async fn ksm_madvise(
    cx: &Cx,
    mm: MmId,
    start: VirtAddr,
    end: VirtAddr,
    mergeable: bool,
) -> Result<(), Errno> {
    let lock = cx.st().mm(mm).mmap_lock;
    let _g = lock.write(cx).await;
    // The advice goes to each VMA of the range; a hole is ENOMEM at the end (`walk_vmas`).
    let (vmas, unmapped) = crate::madvise::walk_vmas(&cx.st(), mm, start, end);
    for v in vmas {
        let (vs, ve, flags, dax, anon_vma) = {
            let st = cx.st();
            let vma = st.vma(v);
            let dax = st.vma_is_dax(v);
            (vma.start.max(start), vma.end.min(end), vma.flags, dax, vma.anon_vma.is_some())
        };
        let changes =
            if mergeable { ksm_should_add_vma(flags, dax) } else { flags.has(VmFlags::MERGEABLE) };
        if !changes {
            continue;
        }
        if mergeable && cx.st().mm(mm).flags & MMF_VM_MERGEABLE == 0 {
            ksm_enter(cx, mm);
        }
        if !mergeable && anon_vma {
            unmerge_ksm_pages(cx, mm, v, vs, ve).await?;
        }
        let parts = cx.st().vma_split_range(mm, vs, ve);
        for p in parts {
            let mut st = cx.st();
            let f = st.vma(p).flags;
            let bit = VmFlags::MERGEABLE;
            st.vma_mut(p).flags = VmFlags(if mergeable { f.0 | bit } else { f.0 & !bit });
        }
    }
    unmapped
}

/// `ksm_fork`: a child of a registered mm is registered, and merges any if its parent does.
pub(crate) fn ksm_fork(cx: &Cx, child: MmId, parent: MmId) {
    if cx.st().mm(parent).flags & MMF_VM_MERGEABLE != 0 {
        cx.st().ksm_fork_zero_pages(child, parent);
        ksm_enter(cx, child);
    }
    merge_any::inherit_merge_any(&mut cx.st(), child, parent);
}

/// After a write of `value` (validated by [`Ksm::store`]) to a KSM sysfs file: `run_store`
/// changes `run` under `ksm_thread_mutex`, so never in the middle of ksmd's scan, and a change
/// to 2 unmerges everything before the mutex is dropped (on failure `run` falls back to 0 and
/// the error is returned); a merge request then wakes ksmd.
pub(crate) async fn sysfs_stored(cx: &Cx, path: &str, value: u64) -> Result<(), Errno> {
    let name = sysfs_name(path);
    if name != Some("run") && name != Some("max_page_sharing") {
        return Ok(());
    }
    let mutex = cx.st().ksm.thread_mutex;
    let guard = match mutex {
        Some(m) => Some(m.lock(cx).await),
        None => None,
    };
    if name == Some("max_page_sharing") {
        return cx.st().set_max_page_sharing(value);
    }
    let changed = cx.st().ksm.run != value;
    if changed {
        cx.st().ksm.run = value;
    }
    if changed
        && value == 2
        && let Err(e) = unmerge_and_remove_all_rmap_items(cx).await
    {
        cx.st().ksm.run = 0;
        return Err(e);
    }
    drop(guard);
    if value & 1 != 0 {
        wake_ksmd(cx);
    }
    Ok(())
}

/// `unmerge_and_remove_all_rmap_items`: every KSM page of every registered mm's mergeable VMAs
/// unshared, every rmap_item freed, exited mms dropped, stale stable nodes removed, and
/// `full_scans` back to 0.
async fn unmerge_and_remove_all_rmap_items(cx: &Cx) -> Result<(), Errno> {
    let slots = cx.st().ksm.mm_slots.clone();
    for mm in slots {
        let lock = cx.st().live_mmap_lock(mm);
        let Some(lock) = lock else { continue };
        let _g = lock.read(cx).await;
        let vmas: Vec<VmaId> = cx.st().mm(mm).vmas.values().copied().collect();
        for v in vmas {
            let (s, e, on) = {
                let st = cx.st();
                let vma = st.vma(v);
                (vma.start, vma.end, vma.flags.has(VmFlags::MERGEABLE) && vma.anon_vma.is_some())
            };
            if on {
                unmerge_ksm_pages(cx, mm, v, s, e).await?;
            }
        }
    }
    let mut st = cx.st();
    let live: Vec<MmId> = st
        .ksm
        .mm_slots
        .iter()
        .copied()
        .filter(|&m| st.mms.get(m).is_some_and(|x| x.is_some()))
        .collect();
    let k = &mut st.ksm;
    k.mm_slots = live;
    k.items.clear();
    k.unstable.clear();
    k.cursor = None;
    k.seqnr = 0;
    // Its error (a KSM page still mapped) is ignored, as the kernel's caller does.
    let _ = st.remove_all_stable_nodes();
    Ok(())
}

/// Whether a write fault may reuse the KSM page `page` mapped at `addr` of `vma`
/// (`reuse_ksm_page`, v5.1 52d1e606ee73 to v5.8, and under the seed's `mapcount` rule): only
/// when its one reference is this PTE and it is not in the swap cache; it then becomes an
/// ordinary exclusive anonymous page of `vma`'s anon_vma (`page_move_anon_rmap`).
pub(crate) fn reuse_ksm_page(
    st: &mut KState,
    k: &Kernel,
    page: Pfn,
    vma: VmaId,
    addr: VirtAddr,
) -> bool {
    if !crate::era::reuses_ksm_page(k.switches.cow_reuse, k.version)
        || st.folios.test(page, pg::SWAPCACHE)
        || st.folios.refcount(page) != 1
        || !crate::folio::folio_trylock(&mut st.folios, page)
    {
        return false;
    }
    let v = st.vma(vma);
    let av = v.anon_vma.expect("a mapped anonymous page's VMA has an anon_vma");
    let index = v.page_index(addr);
    let rel = u32::try_from(index - st.anon_vmas[av].base).expect("anon index out of range");
    st.folios.set_mapping(page, Mapping::Anon(av), rel);
    st.folios.set(page, pg::ANON_EXCLUSIVE);
    st.folios.clear_flag(page, pg::LOCKED);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ids::AnonVmaId;

    #[test]
    fn counters_follow_the_trees() {
        let mut k = Ksm::default();
        let (mm, av) = (MmId(0), AnonVmaId(0));
        let node = StableNodeId(0);
        let mapped = vec![(mm, VirtAddr(0), av)];
        k.nodes.insert(
            node,
            StableNode { kpfn: Pfn(5), checksum: 1, mapped, items: Vec::new(), chain: None },
        );
        for i in 0..4u64 {
            let a = VirtAddr(i << 12);
            let state = match i {
                0..=2 => ItemState::Stable(node),
                _ => ItemState::Unstable,
            };
            k.items.insert((mm, a), RmapItem { state, ..item0() });
            if i < 3 {
                k.nodes.get_mut(&node).unwrap().items.push((mm, a, av));
            }
        }
        let volatile = RmapItem { oldchecksum: 3, state: ItemState::Volatile, ..item0() };
        k.items.insert((mm, VirtAddr(9 << 12)), volatile);
        assert_eq!(k.counts(), (1, 2, 1, 1));
        let (v4_10, v6_6, v6_7) =
            (KernelVersion::new(4, 10), KernelVersion::new(6, 6), KernelVersion::new(6, 7));
        assert_eq!(k.show("pages_sharing", v6_7), Some(2));
        assert_eq!(k.show("use_zero_pages", v4_10), None);
        assert_eq!(k.store("run", 3, v6_7), Err(Errno::EINVAL));
        assert_eq!(k.store("pages_shared", 1, v6_7), Err(Errno::EACCES));
        // Smart scan's knob and counter exist from v6.7 only.
        assert_eq!(k.show("smart_scan", v6_7), Some(1));
        assert_eq!(k.show("smart_scan", v6_6), None);
        assert_eq!(k.store("smart_scan", 0, v6_6), Err(Errno::ENOENT));
        assert_eq!(k.store("smart_scan", 2, v6_7), Err(Errno::EINVAL));
        assert_eq!(k.store("smart_scan", 0, v6_7), Ok(()));
        assert_eq!(k.show("smart_scan", v6_7), Some(0));
        assert_eq!(k.store("pages_skipped", 0, v6_7), Err(Errno::EACCES));
    }

    fn item0() -> RmapItem {
        RmapItem { oldchecksum: 0, state: ItemState::Volatile, age: 0, remaining_skips: 0 }
    }

    #[test]
    fn smart_scan_skips_grow_with_age() {
        // Ages 0-2 are looked at; from age 3 one look, then `skip_age` skips, and again.
        let ages: Vec<u8> = (0..=10).map(skip_age).collect();
        assert_eq!(ages, [1, 1, 1, 1, 2, 2, 4, 4, 4, 8, 8]);
        assert_eq!(skip_age(u8::MAX), 8);
    }
}
