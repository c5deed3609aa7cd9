//! The named cost table: every span of virtual time a mechanism charges comes from here.
//!
//! Costs are the machine's basic operations (enter a fault, allocate a page, clear 4 KiB, install
//! a PTE, flush a TLB entry), never the published latency of a whole mechanism: a figure a seed
//! reports must emerge from the basic operations its code path performs, plus contention. Each
//! profile ([`crate::sim::profile`]) gives the values and says where they come from.

use simcore::SimDuration;

simcore::counter_keys! {
    /// A basic operation with a cost in the machine profile.
    pub enum Cost {
        /// Enter and leave a syscall (`getppid` round trip).
        Syscall = "syscall",
        /// Exception entry and exit, `handle_mm_fault` dispatch, VMA lookup and page-table walk.
        FaultEntry = "fault_entry",
        /// Set one PTE with its rmap and counter updates (`set_pte_at`, `folio_add_*_rmap`).
        PteInstall = "pte_install",
        /// Map one more page-cache page during fault-around (`filemap_map_pages`, per page).
        FaultAroundPage = "fault_around_page",
        /// Allocate one order-0 page (buddy fast path with memcg charge).
        PageAlloc = "page_alloc",
        /// Extra cost per page of a higher-order allocation (finding and splitting blocks).
        PageAllocHighOrderPerPage = "page_alloc_high_order_per_page",
        /// Free one page back to the buddy allocator.
        PageFree = "page_free",
        /// Clear 4 KiB of memory (`clear_page` on a cold page).
        ZeroPage4k = "zero_page_4k",
        /// Copy 4 KiB (`copy_page`).
        CopyPage4k = "copy_page_4k",
        /// Add a folio to an LRU list (batched `folio_add_lru`).
        LruAdd = "lru_add",
        /// Allocate and initialise a page-table page.
        PgtableAlloc = "pgtable_alloc",
        /// Look a page up in the page cache (xarray walk).
        PageCacheLookup = "page_cache_lookup",
        /// Insert a folio into the page cache.
        PageCacheInsert = "page_cache_insert",
        /// Clear or copy one PTE during zap, fork or mprotect.
        PteUpdate = "pte_update",
        /// Invalidate one TLB entry on this CPU (`invlpg`).
        TlbFlushOne = "tlb_flush_one",
        /// Flush this CPU's TLB for an address space.
        TlbFlushAll = "tlb_flush_all",
        /// Send a TLB shootdown IPI and wait for the acknowledgement.
        TlbShootdownIpi = "tlb_shootdown_ipi",
        /// Create, split or free a VMA (`vm_area_alloc`, maple-tree update).
        VmaUpdate = "vma_update",
        /// Copy one byte range of user memory, per 4 KiB (`copy_to_user`/`copy_from_user`).
        UserCopy4k = "user_copy_4k",
        /// Block device: latency of one read or write request.
        BlockIoLatency = "block_io_latency",
        /// Block device: transfer time per 4 KiB.
        BlockIoPerPage = "block_io_per_page",
        /// Process creation beyond copying the address space (`copy_process`).
        ForkBase = "fork_base",
        /// One user memory access that hits the TLB and the caches.
        MemAccess = "mem_access",
        /// Read 4 KiB from persistent memory into DRAM (a DAX `read()`, a private copy).
        PmemRead4k = "pmem_read_4k",
        /// Write (or zero) 4 KiB of persistent memory with non-temporal stores.
        PmemWrite4k = "pmem_write_4k",
        /// A file system allocates one block (ext4 `ext4_map_blocks` with a journal handle).
        FsBlockAlloc = "fs_block_alloc",
        /// Isolate and examine one folio on an LRU list during reclaim.
        LruScan = "lru_scan",
        /// Tear down one reclaimed folio (unmap bookkeeping, cache removal, free).
        ReclaimPage = "reclaim_page",
        /// The task side of a child's life that no mechanism charges: `copy_process` beyond
        /// `fork_base`, the child's first schedule (its context switches are the engine's),
        /// `do_exit`'s `exit_notify`, and the parent's `wait4` reaping it (`release_task`);
        /// charged by `wait`.
        TaskReap = "task_reap",
        /// What a hugetlb fault mapping a 2 MiB folio, and the later unmap of that entry, do
        /// beyond the generic fault entry, page-cache lookup and entry install and clear: the
        /// fault-mutex hash, the folio's lock, reference, rmap and `hugetlb_count` updates, and
        /// the unmap's TLB gather of the page; charged in the fault, under its locks.
        HugetlbFaultFolio = "hugetlb_fault_folio",
        /// An unmap's walk over 1 GiB of a hugetlb range where no page table is: since v6.0 one
        /// step of `__unmap_hugepage_range` whose `huge_pte_offset` finds nothing and skips to the
        /// end of the PUD ("hugetlb: skip to end of PT page mapping when pte not present").
        HugetlbUnmapEmptyGib = "hugetlb_unmap_empty_gib",
        /// An atomic write (lock word, reference count) to a cache line another CPU of the same
        /// socket wrote last: the line's transfer between the two cores' caches. Charged by the
        /// engine for lock words and by mechanisms for shared pages' counts.
        LineTransfer = "line_transfer",
        /// The same across sockets.
        LineTransferRemote = "line_transfer_remote",
        /// From waking a task that sleeps (on a lock, a completion, a wait queue) to its running
        /// again on its CPU: the wake-up IPI and the idle CPU's exit from its idle state. Charged
        /// by the engine to every sleeping waiter it wakes (a lock handed to a sleeper is held
        /// through it); optimistic spinners are not asleep and pay nothing.
        WakeupLatency = "wakeup_latency",
        /// A CPU passing from a task to a user task of another address space (a process
        /// switch, as lmbench's `lat_ctx` measures one: `schedule()`, `context_switch()` with
        /// `switch_mm`, `switch_to`). Charged by the engine to the incoming task (`engine::cpu`).
        ContextSwitch = "context_switch",
        /// The same to a thread of the address space the CPU has loaded, or to a kernel thread:
        /// `context_switch()` calls no `switch_mm` (kernel/sched/core.c).
        ThreadSwitch = "thread_switch",
        /// A RAM disk (`brd`): submitting and completing one request, beside the copy of each
        /// page (charged as `copy_page_4k`).
        RamdiskRequest = "ramdisk_request",
        /// The time a socket's memory bus takes to carry 64 KiB at its sustained bandwidth,
        /// which the page clears and copies of all its CPUs share (`engine::membus`); zero is
        /// no limit. A clear (`zero_page_4k`) streams 4 KiB through it, a copy
        /// (`copy_page_4k`) 8 KiB: the source read and the destination written.
        MemBus64k = "mem_bus_64k",
    }
}

/// The largest cost of one basic operation (10 ms, a disk seek): virtual time is `u64`
/// nanoseconds (584 years), which such costs fill only after 1.8e12 basic operations, more than
/// the engine's event bound (2^40) lets a run perform.
pub const MAX_COST_NS: u64 = 10_000_000;

/// A value per [`Cost`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CostTable {
    ns: Vec<u64>,
}

impl CostTable {
    /// A table from `(cost, ns)` pairs; every cost must be given exactly once.
    pub fn new(values: &[(Cost, u64)]) -> CostTable {
        use simcore::CounterKey;
        let mut ns = vec![u64::MAX; Cost::ALL.len()];
        for &(c, v) in values {
            assert_eq!(ns[c.index()], u64::MAX, "cost {} given twice", c.name());
            ns[c.index()] = v;
        }
        if let Some(missing) = Cost::ALL.iter().find(|c| ns[c.index()] == u64::MAX) {
            panic!("cost {} missing from the table", missing.name());
        }
        CostTable { ns }
    }

    #[inline]
    pub fn get(&self, c: Cost) -> SimDuration {
        use simcore::CounterKey;
        SimDuration::from_ns(self.ns[c.index()])
    }

    /// Overrides one cost (for sensitivity studies: `--set cost.zero_page_4k=300`).
    pub fn set(&mut self, name: &str, ns: u64) -> Result<(), String> {
        use simcore::CounterKey;
        let c = Cost::ALL.iter().find(|c| c.name() == name).ok_or_else(|| {
            let names: Vec<&str> = Cost::ALL.iter().map(|c| c.name()).collect();
            format!("unknown cost `{name}`: expected one of {}", names.join(", "))
        })?;
        if ns > MAX_COST_NS {
            return Err(format!(
                "cost `{name}` = {ns} ns: a basic operation costs at most {MAX_COST_NS} ns (10 ms)"
            ));
        }
        self.ns[c.index()] = ns;
        Ok(())
    }

    /// `(name, ns)` for every cost.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        use simcore::CounterKey;
        Cost::ALL.iter().map(|c| (c.name(), self.ns[c.index()]))
    }
}

impl Cost {
    /// The bytes one operation streams through its socket's memory bus (`mem_bus_64k`): a
    /// clear writes its 4 KiB, a copy reads and writes 4 KiB (`clear_page` and `copy_page`
    /// store whole lines, which x86's fast string operations write without reading them
    /// first); every other operation works in the caches.
    pub fn bus_bytes(self) -> u64 {
        match self {
            Cost::ZeroPage4k => 4096,
            Cost::CopyPage4k => 8192,
            _ => 0,
        }
    }
}
