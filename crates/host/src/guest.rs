//! Other eras in a guest: `mmsim diff FILE... --guest 6.1` boots one of Debian's packaged
//! kernels under `qemu-system-x86_64` with an initramfs whose `/init` is this very binary
//! (`guest/image.rs`), which runs every scenario natively inside the guest beside the model at
//! the guest kernel's version and reports each comparison on a serial port of its own
//! (`guest/init.rs`). Many scenarios share one boot.
//!
//! What the guest gives that the host cannot: its version is another era (Debian's 6.1 and
//! 6.12), it swaps (a RAM disk of each scenario's swap size, `brd`, the model's device), and
//! Debian's 6.1 builds the multi-gen LRU in
//! (`CONFIG_LRU_GEN=y`, off until `/sys/kernel/mm/lru_gen/enabled` is written; 6.12 turns it on
//! at boot). The scratch file system is ext4 on the first virtio disk, as on a host.
//!
//! The accelerator is TCG by default: on the development machine (a Firecracker guest itself)
//! a nested KVM guest hangs in the kernel's decompressor, while TCG boots Debian's 6.12 to
//! `/init` in about 4 s. `--accel kvm` asks for KVM where it works.
//!
//! Bounded: the guest has `--guest-memory` of RAM, each scenario the native run's wall-clock
//! limit, and the whole boot that limit times the scenario count plus five minutes, after
//! which qemu is killed and the scenarios not reported are named.

mod image;
mod init;

pub use image::{GuestKernel, cache_dir};
pub use init::{guest_main, is_guest_init};

use crate::diff::DiffReport;
use crate::support::{Refusal, refuse};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where the guest finds `mkfs.ext4` (for its persistent memory).
const MKFS: &str = "/sbin/mkfs.ext4";

/// Where the guest mounts its persistent memory, ext4 with `dax`.
const DAX_MOUNT: &str = "/pmem";

/// Where the guest finds the RAM disk module its scenarios swap to, loaded per scenario.
const BRD_MODULE: &str = "/modules/on-demand/brd.ko";

/// The serial port the guest writes its results on (qemu's second `-serial`).
const RESULT_PORT: &str = "/dev/ttyS1";

/// What the guest is asked to run.
#[derive(Debug, Serialize, Deserialize)]
struct Job {
    timeout_secs: u64,
    scenarios: Vec<String>,
}

/// One scenario's outcome in the guest.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Compared(DiffReport),
    /// The guest cannot run it natively (the reason), or the file did not load there.
    Refused(String),
    /// The guest stopped before reporting it.
    Lost(String),
}

/// A scenario and its outcome.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct GuestResult {
    pub scenario: String,
    pub outcome: Outcome,
}

/// How a guest runs.
#[derive(Clone, Debug)]
pub struct GuestOptions {
    pub kernel: GuestKernel,
    /// Each scenario's native wall-clock limit.
    pub timeout: Duration,
    /// The guest's memory, MiB.
    pub memory_mib: u64,
    /// `kvm` or `tcg`.
    pub accel: String,
}

/// A boot's results.
#[derive(Clone, Debug, Serialize)]
pub struct GuestRun {
    /// The guest kernel's `uname -r`.
    pub release: String,
    pub results: Vec<GuestResult>,
    /// From qemu's start to its end.
    pub wall_ms: u64,
}

/// Runs `files` (scenario paths relative to the working directory) in one boot of the guest,
/// calling `each` with every result as it arrives.
pub fn diff_in_guest(
    files: &[String],
    o: &GuestOptions,
    each: &mut dyn FnMut(&GuestResult),
) -> Result<GuestRun, Refusal> {
    let qemu = which("qemu-system-x86_64").ok_or_else(|| Refusal {
        reason: "qemu-system-x86_64 is not installed (Debian's qemu-system-x86)".into(),
    })?;
    which("mkfs.ext4").ok_or_else(|| Refusal {
        reason: "mkfs.ext4 is not installed (it makes the guest's disk)".into(),
    })?;
    let kernel = image::kernel_files(o.kernel, &cache_dir())?;
    let work = RunDir::new()?;
    prepare(files, o, &kernel, &work)?;
    let limit =
        o.timeout * u32::try_from(files.len()).unwrap_or(u32::MAX) + Duration::from_secs(300);
    let start = Instant::now();
    let mut child = qemu_command(&qemu, &kernel.vmlinuz, &work, o)
        .spawn()
        .or_else(|e| refuse(format!("cannot start qemu: {e}")))?;
    let (mut results, mut seen) = (Vec::new(), 0);
    loop {
        let done = child.try_wait().ok().flatten().is_some();
        seen = read_new(&work.path("results"), seen, &mut results, each)?;
        if done || start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let console = std::fs::read_to_string(work.path("console")).unwrap_or_default();
    let lost: Vec<String> =
        files.iter().filter(|f| !results.iter().any(|r| &r.scenario == *f)).cloned().collect();
    for scenario in lost {
        let r = GuestResult { scenario, outcome: Outcome::Lost(console_tail(&console)) };
        each(&r);
        results.push(r);
    }
    Ok(GuestRun { release: kernel.release, results, wall_ms: start.elapsed().as_millis() as u64 })
}

/// The boot's initramfs (with the job and the scenario files) and its disk.
fn prepare(
    files: &[String],
    o: &GuestOptions,
    kernel: &image::KernelFiles,
    work: &RunDir,
) -> Result<(), Refusal> {
    let mut texts = Vec::new();
    for f in files {
        if Path::new(f).is_absolute() || f.split('/').any(|p| p == "..") {
            return refuse(format!(
                "{f}: name scenario files by a path below the working directory"
            ));
        }
        texts.push((f.clone(), std::fs::read(f).or_else(|e| refuse(format!("{f}: {e}")))?));
    }
    let job = Job { timeout_secs: o.timeout.as_secs(), scenarios: files.to_vec() };
    let job_text = serde_json::to_vec(&job).expect("a job serialises");
    std::fs::write(work.path("initrd"), image::initramfs(kernel, &job_text, &texts)?)
        .or_else(|e| refuse(format!("the initramfs: {e}")))?;
    ext4_disk(&work.path("disk.img"), 8 << 30)
}

/// Results written since the first `seen` bytes of the port's file; a boot failure refuses.
fn read_new(
    path: &Path,
    seen: usize,
    results: &mut Vec<GuestResult>,
    each: &mut dyn FnMut(&GuestResult),
) -> Result<usize, Refusal> {
    let text = std::fs::read(path).unwrap_or_default();
    let Some(end) = text.iter().rposition(|b| *b == b'\n').map(|i| i + 1).filter(|e| *e > seen)
    else {
        return Ok(seen);
    };
    for line in String::from_utf8_lossy(&text[seen..end]).lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(line)
            && let Some(e) = m.get("boot_failed")
        {
            return refuse(format!("the guest did not boot: {e}"));
        }
        match serde_json::from_str::<GuestResult>(line) {
            Ok(r) => {
                each(&r);
                results.push(r);
            }
            Err(e) => {
                return refuse(format!(
                    "the guest reported a line that is not a result ({e}): {line}"
                ));
            }
        }
    }
    Ok(end)
}

/// The last lines of the guest's console, for a scenario the guest never reported.
fn console_tail(console: &str) -> String {
    let lines: Vec<&str> = console.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(6)..].join(" | ");
    format!("the guest stopped before reporting it; its console ended: {tail}")
}

fn qemu_command(qemu: &Path, vmlinuz: &Path, work: &RunDir, o: &GuestOptions) -> Command {
    let mut c = Command::new(qemu);
    let drive = |name: &str| format!("file={},if=virtio,format=raw", work.path(name).display());
    // The gigabyte above 4 GiB becomes persistent memory (`memmap=1G!4G`), beside the memory.
    // THP boots as `madvise` (Debian builds `always` in), as on the development host: `/init`
    // registered with khugepaged at boot would pass the registration to every agent it forks.
    let memory = (o.memory_mib + 1024).to_string();
    c.args(["-accel", &accel(&o.accel), "-smp", "2", "-m", &memory])
        .args(["-nographic", "-no-reboot", "-nodefaults", "-monitor", "none"])
        .arg("-kernel")
        .arg(vmlinuz)
        .arg("-initrd")
        .arg(work.path("initrd"))
        .args(["-append", "console=ttyS0 panic=-1 quiet memmap=1G!4G transparent_hugepage=madvise"])
        .args(["-drive", &drive("disk.img")])
        .args(["-serial", &format!("file:{}", work.path("console").display())])
        .args(["-serial", &format!("file:{}", work.path("results").display())])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

fn accel(name: &str) -> String {
    if name == "tcg" { "tcg,thread=multi".into() } else { name.into() }
}

/// A sparse disk image of `size` bytes with an empty ext4 file system.
fn ext4_disk(path: &Path, size: u64) -> Result<(), Refusal> {
    let f = std::fs::File::create(path).or_else(|e| refuse(format!("{path:?}: {e}")))?;
    f.set_len(size).or_else(|e| refuse(format!("{path:?}: {e}")))?;
    match Command::new("mkfs.ext4").args(["-q", "-F"]).arg(path).output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => refuse(format!("mkfs.ext4: {}", String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => refuse(format!("cannot run mkfs.ext4: {e}")),
    }
}

fn which(tool: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// A boot's files (initramfs, disks, serial output), removed when the run ends.
struct RunDir(PathBuf);

impl RunDir {
    fn new() -> Result<RunDir, Refusal> {
        let dir = cache_dir().join(format!("run-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).or_else(|e| refuse(format!("{dir:?}: {e}")))?;
        Ok(RunDir(dir))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One result as the side-by-side table, or the reason it has none.
pub fn result_text(r: &GuestResult) -> String {
    match &r.outcome {
        Outcome::Compared(report) => report.text(),
        Outcome::Refused(why) => format!("{}: refused in the guest: {why}\n", r.scenario),
        Outcome::Lost(why) => format!("{}: LOST: {why}\n", r.scenario),
    }
}

/// Counts of one folder's scenarios and rows.
#[derive(Clone, Copy, Debug, Default)]
struct FolderTally {
    agree: usize,
    disagree: usize,
    refused: usize,
    lost: usize,
    rows: [usize; 3],
}

/// Scenarios and rows by folder: how a guest's run reads at a glance.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    folders: std::collections::BTreeMap<String, FolderTally>,
    pub disagree: usize,
    pub lost: usize,
}

impl Tally {
    pub fn add(&mut self, r: &GuestResult) {
        let folder = r.scenario.rsplit_once('/').map_or(".", |(d, _)| d).to_string();
        let t = self.folders.entry(folder).or_default();
        match &r.outcome {
            Outcome::Compared(report) => {
                let count = |v| report.rows.iter().filter(|r| r.verdict == v).count();
                use crate::diff::Verdict;
                t.rows[0] += count(Verdict::Agree);
                t.rows[1] += report.disagreements();
                t.rows[2] += count(Verdict::Declared);
                if report.disagreements() == 0 {
                    t.agree += 1;
                } else {
                    t.disagree += 1;
                    self.disagree += 1;
                }
            }
            Outcome::Refused(_) => t.refused += 1,
            Outcome::Lost(_) => {
                t.lost += 1;
                self.lost += 1;
            }
        }
    }

    /// The per-folder table.
    pub fn text(&self, run: &GuestRun) -> String {
        let mut out = format!(
            "the guest kernel {} against the model, in {:.0} s\n{:<28} {:>6} {:>9} {:>8} {:>5}  rows agree/disagree/declared\n",
            run.release,
            run.wall_ms as f64 / 1000.0,
            "folder",
            "agree",
            "disagree",
            "refused",
            "lost"
        );
        for (folder, t) in &self.folders {
            out.push_str(&format!(
                "{folder:<28} {:>6} {:>9} {:>8} {:>5}  {}/{}/{}\n",
                t.agree, t.disagree, t.refused, t.lost, t.rows[0], t.rows[1], t.rows[2]
            ));
        }
        out
    }
}
