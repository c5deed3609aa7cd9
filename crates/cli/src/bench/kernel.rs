//! `bench pagecache`'s kernel side: the kernel's own CPU time for the requests the model replays
//! (`host::pagecache`: the same pages as real `pread`s through a memory cgroup of the cache's
//! size, on this machine's kernel), beside mmsim's host time per request in the same rounds.
//! The ratio says what the issue asks of the replay: whether the simulator's machinery costs less
//! than the kernel work it models. It runs as root only (the cgroup), and a policy whose LRU the
//! host cannot switch to is reported as not run.

use super::median_spread;
use host::pagecache::{KernelLru, kernel_replay};
use trace::pagecache::Policy;

/// The pages of the oracleGeneral file `og`, or `None` (said) when the kernel's side cannot run.
pub(super) fn pages(og: &std::path::Path) -> Result<Option<Vec<u64>>, String> {
    use trace::block::{BlockFormat, BlockReader};
    if !is_root() {
        println!("kernel's side: not run (it needs root for a memory cgroup of its own)");
        return Ok(None);
    }
    let path = og.to_string_lossy();
    let mut reader =
        BlockReader::open(&path, BlockFormat::OracleGeneral).map_err(|e| e.to_string())?;
    let mut pages = Vec::new();
    while let Some(p) = reader.next_page().map_err(|e| e.to_string())? {
        pages.push(p);
    }
    Ok(Some(pages))
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines().any(|l| {
            l.strip_prefix("Uid:").is_some_and(|u| u.split_whitespace().nth(1) == Some("0"))
        })
    })
}

/// One policy's kernel rounds, each paired with the mmsim round after it.
#[derive(Debug, Default)]
pub(super) struct Rounds {
    /// The kernel's system CPU microseconds per request, per round.
    kernel_us: Vec<f64>,
    /// mmsim's host microseconds per request, per round the kernel ran in.
    mmsim_us: Vec<f64>,
    /// Pages the kernel's cgroup charged in the last round.
    charged: u64,
    refused: Option<String>,
}

impl Rounds {
    /// Runs the kernel's side of one round (once refused, no more).
    pub(super) fn run(&mut self, pages: &[u64], cache: simcore::Bytes, policy: Policy) {
        if self.refused.is_some() {
            return;
        }
        let lru = match policy {
            Policy::Pure => KernelLru::NoReadahead,
            Policy::Classic => KernelLru::Classic,
            Policy::Mglru => KernelLru::MultiGen,
        };
        match kernel_replay(pages, cache.as_u64(), lru) {
            Ok(r) => {
                self.kernel_us.push(r.sys_seconds * 1e6 / r.requests.max(1) as f64);
                self.charged = r.charged;
            }
            Err(e) => self.refused = Some(e.to_string()),
        }
    }

    /// The mmsim round after the kernel's: its rate in requests per host second.
    pub(super) fn mmsim(&mut self, rate: f64) {
        if self.mmsim_us.len() < self.kernel_us.len() {
            self.mmsim_us.push(1e6 / rate.max(1e-9));
        }
    }
}

/// The kernel side's lines, one per policy.
pub(super) fn print(lines: &[(Policy, Rounds)]) {
    if lines.is_empty() {
        return;
    }
    println!(
        "\nthe kernel's own work (host {}): system CPU per request of the same preads in a memory \
         cgroup of the cache's size, against mmsim's host time per request in the same rounds",
        host::support::host_kernel().map_or("?".to_string(), |k| k.to_string())
    );
    println!(
        "{:<16} {:>14} {:>14} {:>14} {:>13} {:>16}",
        "replay", "kernel us/req", "mmsim us/req", "mmsim/kernel", "spread", "kernel charged"
    );
    for (policy, r) in lines {
        let name = format!("mmsim {}", policy.name());
        if let Some(why) = &r.refused {
            println!("{name:<16} not run: {why}");
            continue;
        }
        let mut ratios: Vec<f64> =
            r.mmsim_us.iter().zip(&r.kernel_us).map(|(m, k)| m / k.max(1e-9)).collect();
        let (mut k, mut m) = (r.kernel_us.clone(), r.mmsim_us.clone());
        if ratios.is_empty() || k.is_empty() || m.is_empty() {
            continue;
        }
        let ((k, _, _), (m, _, _)) = (median_spread(&mut k), median_spread(&mut m));
        let (ratio, lo, hi) = median_spread(&mut ratios);
        let spread = format!("{lo:.2}..{hi:.2}");
        println!("{name:<16} {k:>14.2} {m:>14.2} {ratio:>14.2} {spread:>13} {:>16}", r.charged);
    }
}
