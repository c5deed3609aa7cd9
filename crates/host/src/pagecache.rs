//! The page-cache replay's requests on the real kernel: the kernel work that `mmsim bench
//! pagecache` sets the model's machinery beside.
//!
//! The same page requests the model replays (`trace::pagecache`) are made as 4 KiB `pread`s of
//! a sparse file of the replayed size (8 TiB) in the host's ext4 scratch directory, by a forked
//! child in a memory cgroup whose limit is the cache, as the model's replay process is. A read
//! of a page not cached takes the kernel's whole miss path (`filemap_read`, the memcg charge
//! with its limit reclaim of the cgroup's LRU tail and the shadow entry it leaves, the folio's
//! allocation and page-cache insertion, ext4's `read_folio` of a hole, which zeroes it without a
//! device read, the unlock and the copy out); a cached page is a hit. The figure is the child's
//! system CPU time (`getrusage`) per request: the kernel's own instructions, with no device
//! latency in it and none of the model's simulated time.
//!
//! Per policy: `pure` gives `POSIX_FADV_RANDOM` first (no readahead, as `pure` has none), the
//! kernel LRUs keep the device's readahead; `classic` and `mglru` switch the host's multi-gen
//! LRU off or on (`/sys/kernel/mm/lru_gen/enabled`, journalled and restored) and are refused
//! where the host's kernel has no such switch for the one asked. The kernel's LRU is not exact
//! LRU, so its misses (the cgroup's page-cache charges, `memory.stat`) are printed beside the
//! model's, not compared.

use crate::setup::HostSetup;
use crate::support::{CgroupKind, Refusal, cgroup_kind, refuse};
use crate::sys;

/// The replayed file's size in pages (the model's `trace::pagecache::FILE_PAGES`).
const FILE_PAGES: u64 = 1 << 31;

/// The host's LRU for a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelLru {
    /// `POSIX_FADV_RANDOM` on the host's LRU, whichever it is (the `pure` replay's side).
    NoReadahead,
    Classic,
    MultiGen,
}

/// What one native replay measured.
#[derive(Clone, Copy, Debug)]
pub struct KernelReplay {
    pub requests: u64,
    /// Pages the cgroup charged to the page cache over the replay (its misses, with readahead's
    /// pages when there is readahead).
    pub charged: u64,
    /// System CPU seconds of the replaying process.
    pub sys_seconds: f64,
}

const LRU_GEN: &str = "/sys/kernel/mm/lru_gen/enabled";

/// Replays `pages` (page indices below 2^31) natively through a cgroup of `cache` bytes.
pub fn kernel_replay(pages: &[u64], cache: u64, lru: KernelLru) -> Result<KernelReplay, Refusal> {
    if sys::geteuid() != 0 {
        return refuse("the kernel's side needs root (a memory cgroup of its own)");
    }
    if let Some(&p) = pages.iter().find(|&&p| p >= FILE_PAGES) {
        return refuse(format!("page {p} is beyond the replayed file ({FILE_PAGES} pages)"));
    }
    let mut setup = HostSetup::new();
    setup.scratch()?;
    match (lru, std::path::Path::new(LRU_GEN).exists()) {
        (KernelLru::NoReadahead, _) => {}
        (KernelLru::Classic, true) => setup.write(LRU_GEN, "0x0000")?,
        (KernelLru::MultiGen, true) => setup.write(LRU_GEN, "0x0007")?,
        (KernelLru::Classic, false) => {}
        (KernelLru::MultiGen, false) => return refuse(format!("the host has no {LRU_GEN}")),
    }
    let (dir, procs) = setup.replay_cgroup(cache)?;
    let file = format!("{}/replayed", setup.scratch);
    let (r, w) = sys::pipe().or_else(|e| refuse(format!("pipe: {e}")))?;
    let pid = sys::fork().or_else(|e| refuse(format!("fork: {e}")))?;
    if pid == 0 {
        let _ = sys::close(r);
        let out = child(&procs, &dir, &file, pages, lru);
        let _ = sys::write_from(w, out.as_bytes(), None);
        sys::exit_now(0);
    }
    let _ = sys::close(w);
    let out = sys::read_all(r);
    let _ = sys::close(r);
    sys::wait(pid);
    parse_child(&out, pages.len() as u64)
}

/// The child's line: `charged sys_ns` or `error: ...`.
fn parse_child(out: &str, requests: u64) -> Result<KernelReplay, Refusal> {
    let words: Vec<&str> = out.split_whitespace().collect();
    match words.as_slice() {
        [charged, ns] => match (charged.parse::<u64>(), ns.parse::<u64>()) {
            (Ok(charged), Ok(ns)) => {
                Ok(KernelReplay { requests, charged, sys_seconds: ns as f64 / 1e9 })
            }
            _ => refuse(format!("the replaying child printed `{out}`")),
        },
        _ => refuse(format!("the replaying child: {}", out.trim())),
    }
}

/// The forked child: joins the cgroup, replays and describes the result in one line.
fn child(procs: &str, dir: &str, file: &str, pages: &[u64], lru: KernelLru) -> String {
    let run = || -> Result<(u64, u64), String> {
        std::fs::write(procs, std::process::id().to_string())
            .map_err(|e| format!("joining {procs}: {e}"))?;
        let fd = sys::open(file, libc::O_RDWR | libc::O_CREAT, 0o600)
            .map_err(|e| format!("{file}: {e}"))?;
        let size = FILE_PAGES * 4096;
        sys::ftruncate(fd, size).map_err(|e| format!("ftruncate {file}: {e}"))?;
        sys::fadvise(fd, libc::POSIX_FADV_DONTNEED).map_err(|e| format!("fadvise: {e}"))?;
        if lru == KernelLru::NoReadahead {
            sys::fadvise(fd, libc::POSIX_FADV_RANDOM).map_err(|e| format!("fadvise: {e}"))?;
        }
        let buf = sys::own_buffer(4096);
        let before = (charges(dir)?, sys::system_time_ns());
        for &p in pages {
            sys::read_to(fd, buf.as_ptr() as u64, 4096, Some(p * 4096))
                .map_err(|e| format!("pread of page {p}: {e}"))?;
        }
        let after = (charges(dir)?, sys::system_time_ns());
        Ok((after.0 - before.0, after.1 - before.1))
    };
    match run() {
        Ok((charged, ns)) => format!("{charged} {ns}"),
        Err(e) => format!("error: {e}"),
    }
}

/// Pages the cgroup has charged so far: cgroup v1's `pgpgin`; on v2 (which does not count
/// charges) the file pages it holds plus those reclaimed from it.
fn charges(dir: &str) -> Result<u64, String> {
    let path = format!("{dir}/memory.stat");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let stat = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("{path}: no `{name}`"))
    };
    match cgroup_kind() {
        Some(CgroupKind::V1) => stat("pgpgin"),
        _ => Ok(stat("file")? / 4096 + stat("pgsteal")?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_childs_line_parses_or_is_refused() {
        let r = parse_child("42 1500000000\n", 100).unwrap();
        assert_eq!((r.requests, r.charged), (100, 42));
        assert!((r.sys_seconds - 1.5).abs() < 1e-9);
        let e = parse_child("error: joining x: EPERM", 1).unwrap_err();
        assert!(e.to_string().contains("joining x"), "{e}");
        assert!(parse_child("x y", 1).is_err());
    }

    #[test]
    fn pages_beyond_the_file_are_refused() {
        let e = kernel_replay(&[FILE_PAGES], 4096, KernelLru::NoReadahead).unwrap_err();
        let s = e.to_string();
        assert!(s.contains("beyond the replayed file") || s.contains("root"), "{s}");
    }
}
