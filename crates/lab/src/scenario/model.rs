//! The typed form of a scenario, as the parser produces it and the runner consumes it. Every
//! element keeps the source line it came from, for messages.

use engine::SchedulerKind;
use mm::types::fs::FsType;
use mm::types::fs::ShmemHuge;
use mm::types::fs::TmpfsMount;
use mm::{Errno, ExecImage, KernelVersion, OpenFlags, Signal, Switches};

impl Default for MachineSpec {
    /// The `tiny` profile running the default kernel, seed 0, time-ordered.
    fn default() -> Self {
        MachineSpec {
            profile: "tiny".into(),
            cpus: None,
            memory: None,
            kernel: KernelVersion::DEFAULT,
            switch_overrides: Vec::new(),
            seed: 0,
            scheduler: SchedulerKind::TimeOrdered,
            ra_pages: None,
            swap: None,
            pmem: None,
            fault_around_pages: None,
            swappiness: None,
            min_ttl_ms: None,
            hugepages: [None; 6],
            costs: Vec::new(),
            sysfs: Vec::new(),
        }
    }
}

impl MachineSpec {
    /// The switches of `kernel` with this file's overrides applied.
    pub fn switches(&self, kernel: KernelVersion) -> Result<Switches, String> {
        let mut s = Switches::for_kernel(kernel);
        for (k, v) in &self.switch_overrides {
            s.set(k, v)?;
        }
        Ok(s)
    }
}
use simcore::{Bytes, SimDuration};

/// A whole scenario file.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub file: String,
    pub machine: MachineSpec,
    pub files: Vec<FileDecl>,
    /// Memory cgroups, parents before children.
    pub cgroups: Vec<CgroupDecl>,
    pub processes: Vec<ProcessDecl>,
    pub steps: Vec<Step>,
    /// Expectations checked once every step has run.
    pub expects: Vec<Expect>,
    /// Observables printed after the run (`smaps:NAME`, `vmstat`, ...).
    pub show: Vec<Show>,
    /// What exploring this scenario's interleavings must find (`[[explore]]`), per era.
    pub explore: Vec<ExploreExpect>,
    /// `[[schedules]]`: what some or no interleaving shows, explored by `mmsim run` itself
    /// under the run's kernel and switches.
    pub schedules: Vec<ExploreExpect>,
    /// `[requires]`: the kernels (and switches) the scenario means anything on; elsewhere a run
    /// is skipped with the reason, as a kernel selftest skips (`ksft_test_result_skip`).
    pub requires: Option<Requires>,
    /// `[[host_differs]]`: rows where the real kernel is known to differ from the model
    /// (`mmsim diff`, `crates/host`), each with its reason.
    pub host_differs: Vec<HostDiffers>,
    /// `[[time_order]]`: expectations that hold only in the time-ordered run (a race virtual
    /// time decides), which the interleaving explorer does not check.
    pub time_order: Vec<TimeOrder>,
}

/// An operation's or expectation's result that only the time-ordered run decides: explored, a
/// schedule may reorder what virtual time orders, so only the invariants are checked there.
#[derive(Clone, Debug)]
pub struct TimeOrder {
    pub line: usize,
    /// The line of the operation or expectation; `None`: every one of the scenario's (its
    /// results are all about what daemons did while a task slept).
    pub at: Option<usize>,
    pub reason: String,
}

impl TimeOrder {
    /// Whether the result checked at `line` is declared time-ordered by one of `decls`.
    pub fn covers(decls: &[TimeOrder], line: usize) -> bool {
        decls.iter().any(|d| d.at.is_none_or(|at| at == line))
    }
}

/// A declared difference between the host kernel and the model on one row of `mmsim diff`.
#[derive(Clone, Debug)]
pub struct HostDiffers {
    pub line: usize,
    /// The line of the operation or expectation that differs.
    pub at: usize,
    /// The host kernels it applies to (a `kernel` bound; empty: every one).
    pub when: When,
    pub reason: String,
    /// `varies = true`: the native value changes from run to run with host state the model
    /// has none of (a memcg limit's overshoot, charges of kernel memory), so the row is not
    /// compared, rather than declared to differ.
    pub varies: bool,
}

/// A scenario's precondition on the run's kernel and switches, with why.
#[derive(Clone, Debug)]
pub struct Requires {
    pub line: usize,
    pub when: When,
    /// What the excluded kernels lack (`"io_uring (v5.1)"`).
    pub reason: String,
}

impl Requires {
    /// Why a run on `kernel` with `switches` is skipped, if it is.
    pub fn skip(&self, switches: &Switches, kernel: KernelVersion) -> Option<String> {
        (!self.when.holds(switches, kernel)).then(|| format!("skipped: {}", self.reason))
    }
}

/// A declared exploration result: under this kernel and these overrides, this strategy and
/// budget find a violation, or none.
#[derive(Clone, Debug)]
pub struct ExploreExpect {
    pub line: usize,
    pub kernel: Option<KernelVersion>,
    pub sets: Vec<(String, String)>,
    /// The strategy text (`dfs:2`, `pct:3`, `random`).
    pub strategy: String,
    pub budget: u64,
    pub seed: u64,
    pub violation: bool,
    /// `reach`: an expectation that must hold at the end of at least one explored schedule
    /// (evidence that the search took the path the race is about).
    pub reach: Option<Expect>,
    /// `never`: an expectation no explored schedule may end meeting.
    pub never: Option<Expect>,
    /// The kernels and switches the table applies to (`[[schedules]]`; always for
    /// `[[explore]]`, which names its kernel).
    pub when: When,
}

#[derive(Clone, Debug)]
pub struct MachineSpec {
    pub profile: String,
    pub cpus: Option<u32>,
    pub memory: Option<Bytes>,
    pub kernel: KernelVersion,
    /// `[machine.switches]`: applied on top of the kernel's switches (also after `--kernel`).
    pub switch_overrides: Vec<(String, String)>,
    pub seed: u64,
    pub scheduler: SchedulerKind,
    /// `read_ahead_kb` in pages.
    pub ra_pages: Option<u64>,
    /// Size of the swap device.
    pub swap: Option<Bytes>,
    /// Size of the persistent-memory device DAX files live on.
    pub pmem: Option<Bytes>,
    /// `fault_around_bytes` in pages.
    pub fault_around_pages: Option<u64>,
    /// `vm.swappiness`.
    pub swappiness: Option<u64>,
    /// `/sys/kernel/mm/lru_gen/min_ttl_ms`.
    pub min_ttl_ms: Option<u64>,
    /// The hugetlb pools at boot: `nr_hugepages`, `nr_overcommit_hugepages` (2 MiB), then
    /// `nr_hugepages_1g`, `nr_overcommit_hugepages_1g`; then the options `size=` and `min_size=`
    /// in bytes of the hugetlbfs mount the scenario's 2 MiB hugetlbfs files are on
    /// (`hugetlbfs_size`, `hugetlbfs_min_size`; `hugetlb/subpool.rs`) ([`TUNABLES`]).
    pub hugepages: [Option<u64>; 6],
    /// Cost overrides by name, in ns.
    pub costs: Vec<(String, u64)>,
    /// `[machine.sysfs]`: THP knobs by path (below `/sys/kernel/mm/transparent_hugepage/`) and
    /// the value written to each at boot.
    pub sysfs: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
pub struct FileDecl {
    pub line: usize,
    pub path: String,
    pub spec: mm::FileSpec,
}

#[derive(Clone, Debug)]
pub struct ProcessDecl {
    pub line: usize,
    pub name: String,
    /// The memory cgroup it runs in (the root by default).
    pub cgroup: Option<String>,
}

/// A memory cgroup (`[[cgroup]]`): its path and `memory.max`.
#[derive(Clone, Debug)]
pub struct CgroupDecl {
    pub line: usize,
    pub path: String,
    pub max: Option<Bytes>,
}

/// Tasks that run concurrently; the next step starts when all have finished.
#[derive(Clone, Debug)]
pub struct Step {
    pub line: usize,
    pub tasks: Vec<Task>,
    /// Expectations checked when this step is done.
    pub expects: Vec<Expect>,
}

/// One simulated thread running operations in order.
#[derive(Clone, Debug)]
pub struct Task {
    pub line: usize,
    pub name: String,
    /// A declared process, or a name bound by `fork`.
    pub process: String,
    pub cpu: u32,
    pub ops: Vec<Op>,
}

/// An address: a literal, or a bound name (a mapping, an exec segment) plus an offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrExpr {
    pub base: Option<String>,
    pub offset: i64,
}

/// One operation with its optional result name and expectation.
#[derive(Clone, Debug)]
pub struct Op {
    pub line: usize,
    pub kind: OpKind,
    /// The name its result is bound to (`as = "buf"`).
    pub bind: Option<String>,
    /// What it must return: the first alternative whose `when` holds (success if none does).
    pub expect: Vec<Alternative>,
}

impl Op {
    /// This operation, then the body of a `repeat`, in order.
    pub fn flatten(&self) -> impl Iterator<Item = &Op> {
        let body = match &self.kind {
            OpKind::Repeat { body, .. } => &body[..],
            _ => &[],
        };
        std::iter::once(self).chain(body)
    }
}

impl Scenario {
    /// Every operation of every task, the bodies of loops included, in file order.
    pub fn all_ops(&self) -> impl Iterator<Item = &Op> {
        self.steps.iter().flat_map(|st| &st.tasks).flat_map(|t| &t.ops).flat_map(Op::flatten)
    }
}

/// One expected result, under a condition on the switches.
#[derive(Clone, Debug)]
pub struct Alternative {
    pub when: When,
    pub expect: OpExpect,
}

/// A condition on the run's switches and kernel version: every listed switch has one of the
/// listed values (`when = { cow_reuse = ["page_count", "mapcount"] }`) and the kernel meets every
/// bound (`kernel = ">=v5.11"`, `"<v6.5"`, `"v5.12"`, or a range as a list:
/// `[">=v5.8", "<v6.13"]`). Empty: always.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct When {
    pub switches: Vec<(String, Vec<String>)>,
    pub kernel: Vec<(std::cmp::Ordering, bool, KernelVersion)>,
}

impl When {
    pub fn holds(&self, switches: &Switches, kernel: KernelVersion) -> bool {
        let values = switches.iter();
        let switches_hold = self.switches.iter().all(|(k, allowed)| {
            values.iter().any(|(name, v)| name == k && allowed.iter().any(|a| a == v))
        });
        let kernel_holds = self.kernel.iter().all(|&(ord, or_equal, v)| {
            let c = kernel.cmp(&v);
            c == ord || (or_equal && c == std::cmp::Ordering::Equal)
        });
        switches_hold && kernel_holds
    }
}

#[derive(Clone, Debug)]
pub enum OpKind {
    Mmap {
        addr: Option<AddrExpr>,
        len: Bytes,
        prot: u32,
        flags: u32,
        fd: Option<String>,
        offset: u64,
    },
    Munmap {
        addr: AddrExpr,
        len: Bytes,
    },
    Mprotect {
        addr: AddrExpr,
        len: Bytes,
        prot: u32,
    },
    /// `remap_file_pages(addr, len, prot, pgoff, flags)`: `prot` must be 0 and `flags` at most
    /// `MAP_NONBLOCK` (anything else is the kernel's EINVAL to ask about).
    RemapFilePages {
        addr: AddrExpr,
        len: Bytes,
        prot: u32,
        pgoff: u64,
        flags: u32,
    },
    Madvise {
        addr: AddrExpr,
        len: Bytes,
        advice: u32,
    },
    /// `mlock(addr, len)`, or `mlock2(addr, len, flags)` when `flags` is given
    /// (`mm::mlock::mlock_flags`).
    Mlock {
        addr: AddrExpr,
        len: Bytes,
        flags: Option<u32>,
    },
    Munlock {
        addr: AddrExpr,
        len: Bytes,
    },
    /// `mseal(addr, len, flags)` (v6.10; `flags` must be 0, any other value is the kernel's
    /// EINVAL to ask about).
    Mseal {
        addr: AddrExpr,
        len: Bytes,
        flags: u64,
    },
    /// `mlockall(flags)` (`mm::mlock::mcl`).
    Mlockall {
        flags: u32,
    },
    Munlockall,
    /// `brk(addr)`: returns the program break in force afterwards.
    Brk {
        addr: AddrExpr,
    },
    /// `msync(addr, len, flags)` (`mm::msync::ms`).
    Msync {
        addr: AddrExpr,
        len: Bytes,
        flags: u32,
    },
    /// `mremap(addr, old_len, new_len, flags, new_addr)`; `flags` holds `mm::mremap_flags`.
    Mremap {
        addr: AddrExpr,
        old_len: Bytes,
        new_len: Bytes,
        flags: u32,
        new_addr: Option<AddrExpr>,
    },
    /// `shmget(key, size, flags)`: a System V segment's id; `flags` holds `mm::shm::shmflg`
    /// and the permission bits.
    Shmget {
        key: i32,
        size: u64,
        flags: u32,
    },
    /// `shmat(shmid, addr, flags)`: where the segment is mapped.
    Shmat {
        shmid: String,
        addr: Option<AddrExpr>,
        flags: u32,
    },
    /// `shmdt(addr)`.
    Shmdt {
        addr: AddrExpr,
    },
    /// `shmctl(shmid, IPC_RMID)`, or `IPC_STAT` reading one field of `struct shmid_ds`.
    Shmctl {
        shmid: String,
        stat: Option<ShmField>,
    },
    /// `memfd_create(name, flags)`: a descriptor of a new unlinked tmpfs (or hugetlbfs) file.
    MemfdCreate {
        name: String,
        flags: u32,
    },
    Open {
        path: String,
        flags: OpenFlags,
    },
    Close {
        fd: String,
    },
    Dup {
        fd: String,
    },
    Read {
        fd: String,
        buf: Option<AddrExpr>,
        len: u64,
        offset: Option<u64>,
    },
    Write {
        fd: String,
        data: Vec<u8>,
        offset: Option<u64>,
    },
    Truncate {
        path: String,
        size: u64,
    },
    Ftruncate {
        fd: String,
        size: u64,
    },
    Fsync {
        fd: String,
    },
    Fork,
    Exit,
    Exec {
        path: String,
        image: ExecImage,
    },
    Touch {
        addr: AddrExpr,
        len: Bytes,
        access: mm::Access,
    },
    ReadBytes {
        addr: AddrExpr,
        len: u64,
    },
    /// `mincore(addr, len)`: its vector, a byte per page, as data.
    Mincore {
        addr: AddrExpr,
        len: u64,
    },
    /// Reads the PFN `/proc/self/pagemap` shows at `addr` (as root), bound as a frame.
    Pagemap {
        addr: AddrExpr,
    },
    WriteBytes {
        addr: AddrExpr,
        data: Vec<u8>,
    },
    /// `pwrite()` of `data` at `addr` to `/proc/self/mem`: a forced write (FOLL_FORCE), which
    /// reaches private mappings the process cannot write itself. Counts the bytes written.
    ProcMemWrite {
        addr: AddrExpr,
        data: Vec<u8>,
    },
    /// Takes `[addr, addr + len)` with GUP and holds it (a driver, `gup_test`).
    Pin {
        addr: AddrExpr,
        len: u64,
        flags: mm::types::mm_types::GupFlags,
    },
    /// Reads what a holder's pages contain: `len` bytes (all by default) from `offset`.
    PinRead {
        hold: String,
        offset: u64,
        len: Option<u64>,
    },
    /// Releases a holder's pages.
    Unpin {
        hold: String,
    },
    /// `pread` through O_DIRECT into `buf` (the descriptor must be opened `direct`); with
    /// `submit`, an asynchronous read left in flight until a `complete`.
    PreadDirect {
        fd: String,
        buf: AddrExpr,
        len: u64,
        offset: u64,
        submit: bool,
    },
    /// `pwrite` of `len` bytes from `buf` at `offset`: through O_DIRECT when the descriptor was
    /// opened `direct` (the device reads the buffer's pages), copied otherwise.
    PwriteFrom {
        fd: String,
        buf: AddrExpr,
        len: u64,
        offset: u64,
    },
    /// `IORING_REGISTER_BUFFERS` of `[addr, addr + len)`: a long-term writable pin, bound as
    /// pages held (so `pin_read` reads them).
    IoUringRegister {
        addr: AddrExpr,
        len: u64,
    },
    /// A userfaultfd operation.
    Uffd(UffdOp),
    /// `IORING_UNREGISTER_BUFFERS`: releases the registered buffer.
    IoUringUnregister {
        hold: String,
    },
    /// `IORING_OP_READ_FIXED` (`write`: `WRITE_FIXED`) of `len` bytes at `addr` of registered
    /// buffer `hold`, from (to) `fd` at `offset`. Counts the bytes moved.
    Fixed {
        write: bool,
        hold: String,
        addr: AddrExpr,
        len: u64,
        fd: String,
        offset: u64,
    },
    /// Ends an asynchronous read: the device writes the held pages now; counts the bytes read.
    Complete {
        io: String,
    },
    /// `prctl(option, arg)`: a get returns its value.
    Prctl {
        option: mm::syscall::Prctl,
        arg: u64,
    },
    /// A read of a number from a sysfs or sysctl file (khugepaged's `full_scans`, as the
    /// kernel's selftest polls it), or from KSM's per-process files (`field`: the line of
    /// `/proc/self/ksm_stat`).
    SysfsRead {
        path: String,
        field: Option<String>,
    },
    /// A write of `value` to a sysfs or sysctl file (a THP knob, a hugetlb pool's size).
    SysfsWrite {
        path: String,
        value: String,
    },
    /// Writes `value` to `/proc/PID/clear_refs` of `process`.
    ClearRefs {
        process: String,
        value: u64,
    },
    /// `pipe()`: binds `NAME.read` and `NAME.write`.
    Pipe,
    /// `vmsplice` of `[addr, addr + len)` into the pipe end `fd`.
    Vmsplice {
        fd: String,
        addr: AddrExpr,
        len: u64,
    },
    /// Loads the 8-byte little-endian counter at `addr`, then stores it plus one: two separate
    /// accesses, as a program incrementing without a lock does (so concurrent increments can
    /// lose updates).
    Increment {
        addr: AddrExpr,
    },
    /// Runs a workload's access loop on this thread over `[addr, addr + len)` (pmbench's: each
    /// access one byte of a page chosen by `pattern`, a load with probability `reads`).
    Run {
        addr: AddrExpr,
        len: Bytes,
        pattern: workload::access::Pattern,
        reads: simcore::Ratio,
        accesses: u64,
    },
    Sleep {
        duration: SimDuration,
    },
    /// `posix_fadvise(fd, offset, len, advice)`.
    Fadvise {
        fd: String,
        offset: i64,
        len: i64,
        advice: i32,
    },
    /// `readahead(fd, offset, count)`.
    Readahead {
        fd: String,
        offset: u64,
        len: u64,
    },
    /// `cachestat(fd, &{offset, len}, &cstat, flags)`, reading one field of `struct cachestat`
    /// (or none: success or an errno only); `null_range` and `null_cstat` pass NULL for that
    /// pointer.
    Cachestat {
        fd: String,
        offset: u64,
        len: u64,
        flags: u32,
        null_range: bool,
        null_cstat: bool,
        field: Option<CachestatField>,
    },
    /// A write of `amount` to the cgroup's `memory.reclaim`.
    MemoryReclaim {
        cgroup: String,
        amount: Bytes,
    },
    /// `fallocate(fd, mode, offset, len)`; `mode` holds `mm::fs::falloc` flags.
    Fallocate {
        fd: String,
        mode: u32,
        offset: u64,
        len: u64,
    },
    /// Runs `body` again and again: `max` times, or until `until` holds (at most `max`
    /// iterations). The body holds no `repeat`.
    Repeat {
        body: Vec<Op>,
        until: Until,
        max: u64,
    },
    /// Raises the scenario flag `flag`: every task waiting for it goes on, and every loop
    /// repeating until it ends after its current iteration. A flag stays raised.
    Notify {
        flag: String,
    },
    /// Blocks until the scenario flag `flag` is raised (at once if it is).
    Wait {
        flag: String,
    },
}

/// The userfaultfd operations (`crates/mm/src/userfaultfd.rs`).
#[derive(Clone, Debug)]
pub enum UffdOp {
    /// `userfaultfd(2)` with `flags` (`O_CLOEXEC`, `O_NONBLOCK`, `UFFD_USER_MODE_ONLY`), or with
    /// `dev` `/dev/userfaultfd`'s `USERFAULTFD_IOC_NEW`: binds the descriptor.
    Create { flags: u64, dev: bool },
    /// `ioctl(UFFDIO_API)` on userfaultfd `fd`, enabling `features`.
    Api { fd: String, features: u64 },
    /// `ioctl(UFFDIO_REGISTER)` of `[addr, addr + len)` with `mode` (missing).
    Register { fd: String, addr: AddrExpr, len: u64, mode: u64 },
    /// `ioctl(UFFDIO_UNREGISTER)` of `[addr, addr + len)`.
    Unregister { fd: String, addr: AddrExpr, len: u64 },
    /// `ioctl(UFFDIO_WAKE)` of `[addr, addr + len)`.
    Wake { fd: String, addr: AddrExpr, len: u64 },
    /// `ioctl(UFFDIO_COPY)` of `len` bytes from `src` (the caller's) to `dst` with `mode`
    /// (`dontwake`); counts the bytes.
    Copy { fd: String, dst: AddrExpr, src: AddrExpr, len: u64, mode: u64 },
    /// `ioctl(UFFDIO_ZEROPAGE)` of `[dst, dst + len)` with `mode`; counts the bytes.
    Zeropage { fd: String, dst: AddrExpr, len: u64, mode: u64 },
    /// `ioctl(UFFDIO_CONTINUE)` of `[dst, dst + len)` with `mode`; counts the bytes.
    Continue { fd: String, dst: AddrExpr, len: u64, mode: u64 },
    /// `ioctl(UFFDIO_WRITEPROTECT)` of `[addr, addr + len)` with `mode` (`wp` sets the
    /// protection, none resolves it, `dontwake`).
    Writeprotect { fd: String, addr: AddrExpr, len: u64, mode: u64 },
    /// `read(2)` of one message from userfaultfd `fd` (sleeping for one): binds a fault's
    /// address, or with `fork` (its expectation is a fork event) the child's descriptor.
    Read { fd: String, fork: bool },
}

impl UffdOp {
    /// The operation's name in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            UffdOp::Create { .. } => "userfaultfd",
            UffdOp::Api { .. } => "uffdio_api",
            UffdOp::Register { .. } => "uffdio_register",
            UffdOp::Unregister { .. } => "uffdio_unregister",
            UffdOp::Wake { .. } => "uffdio_wake",
            UffdOp::Copy { .. } => "uffdio_copy",
            UffdOp::Zeropage { .. } => "uffdio_zeropage",
            UffdOp::Continue { .. } => "uffdio_continue",
            UffdOp::Writeprotect { .. } => "uffdio_writeprotect",
            UffdOp::Read { .. } => "uffd_read",
        }
    }
}

/// A `uffd_read` message a scenario expects (`struct uffd_msg`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MsgExpect {
    /// A page fault at `addr`; a write fault or not when `write` is given, a minor fault or not
    /// when `minor` is, a write-protect fault or not when `wp` is; raised by process `tid`'s
    /// thread when given (`UFFD_FEATURE_THREAD_ID`).
    Pagefault {
        addr: AddrExpr,
        write: Option<bool>,
        minor: Option<bool>,
        wp: Option<bool>,
        tid: Option<String>,
    },
    /// `UFFD_EVENT_FORK`.
    Fork,
    /// `UFFD_EVENT_REMAP` of `len` bytes from `from` to `to`.
    Remap { from: AddrExpr, to: AddrExpr, len: u64 },
    /// `UFFD_EVENT_REMOVE` of `[start, end)`.
    Remove { start: AddrExpr, end: AddrExpr },
    /// `UFFD_EVENT_UNMAP` of `[start, end)`.
    Unmap { start: AddrExpr, end: AddrExpr },
}

/// When a `repeat` ends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Until {
    /// After `max` iterations (`times = N`).
    Count,
    /// Before an iteration, when the flag is raised (`until = "flag"`, `flag = NAME`).
    Flag(String),
    /// After the first iteration whose every operation met its expectation
    /// (`until = "success"`); an iteration ends at its first operation that did not.
    Success,
}

impl OpKind {
    /// The operation's name in scenario files.
    pub fn name(&self) -> &'static str {
        match self {
            OpKind::Mmap { .. } => "mmap",
            OpKind::Munmap { .. } => "munmap",
            OpKind::Mprotect { .. } => "mprotect",
            OpKind::RemapFilePages { .. } => "remap_file_pages",
            OpKind::Madvise { .. } => "madvise",
            OpKind::Mlock { flags: None, .. } => "mlock",
            OpKind::Mlock { flags: Some(_), .. } => "mlock2",
            OpKind::Munlock { .. } => "munlock",
            OpKind::Mseal { .. } => "mseal",
            OpKind::Mlockall { .. } => "mlockall",
            OpKind::Munlockall => "munlockall",
            OpKind::Brk { .. } => "brk",
            OpKind::Msync { .. } => "msync",
            OpKind::Mremap { .. } => "mremap",
            OpKind::Open { .. } => "open",
            OpKind::MemfdCreate { .. } => "memfd_create",
            OpKind::Shmget { .. } => "shmget",
            OpKind::Shmat { .. } => "shmat",
            OpKind::Shmdt { .. } => "shmdt",
            OpKind::Shmctl { .. } => "shmctl",
            OpKind::Close { .. } => "close",
            OpKind::Dup { .. } => "dup",
            OpKind::Read { .. } => "read",
            OpKind::Write { .. } => "write",
            OpKind::Truncate { .. } => "truncate",
            OpKind::Ftruncate { .. } => "ftruncate",
            OpKind::Fsync { .. } => "fsync",
            OpKind::Fork => "fork",
            OpKind::Exit => "exit",
            OpKind::Exec { .. } => "exec",
            OpKind::Touch { .. } => "touch",
            OpKind::ReadBytes { .. } => "read_bytes",
            OpKind::Mincore { .. } => "mincore",
            OpKind::Pagemap { .. } => "pagemap",
            OpKind::WriteBytes { .. } => "write_bytes",
            OpKind::ProcMemWrite { .. } => "proc_mem_write",
            OpKind::Increment { .. } => "increment",
            OpKind::Run { .. } => "run",
            OpKind::Pin { .. } => "pin",
            OpKind::PinRead { .. } => "pin_read",
            OpKind::Unpin { .. } => "unpin",
            OpKind::PreadDirect { .. } => "pread_direct",
            OpKind::PwriteFrom { .. } => "pwrite",
            OpKind::Complete { .. } => "complete",
            OpKind::IoUringRegister { .. } => "io_uring_register_buffers",
            OpKind::IoUringUnregister { .. } => "io_uring_unregister_buffers",
            OpKind::Uffd(u) => u.name(),
            OpKind::Fixed { write: false, .. } => "read_fixed",
            OpKind::Fixed { write: true, .. } => "write_fixed",
            OpKind::ClearRefs { .. } => "clear_refs",
            OpKind::Prctl { .. } => "prctl",
            OpKind::Pipe => "pipe",
            OpKind::Vmsplice { .. } => "vmsplice",
            OpKind::Sleep { .. } => "sleep",
            OpKind::Fadvise { .. } => "fadvise",
            OpKind::Readahead { .. } => "readahead",
            OpKind::Cachestat { .. } => "cachestat",
            OpKind::MemoryReclaim { .. } => "memory_reclaim",
            OpKind::Fallocate { .. } => "fallocate",
            OpKind::SysfsRead { .. } => "sysfs_read",
            OpKind::SysfsWrite { .. } => "sysfs_write",
            OpKind::Repeat { .. } => "repeat",
            OpKind::Notify { .. } => "notify",
            OpKind::Wait { .. } => "wait",
        }
    }

    /// What kind of value the operation's result is, if it can be bound to a name.
    pub fn binds(&self) -> Option<ValueKind> {
        match self {
            OpKind::Mmap { .. }
            | OpKind::Mremap { .. }
            | OpKind::Shmat { .. }
            | OpKind::Brk { .. }
            | OpKind::Uffd(UffdOp::Read { fork: false, .. }) => Some(ValueKind::Addr),
            OpKind::Shmget { .. } => Some(ValueKind::Shm),
            OpKind::Open { .. }
            | OpKind::Dup { .. }
            | OpKind::MemfdCreate { .. }
            | OpKind::Uffd(UffdOp::Create { .. } | UffdOp::Read { fork: true, .. }) => {
                Some(ValueKind::Fd)
            }
            OpKind::Fork => Some(ValueKind::Process),
            OpKind::Exec { .. } => Some(ValueKind::Layout),
            OpKind::Pin { .. } | OpKind::IoUringRegister { .. } => Some(ValueKind::Hold),
            OpKind::Pipe => Some(ValueKind::Pipe),
            OpKind::PreadDirect { submit: true, .. } => Some(ValueKind::Io),
            OpKind::Pagemap { .. } => Some(ValueKind::Frame),
            _ => None,
        }
    }
}

/// The kinds of values names are bound to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    Addr,
    Fd,
    Process,
    /// An exec layout: `NAME.text`, `NAME.data`, `NAME.bss`, `NAME.stack` are addresses.
    Layout,
    /// Pages held with GUP.
    Hold,
    /// A pipe: `NAME.read` and `NAME.write` are file descriptors.
    Pipe,
    /// An asynchronous read in flight.
    Io,
    /// A System V shared memory segment's id.
    Shm,
    /// A page frame number (`pagemap`).
    Frame,
}

/// The field of `struct cachestat` a `cachestat` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CachestatField {
    Cache,
    Dirty,
    Writeback,
    Evicted,
    RecentlyEvicted,
}

impl CachestatField {
    pub const NAMES: [(&'static str, CachestatField); 5] = [
        ("nr_cache", CachestatField::Cache),
        ("nr_dirty", CachestatField::Dirty),
        ("nr_writeback", CachestatField::Writeback),
        ("nr_evicted", CachestatField::Evicted),
        ("nr_recently_evicted", CachestatField::RecentlyEvicted),
    ];

    /// The field named `s` (`nr_cache`, ...).
    pub fn parse(s: &str) -> Result<CachestatField, String> {
        Self::NAMES.iter().find(|(n, _)| *n == s).map(|&(_, f)| f).ok_or_else(|| {
            let names: Vec<&str> = Self::NAMES.iter().map(|(n, _)| *n).collect();
            format!("unknown `struct cachestat` field `{s}`: expected {}", names.join(", "))
        })
    }

    /// The field's value in `cs`.
    pub fn of(self, cs: &mm::filemap::Cachestat) -> u64 {
        match self {
            CachestatField::Cache => cs.nr_cache,
            CachestatField::Dirty => cs.nr_dirty,
            CachestatField::Writeback => cs.nr_writeback,
            CachestatField::Evicted => cs.nr_evicted,
            CachestatField::RecentlyEvicted => cs.nr_recently_evicted,
        }
    }
}

/// The field of `struct shmid_ds` a `shmctl` with `IPC_STAT` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShmField {
    Segsz,
    Nattch,
    Cpid,
    Lpid,
    Mode,
}

impl ShmField {
    /// The field named `s` (`shm_segsz` or `segsz`, ...).
    pub fn parse(s: &str) -> Result<ShmField, String> {
        Ok(match s.strip_prefix("shm_").unwrap_or(s) {
            "segsz" => ShmField::Segsz,
            "nattch" => ShmField::Nattch,
            "cpid" => ShmField::Cpid,
            "lpid" => ShmField::Lpid,
            "mode" => ShmField::Mode,
            _ => {
                return Err(format!(
                    "unknown `shmid_ds` field `{s}`: expected shm_segsz, shm_nattch, shm_cpid, shm_lpid or shm_mode"
                ));
            }
        })
    }

    /// The field's value in `ds`.
    pub fn of(self, ds: &mm::shm::ShmidDs) -> u64 {
        match self {
            ShmField::Segsz => ds.segsz,
            ShmField::Nattch => ds.nattch,
            ShmField::Cpid => u64::from(ds.cpid),
            ShmField::Lpid => u64::from(ds.lpid),
            ShmField::Mode => u64::from(ds.mode),
        }
    }
}

impl ValueKind {
    /// The kind as a message names it.
    pub fn describe(self) -> &'static str {
        match self {
            ValueKind::Addr => "an address",
            ValueKind::Fd => "a file descriptor",
            ValueKind::Hold => "pages held by `pin` or `io_uring_register_buffers`",
            ValueKind::Pipe => "a pipe",
            ValueKind::Process => "a process",
            ValueKind::Layout => "an exec layout",
            ValueKind::Io => "an asynchronous read (`pread_direct` with `async`)",
            ValueKind::Shm => "a System V segment (`shmget`)",
            ValueKind::Frame => "a frame (`pagemap`)",
        }
    }
}

/// What an operation must return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpExpect {
    /// Success, whatever the value (the default).
    Success,
    /// Any result, success or error (`"any"`): a racing operation whose outcome the
    /// interleaving decides; the scenario checks the state it leaves.
    Any,
    Errno(Errno),
    Signal(Signal),
    /// Success with these bytes (`read_bytes`, `read` into a buffer).
    Data(Vec<u8>),
    /// Success moving this many bytes (`read`, `write`).
    Count(u64),
    /// A `repeat` whose condition was met after a number of iterations that meets this.
    Iterations(Comparison),
    /// Success reading a number that meets this (`sysfs_read`).
    Value(Comparison),
    /// `mincore`'s vector with a number of resident pages (bytes with bit 0 set) that meets this.
    Resident(Comparison),
    /// Success returning this address (`brk`'s break, the mapping `mmap`, `mremap` or `shmat`
    /// returned).
    Addr(AddrExpr),
    /// A `uffd_read` message.
    Msg(MsgExpect),
}

/// An expectation on an observable, checked after a step or at the end.
#[derive(Clone, Debug)]
pub struct Expect {
    pub line: usize,
    pub what: Observable,
    pub cmp: Comparison,
    /// Checked only when this holds.
    pub when: When,
}

/// A number the model exposes in a kernel format.
#[derive(Clone, Debug)]
pub enum Observable {
    /// An smaps field (kB) of the VMA of `process` containing `at`.
    Smaps { process: String, at: AddrExpr, field: String },
    /// An smaps_rollup field (kB) of `process`.
    SmapsRollup { process: String, field: String },
    /// A `/proc/PID/status` field (kB).
    Status { process: String, field: String },
    /// A `/proc/PID/stat` field by its `proc(5)` name (`mm::fs::proc::array::STAT_FIELDS`).
    Stat { process: String, field: String },
    /// The signals of one kind the user accesses of `process`'s threads raised.
    Signals { process: String, signal: Signal },
    /// A `struct stat` field of a file (`mm::fs::stat::STAT_FIELDS`), by path or descriptor.
    Fstat { file: FileRef, field: String },
    /// A `/proc/vmstat` counter.
    Vmstat { name: String },
    /// A `/proc/meminfo` field (kB).
    Meminfo { name: String },
    /// A pagemap bit (1 or 0) of the page of `process` at `at`; `zero_page` compares the PFN.
    Pagemap { process: String, at: AddrExpr, bit: PagemapBit },
    /// A `memory.stat` entry of a cgroup (bytes for amounts, counts for events).
    MemoryStat { cgroup: String, name: String },
    /// A number in a sysfs or sysctl file (`/sys/kernel/mm/transparent_hugepage/khugepaged/
    /// pages_collapsed`, `/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages`, ...).
    Sysfs { path: String },
    /// A field of the model's state by its kernel name (`mm::inspect::FIELDS`: a folio's
    /// refcount, a PTE's bits, a page-cache entry, a file's `f_mode`, ...), where `on` says.
    Inspect { field: String, on: InspectOn },
    /// A named whole-system invariant (`mm::sim::check::INVARIANTS`): 1 if it holds, 0 if not.
    Invariant { name: String },
    /// A `/proc/kpageflags` bit (`KPF_<flag>`, 1 or 0) of the frame pagemap gives at `at`.
    Kpageflags { process: String, at: AddrExpr, flag: String },
    /// `/proc/kpagecount` of the frame pagemap gives at `at`.
    Kpagecount { process: String, at: AddrExpr },
    /// A `/proc/kpageflags` bit of a frame bound earlier by `pagemap` (`KPF_BUDDY` once it is
    /// free, whoever maps the address now).
    FrameFlags { frame: String, flag: String },
    /// A number of a cgroup's multi-gen LRU as `/sys/kernel/debug/lru_gen` shows it.
    LruGen { cgroup: String, field: LruGenField },
    /// A `/proc/lock_stat` column of a lock class, since boot or since the last write of `0`.
    LockStat { class: String, column: LockStatColumn },
    /// The lines of `/proc/PID/maps` (`maps = "count"`): the process's VMAs.
    MapsCount { process: String },
}

/// A `/proc/lock_stat` column an expectation reads (times in ns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockStatColumn {
    Contentions,
    Acquisitions,
    WaittimeTotal,
    WaittimeMax,
    HoldtimeTotal,
    HoldtimeMax,
}

impl LockStatColumn {
    pub const NAMES: [(&'static str, LockStatColumn); 6] = [
        ("contentions", LockStatColumn::Contentions),
        ("acquisitions", LockStatColumn::Acquisitions),
        ("waittime-total", LockStatColumn::WaittimeTotal),
        ("waittime-max", LockStatColumn::WaittimeMax),
        ("holdtime-total", LockStatColumn::HoldtimeTotal),
        ("holdtime-max", LockStatColumn::HoldtimeMax),
    ];

    /// The column of `stats`.
    pub fn of(self, stats: &engine::LockClassStats) -> u64 {
        match self {
            LockStatColumn::Contentions => stats.contentions,
            LockStatColumn::Acquisitions => stats.acquisitions,
            LockStatColumn::WaittimeTotal => u64::try_from(stats.wait_ns.sum()).unwrap_or(u64::MAX),
            LockStatColumn::WaittimeMax => stats.wait_ns.max(),
            LockStatColumn::HoldtimeTotal => stats.hold_total.as_ns(),
            LockStatColumn::HoldtimeMax => stats.hold_max.as_ns(),
        }
    }
}

/// What an `lru_gen` expectation reads of a lruvec (`mm/vmscan.c`, `struct lru_gen_folio`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LruGenField {
    /// `max_seq`: the youngest generation's sequence number.
    MaxSeq,
    /// `min_seq[type]`: the oldest generation of anon (`file` false) or file pages.
    MinSeq { file: bool },
    /// The anon or file pages of one generation.
    Pages { file: bool, seq: GenSeq },
}

/// A generation by its sequence number or its place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GenSeq {
    Seq(u64),
    /// `max_seq`.
    Youngest,
    /// `min_seq` of the type read.
    Oldest,
}

/// Where an inspected field is read.
#[derive(Clone, Debug)]
pub enum InspectOn {
    /// An address of a process.
    Addr { process: String, at: AddrExpr },
    /// A page-cache index of a file.
    Index { file: FileRef, index: u64 },
    /// A file's `address_space`.
    Mapping(FileRef),
    /// The open file of a process's descriptor.
    File { process: String, fd: String },
    /// The machine.
    Machine,
}

/// A file named by its path (`stat`) or by a process's descriptor (`fstat`).
#[derive(Clone, Debug)]
pub enum FileRef {
    Path(String),
    Fd { process: String, fd: String },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PagemapBit {
    Present,
    Swapped,
    Exclusive,
    SoftDirty,
    /// `PM_UFFD_WP` (bit 57, v5.13): the PTE or swap entry is uffd write-protected.
    UffdWp,
    File,
    ZeroPage,
    /// `/proc/kpageflags`' `KPF_THP` of the mapped page: part of a PMD-sized folio.
    Thp,
    /// `PM_GUARD_REGION` (bit 58, v6.15): a guard region's page.
    Guard,
}

impl PagemapBit {
    pub const NAMES: &'static str =
        "present, swapped, exclusive, soft_dirty, uffd_wp, file, zero_page, thp, guard";

    /// The bit named `name` in scenario files.
    pub fn named(name: &str) -> Option<PagemapBit> {
        let table = [
            ("present", PagemapBit::Present),
            ("swapped", PagemapBit::Swapped),
            ("exclusive", PagemapBit::Exclusive),
            ("soft_dirty", PagemapBit::SoftDirty),
            ("uffd_wp", PagemapBit::UffdWp),
            ("file", PagemapBit::File),
            ("zero_page", PagemapBit::ZeroPage),
            ("thp", PagemapBit::Thp),
            ("guard", PagemapBit::Guard),
        ];
        table.iter().find(|(n, _)| *n == name).map(|&(_, b)| b)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    Equals(u64),
    AtLeast(u64),
    AtMost(u64),
}

impl Comparison {
    pub fn holds(self, v: u64) -> bool {
        match self {
            Comparison::Equals(x) => v == x,
            Comparison::AtLeast(x) => v >= x,
            Comparison::AtMost(x) => v <= x,
        }
    }
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Comparison::Equals(x) => write!(f, "= {x}"),
            Comparison::AtLeast(x) => write!(f, ">= {x}"),
            Comparison::AtMost(x) => write!(f, "<= {x}"),
        }
    }
}

/// An observable to print after the run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Show {
    Smaps(String),
    SmapsRollup(String),
    Maps(String),
    Status(String),
    /// `/proc/PID/stat`.
    Stat(String),
    Vmstat,
    Meminfo,
    LockStat,
    /// Lockdep's report: its first splat, or `clean` (`mm::inspect::lockdep_report`).
    Lockdep,
    /// `memory.stat` of a cgroup.
    MemoryStat(String),
    /// `/sys/kernel/debug/lru_gen`.
    LruGen,
    /// The model's state at an address of a process by kernel names (`mm::inspect`).
    Inspect(String, AddrExpr),
    /// `page-types -L` over the pages of the mapping of a process containing an address.
    PageTypes(String, AddrExpr),
}

impl Show {
    pub const NAMES: &'static str = "smaps:PROCESS, smaps_rollup:PROCESS, maps:PROCESS, status:PROCESS, stat:PROCESS, vmstat, meminfo, lock_stat, lockdep, memory.stat:CGROUP, lru_gen, inspect:PROCESS:ADDR, kpageflags:PROCESS:ADDR";
}

/// The `[machine.tunables]` keys: `read_ahead_kb`, `fault_around_bytes`, `swappiness`,
/// `lru_gen_min_ttl_ms`, then the hugetlb pools and the hugetlbfs mount's options in
/// [`MachineSpec::hugepages`] order.
pub const TUNABLES: [&str; 10] = [
    "read_ahead_kb",
    "fault_around_bytes",
    "swappiness",
    "lru_gen_min_ttl_ms",
    "nr_hugepages",
    "nr_overcommit_hugepages",
    "nr_hugepages_1g",
    "nr_overcommit_hugepages_1g",
    "hugetlbfs_size",
    "hugetlbfs_min_size",
];

/// What an `[[expect]]` reads: exactly one of these keys.
pub const EXPECT_KINDS: [&str; 19] = [
    "smaps",
    "smaps_rollup",
    "status",
    "stat",
    "signals",
    "fstat",
    "vmstat",
    "meminfo",
    "pagemap",
    "memory_stat",
    "sysfs",
    "model",
    "inspect",
    "invariant",
    "kpageflags",
    "kpagecount",
    "lru_gen",
    "lock_stat",
    "maps",
];

/// A file system type by name: `tmpfs` is a tmpfs mount with `huge=never`,
/// `tmpfs:huge=VALUE` one with that option, `shmem` a file on the kernel's `shm_mnt` (as memfd
/// and shared anonymous memory are), whose THPs follow `shmem_enabled`.
pub fn fs_type(name: &str) -> Option<FsType> {
    match name {
        "ext4" | "disk" => Some(FsType::Disk),
        "xfs" => Some(FsType::Xfs),
        "bdev" => Some(FsType::Bdev),
        "tmpfs" => Some(FsType::Tmpfs(TmpfsMount::Mount(ShmemHuge::Never))),
        "shmem" => Some(FsType::Tmpfs(TmpfsMount::ShmMnt)),
        "dax" | "ext4-dax" => Some(FsType::Dax),
        "hugetlbfs" | "hugetlbfs:2MiB" => {
            Some(FsType::Hugetlbfs(mm::types::hugetlb::HugeSize::Size2M))
        }
        "hugetlbfs:1GiB" => Some(FsType::Hugetlbfs(mm::types::hugetlb::HugeSize::Size1G)),
        _ => {
            let huge = name.strip_prefix("tmpfs:huge=")?;
            Some(FsType::Tmpfs(TmpfsMount::Mount(ShmemHuge::parse(huge).ok()?)))
        }
    }
}
