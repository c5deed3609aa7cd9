//! The machine's kernel state, and the context through which mechanisms reach it.
//!
//! [`KState`] holds all simulated kernel state; it lives in one `RefCell` inside [`Kernel`] and is
//! borrowed only between blocking points (clippy's `await_holding_refcell_ref` is denied, so a
//! borrow held across an `.await` does not compile). Each mechanism module adds the `KState`
//! methods of its kernel concern (`rmap.rs` the rmap updates, `zap.rs` the unmapping of PTEs, ...);
//! the types it holds are defined below it, in the state floor (`types/`).
//!
//! [`Cx`] is what a simulated task's code receives: the engine context (its CPU, the blocking
//! points), the kernel, and `current` (the process it runs in, if any). `cx.charge(Cost::X)`
//! spends the machine profile's cost of a basic operation.

use crate::era::Switches;
use crate::folio::Folios;
use crate::mm_struct::MmStruct;
use crate::page_alloc::buddy::BuddyAllocator;
use crate::pgtable::{PageTables, Pte};
use crate::process::Process;
use crate::sim::content::FrameContents;
use crate::sim::cost::{Cost, CostTable};
use crate::types::fs::{File, Inode};
use crate::types::ids::FileId;
use crate::types::ids::MmId;
use crate::types::ids::Pid;
use crate::types::ids::PtId;
use crate::types::ids::VmaId;
use crate::types::ids::{AnonVmaId, InodeId};
use crate::types::mm_types::AnonVma;
use crate::vma::Vma;
use crate::vmstat::{MmEvents, VmStat, VmStats};
use engine::{Handle, WaitQueue};
use simcore::{IdVec, Order, Pfn, SimDuration, VirtAddr};
use std::cell::{Ref, RefCell, RefMut};
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Deref;
use std::rc::Rc;

/// The largest `read_ahead_kb` a run takes (1 GiB): the kernel's sysfs file takes any number, but
/// a window that large is far above any real setting, and every window is read in one step.
pub const MAX_READ_AHEAD_KB: u64 = 1 << 20;

/// Tunables that are sysfs or sysctl settings rather than kernel versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tunables {
    /// `read_ahead_kb` of the block device, in pages (default 128 KiB).
    pub ra_pages: u64,
    /// `fault_around_bytes`, in pages (default 64 KiB).
    pub fault_around_pages: u64,
    /// `vm.swappiness` (default 60).
    pub swappiness: u64,
    /// `/sys/kernel/mm/lru_gen/min_ttl_ms` (default 0: off).
    pub lru_gen_min_ttl_ms: u64,
    /// `/sys/kernel/mm/transparent_hugepage/` at boot (`huge_memory/policy.rs`).
    pub thp: crate::types::huge_mm::ThpSettings,
    /// `nr_hugepages` of each huge page size at boot (`hugepages=`, by `HugeSize` order: 2 MiB,
    /// 1 GiB), and `nr_overcommit_hugepages`.
    pub nr_hugepages: [u64; 2],
    pub nr_overcommit_hugepages: [u64; 2],
    /// The scenario files' 2 MiB hugetlbfs mount options `size=` and `min_size=`, in bytes.
    pub hugetlbfs_size: Option<u64>,
    pub hugetlbfs_min_size: Option<u64>,
}

impl Default for Tunables {
    fn default() -> Self {
        Tunables {
            ra_pages: 32,
            fault_around_pages: 16,
            swappiness: 60,
            lru_gen_min_ttl_ms: 0,
            thp: Default::default(),
            nr_hugepages: [0; 2],
            nr_overcommit_hugepages: [0; 2],
            hugetlbfs_size: None,
            hugetlbfs_min_size: None,
        }
    }
}

/// The block device under the file system and the swap device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// The profile's disk (`block_io_latency` plus `block_io_per_page`).
    Disk,
    /// A RAM disk (`brd`): a request overhead plus a page copy per page, no device latency.
    Ramdisk,
}

/// All simulated kernel state.
#[derive(Debug)]
pub struct KState {
    pub(crate) buddy: BuddyAllocator,
    pub folios: Folios,
    pub mem: FrameContents,
    pub vmstat: VmStats,
    pub events: MmEvents,
    pub pt: PageTables,
    pub mms: IdVec<MmId, Option<Box<MmStruct>>>,
    pub vmas: IdVec<VmaId, Option<Box<Vma>>>,
    pub anon_vmas: IdVec<AnonVmaId, AnonVma>,
    pub inodes: IdVec<InodeId, Inode>,
    /// Path name to inode.
    pub paths: BTreeMap<String, InodeId>,
    pub files: IdVec<FileId, Option<File>>,
    pub procs: IdVec<Pid, Process>,
    /// The shared zero page (`ZERO_PAGE(0)`).
    pub zero_pfn: Pfn,
    /// The huge zero page, allocated on first use (`get_huge_zero_page`; kept for the rest of
    /// the run, where the kernel's shrinker frees it once unused).
    pub huge_zero_pfn: Option<Pfn>,
    /// The persistent-memory device and the DAX files on it.
    pub dax: crate::types::fs::DaxFs,
    /// The block device's readahead window in pages (`bdi->ra_pages`), given to opened files.
    pub bdi_ra_pages: u64,
    pub swap: crate::types::swap::SwapDevice,
    pub wmark: crate::types::mmzone::Watermarks,
    /// Pages held by GUP on behalf of user-visible holders (`gup_test`-style long-term pins).
    pub gup_holds: IdVec<crate::types::ids::HoldId, Option<crate::types::mm_types::Hold>>,
    /// Asynchronous O_DIRECT reads not yet reaped (`Thread::pread_submit`).
    pub dio_reads: IdVec<crate::types::ids::DioId, Option<crate::types::fs::Submitted>>,
    /// Pipe buffers, by the pipe's inode.
    pub pipes: BTreeMap<InodeId, crate::types::fs::Pipe>,
    /// kswapd has been woken and not yet finished balancing.
    pub kswapd_awake: bool,
    /// Every CPU's TLBs and walk caches.
    pub tlb: crate::arch::tlb::Tlbs,
    /// Memory cgroups, the root first; each has its lruvec.
    pub memcgs: IdVec<crate::types::ids::MemcgId, crate::types::memcontrol::MemCgroup>,
    /// The memory cgroup of each process not in the root (`cgroup.procs`).
    pub task_memcg: BTreeMap<Pid, crate::types::ids::MemcgId>,
    /// Shadow entries of evicted pages (`workingset.rs`).
    pub workingset: crate::types::swap::Workingset,
    /// The LRU algorithm, its era and tunables (`lru.rs`).
    pub lru: crate::types::mmzone::LruConfig,
    /// The transparent-hugepage policy: the sysfs knobs and the era facts it needs.
    pub thp: crate::types::huge_mm::ThpState,
    /// hugetlb pools, pages, files and reservations (`hugetlb.rs`).
    pub hugetlb: crate::types::hugetlb::Hugetlb,
    /// KSM: ksmd's lists, its stable and unstable trees and its knobs (`ksm.rs`).
    pub ksm: crate::types::ksm::Ksm,
    /// The first `VM_BUG_ON` site a code path reached, and what it found there: a kernel built
    /// with CONFIG_DEBUG_VM stops at it; mmsim records it (an invariant names each site) and goes
    /// on as a kernel without that option does.
    pub vm_bug: Option<(&'static str, String)>,
    /// Reclaim's folio lists, reused from pass to pass (`vmscan.rs`).
    pub reclaim_lists: crate::types::mmzone::ReclaimLists,
    /// System V shared memory segments (`shm.rs`).
    pub shm: crate::types::shm::ShmIds,
    /// Mlocked folios that lost a mapping, to ask again at the operation's end (`mlock.rs`).
    pub mlock_fbatch: Vec<Pfn>,
    /// Each CPU's batch of folios `MADV_FREE` marked lazyfree (`cpu_fbatches.lru_lazyfree`), by
    /// CPU number, each folio with the batch's reference (`lru.rs`).
    pub lru_lazyfree: Vec<Vec<Pfn>>,
    /// userfaultfd contexts (`userfaultfd.rs`).
    pub uffd: crate::types::userfaultfd::Userfaultfds,
    /// Each task's delay accounting (`delayacct.rs`), by engine task.
    pub delays: BTreeMap<engine::TaskId, crate::types::delayacct::TaskDelays>,
}

/// The kernel of one simulated machine.
#[derive(Debug)]
pub struct Kernel {
    st: RefCell<KState>,
    /// How many times `st` has been borrowed for writing. `KState` holds no interior
    /// mutability, so while this count stands still the state does too: a checker that found
    /// it sound need not look again until the count moves (`state_writes`).
    writes: std::cell::Cell<u64>,
    /// The state's fingerprint and the write count it was taken at (`fingerprint`).
    fingerprinted: std::cell::Cell<Option<(u64, u64)>>,
    /// The kernel version: switches carry the behaviour each seed changed; the version decides
    /// the smaller era details around them (which fixes a `page_count` kernel had, whether
    /// O_DIRECT pins or gets its pages, ...).
    pub version: crate::era::KernelVersion,
    pub costs: CostTable,
    /// The profile's data caches (`crate::arch::caches`).
    pub caches: crate::arch::caches::Caches,
    pub switches: Switches,
    pub tunables: Tunables,
    pub storage: Storage,
    /// The hashed folio wait queues (`folio_wait_table`, 256 entries in `mm/filemap.c`).
    folio_waitqueues: Vec<WaitQueue>,
    /// The hashed DAX entry wait queues (`wait_table` of `fs/dax.c`; 4096 there, 64 here).
    dax_waitqueues: Vec<WaitQueue>,
    /// Where kswapd sleeps (`pgdat->kswapd_wait`).
    pub kswapd_wait: WaitQueue,
}

impl Kernel {
    pub(crate) fn new(
        st: KState,
        version: crate::era::KernelVersion,
        profile: &crate::Profile,
        switches: Switches,
        tunables: Tunables,
        storage: Storage,
        handle: &Handle,
    ) -> Kernel {
        let folio_waitqueues = (0..256).map(|_| handle.wait_queue("folio_waitqueue")).collect();
        let dax_waitqueues = (0..64).map(|_| handle.wait_queue("dax_wait_table")).collect();
        let kswapd_wait = handle.wait_queue("kswapd_wait");
        Kernel {
            st: RefCell::new(st),
            writes: std::cell::Cell::new(0),
            fingerprinted: std::cell::Cell::new(None),
            version,
            costs: profile.costs.clone(),
            caches: profile.caches,
            switches,
            tunables,
            storage,
            folio_waitqueues,
            dax_waitqueues,
            kswapd_wait,
        }
    }

    #[inline]
    pub fn state(&self) -> Ref<'_, KState> {
        self.st.borrow()
    }

    #[inline]
    pub(crate) fn state_mut(&self) -> RefMut<'_, KState> {
        self.writes.set(self.writes.get() + 1);
        self.st.borrow_mut()
    }

    /// How many times the state has been borrowed for writing so far: equal counts mean the
    /// same state, so the whole-system checkers run after a step only when it has moved.
    pub fn state_writes(&self) -> u64 {
        self.writes.get()
    }

    /// `KState::fingerprint`, taken again only when the state has been written since the last
    /// one (the explorer asks after every step).
    pub fn fingerprint(&self) -> u64 {
        let writes = self.writes.get();
        match self.fingerprinted.get() {
            Some((at, fp)) if at == writes => fp,
            _ => {
                let fp = self.state().fingerprint();
                self.fingerprinted.set(Some((writes, fp)));
                fp
            }
        }
    }

    /// The wait queue a folio's lock and writeback waiters sleep on (`folio_waitqueue`).
    pub(crate) fn folio_waitqueue(&self, pfn: Pfn) -> WaitQueue {
        let h = pfn.0.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56;
        self.folio_waitqueues[h as usize]
    }

    /// The wait queue of the DAX entry starting at `index` of `inode` (`dax_entry_waitqueue`).
    pub(crate) fn dax_waitqueue(&self, inode: InodeId, index: u64) -> WaitQueue {
        let key = (u64::from(inode.0) << 40) ^ index;
        let h = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58;
        self.dax_waitqueues[h as usize]
    }
}

/// A task's context inside the simulated kernel.
pub struct Cx {
    ecx: engine::Cx,
    k: Rc<Kernel>,
    current: Option<Pid>,
    /// `current->in_lru_fault`: inside a fault on a VMA with recency (multi-gen LRU hint).
    in_lru_fault: std::cell::Cell<bool>,
    /// The userfaultfd flags of the fault this task is in ([`UffdFlag`]).
    uffd_flags: [std::cell::Cell<bool>; 4],
    /// The address the user fault this task is in faulted at, unmasked
    /// (`vmf->real_address`).
    fault_address: std::cell::Cell<VirtAddr>,
    /// The userfaultfd events this task's system call owes, sent once it drops `mmap_lock`
    /// (the kernel's `uf` lists of `munmap` and `mremap`: `userfaultfd/events.rs`).
    uffd_events: RefCell<Vec<(InodeId, crate::types::userfaultfd::UffdEvent)>>,
}

/// A task's userfaultfd flags, each set for a scope ([`Cx::uffd_scope`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum UffdFlag {
    /// `FAULT_FLAG_ALLOW_RETRY`: a user access's fault, which may drop `mmap_lock` and sleep
    /// for a userfaultfd handler (`userfaultfd.rs`); GUP's faults in the model do not.
    AllowRetry = 0,
    /// Inside `UFFDIO_COPY`/`UFFDIO_ZEROPAGE` of a shared VMA, whose fill takes the fault path:
    /// the fault fills the page itself and is no userfault (`userfaultfd/mfill.rs`).
    Fill = 1,
    /// `FAULT_FLAG_TRIED`: the fault is the retry of one that returned `VM_FAULT_RETRY`.
    Tried = 2,
    /// `FAULT_FLAG_USER`: a user-mode access's fault (a load or store of the program), not
    /// the kernel's `copy_to_user`/`copy_from_user` on its behalf.
    User = 3,
}

impl std::fmt::Debug for Cx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "mm::Cx({:?}, current={:?})", self.ecx, self.current)
    }
}

impl Deref for Cx {
    type Target = engine::Cx;
    fn deref(&self) -> &engine::Cx {
        &self.ecx
    }
}

impl Cx {
    /// Starts a kernel daemon (khugepaged) on the last CPU, as the machine starts kswapd there.
    pub(crate) fn spawn_kernel_daemon<F, Fut>(&self, name: &str, f: F)
    where
        F: FnOnce(Cx) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let k = self.k.clone();
        let handle: &Handle = self;
        let cpu = handle.cpu(handle.cpus() - 1).expect("the machine has CPUs");
        let task = handle.spawn_daemon(cpu, name.to_string(), move |ecx| f(Cx::new(ecx, k, None)));
        handle.set_context(task, engine::TaskContext::Kernel);
    }

    pub(crate) fn new(ecx: engine::Cx, k: Rc<Kernel>, current: Option<Pid>) -> Cx {
        let uffd_flags = std::array::from_fn(|_| std::cell::Cell::new(false));
        Cx {
            ecx,
            k,
            current,
            in_lru_fault: std::cell::Cell::new(false),
            uffd_flags,
            fault_address: std::cell::Cell::new(VirtAddr(0)),
            uffd_events: Default::default(),
        }
    }

    pub fn kernel(&self) -> &Kernel {
        &self.k
    }

    /// Borrows the kernel state until the next blocking point.
    #[inline]
    pub(crate) fn st(&self) -> RefMut<'_, KState> {
        self.k.state_mut()
    }

    /// `current->in_lru_fault`: this task is inside a fault on a VMA with recency, the hint
    /// `folio_add_lru` and `lru_gen_refault` read. It stays the task's: the paths that add a
    /// folio to the LRU under a borrow of the state pass it on from here.
    pub(crate) fn in_lru_fault(&self) -> bool {
        self.in_lru_fault.get()
    }

    /// `lru_gen_enter_fault` / `lru_gen_exit_fault`: sets the fault hint for the guard's life.
    pub(crate) fn lru_fault_scope(&self, in_fault: bool) -> LruFaultScope<'_> {
        let old = self.in_lru_fault.replace(in_fault);
        LruFaultScope { cx: self, old }
    }

    /// Whether userfaultfd flag `f` is set for this task.
    pub(crate) fn uffd_flag(&self, f: UffdFlag) -> bool {
        self.uffd_flags[f as usize].get()
    }

    /// The address of the user fault this task is in, unmasked.
    pub(crate) fn fault_address(&self) -> VirtAddr {
        self.fault_address.get()
    }

    /// Records the address a user fault of this task faulted at (`do_user_addr_fault`).
    pub(crate) fn set_fault_address(&self, addr: VirtAddr) {
        self.fault_address.set(addr);
    }

    /// The userfaultfd events this task owes (`userfaultfd/events.rs`).
    pub(crate) fn uffd_events(
        &self,
    ) -> RefMut<'_, Vec<(InodeId, crate::types::userfaultfd::UffdEvent)>> {
        self.uffd_events.borrow_mut()
    }

    /// Sets userfaultfd flag `f` to `on` for the guard's life.
    pub(crate) fn uffd_scope(&self, f: UffdFlag, on: bool) -> UffdScope<'_> {
        let old = self.uffd_flags[f as usize].replace(on);
        UffdScope { cx: self, flag: f, old }
    }

    /// The memory cgroup this task charges to.
    pub(crate) fn memcg(&self) -> crate::types::ids::MemcgId {
        self.k.state().task_memcg(self.current)
    }

    /// The process this task runs in; `None` for a kernel daemon.
    pub(crate) fn current_process(&self) -> Option<Pid> {
        self.current
    }

    /// The process this task runs in.
    pub fn current(&self) -> Pid {
        self.current.expect("a kernel thread has no current process")
    }

    #[inline]
    pub(crate) fn cost(&self, c: Cost) -> SimDuration {
        self.k.costs.get(c)
    }

    /// The machine's data caches.
    pub(crate) fn caches(&self) -> crate::arch::caches::Caches {
        self.k.caches
    }

    /// How long one block request of `pages` pages takes on the machine's storage.
    pub(crate) fn block_io(&self, pages: u64) -> SimDuration {
        match self.k.storage {
            Storage::Disk => {
                self.cost(Cost::BlockIoLatency) + self.cost(Cost::BlockIoPerPage) * pages
            }
            Storage::Ramdisk => {
                self.cost(Cost::RamdiskRequest) + self.cost(Cost::CopyPage4k) * pages
            }
        }
    }

    /// Spends the cost of one basic operation.
    #[inline]
    #[track_caller]
    pub(crate) fn charge(&self, c: Cost) -> engine::PointFuture<'_> {
        self.charge_n(c, 1)
    }

    /// Starts a kernel task (a device, a kernel thread) on this task's CPU, with no current
    /// process. It stays `engine::TaskContext::Free`: its one user, O_DIRECT's device
    /// completion, runs in interrupt context, which switches no task.
    pub(crate) fn spawn_kthread<F, Fut>(&self, name: &str, f: F) -> engine::TaskId
    where
        F: FnOnce(Cx) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let k = self.k.clone();
        self.ecx.spawn(self.ecx.cpu(), name, move |ecx| f(Cx::new(ecx, k, None)))
    }

    /// Spends `n` times the cost of a basic operation; an operation that streams through the
    /// memory bus ([`Cost::bus_bytes`]) lasts until the bus has carried its bytes if that is
    /// later (`engine::membus`).
    #[inline]
    #[track_caller]
    pub(crate) fn charge_n(&self, c: Cost, n: u64) -> engine::PointFuture<'_> {
        self.charge_streaming(self.k.costs.get(c) * n, c.bus_bytes().saturating_mul(n))
    }

    /// Spends `work`, streaming `bytes` through the memory bus meanwhile: lasts until the bus
    /// has carried them if that is later (`engine::membus`).
    #[inline]
    #[track_caller]
    pub(crate) fn charge_streaming(
        &self,
        work: SimDuration,
        bytes: u64,
    ) -> engine::PointFuture<'_> {
        let d = if bytes == 0 { work } else { work.max(self.ecx.bus_transfer(bytes)) };
        self.ecx.charge(d)
    }
}

/// Restores the fault hint when a fault ends.
#[derive(Debug)]
pub(crate) struct LruFaultScope<'a> {
    cx: &'a Cx,
    old: bool,
}

impl Drop for LruFaultScope<'_> {
    fn drop(&mut self) {
        self.cx.in_lru_fault.set(self.old);
    }
}

/// A userfaultfd flag set for a scope; restored when dropped.
pub(crate) struct UffdScope<'a> {
    cx: &'a Cx,
    flag: UffdFlag,
    old: bool,
}

impl Drop for UffdScope<'_> {
    fn drop(&mut self) {
        self.cx.uffd_flags[self.flag as usize].set(self.old);
    }
}

impl KState {
    pub fn vma(&self, id: VmaId) -> &Vma {
        self.vmas[id].as_deref().expect("use of a freed VMA")
    }

    /// `[start, end)` of a VMA.
    pub fn vma_range(&self, id: VmaId) -> (VirtAddr, VirtAddr) {
        let v = self.vma(id);
        (v.start, v.end)
    }

    pub(crate) fn vma_mut(&mut self, id: VmaId) -> &mut Vma {
        self.vmas[id].as_deref_mut().expect("use of a freed VMA")
    }

    pub fn mm(&self, id: MmId) -> &MmStruct {
        self.mms[id].as_deref().expect("use of a freed mm")
    }

    /// The `mmap_lock` of mm `id`, unless it exited (a daemon that found the mm earlier asks).
    pub(crate) fn live_mmap_lock(&self, id: MmId) -> Option<engine::RwSem> {
        self.mms.get(id).and_then(|m| m.as_ref()).map(|m| m.mmap_lock)
    }

    pub(crate) fn mm_mut(&mut self, id: MmId) -> &mut MmStruct {
        self.mms[id].as_deref_mut().expect("use of a freed mm")
    }

    pub fn file(&self, id: FileId) -> &File {
        self.files[id].as_ref().expect("use of a released file")
    }

    pub(crate) fn file_mut(&mut self, id: FileId) -> &mut File {
        self.files[id].as_mut().expect("use of a released file")
    }

    /// The VMA of `mm` containing `addr`.
    pub fn find_vma(&self, mm: MmId, addr: VirtAddr) -> Option<VmaId> {
        self.mm(mm).vma_at(addr, |id| self.vma(id).end)
    }

    /// Allocates a folio of `order` (`folio_alloc`); `None` when memory is exhausted. The
    /// allocating task holds its one reference as an extra holder until it hands it to a
    /// mapping (`Folios::extra_to_mapping`) or drops it (`put_folio_extra`).
    pub(crate) fn alloc_folio(&mut self, order: Order) -> Option<Pfn> {
        let pfn = self.buddy.alloc(order)?;
        self.folios.grow(self.buddy.high_water());
        self.folios.prep_new(pfn, order);
        self.vmstat.add(VmStat::PgallocNormal, order.pages());
        self.vmstat.sub(VmStat::NrFreePages, order.pages());
        Some(pfn)
    }

    /// Returns a folio whose last reference was dropped to the buddy allocator.
    pub(crate) fn free_folio(&mut self, head: Pfn) {
        if self.folios.test(head, crate::folio::pg::LRU) {
            self.lruvec_del_folio(head, true);
        }
        if self.folios.large(head).is_some() {
            self.deferred_split_remove(head);
        }
        self.mlock_clear_on_free(head);
        let memcg = self.folio_memcg(head);
        self.memcg_uncharge_pages(memcg, self.folios.order(head).pages());
        let order = self.folios.clear(head);
        for i in 0..order.pages() {
            self.mem.zero((head + i).0);
        }
        self.buddy.free(head, order);
        self.vmstat.add(VmStat::Pgfree, order.pages());
        self.vmstat.add(VmStat::NrFreePages, order.pages());
    }

    /// Drops `n` references; frees the folio when they were the last.
    pub(crate) fn put_folio(&mut self, head: Pfn, n: u32) {
        if self.folios.put(head, n) {
            self.free_folio(head);
        }
    }

    /// Drops a reference taken with `Folios::get_extra`.
    pub(crate) fn put_folio_extra(&mut self, head: Pfn) {
        if self.folios.put_extra(head) {
            self.free_folio(head);
        }
    }

    /// Allocates the frame that backs a new page-table page (`pagetable_alloc`).
    pub(crate) fn alloc_pgtable_frame(&mut self) -> Option<Pfn> {
        let frame = self.buddy.alloc(Order::BASE)?;
        let high = self.buddy.high_water();
        self.folios.grow(high);
        self.vmstat.sub(VmStat::NrFreePages, 1);
        self.vmstat.inc(VmStat::NrPageTablePages);
        Some(frame)
    }

    /// Frees the frame of a page-table page.
    pub(crate) fn free_pgtable_frame(&mut self, frame: Pfn) {
        self.buddy.free(frame, Order::BASE);
        self.vmstat.add(VmStat::NrFreePages, 1);
        self.vmstat.sub(VmStat::NrPageTablePages, 1);
    }

    /// The vmstat counters, with the LRU gauges read from the lists.
    pub fn vmstat_snapshot(&self) -> VmStats {
        let mut v = self.vmstat.clone();
        for (list, key) in crate::vmstat::LRU_GAUGES {
            v.add(key, self.lru_pages(list));
        }
        v
    }

    pub fn total_pages(&self) -> u64 {
        self.buddy.total_pages()
    }

    pub fn free_pages(&self) -> u64 {
        self.buddy.nr_free()
    }

    /// One of the numbers no kernel interface shows ([`MODEL_COUNTERS`]), which scenarios read
    /// as `model = NAME` (with `path` for a file's): mmsim's own counters, evidence that a
    /// schedule took a path, and kernel fields kept out of `/proc` (a mapping's `nr_thps`).
    pub fn model_counter(&self, name: &str, path: Option<&str>) -> Option<u64> {
        match (name, path) {
            ("collapse_truncated_rollbacks", None) => Some(self.thp.khugepaged.truncated_rollbacks),
            ("nr_thps", Some(p)) => self.paths.get(p).map(|&i| self.inodes[i].mapping.nr_thps),
            _ => None,
        }
    }
}

/// The names [`KState::model_counter`] knows, each with whether it is a file's (and needs a
/// `path`).
pub const MODEL_COUNTERS: &[(&str, bool)] =
    &[("collapse_truncated_rollbacks", false), ("nr_thps", true)];

impl KState {
    /// A fingerprint of the whole kernel state (frames, page tables, VMAs, files, contents and
    /// counters), for the explorer's visited-state cache: two states with equal fingerprints
    /// behave alike. O(state).
    pub fn fingerprint(&self) -> u64 {
        let mut d = simcore::Digest::new();
        for (_, v) in self.vmstat.iter() {
            d.write_u64(v);
        }
        for head in self.folios.heads() {
            let (f, m) = (&self.folios, self.folios.meta(head));
            d.write_u64(head.0);
            d.write_u64(
                u64::from(m.flags)
                    | u64::from(self.folios.page_mapcount(head)) << 16
                    | u64::from(self.folios.refcount(head)) << 32,
            );
            d.write_u64(u64::from(f.index(head)) | u64::from(f.extra_refs(head)) << 32);
            d.write_u64(
                u64::from(self.folios.memcg_raw(head))
                    | u64::from(self.folios.lru_gen(head).map_or(0, |g| g + 1)) << 16
                    | u64::from(self.folios.lru_refs(head)) << 24,
            );
            d.write_u64(match self.folios.mapping(head) {
                crate::folio::Mapping::None => 0,
                crate::folio::Mapping::Anon(a) => 1 | u64::from(a.0) << 2,
                crate::folio::Mapping::Ksm(n) => 3 | u64::from(n.0) << 2,
                crate::folio::Mapping::File(i) => 2 | u64::from(i.0) << 2,
            });
        }
        for (id, mm) in self.mms.iter() {
            let Some(mm) = mm else { continue };
            d.write_u64(u64::from(id.0));
            for &v in mm.vmas.values() {
                let vma = self.vma(v);
                d.write_u64(vma.start.0 ^ vma.end.0.rotate_left(32) ^ vma.flags.0.rotate_left(16));
                d.write_u64(vma.pgoff);
                for (a, pte) in self.mapped_entries(mm.pgd, v) {
                    d.write_u64(a.0 ^ pte.0.rotate_left(17));
                }
            }
            d.write_u64(mm.rss_total());
        }
        for (_, i) in self.inodes.iter() {
            d.write_u64(i.size ^ (i.writecount as u64).rotate_left(48));
            for (&index, &head) in i.mapping.pages.iter() {
                d.write_u64(index ^ head.0.rotate_left(32));
            }
        }
        d.write_u64(self.huge_zero_pfn.map_or(0, |p| p.0));
        self.thp.khugepaged.fingerprint(&mut d);
        self.ksm.fingerprint(&mut d);
        for (inode, dax) in &self.dax.inodes {
            let ino = u64::from(inode.0);
            for (&index, b) in &dax.blocks {
                let unwritten = u64::from(b.unwritten);
                d.write_u64(ino ^ index.rotate_left(20) ^ b.block.rotate_left(44) ^ unwritten);
            }
            for (&start, e) in &dax.entries {
                d.write_u64(ino ^ start.rotate_left(20) ^ e.code().rotate_left(40));
            }
        }
        for (id, f) in self.files.iter() {
            if let Some(f) = f {
                d.write_u64(
                    u64::from(id.0) ^ f.pos.rotate_left(20) ^ u64::from(f.refs).rotate_left(56),
                );
            }
        }
        d.write_u64(self.mem.fingerprint());
        self.hugetlb.fingerprint_into(&mut d);
        self.uffd.fingerprint(&mut d);
        d.value()
    }
}

impl KState {
    /// Every present entry of `vma` in the tables under `pgd`, `(address, entry)` a page (a huge
    /// page of a hugetlb VMA) at a time, stepping over empty tables as `walk_page_range` does.
    fn mapped_entries(&self, pgd: PtId, v: VmaId) -> impl Iterator<Item = (VirtAddr, Pte)> + '_ {
        let (step, end) = (self.page_step(v), self.vma(v).end);
        let mut a = self.vma(v).start;
        std::iter::from_fn(move || {
            while a < end {
                let here = a;
                match self.pt.translate(pgd, here) {
                    Some((pte, _)) => {
                        a = here + step;
                        return Some((here, pte));
                    }
                    None => a = self.pt.skip_empty(pgd, here).max(here + step),
                }
            }
            None
        })
    }

    /// A readable dump of the memory state in kernel terms: each process's present PTEs and
    /// every live folio with the flags `kernel` has (for replays that print the state after
    /// each step).
    pub fn dump(&self, kernel: crate::era::KernelVersion) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        for (pid, p) in self.procs.iter() {
            let Some(mm) = p.mm else { continue };
            let m = self.mm(mm);
            for &v in m.vmas.values() {
                for (a, pte) in self.mapped_entries(m.pgd, v) {
                    let _ = writeln!(out, "pid {pid} {} {pte:?}", a);
                }
            }
        }
        for (inode, dax) in &self.dax.inodes {
            for (start, e) in &dax.entries {
                let path = &self.inodes[*inode].path;
                let _ = writeln!(out, "dax {path} [{start}] {e:?}");
            }
        }
        for head in self.folios.heads() {
            let meta = self.folios.meta(head);
            if meta.flags & crate::folio::pg::RESERVED != 0 {
                continue;
            }
            let _ = writeln!(
                out,
                "folio {head} ref {} map {} holders {} {} [{}]",
                self.folios.refcount(head),
                self.folios.folio_mapcount(head),
                self.folios.extra_refs(head),
                self.folios.mapping(head),
                crate::folio::flag_names_on(meta.flags, kernel).join(",")
            );
        }
        out
    }
}
