//! `/proc/PID/stat` (`fs/proc/array.c` `do_task_stat`, Linux v6.8; the 52-field line since
//! v3.5): one line of space-separated fields, field 2 the command in parentheses.
//!
//! The fields mmsim keeps are printed from its state: the pid (1), the command (2, at most 15
//! bytes, `TASK_COMM_LEN`), the state (3: `R` while the process runs, `Z` once it exited, as no
//! one reaps it), the parent's pid (4), the fault counts `minflt` (10) and `majflt` (12) that
//! `fault.rs` `mm_account_fault` keeps, `vsize` in bytes (23) and `rss` in pages (24), the
//! `rsslim` of an unlimited `RLIMIT_RSS` (25) and the exit signal `SIGCHLD` (38).
//!
//! Approximations: the children's counts `cminflt`/`cmajflt` (11, 13) are 0, which is what the
//! kernel prints while no child has been waited for (mmsim has no `wait`); the process group and
//! session (5, 6) are the pid of the process's first ancestor; every other field (times,
//! scheduling, signals, addresses of the image) is 0, as the model keeps none of them.
//! [`STAT_FIELDS`] names the fields an expectation may read; the others are refused there.

use crate::kernel::KState;
use crate::process::ProcState;
use crate::types::ids::Pid;

/// The fields of `/proc/PID/stat` the model keeps, by their `proc(5)` names, with their
/// 1-based positions on the line.
pub const STAT_FIELDS: [(&str, usize); 8] = [
    ("pid", 1),
    ("ppid", 4),
    ("minflt", 10),
    ("cminflt", 11),
    ("majflt", 12),
    ("cmajflt", 13),
    ("vsize", 23),
    ("rss", 24),
];

/// `RLIM_INFINITY` as `rsslim` prints it.
const RLIM_INFINITY: u64 = u64::MAX;
/// `SIGCHLD`, the exit signal of a forked process.
const SIGCHLD: u64 = 17;
/// `TASK_COMM_LEN` less the terminating NUL.
const COMM_MAX: usize = 15;

impl KState {
    /// The `/proc/PID/stat` line of `pid`.
    pub fn proc_stat(&self, pid: Pid) -> String {
        let p = &self.procs[pid];
        let comm: String = p.name.chars().take(COMM_MAX).collect();
        let state = if p.state == ProcState::Exited { 'Z' } else { 'R' };
        let f = self.stat_values(pid);
        let rest: Vec<String> = f[3..].iter().map(u64::to_string).collect();
        format!("{} ({comm}) {state} {}\n", f[0], rest.join(" "))
    }

    /// The numeric fields of the stat line by position (fields 2 and 3, the command and state,
    /// are left 0).
    fn stat_values(&self, pid: Pid) -> [u64; 52] {
        let p = &self.procs[pid];
        let (vsize, rss) = p.mm.map_or((0, 0), |mm| {
            let m = self.mm(mm);
            let vm: u64 = m.vmas.values().map(|&v| self.vma(v).len().as_u64()).sum();
            (vm, m.rss_total())
        });
        let mut f = [0u64; 52];
        let mut set = |pos: usize, v: u64| f[pos - 1] = v;
        set(1, u64::from(pid.0));
        set(4, p.parent.map_or(0, |q| u64::from(q.0)));
        let leader = u64::from(self.first_ancestor(pid).0);
        set(5, leader);
        set(6, leader);
        set(10, p.min_flt);
        set(12, p.maj_flt);
        set(23, vsize);
        set(24, rss);
        set(25, RLIM_INFINITY);
        set(38, SIGCHLD);
        f
    }

    /// The process `pid` descends from that has no parent (the swapper's children are roots).
    fn first_ancestor(&self, pid: Pid) -> Pid {
        let mut p = pid;
        while let Some(q) = self.procs[p].parent {
            p = q;
        }
        p
    }

    /// Field `name` of `/proc/PID/stat` (one of [`STAT_FIELDS`]).
    pub fn proc_stat_field(&self, pid: Pid, name: &str) -> Option<u64> {
        let &(_, pos) = STAT_FIELDS.iter().find(|(n, _)| *n == name)?;
        Some(self.stat_values(pid)[pos - 1])
    }
}

#[cfg(test)]
mod tests {
    use crate::{FileSpec, Machine, MachineConfig, MmapArgs, OpenFlags, Profile, map, prot};
    use simcore::Bytes;

    /// Given a process that write-faults an anonymous page and read-faults a page of a file on
    /// disk, its stat line counts one minor and one major fault, at positions 10 and 12, and its
    /// command is cut to 15 bytes.
    #[test]
    fn stat_counts_minor_and_major_faults() {
        let c = MachineConfig::new(Profile::named("tiny").unwrap(), "v6.8".parse().unwrap());
        let mut m = Machine::new(c).unwrap();
        m.create_file("/f", &FileSpec::zeros(Bytes(4096))).unwrap();
        let pid = m.new_process("a process name longer than 15").unwrap();
        m.spawn_thread(pid, 0, "t", |t| async move {
            let a = t.mmap_anon(Bytes(4096), prot::READ | prot::WRITE).await.unwrap();
            t.write_bytes(a, &[1]).await.unwrap();
            let fd = t.open("/f", OpenFlags::RDONLY).await.unwrap();
            let (len, flags) = (Bytes(4096), map::PRIVATE);
            let args =
                MmapArgs { addr: None, len, prot: prot::READ, flags, fd: Some(fd), offset: 0 };
            let f = t.mmap(args).await.unwrap();
            t.read_bytes(f, 1).await.unwrap();
        })
        .unwrap();
        m.run_checked().unwrap();
        let st = m.kernel().state();
        let line = st.proc_stat(pid);
        assert!(line.contains(" (a process name ) R "), "{line}");
        assert_eq!(st.proc_stat_field(pid, "minflt"), Some(1), "{line}");
        assert_eq!(st.proc_stat_field(pid, "majflt"), Some(1), "{line}");
        assert_eq!(st.proc_stat_field(pid, "pid"), Some(u64::from(pid.0)));
        assert_eq!(st.proc_stat_field(pid, "vsize"), Some(8192));
        assert_eq!(line.split_whitespace().count(), 52 + 3, "the command holds three spaces");
    }
}
