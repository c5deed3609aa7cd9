//! The host made into the scenario's machine, and made back: a scratch directory with the
//! scenario's files (ext4 on the host's own file system, tmpfs and hugetlbfs mounts, memfds for
//! `shmem` files), the machine's THP knobs and tunables written to the host's files (the model's
//! boot values, so the defaults agree too), the hugetlb pool, and the memory cgroups (one for the
//! whole run, whose limit is the machine's memory capped by the host budget, with the scenario's
//! below it).
//!
//! Every change is journalled before it is made (`/run/mmsim-host.journal`, JSON) and undone in
//! reverse order when the run ends, normally, by error or by SIGINT/SIGTERM (the controller
//! polls for them); a run killed outright leaves the journal, which the next native run replays
//! first ([`restore_leftovers`]).

use crate::support::{CgroupKind, Refusal, cgroup_kind, host_sysfs_path, refuse};
use crate::sys;
use lab::scenario::model::Scenario;
use mm::types::fs::FsType;
use mm::types::fs::TmpfsMount;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

const JOURNAL: &str = "/run/mmsim-host.journal";

/// One change to the host, as its undoing needs it.
#[derive(Clone, Debug, Serialize, Deserialize)]
enum Change {
    /// A file's text before the run wrote it.
    Wrote {
        path: String,
        was: String,
    },
    Mounted(String),
    Cgroup(String),
    Dir(String),
    Swapon(String),
    Module(String),
}

/// The host's state for one native run; dropping it restores the host.
#[derive(Debug)]
pub(crate) struct HostSetup {
    changes: Vec<Change>,
    pub scratch: String,
    /// Scenario path to host path, for the declared files.
    paths: BTreeMap<String, String>,
    /// Scenario cgroup path to host cgroup directory ("" is the run's own).
    cgroups: BTreeMap<String, String>,
    kind: Option<CgroupKind>,
    /// The DAX file system's directory for the scenario's DAX files (the guest's).
    pub dax: Option<String>,
    /// The run swaps to a device of its own (`ram_disk_swap`), the machine's only swap.
    pub own_swap: bool,
    /// cgroup v2: the leaf below the run's own that processes without a cgroup join.
    leaf: Option<String>,
    /// The memfds behind `shmem` files (kept open for the run).
    memfds: Vec<i32>,
}

/// Undoes the changes a killed run left in the journal.
pub(crate) fn restore_leftovers() {
    let Ok(text) = std::fs::read_to_string(JOURNAL) else { return };
    let changes: Vec<Change> = serde_json::from_str(&text).unwrap_or_default();
    undo(&changes);
    let _ = std::fs::remove_file(JOURNAL);
}

fn undo(changes: &[Change]) {
    for c in changes.iter().rev() {
        match c {
            Change::Wrote { path, was } => {
                if path.ends_with("/ksm/run") {
                    // Unmerge what the run merged and reset ksmd's scan before it stops.
                    let _ = std::fs::write(path, "2");
                }
                let _ = std::fs::write(path, was);
            }
            Change::Mounted(t) => {
                let _ = sys::umount(t);
                if !t.starts_with("/sys/") {
                    let _ = std::fs::remove_dir(t);
                }
            }
            Change::Cgroup(dir) => remove_cgroup(dir),
            Change::Swapon(path) => {
                let _ = sys::swapoff(path);
            }
            Change::Module(name) => {
                let _ = sys::unload_module(name);
            }
            Change::Dir(d) => {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
}

/// Moves what is left in a cgroup to its parent and removes it. A cgroup whose last tasks have
/// just died stays busy until they are reaped (a killed run's agents, reparented to init), so
/// the removal is retried for up to two seconds.
fn remove_cgroup(dir: &str) {
    let parent = dir.rsplit_once('/').map_or(dir, |(p, _)| p);
    for _ in 0..100 {
        for file in ["cgroup.procs", "tasks"] {
            if let Ok(t) = std::fs::read_to_string(format!("{dir}/{file}")) {
                for pid in t.lines() {
                    let _ = std::fs::write(format!("{parent}/{file}"), pid);
                }
            }
        }
        match std::fs::remove_dir(dir) {
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => return,
        }
    }
}

/// A knob's current value as it would be written back: the bracketed choice of a choice file
/// (`always [madvise] never`), else the text.
fn current(path: &str) -> Result<String, Refusal> {
    let text = std::fs::read_to_string(path).or_else(|e| refuse(format!("{path}: {e}")))?;
    let t = text.trim();
    Ok(t.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap_or(t)
        .to_string())
}

impl HostSetup {
    pub(crate) fn new() -> HostSetup {
        let scratch = format!("/tmp/mmsim-host-{}", std::process::id());
        HostSetup {
            changes: Vec::new(),
            scratch,
            paths: BTreeMap::new(),
            cgroups: BTreeMap::new(),
            kind: cgroup_kind(),
            leaf: None,
            own_swap: false,
            dax: None,
            memfds: Vec::new(),
        }
    }

    fn journal(&mut self, c: Change) -> Result<(), Refusal> {
        self.changes.push(c);
        let text = serde_json::to_string(&self.changes).unwrap_or_default();
        std::fs::write(JOURNAL, text).or_else(|e| refuse(format!("{JOURNAL}: {e}")))
    }

    /// Writes `value` to `path`, journalling what it held.
    pub(crate) fn write(&mut self, path: &str, value: &str) -> Result<(), Refusal> {
        let was = current(path)?;
        if was == value {
            return Ok(());
        }
        self.journal(Change::Wrote { path: path.into(), was })?;
        std::fs::write(path, value).or_else(|e| refuse(format!("writing {value} to {path}: {e}")))
    }

    /// Journals `path`'s value so the run may change it (a `sysfs_write` of the scenario).
    pub(crate) fn keep(&mut self, path: &str) -> Result<(), Refusal> {
        let was = current(path)?;
        self.journal(Change::Wrote { path: path.into(), was })
    }

    fn mkdir(&mut self, dir: &str) -> Result<(), Refusal> {
        std::fs::create_dir_all(dir).or_else(|e| refuse(format!("mkdir {dir}: {e}")))?;
        self.journal(Change::Dir(dir.into()))
    }

    pub(crate) fn mount(&mut self, fstype: &str, target: &str, data: &str) -> Result<(), Refusal> {
        std::fs::create_dir_all(target).or_else(|e| refuse(format!("mkdir {target}: {e}")))?;
        sys::mount(fstype, target, data)
            .or_else(|e| refuse(format!("mount -t {fstype} -o {data} {target}: {e}")))?;
        self.journal(Change::Mounted(target.into()))
    }

    /// The scratch directory, on an ext4 file system for the scenario's disk files.
    pub(crate) fn scratch(&mut self) -> Result<(), Refusal> {
        let dir = self.scratch.clone();
        self.mkdir(&dir)?;
        const EXT4_SUPER_MAGIC: i64 = 0xef53;
        match sys::fs_magic(&dir) {
            Ok(EXT4_SUPER_MAGIC) => Ok(()),
            _ => refuse(format!("{dir} is not on ext4: the scenario's disk files need it")),
        }
    }

    /// Swaps to a RAM disk of `size` bytes: `brd` loaded from `module` with one disk of that
    /// size, its first page the swap header `mkswap` writes (version 1, the last page's index,
    /// no bad pages, `SWAPSPACE2` at the page's end), then `swapon`; undone by `swapoff` and
    /// unloading the module.
    pub(crate) fn ram_disk_swap(&mut self, module: &str, size: u64) -> Result<(), Refusal> {
        let pages = size / 4096;
        let last =
            u32::try_from(pages.saturating_sub(1)).or_else(|_| refuse("swap over 16 TiB"))?;
        if pages < 10 {
            return refuse(format!("swap of {size} bytes: a swap device needs 10 pages at least"));
        }
        self.journal(Change::Module("brd".into()))?;
        sys::load_module(module, &format!("rd_nr=1 rd_size={} max_part=0", pages * 4))
            .or_else(|e| refuse(format!("loading {module}: {e}")))?;
        let dev = "/dev/ram0";
        let mut header = vec![0u8; 4096];
        header[1024..1028].copy_from_slice(&1u32.to_le_bytes());
        header[1028..1032].copy_from_slice(&last.to_le_bytes());
        header[4086..].copy_from_slice(b"SWAPSPACE2");
        let written = std::fs::OpenOptions::new().write(true).open(dev).and_then(|f| {
            use std::os::unix::fs::FileExt;
            f.write_all_at(&header, 0)?;
            f.sync_all()
        });
        written.or_else(|e| refuse(format!("the swap header on {dev}: {e}")))?;
        self.journal(Change::Swapon(dev.into()))?;
        sys::swapon(dev).or_else(|e| refuse(format!("swapon {dev}: {e}")))?;
        self.own_swap = true;
        Ok(())
    }

    /// The host path of a scenario path: a declared file's, else under the ext4 directory.
    pub(crate) fn host_path(&self, path: &str) -> String {
        self.paths.get(path).cloned().unwrap_or_else(|| format!("{}/ext4{path}", self.scratch))
    }

    /// The directory a file of `fs` lives in, mounting it on first use.
    fn fs_dir(&mut self, fs: FsType, hugetlbfs_opts: &str) -> Result<String, Refusal> {
        let (name, fstype, data) = match fs {
            FsType::Tmpfs(TmpfsMount::Mount(huge)) => {
                let h = huge.name();
                (format!("tmpfs-{h}"), "tmpfs", format!("huge={h}"))
            }
            FsType::Hugetlbfs(h) => {
                let size = if h.bytes() == 2 << 20 { "2M" } else { "1G" };
                (
                    format!("hugetlbfs-{size}"),
                    "hugetlbfs",
                    format!("pagesize={size}{hugetlbfs_opts}"),
                )
            }
            FsType::Dax => {
                let root = self
                    .dax
                    .clone()
                    .ok_or_else(|| Refusal { reason: "no DAX file system".into() })?;
                let dir = format!("{root}/mmsim-host-{}", std::process::id());
                if !std::path::Path::new(&dir).exists() {
                    self.mkdir(&dir)?;
                }
                return Ok(dir);
            }
            _ => return Ok(format!("{}/ext4", self.scratch)),
        };
        let dir = format!("{}/{name}", self.scratch);
        if !self.changes.iter().any(|c| matches!(c, Change::Mounted(t) if *t == dir)) {
            self.mount(fstype, &dir, &data)?;
        }
        Ok(dir)
    }

    /// Creates the scenario's files with their contents, out of the page cache where the
    /// file system allows (the model's files start uncached).
    pub(crate) fn files(&mut self, s: &Scenario, hugetlbfs_opts: &str) -> Result<(), Refusal> {
        let ext4 = format!("{}/ext4", self.scratch);
        std::fs::create_dir_all(&ext4).or_else(|e| refuse(format!("mkdir {ext4}: {e}")))?;
        for f in &s.files {
            let host = if f.spec.fs == FsType::Tmpfs(TmpfsMount::ShmMnt) {
                let fd =
                    sys::memfd_create(&f.path, 0).or_else(|e| refuse(format!("memfd: {e}")))?;
                self.memfds.push(fd);
                format!("/proc/{}/fd/{fd}", std::process::id())
            } else {
                let dir = self.fs_dir(f.spec.fs, hugetlbfs_opts)?;
                format!("{dir}{}", f.path)
            };
            if let Some(parent) = std::path::Path::new(&host).parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            write_contents(&host, &f.spec)
                .or_else(|e| refuse(format!("file `{}` at {host}: {e}", f.path)))?;
            self.paths.insert(f.path.clone(), host);
        }
        Ok(())
    }

    /// The run's own memory cgroup, limited to `limit` bytes, and the scenario's below it.
    pub(crate) fn cgroups(&mut self, s: &Scenario, limit: u64) -> Result<(), Refusal> {
        let Some(kind) = self.kind else {
            return refuse(
                "the host mounts no memory cgroup controller (the host budget needs one)",
            );
        };
        let (root, max_file) = match kind {
            CgroupKind::V2(root) => (root.to_string(), "memory.max"),
            CgroupKind::V1 => ("/sys/fs/cgroup/memory".to_string(), "memory.limit_in_bytes"),
        };
        let own = format!("{root}/mmsim-host-{}", std::process::id());
        self.new_cgroup(&own, max_file, Some(limit))?;
        self.cgroups.insert(String::new(), own.clone());
        for c in &s.cgroups {
            let dir = format!("{own}{}", c.path);
            if kind != CgroupKind::V1 {
                self.delegate_memory(dir.rsplit_once('/').map_or(&own, |(p, _)| p))?;
            }
            self.new_cgroup(&dir, max_file, c.max.map(|b| b.as_u64()))?;
            self.cgroups.insert(c.path.clone(), dir);
        }
        if kind != CgroupKind::V1 && !s.cgroups.is_empty() {
            // cgroup v2 keeps processes out of a cgroup that gives its children a controller:
            // the scenario's processes without a cgroup join a leaf of the run's own.
            let leaf = format!("{own}/top");
            self.new_cgroup(&leaf, max_file, None)?;
            self.leaf = Some(leaf);
        }
        Ok(())
    }

    /// A memory cgroup of its own limited to `max` bytes, for a process that is not a scenario's
    /// (`bench pagecache`'s kernel side): its directory and the file a process joins it by.
    pub(crate) fn replay_cgroup(&mut self, max: u64) -> Result<(String, String), Refusal> {
        let (root, max_file, procs) = match self.kind {
            Some(CgroupKind::V2(root)) => (root.to_string(), "memory.max", "cgroup.procs"),
            Some(CgroupKind::V1) => {
                ("/sys/fs/cgroup/memory".into(), "memory.limit_in_bytes", "tasks")
            }
            None => return refuse("the host mounts no memory cgroup controller"),
        };
        let dir = format!("{root}/mmsim-replay-{}", std::process::id());
        self.new_cgroup(&dir, max_file, Some(max))?;
        let procs = format!("{dir}/{procs}");
        Ok((dir, procs))
    }

    /// Gives `parent`'s children the memory controller (cgroup v2's `cgroup.subtree_control`).
    fn delegate_memory(&mut self, parent: &str) -> Result<(), Refusal> {
        let path = format!("{parent}/cgroup.subtree_control");
        let on = std::fs::read_to_string(&path).unwrap_or_default();
        if on.split_whitespace().any(|c| c == "memory") {
            return Ok(());
        }
        std::fs::write(&path, "+memory").or_else(|e| refuse(format!("{path}: +memory: {e}")))
    }

    fn new_cgroup(&mut self, dir: &str, max_file: &str, max: Option<u64>) -> Result<(), Refusal> {
        std::fs::create_dir(dir).or_else(|e| refuse(format!("mkdir {dir}: {e}")))?;
        self.journal(Change::Cgroup(dir.into()))?;
        if let Some(m) = max {
            let path = format!("{dir}/{max_file}");
            std::fs::write(&path, m.to_string()).or_else(|e| refuse(format!("{path}: {e}")))?;
        }
        Ok(())
    }

    /// The host directory of a scenario cgroup (`""`: the run's own).
    pub(crate) fn cgroup_dir(&self, path: &str) -> Option<String> {
        self.cgroups.get(path).cloned()
    }

    /// The file a process joins a scenario cgroup by (the run's own when `None`).
    pub(crate) fn procs_file(&self, cgroup: Option<&str>) -> Option<String> {
        let dir = match cgroup {
            None => self.leaf.clone().or_else(|| self.cgroup_dir(""))?,
            Some(c) => self.cgroup_dir(c)?,
        };
        let file = if matches!(self.kind, Some(CgroupKind::V1)) { "tasks" } else { "cgroup.procs" };
        Some(format!("{dir}/{file}"))
    }

    /// Writes the machine's sysfs knobs (their model boot values) and tunables.
    pub(crate) fn knobs(&mut self, values: &[(String, String)]) -> Result<(), Refusal> {
        for (path, value) in values {
            let full = host_sysfs_path(path);
            if std::path::Path::new(&full).exists() || full.contains("/debug/") {
                self.write(&full, value)?;
            }
        }
        Ok(())
    }
}

impl Drop for HostSetup {
    fn drop(&mut self) {
        for fd in self.memfds.drain(..) {
            let _ = sys::close(fd);
        }
        undo(&self.changes);
        let _ = std::fs::remove_file(JOURNAL);
    }
}

/// Writes a declared file's contents: every page outside its holes, as the model's backing
/// store gives it; then drops it from the page cache (a no-op on tmpfs and hugetlbfs).
fn write_contents(path: &str, spec: &mm::FileSpec) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let size = spec.size.as_u64();
    let mut backing = mm::types::fs::Backing { pattern: spec.pattern, ..Default::default() };
    for &(first, pages) in &spec.holes {
        backing.holes.insert(first, first + pages);
    }
    // The size first: a tmpfs `huge=within_size` write then sees the file's final size.
    f.set_len(size)?;
    // tmpfs has no backing store: a page of zeros is a hole, which the model's tmpfs file (whose
    // pages start on a backing store, unread) also reads as zeros without holding it.
    let sparse = spec.fs.tmpfs_mount().is_some();
    if spec.fs.hugetlb_size().is_none() {
        let mut page = [0u8; 4096];
        for index in 0..size.div_ceil(4096) {
            if backing.is_hole(index) {
                continue;
            }
            mm::sim::content::Content::read(backing.read(index).as_ref(), 0, &mut page);
            if sparse && page.iter().all(|&b| b == 0) {
                continue;
            }
            let len = (size - index * 4096).min(4096) as usize;
            f.write_all_at(&page[..len], index * 4096)?;
        }
    }
    f.sync_all()?;
    use std::os::fd::AsRawFd;
    let a = [f.as_raw_fd() as u64, 0, 0, libc::POSIX_FADV_DONTNEED as u64, 0, 0];
    let _ = sys::raw(libc::SYS_fadvise64, a);
    Ok(())
}
