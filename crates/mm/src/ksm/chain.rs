//! KSM's sharing limit and stable-node chains (`mm/ksm.c`: `is_page_sharing_candidate`,
//! `stable_node_dup`, `__stable_node_chain`, `alloc_stable_node_chain`,
//! `stable_node_chain_add_dup`, `stable_node_dup_del`, `remove_all_stable_nodes`,
//! `max_page_sharing_store`), since v4.13 ("ksm: introduce ksm_max_page_sharing per page
//! deduplication limit", 2c653d0ee2ae; read in v6.18, the same in v6.8 and v6.12).
//!
//! A KSM page takes at most `max_page_sharing` mappings (256 by default, at least 2). A stable
//! node is a candidate for one more while it has a mapping counted and fewer than the limit; a
//! page whose contents match only full KSM pages is not merged with them but waits in the
//! unstable tree for a match of its own, and the KSM page made from that pair joins the full
//! one as a *dup* of a *chain*: the tree's entry for those contents becomes the chain
//! (`stable_node_chains`), its dups the KSM pages (`stable_node_dups`, each also counted in
//! `pages_shared`). Looking the contents up picks a dup (`stable_node_dup`): the first one in
//! the chain's order that is a candidate, or, every `stable_node_chains_prune_millisecs` (2 s)
//! per chain, after walking them all (stale dups leave as the walk finds them) the candidate
//! with the most mappings; a dup that can take two more moves to the chain's head. A chain
//! down to one dup is collapsed back into a plain node when a lookup passes it; one with none
//! is freed then. A dup whose page is gone leaves its chain when a lookup finds it stale.
//! Changing `max_page_sharing` is EBUSY while any KSM page is shared (`pages_shared`) and
//! removes the stale nodes first; `run` = 2 frees every chain with the nodes.
//!
//! Approximations: the kernel's rbtree walk passes (and may collapse or prune) chains of other
//! contents on its way down; the model looks only at nodes whose checksum matches (see
//! `ksm.rs`). `max_page_sharing_store` removes a node whose KSM page is no longer mapped and
//! only refuses one still mapped; the model refuses both (no item counts them, so the case
//! needs a KSM page unmapped between two scans). Before v4.13 there is no limit and no chain:
//! the files are absent (ENOENT) and equal KSM pages stay separate plain nodes, as the model
//! always kept them.

use crate::errno::Errno;
use crate::kernel::KState;
use crate::types::ids::StableNodeId;
use crate::types::ksm::{Chain, ChainId, Ksm};
use simcore::{Pfn, SimDuration, SimTime};

/// `max_page_sharing`'s default (`ksm_max_page_sharing`).
pub(crate) const MAX_PAGE_SHARING: u64 = 256;

/// `stable_node_chains_prune_millisecs`' default.
pub(crate) const CHAINS_PRUNE_MILLISECS: u64 = 2000;

/// The tree's entry for one node's contents: the node itself or the chain it is a dup of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Entry {
    Plain(StableNodeId),
    Chain(ChainId),
}

impl Ksm {
    /// `(stable_node_chains, stable_node_dups)`.
    pub(super) fn chain_counts(&self) -> (u64, u64) {
        let dups = self.chains.values().map(|c| c.dups.len() as u64).sum();
        (self.chains.len() as u64, dups)
    }

    /// `__is_page_sharing_candidate(node, offset)`: the node's page has a mapping counted and
    /// room for `offset` more beyond the next one. Unlimited without chains (before v4.13).
    pub(super) fn sharing_candidate(&self, node: StableNodeId, offset: u64, chains: bool) -> bool {
        let len = self.nodes[&node].items.len() as u64;
        len > 0 && (!chains || len + offset < self.max_page_sharing)
    }

    /// The tree entries of the nodes with `checksum`, each chain once, skipping `except`.
    pub(super) fn entries(&self, checksum: u64, except: Option<StableNodeId>) -> Vec<Entry> {
        let mut out = Vec::new();
        let same = self.stable.range((checksum, StableNodeId(0))..);
        for &(_, n) in same.take_while(|(c, _)| *c == checksum) {
            let e = self.nodes[&n].chain.map_or(Entry::Plain(n), Entry::Chain);
            if Some(n) != except && !out.contains(&e) {
                out.push(e);
            }
        }
        out
    }
}

impl KState {
    /// `stable_node_dup`: the dup of `chain` a lookup uses, with its KSM page, walking every
    /// dup when `prune` is asked and the chain's prune interval has passed; collapses a chain
    /// of one dup and frees one of none.
    pub(super) fn stable_node_dup(
        &mut self,
        chain: ChainId,
        prune: bool,
        now: SimTime,
    ) -> Option<(StableNodeId, Pfn)> {
        let interval = SimDuration::from_ms(self.ksm.chains_prune_millisecs);
        let c = self.ksm.chains.get_mut(&chain).expect("a live chain");
        let prune = prune && now >= c.prune_time + interval;
        if prune {
            c.prune_time = now;
        }
        let mut found: Option<(StableNodeId, Pfn)> = None;
        for dup in c.dups.clone() {
            let Some(kpage) = self.get_ksm_page(dup) else { continue };
            let better = match found {
                None => true,
                Some((f, _)) => {
                    let k = &self.ksm;
                    k.sharing_candidate(dup, 0, true)
                        && (!k.sharing_candidate(f, 0, true)
                            || k.nodes[&dup].items.len() > k.nodes[&f].items.len())
                }
            };
            if better {
                found = Some((dup, kpage));
                if !prune && self.ksm.sharing_candidate(dup, 0, true) {
                    break;
                }
            }
        }
        self.settle_chain(chain, found.map(|(f, _)| f));
        found
    }

    /// The end of `stable_node_dup` for `chain`, whose lookup found `found`.
    fn settle_chain(&mut self, chain: ChainId, found: Option<StableNodeId>) {
        let k = &mut self.ksm;
        let Some(found) = found else {
            k.chains.remove(&chain);
            return;
        };
        let dups = &k.chains[&chain].dups;
        if dups.len() == 1 {
            k.chains.remove(&chain);
            k.nodes.get_mut(&found).expect("a live dup").chain = None;
        } else if dups[0] != found && k.sharing_candidate(found, 1, true) {
            let dups = &mut k.chains.get_mut(&chain).expect("a live chain").dups;
            dups.retain(|&d| d != found);
            dups.insert(0, found);
        }
    }

    /// `stable_tree_insert` from v4.13: the new KSM page of `node` joins the tree entry of a
    /// KSM page with the same contents as a dup of its chain (made now from a plain node).
    pub(super) fn stable_tree_insert_chained(&mut self, node: StableNodeId, now: SimTime) {
        let (checksum, kpfn) = (self.ksm.nodes[&node].checksum, self.ksm.nodes[&node].kpfn);
        for entry in self.ksm.entries(checksum, Some(node)) {
            let found = match entry {
                Entry::Plain(n) => self.get_ksm_page(n).map(|p| (n, p)),
                Entry::Chain(c) => self.stable_node_dup(c, false, now),
            };
            let Some((other, page)) = found else { continue };
            if !self.mem.same(page.0, kpfn.0) {
                continue;
            }
            // The entry may be the dup that a collapse just made plain again.
            let chain = match self.ksm.nodes[&other].chain {
                Some(c) => c,
                None => self.alloc_stable_node_chain(other, now),
            };
            self.ksm.nodes.get_mut(&node).expect("the new node").chain = Some(chain);
            self.ksm.chains.get_mut(&chain).expect("a live chain").dups.insert(0, node);
            return;
        }
    }

    /// `alloc_stable_node_chain`: plain `node` becomes the first dup of a new chain.
    fn alloc_stable_node_chain(&mut self, node: StableNodeId, now: SimTime) -> ChainId {
        let k = &mut self.ksm;
        let id = ChainId(k.next_chain);
        k.next_chain += 1;
        k.chains.insert(id, Chain { dups: vec![node], prune_time: now });
        k.nodes.get_mut(&node).expect("a live node").chain = Some(id);
        id
    }

    /// `stable_node_dup_del` of a stale `node` leaving the tree: out of its chain, which stays
    /// (even empty) until a lookup passes it.
    pub(super) fn chain_forget(&mut self, node: StableNodeId, chain: Option<ChainId>) {
        if let Some(c) = chain.and_then(|c| self.ksm.chains.get_mut(&c)) {
            c.dups.retain(|&d| d != node);
        }
    }

    /// `remove_all_stable_nodes`: every stale node and every chain left without dups go; EBUSY
    /// when a KSM page remains (the module note has the approximation).
    pub(super) fn remove_all_stable_nodes(&mut self) -> Result<(), Errno> {
        let nodes: Vec<StableNodeId> = self.ksm.nodes.keys().copied().collect();
        for n in nodes {
            self.get_ksm_page(n);
        }
        self.ksm.chains.retain(|_, c| !c.dups.is_empty());
        if self.ksm.nodes.is_empty() { Ok(()) } else { Err(Errno::EBUSY) }
    }

    /// `max_page_sharing_store`'s change (under `ksm_thread_mutex`): EBUSY while a KSM page is
    /// shared or a node cannot be removed.
    pub(super) fn set_max_page_sharing(&mut self, value: u64) -> Result<(), Errno> {
        if self.ksm.max_page_sharing == value {
            return Ok(());
        }
        let shared = self.ksm.nodes.values().any(|n| !n.items.is_empty());
        if shared {
            return Err(Errno::EBUSY);
        }
        self.remove_all_stable_nodes()?;
        self.ksm.max_page_sharing = value;
        Ok(())
    }
}
