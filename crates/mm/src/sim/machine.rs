//! A simulated machine: the engine, the kernel state, and the API that tests, scenario files,
//! the Python bindings and experiments use to create files and processes, start threads, run,
//! and read the observables.

use crate::era::{KernelVersion, Switches};
use crate::errno::Errno;
use crate::folio::pg;
use crate::kernel::{Cx, KState, Kernel, Tunables};
use crate::page_alloc::buddy::BuddyAllocator;
use crate::process::{ProcState, Process};
use crate::sim::check::check_all;
use crate::sim::cost::Cost;
use crate::sim::profile::Profile;
use crate::syscall::Thread;
use crate::types::fs::Backing;
use crate::types::fs::DaxFs;
use crate::types::fs::FsType;
use crate::types::huge_mm::ThpState;
use crate::types::hugetlb::{HugeSize, Hugetlb};
use crate::types::ids::InodeId;
use crate::types::ids::MemcgId;
use crate::types::ids::Pid;
use crate::types::memcontrol::MemCgroup;
use crate::types::mmzone::LruConfig;
use crate::types::mmzone::Watermarks;
use crate::types::swap::SwapDevice;
use crate::vmstat::{VmStat, VmStats};
use engine::{RunReport, SchedulerKind, Sim, SimConfig, SimError, TaskContext, TaskId};
use simcore::{Bytes, IdVec, Order, VirtAddr};
use std::future::Future;
use std::rc::Rc;

/// Everything that defines a machine.
#[derive(Clone, Debug)]
pub struct MachineConfig {
    pub profile: Profile,
    pub kernel: KernelVersion,
    pub switches: Switches,
    pub tunables: Tunables,
    pub seed: u64,
    pub scheduler: SchedulerKind,
    /// Size of the swap device (none when zero).
    pub swap: Bytes,
    /// What holds the file system and the swap device.
    pub storage: crate::kernel::Storage,
    /// Size of the persistent-memory device that DAX files live on (none when zero).
    pub pmem: Bytes,
    pub max_events: u64,
    /// Keep the engine's event trace (for the explorer).
    pub trace: bool,
}

impl MachineConfig {
    /// A machine of profile `profile` running kernel `kernel`, with that kernel's switches.
    pub fn new(profile: Profile, kernel: KernelVersion) -> MachineConfig {
        MachineConfig {
            profile,
            kernel,
            switches: Switches::for_kernel(kernel),
            tunables: Tunables::default(),
            seed: 0,
            scheduler: SchedulerKind::TimeOrdered,
            swap: Bytes::ZERO,
            storage: crate::kernel::Storage::Disk,
            pmem: Bytes::ZERO,
            max_events: 1 << 40,
            trace: false,
        }
    }
}

/// How to create a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSpec {
    pub size: Bytes,
    pub fs: FsType,
    /// Contents: a pattern seed, or zeros.
    pub pattern: Option<u64>,
    /// Unallocated page ranges `(first page, pages)`.
    pub holes: Vec<(u64, u64)>,
}

impl FileSpec {
    /// A file of `size` zero bytes on the disk file system.
    pub fn zeros(size: Bytes) -> FileSpec {
        FileSpec { size, fs: FsType::Disk, pattern: None, holes: Vec::new() }
    }
}

/// Starts a user thread of `pid` on CPU `cpu` running `f`; usable from inside a running
/// simulation (a scenario's driver task starts each step's threads this way).
pub fn spawn_user_thread<F, Fut>(
    handle: &engine::Handle,
    kernel: &Rc<Kernel>,
    pid: Pid,
    cpu: u32,
    name: &str,
    f: F,
) -> Result<TaskId, String>
where
    F: FnOnce(Thread) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let cpu = handle.cpu(cpu).map_err(|e| e.to_string())?;
    {
        let mut st = kernel.state_mut();
        let p = st.procs.get(pid).ok_or_else(|| format!("no process {pid}"))?;
        if p.state == ProcState::Exited {
            return Err(format!("process {pid} has exited"));
        }
        if let Some(mm) = p.mm {
            st.mm_mut(mm).cpumask.insert(cpu);
        }
    }
    let kernel = kernel.clone();
    let task = handle.spawn(cpu, name, move |ecx| f(Thread::new(Cx::new(ecx, kernel, Some(pid)))));
    // A process's threads share its address space (exec replaces it for all of them).
    handle.set_context(task, TaskContext::User(u64::from(pid.0)));
    Ok(task)
}

/// Starts kswapd on the last CPU.
fn spawn_kswapd(handle: &engine::Handle, kernel: &Rc<Kernel>, cpus: u32) -> Result<(), String> {
    let last_cpu = handle.cpu(cpus - 1).map_err(|e| e.to_string())?;
    let k = kernel.clone();
    let task = handle
        .spawn_daemon(last_cpu, "kswapd0", move |ecx| crate::vmscan::kswapd(Cx::new(ecx, k, None)));
    handle.set_context(task, TaskContext::Kernel);
    Ok(())
}

/// A simulated machine.
pub struct Machine {
    sim: Sim,
    kernel: Rc<Kernel>,
    config: MachineConfig,
}

impl std::fmt::Debug for Machine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Machine({}, {}, seed {})",
            self.config.profile.name, self.config.kernel, self.config.seed
        )
    }
}

/// The simulation must have the profile's CPUs.
/// Refuses a configuration the model cannot run as asked: a switch value not modelled for the
/// kernel, a TLB geometry that does not hold together, a simulation with another CPU count, and
/// a hugetlb pool asked for on a memory that is not a whole number of its pages (the model
/// carves the pool from the top of memory, which must be aligned to the page size; the kernel
/// would take the pages from anywhere).
fn check_config(sim: &Sim, config: &MachineConfig) -> Result<(), String> {
    config.switches.check_implemented(config.kernel)?;
    config.profile.tlb.validate()?;
    let (sim_cpus, cpus) = (sim.handle().cpus(), config.profile.cpus);
    if sim_cpus != cpus {
        return Err(format!("the simulation has {sim_cpus} CPUs, the profile {cpus}"));
    }
    let t = &config.tunables;
    for size in HugeSize::ALL {
        let asked = t.nr_hugepages[size.idx()] + t.nr_overcommit_hugepages[size.idx()] > 0;
        if asked && !config.profile.memory.pages_ceil().is_multiple_of(size.pages()) {
            return Err(format!(
                "a hugetlb pool of {} pages on a memory of {}: expected a memory that is a \
                 whole number of them (the model carves the pool from the top of memory)",
                Bytes(size.bytes()),
                config.profile.memory
            ));
        }
    }
    Ok(())
}

impl Machine {
    /// Builds a machine; an impossible configuration is an error message, not a panic.
    pub fn new(config: MachineConfig) -> Result<Machine, String> {
        let sim = Sim::new(Machine::sim_config(&config)).map_err(|e| e.to_string())?;
        Machine::on_sim(config, sim)
    }

    /// The engine configuration a machine needs (for callers that build the simulation
    /// themselves, like the explorer, which plugs in its own scheduler).
    pub fn sim_config(config: &MachineConfig) -> SimConfig {
        SimConfig {
            cpus: config.profile.cpus,
            seed: config.seed,
            scheduler: config.scheduler,
            max_events: config.max_events,
            trace: config.trace,
            wakeup_latency: config.profile.costs.get(Cost::WakeupLatency),
            line_costs: engine::LineCosts {
                same_socket: config.profile.costs.get(Cost::LineTransfer),
                cross_socket: config.profile.costs.get(Cost::LineTransferRemote),
                cpus_per_socket: config.profile.cpus_per_socket,
            },
            switch_costs: engine::SwitchCosts {
                address_space: config.profile.costs.get(Cost::ContextSwitch),
                same_space: config.profile.costs.get(Cost::ThreadSwitch),
            },
            bus_costs: engine::BusCosts {
                per_64k: config.profile.costs.get(Cost::MemBus64k),
                cpus_per_socket: config.profile.cpus_per_socket,
            },
            ..SimConfig::default()
        }
    }

    /// Builds a machine on a simulation built by the caller (from [`Machine::sim_config`]).
    pub fn on_sim(config: MachineConfig, sim: Sim) -> Result<Machine, String> {
        check_config(&sim, &config)?;
        let handle = sim.handle().clone();
        crate::rmap::declare_lock_order(&handle);
        let total = config.profile.memory.pages_ceil();
        let mut buddy = BuddyAllocator::new(total);
        let zero = buddy.alloc(Order::BASE).ok_or("a machine needs at least one page")?;
        let folios = boot_folios(&buddy, zero);
        let vmstat = boot_vmstat(buddy.nr_free());
        // The DAX device's frames start at the first 1 GiB boundary above RAM.
        let dax_base = simcore::Pfn(total.next_multiple_of(1 << 18));
        let mut st = KState {
            buddy,
            folios,
            mem: Default::default(),
            vmstat,
            events: Default::default(),
            pt: Default::default(),
            mms: IdVec::new(),
            vmas: IdVec::new(),
            anon_vmas: IdVec::new(),
            inodes: IdVec::new(),
            paths: Default::default(),
            files: IdVec::new(),
            procs: IdVec::with_first(Process::new("swapper".into(), None)),
            zero_pfn: zero,
            huge_zero_pfn: None,
            dax: DaxFs::new(dax_base, config.pmem.pages_ceil()),
            bdi_ra_pages: config.tunables.ra_pages,
            swap: SwapDevice::new(config.swap.pages_ceil()),
            wmark: Watermarks::for_pages(total),
            gup_holds: IdVec::new(),
            dio_reads: IdVec::new(),
            pipes: Default::default(),
            kswapd_awake: false,
            tlb: crate::arch::tlb::Tlbs::new(
                &config.profile.tlb,
                config.profile.cpus,
                config.profile.costs.get(Cost::TlbFlushAll),
            ),
            memcgs: IdVec::with_first(MemCgroup::new("/".into(), None)),
            task_memcg: Default::default(),
            workingset: Default::default(),
            lru: LruConfig::new(&config.switches, config.kernel, &config.tunables),
            thp: ThpState::boot(&config.tunables.thp, config.kernel, config.switches.file_thp),
            hugetlb: Hugetlb::new(config.kernel, config.switches.hugetlb_sync, handle.clone()),
            ksm: Default::default(),
            vm_bug: None,
            reclaim_lists: Default::default(),
            mlock_fbatch: Vec::new(),
            lru_lazyfree: Vec::new(),
            uffd: Default::default(),
            delays: Default::default(),
            shm: Default::default(),
        };
        st.hugetlb_boot(&config.tunables)?;
        let kernel = Rc::new(Kernel::new(
            st,
            config.kernel,
            &config.profile,
            config.switches,
            config.tunables.clone(),
            config.storage,
            &handle,
        ));
        spawn_kswapd(&handle, &kernel, config.profile.cpus)?;
        Ok(Machine { sim, kernel, config })
    }

    /// Splits the machine into its simulation (to be run by the caller) and its kernel.
    pub fn into_parts(self) -> (Sim, Rc<Kernel>) {
        (self.sim, self.kernel)
    }

    /// The kernel, shared (for tasks that outlive a borrow of the machine).
    pub fn kernel_rc(&self) -> Rc<Kernel> {
        self.kernel.clone()
    }

    pub fn config(&self) -> &MachineConfig {
        &self.config
    }

    pub fn kernel(&self) -> &Kernel {
        &self.kernel
    }

    pub fn handle(&self) -> &engine::Handle {
        self.sim.handle()
    }

    /// Creates a file. A DAX file needs the machine's pmem device (ENODEV without one, ENOSPC
    /// when it does not fit): its pages outside the holes get blocks holding its contents.
    pub fn create_file(&mut self, path: &str, spec: &FileSpec) -> Result<InodeId, Errno> {
        let mut st = self.kernel.state_mut();
        if st.paths.contains_key(path) {
            return Err(Errno::EEXIST);
        }
        if let Some(h) = spec.fs.hugetlb_size() {
            // A hugetlbfs file starts without pages; its size is a huge page multiple.
            if !spec.size.as_u64().is_multiple_of(h.bytes())
                || spec.pattern.is_some()
                || !spec.holes.is_empty()
            {
                return Err(Errno::EINVAL);
            }
        }
        let mut backing = Backing { pattern: spec.pattern, ..Default::default() };
        for &(first, pages) in &spec.holes {
            backing.holes.insert(first, first + pages);
        }
        let inode = InodeId(st.inodes.len() as u32);
        if spec.fs.is_dax() {
            st.dax_create(inode, spec.size.pages_ceil(), &backing)?;
            backing = Backing::default();
        }
        let created = st.new_inode(
            self.sim.handle(),
            path.to_string(),
            spec.fs,
            spec.size.as_u64(),
            spec.pattern,
        );
        debug_assert_eq!(created, inode);
        st.inodes[inode].backing = backing;
        st.hugetlbfs_join_mount(inode);
        st.paths.insert(path.to_string(), inode);
        Ok(inode)
    }

    /// Creates a process with an empty address space.
    pub fn new_process(&mut self, name: &str) -> Result<Pid, Errno> {
        let mut st = self.kernel.state_mut();
        let pid = st.procs.push(Process::new(name.into(), None));
        let mm = st.mm_alloc(self.sim.handle(), pid)?;
        st.procs[pid].mm = Some(mm);
        Ok(pid)
    }

    /// Starts a thread of `pid` on CPU `cpu`, running `f`.
    pub fn spawn_thread<F, Fut>(
        &mut self,
        pid: Pid,
        cpu: u32,
        name: &str,
        f: F,
    ) -> Result<TaskId, String>
    where
        F: FnOnce(Thread) -> Fut + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        spawn_user_thread(self.sim.handle(), &self.kernel, pid, cpu, name, f)
    }

    /// Runs until every thread has finished; with `simcore::verify::verify()` on, the checkers
    /// run at the end.
    pub fn run(&mut self) -> Result<RunReport, SimError> {
        let report = self.sim.run()?;
        if simcore::verify::verify()
            && let Err(e) = self.check()
        {
            panic!(
                "invariant broken at the end of a run: {e}\n  reproduce with seed={}",
                self.config.seed
            );
        }
        Ok(report)
    }

    /// Runs with the whole-system checkers after every step.
    pub fn run_checked(&mut self) -> Result<RunReport, SimError> {
        let rule = self.config.switches.cow_reuse;
        self.run_each_step(&mut |k| check_all(&k.state(), rule))
    }

    /// Runs, calling `observe` after every step (every resumption of a task up to its next
    /// blocking point: checkers, samples of the state); its first error stops the run.
    pub fn run_each_step(
        &mut self,
        observe: &mut dyn FnMut(&Kernel) -> Result<(), String>,
    ) -> Result<RunReport, SimError> {
        let kernel = self.kernel.clone();
        self.sim.run_checked(&mut || observe(&kernel))
    }

    /// Runs, calling `observe` after every pass of the engine's run loop (progress reporting):
    /// a pass may cover several blocking points where a task ran on with nothing else due
    /// (`engine::Sim::run_observed`). Its first error stops the run.
    pub fn run_observed(
        &mut self,
        observe: &mut dyn FnMut(&Kernel) -> Result<(), String>,
    ) -> Result<RunReport, SimError> {
        let kernel = self.kernel.clone();
        self.sim.run_observed(&mut || observe(&kernel))
    }

    /// A fingerprint of the kernel state (for the explorer's visited-state cache).
    pub fn fingerprint(&self) -> u64 {
        self.kernel.fingerprint()
    }

    /// Runs the whole-system checkers now.
    pub fn check(&self) -> Result<(), String> {
        check_all(&self.kernel.state(), self.config.switches.cow_reuse)
    }

    pub fn smaps(&self, pid: Pid) -> String {
        self.kernel.state().smaps(pid)
    }

    pub fn smaps_rollup(&self, pid: Pid) -> Result<String, Errno> {
        self.kernel.state().smaps_rollup(pid)
    }

    pub fn maps(&self, pid: Pid) -> String {
        self.kernel.state().maps(pid)
    }

    pub fn status(&self, pid: Pid) -> String {
        self.kernel.state().status(pid)
    }

    /// `/proc/PID/pagemap` entries for `pages` pages at `addr`.
    pub fn pagemap(&self, pid: Pid, addr: VirtAddr, pages: u64) -> Result<Vec<u64>, Errno> {
        let st = self.kernel.state();
        let mm = st.procs.get(pid).and_then(|p| p.mm).ok_or(Errno::ENOENT)?;
        Ok(st.pagemap(mm, addr, pages))
    }

    /// The model's state at `addr` of `pid` by kernel names (`crate::inspect`): every field
    /// this kernel has and that has a value there.
    pub fn inspect(&self, pid: Pid, addr: VirtAddr) -> Result<Vec<(&'static str, u64)>, Errno> {
        let st = self.kernel.state();
        let mm = st.procs.get(pid).and_then(|p| p.mm).ok_or(Errno::ENOENT)?;
        Ok(st.inspect_fields(mm, addr, self.config.kernel, &self.config.switches))
    }

    pub fn vmstat(&self) -> VmStats {
        self.kernel.state().vmstat_snapshot()
    }

    pub fn vmstat_text(&self) -> String {
        crate::vmstat::vmstat_text(&self.vmstat(), self.config.kernel)
    }

    pub fn meminfo(&self) -> String {
        self.kernel.state().meminfo()
    }

    /// Creates a memory cgroup at `path` (`mkdir /sys/fs/cgroup/PATH`; its parent must exist).
    pub fn create_cgroup(&mut self, path: &str) -> Result<MemcgId, String> {
        let (parent, name) = path
            .rsplit_once('/')
            .ok_or_else(|| format!("cgroup path `{path}`: expected /NAME or /PARENT/NAME"))?;
        let mut st = self.kernel.state_mut();
        let parent_path = if parent.is_empty() { "/" } else { parent };
        let parent = st
            .mem_cgroup_by_path(parent_path)
            .ok_or_else(|| format!("cgroup `{parent_path}` does not exist"))?;
        let now = self.sim.handle().now().as_ns();
        st.mem_cgroup_create(name, parent, now)
    }

    /// The cgroup at `path`.
    pub fn cgroup(&self, path: &str) -> Result<MemcgId, String> {
        self.kernel.state().mem_cgroup_by_path(path).ok_or_else(|| format!("no cgroup `{path}`"))
    }

    /// Writes `memory.max` of a cgroup (`None`: `max`). A limit below the current usage takes
    /// effect at the next charge, which reclaims.
    pub fn set_memory_max(&mut self, memcg: MemcgId, max: Option<Bytes>) -> Result<(), String> {
        if memcg == crate::memcontrol::ROOT_MEMCG {
            return Err("the root cgroup has no memory.max".into());
        }
        self.kernel.state_mut().memcgs[memcg].max = max.map(|b| b.as_u64() / 4096);
        Ok(())
    }

    /// Moves a process into a cgroup (a write to `cgroup.procs`).
    pub fn attach_cgroup(&mut self, pid: Pid, memcg: MemcgId) {
        self.kernel.state_mut().mem_cgroup_attach(pid, memcg);
    }

    /// `memory.stat` of a cgroup.
    pub fn memory_stat(&self, memcg: MemcgId) -> String {
        self.kernel.state().memory_stat(memcg)
    }

    /// `/sys/kernel/debug/lru_gen`.
    pub fn lru_gen(&self) -> String {
        self.kernel.state().lru_gen_debugfs(self.sim.handle().now().as_ns())
    }
}

/// The per-frame state of a booting machine: every frame the allocator can hand out, the LRU
/// The vmstat counters at boot: `nr_free` pages free.
fn boot_vmstat(nr_free: u64) -> VmStats {
    let mut vmstat = VmStats::new();
    vmstat.add(VmStat::NrFreePages, nr_free);
    vmstat
}

/// lists of the root cgroup, and the zero page reserved.
fn boot_folios(buddy: &BuddyAllocator, zero: simcore::Pfn) -> crate::folio::Folios {
    let mut folios = crate::folio::Folios::new();
    folios.grow(buddy.high_water());
    folios.grow_lists(crate::memcontrol::LISTS_PER_LRUVEC as usize);
    folios.set(zero, pg::RESERVED | pg::UPTODATE);
    folios
}
