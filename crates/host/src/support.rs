//! What the host can run natively, decided before anything on the host is touched: a scenario
//! that needs a feature this machine or the native executor lacks is refused with the feature
//! named (exit 2), as a kernel selftest skips what its kernel cannot do.
//!
//! Refused: without root; a kernel version mmsim does not model; swap (no swap device), pmem and
//! DAX files, XFS files, 1 GiB hugetlbfs without a 1 GiB pool directory; a switch set to another
//! value than the host kernel's own (the host runs its own behaviour only), but for `lru`
//! where the kernel has the multi-gen LRU's switch (`/sys/kernel/mm/lru_gen/enabled`); a scenario that only
//! makes sense under exploration (`[[explore]]` tables, a random or PCT scheduler); two tasks
//! of one process in one step (the agents are single-threaded); and the operations the
//! executor does not make natively yet: GUP pins (`pin`: it needs `CONFIG_GUP_TEST`'s
//! `/sys/kernel/debug/gup_test`), asynchronous O_DIRECT (`pread_direct` with `async`, `complete`:
//! the model's device writes at `complete`, a real disk long before), `exec`, `brk`, the `run`
//! workload, an exec `touch`, `memory_reclaim` without a cgroup v2 memory controller, soft-dirty
//! `clear_refs` (4) without `CONFIG_MEM_SOFT_DIRTY`; io_uring's operations where the kernel does
//! not run io_uring (`io_uring_setup` fails: built without `CONFIG_IO_URING`, or
//! `kernel.io_uring_disabled`), which the model's version would have run.
//!
//! io_uring's registered buffers run natively (`uring.rs`): `io_uring_register_buffers`,
//! `io_uring_unregister_buffers`, `read_fixed`, `write_fixed`, and `pin_read`/`unpin` of a
//! registered buffer (the only holds a native run makes).

use crate::sys;
use lab::scenario::model::{Observable, Op, OpKind, Scenario};
use mm::types::fs::FsType;
use mm::{Access, KernelVersion, Switches};

/// Why the host cannot run a scenario natively (exit 2).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub reason: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "refused on the host: {}", self.reason)
    }
}

pub(crate) fn refuse<T>(reason: impl Into<String>) -> Result<T, Refusal> {
    Err(Refusal { reason: reason.into() })
}

/// The host kernel's version as mmsim names it (`6.18.44-fc` is v6.18), refused when mmsim
/// does not model it.
pub fn host_kernel() -> Result<KernelVersion, Refusal> {
    parse_release(&sys::kernel_release())
}

/// The version of a kernel release string (`uname -r`).
pub fn parse_release(release: &str) -> Result<KernelVersion, Refusal> {
    let mut parts = release.split(['.', '-', '+']);
    let (major, minor) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    format!("v{major}.{minor}")
        .parse()
        .or_else(|e: String| refuse(format!("the host kernel {release}: {e}")))
}

/// The memory cgroup hierarchy the host offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CgroupKind {
    /// cgroup v2 with the memory controller, mounted at the path.
    V2(&'static str),
    /// cgroup v1's memory controller at `/sys/fs/cgroup/memory`.
    V1,
}

/// The memory cgroup hierarchy of this host, if any.
pub(crate) fn cgroup_kind() -> Option<CgroupKind> {
    for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
        let controllers = std::fs::read_to_string(format!("{root}/cgroup.controllers"));
        if controllers.is_ok_and(|c| c.split_whitespace().any(|w| w == "memory")) {
            return Some(CgroupKind::V2(root));
        }
    }
    std::path::Path::new("/sys/fs/cgroup/memory/memory.limit_in_bytes")
        .exists()
        .then_some(CgroupKind::V1)
}

/// Whether the host tracks soft-dirty bits (`CONFIG_MEM_SOFT_DIRTY`): pagemap bit 55 of a page
/// just written is set only then.
pub(crate) fn has_soft_dirty() -> bool {
    let mut page = vec![0u8; 8192];
    let base = page.as_ptr() as u64;
    let addr = (base + 4095) & !4095;
    page[(addr - base) as usize] = 1;
    std::hint::black_box(&page);
    crate::observe::pagemap_entry(std::process::id() as i32, addr).is_ok_and(|e| e >> 55 & 1 == 1)
}

/// Checks that the host can run `s` natively on kernel `host`.
/// What a run brings beside the host's own devices (the guest's, `NativeOptions`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Provided {
    /// A swap device made for the run.
    pub swap: bool,
    /// A DAX-mounted file system on persistent memory.
    pub dax: bool,
}

/// Checks that the host can run `s` natively on kernel `host` with what the run brings.
pub fn check(s: &Scenario, host: KernelVersion, provided: Provided) -> Result<(), Refusal> {
    if sys::geteuid() != 0 {
        return refuse("the native executor needs root (it mounts, writes sysfs and reads PFNs)");
    }
    if !cfg!(target_arch = "x86_64") {
        return refuse("the native executor's accesses are x86-64 only");
    }
    check_machine(s, host, provided)?;
    for f in &s.files {
        check_fs(f.spec.fs, &f.path, provided.dax)?;
    }
    if !s.cgroups.is_empty() && cgroup_kind().is_none() {
        return refuse("memory cgroups: the host mounts no memory controller");
    }
    for step in &s.steps {
        let mut procs: Vec<&str> = step.tasks.iter().map(|t| t.process.as_str()).collect();
        procs.sort_unstable();
        if procs.windows(2).any(|w| w[0] == w[1]) {
            return refuse(format!(
                "line {}: two tasks of one process in one step (threads are not run natively yet)",
                step.line
            ));
        }
    }
    check_config(s)?;
    let uring = s.all_ops().any(|op| is_uring(&op.kind));
    let host = HostOps {
        soft_dirty: has_soft_dirty(),
        no_io_uring: uring.then(crate::uring::unavailable).flatten(),
    };
    s.all_ops().try_for_each(|op| check_op(op, &host))
}

/// What the host's kernel offers the operations.
struct HostOps {
    soft_dirty: bool,
    /// Why io_uring does not run here, when it does not.
    no_io_uring: Option<String>,
}

/// The operations run on io_uring's registered buffers (`uring.rs`).
fn is_uring(op: &OpKind) -> bool {
    matches!(
        op,
        OpKind::IoUringRegister { .. }
            | OpKind::IoUringUnregister { .. }
            | OpKind::Fixed { .. }
            | OpKind::PinRead { .. }
            | OpKind::Unpin { .. }
    )
}

/// An option of the running kernel's build configuration, from `/boot/config-<release>`
/// (Debian's kernel packages install it; the guest's initramfs carries it) or the kernel's own
/// `/proc/config.gz` (`CONFIG_IKCONFIG_PROC`): `None` when neither is there or the option is
/// not mentioned.
pub(crate) fn kernel_config(option: &str) -> Option<bool> {
    let text = std::fs::read_to_string(format!("/boot/config-{}", sys::kernel_release()))
        .ok()
        .or_else(proc_config)?;
    text.lines().find_map(|l| {
        if let Some(value) = l.strip_prefix(option).and_then(|r| r.strip_prefix('=')) {
            return Some(value != "n");
        }
        let unset = l.strip_prefix("# ").and_then(|r| r.strip_prefix(option));
        (unset == Some(" is not set")).then_some(false)
    })
}

/// `/proc/config.gz`, unpacked.
fn proc_config() -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open("/proc/config.gz").ok()?;
    let mut text = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut text).ok()?;
    Some(text)
}

/// The build options the model assumes and a kernel may lack: file THPs of ext4 and XFS files
/// need `CONFIG_READ_ONLY_THP_FOR_FS` (off in Debian's builds), so a scenario with disk files
/// that reads a file THP count (`FilePmdMapped`, `FileHugePages`, `nr_file_hugepages`,
/// `thp_file_*`) is refused there.
fn check_config(s: &Scenario) -> Result<(), Refusal> {
    let disk = s.files.iter().any(|f| f.spec.fs == FsType::Disk);
    let file_thp = |name: &str| {
        ["FilePmdMapped", "FileHugePages", "nr_file_hugepages", "thp_file_"]
            .iter()
            .any(|n| name.starts_with(n))
    };
    let mut expects = s.steps.iter().flat_map(|st| &st.expects).chain(&s.expects);
    let reads = expects.any(|e| match &e.what {
        Observable::Smaps { field: n, .. }
        | Observable::SmapsRollup { field: n, .. }
        | Observable::Meminfo { name: n }
        | Observable::Vmstat { name: n } => file_thp(n),
        _ => false,
    });
    if disk && reads && kernel_config("CONFIG_READ_ONLY_THP_FOR_FS") == Some(false) {
        return refuse(
            "file THPs of disk files: the kernel is built without CONFIG_READ_ONLY_THP_FOR_FS",
        );
    }
    Ok(())
}

/// The machine's needs: devices, switches, schedulers.
fn check_machine(s: &Scenario, host: KernelVersion, provided: Provided) -> Result<(), Refusal> {
    let m = &s.machine;
    match (m.swap.is_some(), provided.swap, has_swap()) {
        (true, false, false) => return refuse("swap: the host has no swap device (`/proc/swaps`)"),
        (true, true, true) => {
            return refuse(
                "swap: the machine swaps already; the run's RAM disk would not be its only swap",
            );
        }
        _ => {}
    }
    if m.pmem.is_some() && !provided.dax {
        return refuse("pmem: the host has no persistent-memory device for DAX");
    }
    if !s.explore.is_empty() || m.scheduler != engine::SchedulerKind::TimeOrdered {
        return refuse(
            "a race scenario: its outcome is the interleaving's, which only exploration decides",
        );
    }
    let own = Switches::for_kernel(host);
    for (k, v) in &m.switch_overrides {
        if k == "lru" && (v == "classic" || v == "mglru") && has_lru_gen() {
            continue; // the run writes /sys/kernel/mm/lru_gen/enabled (`controller::boot_values`)
        }
        let host_value = own.iter().into_iter().find(|(name, _)| name == k).map(|(_, v)| v);
        if host_value != Some(v.as_str()) {
            return refuse(format!(
                "switch {k} = {v}: the host kernel ({host}) has {k} = {}",
                host_value.unwrap_or("(none)")
            ));
        }
    }
    for (path, _) in &m.sysfs {
        let full = host_sysfs_path(path);
        if !std::path::Path::new(&full).exists() {
            return refuse(format!("{full}: the host kernel has no such file"));
        }
    }
    Ok(())
}

/// A THP knob's full path (`[machine.sysfs]` keys may start below `transparent_hugepage/`).
pub(crate) fn host_sysfs_path(key: &str) -> String {
    if key.starts_with('/') {
        key.to_string()
    } else if key.starts_with("transparent_hugepage/") {
        format!("/sys/kernel/mm/{key}")
    } else {
        format!("/sys/kernel/mm/transparent_hugepage/{key}")
    }
}

/// Where a kernel built with the multi-gen LRU switches it on and off (v6.1+).
pub(crate) const LRU_GEN_ENABLED: &str = "/sys/kernel/mm/lru_gen/enabled";

fn has_lru_gen() -> bool {
    std::path::Path::new(LRU_GEN_ENABLED).exists()
}

fn has_swap() -> bool {
    std::fs::read_to_string("/proc/swaps").is_ok_and(|t| t.lines().count() > 1)
}

fn check_fs(fs: FsType, path: &str, dax: bool) -> Result<(), Refusal> {
    match fs {
        FsType::Disk | FsType::Tmpfs(_) => Ok(()),
        FsType::Hugetlbfs(h) => {
            let dir = format!("/sys/kernel/mm/hugepages/hugepages-{}kB", h.bytes() / 1024);
            if std::path::Path::new(&dir).exists() {
                Ok(())
            } else {
                refuse(format!("file `{path}`: the host has no {dir}"))
            }
        }
        FsType::Xfs => refuse(format!("file `{path}`: no XFS scratch file system on the host")),
        FsType::Dax if dax => Ok(()),
        FsType::Dax => refuse(format!("file `{path}`: DAX needs a pmem device")),
        FsType::Pipe | FsType::AnonInode => {
            refuse(format!("file `{path}`: a pipe or userfaultfd is not a file to create"))
        }
        FsType::Bdev => refuse(format!("file `{path}`: a block device needs a scratch device")),
    }
}

/// The operations the native executor does not make.
fn check_op(op: &Op, host: &HostOps) -> Result<(), Refusal> {
    let why = match &op.kind {
        OpKind::Pin { .. } => {
            "GUP pins need CONFIG_GUP_TEST's /sys/kernel/debug/gup_test (not run natively yet)"
        }
        k if is_uring(k) && host.no_io_uring.is_some() => {
            let why = host.no_io_uring.as_deref().unwrap_or_default();
            return refuse(format!("line {}: `{}`: {why}", op.line, op.kind.name()));
        }
        OpKind::PreadDirect { submit: true, .. } | OpKind::Complete { .. } => {
            "asynchronous O_DIRECT reads are not run natively yet"
        }
        OpKind::Exec { .. } | OpKind::Brk { .. } => {
            "`exec` of a synthetic image (and `brk` after it) is not run natively"
        }
        OpKind::Run { .. } => "the `run` workload is not run natively yet",
        OpKind::Touch { access: Access::Exec, .. } => {
            "an exec touch needs code in the page (not run natively)"
        }
        OpKind::MemoryReclaim { .. } if !matches!(cgroup_kind(), Some(CgroupKind::V2(_))) => {
            "`memory_reclaim` needs a cgroup v2 memory controller (memory.reclaim)"
        }
        OpKind::ClearRefs { value: 4, .. } if !host.soft_dirty => {
            "soft-dirty `clear_refs` needs CONFIG_MEM_SOFT_DIRTY"
        }
        OpKind::SysfsWrite { path, .. } if path == mm::syscall::LOCK_STAT => {
            "clearing /proc/lock_stat needs CONFIG_LOCK_STAT (not run natively)"
        }
        OpKind::SysfsWrite { path, .. } if path == mm::mglru::debugfs::LRU_GEN => {
            "lru_gen commands name memory cgroup IDs, which differ on the host (not run natively)"
        }
        _ => return Ok(()),
    };
    refuse(format!("line {}: `{}`: {why}", op.line, op.kind.name()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn releases_name_their_modelled_version() {
        assert_eq!(parse_release("6.18.44-fc-v1045"), Ok(KernelVersion::new(6, 18)));
        assert_eq!(parse_release("6.1.0-28-amd64"), Ok(KernelVersion::new(6, 1)));
        assert!(parse_release("3.10.0-1160.el7").unwrap_err().reason.contains("outside"));
        assert!(parse_release("garbage").is_err());
    }
}
