//! The scenario files' words: sizes (`"64KiB"`), addresses (`"buf+4KiB"`), protections,
//! `mmap`/`madvise`/`fadvise`/`open` flags, file systems and contents, durations, kernel
//! conditions, percentages and `show` observables. Each parser reads a string and says what it
//! expected; `fields.rs` places the message at the value's line. The Python bindings and the CLI
//! read the same words through these functions.

use crate::scenario::model::{AddrExpr, Show, fs_type};
use mm::{KernelVersion, OpenFlags, madv, map, prot};
use simcore::{Bytes, SimDuration};

/// `4096`, `"64KiB"`, `"2M"`, `"1GiB"`, `"4 kB"` (procfs kilobytes are KiB).
pub fn parse_size(s: &str) -> Option<Bytes> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim() {
        "" | "B" => 0,
        "K" | "KiB" | "kB" | "KB" | "k" => 10,
        "M" | "MiB" | "MB" => 20,
        "G" | "GiB" | "GB" => 30,
        "T" | "TiB" | "TB" => 40,
        _ => return None,
    };
    n.checked_mul(1 << shift).map(Bytes)
}

fn parse_number(s: &str) -> Option<i64> {
    let s = s.trim();
    if let Some(hex) = s.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    parse_size(s).and_then(|b| i64::try_from(b.as_u64()).ok())
}

/// A file system by name: `"ext4"` (or `"disk"`), `"xfs"`, `"tmpfs"` (a mount with `huge=never`),
/// `"tmpfs:huge=VALUE"` (`always`, `within_size`, `advise`, `never`), `"shmem"` (the kernel's
/// `shm_mnt`, as memfd), `"dax"` (or `"ext4-dax"`: ext4 with `-o dax` on the machine's
/// persistent memory), `"hugetlbfs"` (2 MiB pages, or `"hugetlbfs:2MiB"`) and
/// `"hugetlbfs:1GiB"` (a mount's `pagesize=`).
pub fn parse_fs(s: &str) -> Result<mm::types::fs::FsType, String> {
    fs_type(s).ok_or_else(|| {
        format!(
            "unknown file system `{s}`: expected ext4, xfs, tmpfs, tmpfs:huge=always, \
             tmpfs:huge=within_size, tmpfs:huge=advise, tmpfs:huge=never, shmem, dax, hugetlbfs, \
             hugetlbfs:2MiB or hugetlbfs:1GiB"
        )
    })
}

/// A `fallocate` mode: `"allocate"` (0), `"keep_size"`, or `"punch_hole"` (with `KEEP_SIZE`,
/// as the kernel requires).
pub fn parse_fallocate_mode(s: &str) -> Result<u32, String> {
    use mm::fs::falloc;
    match s {
        "allocate" => Ok(0),
        "keep_size" => Ok(falloc::KEEP_SIZE),
        "punch_hole" => Ok(falloc::PUNCH_HOLE | falloc::KEEP_SIZE),
        _ => Err(format!("unknown mode `{s}`: expected allocate, keep_size or punch_hole")),
    }
}

/// A file's contents: `"zeros"`, or `"pattern:SEED"` (a pattern generated from the seed).
pub fn parse_content(s: &str) -> Result<Option<u64>, String> {
    if s == "zeros" {
        return Ok(None);
    }
    match s.strip_prefix("pattern:").map(str::parse::<u64>) {
        Some(Ok(seed)) => Ok(Some(seed)),
        _ => Err(format!("content `{s}`: expected `zeros` or `pattern:SEED`")),
    }
}

/// A file hole `[offset, offset + len)` as `(first page, pages)`, as `mm::FileSpec` keeps it.
pub fn parse_hole(offset: Bytes, len: Bytes) -> Result<(u64, u64), String> {
    if !offset.is_page_aligned() || !len.is_page_aligned() {
        return Err("a hole: offset and length must be multiples of 4 KiB".into());
    }
    Ok((offset.as_u64() >> 12, len.as_u64() >> 12))
}

/// `"buf"`, `"buf+4KiB"`, `"exe.text-0x1000"`, `"0x10000000"`.
pub fn parse_addr(s: &str) -> Option<AddrExpr> {
    let s = s.trim();
    if let Some(n) = parse_number(s) {
        return Some(AddrExpr { base: None, offset: n });
    }
    let (base, offset) = match s.find(['+', '-']) {
        Some(i) => {
            let n = parse_number(&s[i + 1..])?;
            (&s[..i], if &s[i..=i] == "-" { -n } else { n })
        }
        None => (s, 0),
    };
    let valid = !base.is_empty()
        && base.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
        && !base.starts_with(|c: char| c.is_ascii_digit());
    valid.then(|| AddrExpr { base: Some(base.trim().to_string()), offset })
}

/// `"a|b|c"` where each part is a name in `table`; the values are combined with `combine`.
fn flag_words<T: Copy>(
    s: &str,
    table: &[(&str, T)],
    combine: impl Fn(T, T) -> T,
) -> Result<T, String> {
    let names: Vec<&str> = table.iter().map(|(n, _)| *n).collect();
    let mut acc: Option<T> = None;
    for part in s.split('|').map(str::trim) {
        // A word this table knows is meant here (`sync` is msync's MS_SYNC, not MAP_SYNC).
        let known = table.iter().find(|(n, _)| *n == part).map(|&(_, v)| v);
        if let (None, Some(why)) = (known, unmodelled(UNMODELLED_WORDS, part)) {
            return Err(why);
        }
        let v = known.ok_or_else(|| format!("unknown `{part}`, expected {}", names.join(", ")))?;
        acc = Some(acc.map_or(v, |a| combine(a, v)));
    }
    acc.ok_or_else(|| format!("expected one of {}", names.join(", ")))
}

/// `"rw"`, `"r-x"`, `"rwx"`, `"none"`, `"---"`.
pub fn parse_prot(s: &str) -> Result<u32, String> {
    let bad = || format!("expected permissions like \"rw\", \"r-x\" or \"none\", found \"{s}\"");
    if s == "none" {
        return Ok(prot::NONE);
    }
    let mut p = 0;
    for c in s.chars() {
        p |= match c {
            'r' => prot::READ,
            'w' => prot::WRITE,
            'x' => prot::EXEC,
            '-' => 0,
            _ => return Err(bad()),
        };
    }
    if s.is_empty() { Err(bad()) } else { Ok(p) }
}

/// `"private|anonymous"`, `"shared|populate"`, ...
pub fn parse_map_flags(s: &str) -> Result<u32, String> {
    let table = [
        ("private", map::PRIVATE),
        ("shared", map::SHARED),
        ("anonymous", map::ANONYMOUS),
        ("fixed", map::FIXED),
        ("fixed_noreplace", map::FIXED_NOREPLACE),
        ("populate", map::POPULATE),
        ("locked", map::LOCKED),
        ("growsdown", map::GROWSDOWN),
        ("noreserve", map::NORESERVE),
        ("denywrite", map::DENYWRITE),
        ("hugetlb", map::HUGETLB),
        ("huge_2mb", map::HUGE_2MB),
        ("huge_1gb", map::HUGE_1GB),
        ("shared_validate", map::SHARED_VALIDATE),
        ("sync", map::SYNC),
        ("stack", map::STACK),
        ("executable", map::EXECUTABLE),
        ("nonblock", map::NONBLOCK),
        ("file", 0),
    ];
    flag_words(s, &table, |a, b| a | b)
}

/// `memfd_create` flags: `"cloexec|allow_sealing"`, `"hugetlb|huge_1gb"`, ...
pub(super) fn parse_memfd_flags(s: &str) -> Result<u32, String> {
    use mm::memfd::mfd;
    let table = [
        ("cloexec", mfd::CLOEXEC),
        ("allow_sealing", mfd::ALLOW_SEALING),
        ("hugetlb", mfd::HUGETLB),
        ("noexec_seal", mfd::NOEXEC_SEAL),
        ("exec", mfd::EXEC),
        ("huge_2mb", map::HUGE_2MB),
        ("huge_1gb", map::HUGE_1GB),
    ];
    flag_words(s, &table, |a, b| a | b)
}

/// Flag words of a call whose flags may be none at all (`""` is 0, which the call itself
/// judges: `mlockall(0)` is EINVAL, `msync(.., 0)` is not).
fn flag_words_or_none(s: &str, table: &[(&str, u32)]) -> Result<u32, String> {
    if s.is_empty() { Ok(0) } else { flag_words(s, table, |a, b| a | b) }
}

/// `mlock2` flags: `"onfault"`.
pub fn parse_mlock2_flags(s: &str) -> Result<u32, String> {
    flag_words_or_none(s, &[("onfault", mm::mlock::mlock_flags::ONFAULT)])
}

/// `mlockall` flags: `"current|future|onfault"`.
pub fn parse_mcl_flags(s: &str) -> Result<u32, String> {
    use mm::mlock::mcl;
    let table = [("current", mcl::CURRENT), ("future", mcl::FUTURE), ("onfault", mcl::ONFAULT)];
    flag_words_or_none(s, &table)
}

/// userfaultfd words of kernel features mmsim does not model (`crates/mm/src/userfaultfd.rs`),
/// refused by name wherever a userfaultfd operation takes words.
const UNMODELLED_UFFD: &[(&str, &str)] = &[
    (
        "wp_hugetlbfs_shmem",
        "UFFD_FEATURE_WP_HUGETLBFS_SHMEM, shmem and hugetlb write-protection (v5.19)",
    ),
    ("wp_unpopulated", "UFFD_FEATURE_WP_UNPOPULATED, write-protection (v6.4)"),
    ("poison", "UFFD_FEATURE_POISON, UFFDIO_POISON (v6.6)"),
    ("wp_async", "UFFD_FEATURE_WP_ASYNC, asynchronous write-protection (v6.7)"),
    ("move", "UFFD_FEATURE_MOVE, UFFDIO_MOVE (v6.8)"),
];

/// Words of a userfaultfd operation: `table`'s, joined with `|` (`""` for none); a word
/// `UNMODELLED_UFFD` lists is refused by name.
fn uffd_words(s: &str, table: &[(&str, u64)]) -> Result<u64, String> {
    let parts = s.split('|').map(str::trim).filter(|p| !p.is_empty());
    if let Some(why) = parts.filter_map(|p| unmodelled(UNMODELLED_UFFD, p)).next() {
        return Err(why);
    }
    if s.is_empty() { Ok(0) } else { flag_words(s, table, |a, b| a | b) }
}

/// `userfaultfd(2)` flags: `"cloexec|nonblock|user_mode_only"`.
pub(super) fn parse_uffd_flags(s: &str) -> Result<u64, String> {
    use mm::userfaultfd::flags;
    let table = [
        ("cloexec", u64::from(flags::CLOEXEC)),
        ("nonblock", u64::from(flags::NONBLOCK)),
        ("user_mode_only", u64::from(flags::USER_MODE_ONLY)),
    ];
    uffd_words(s, &table)
}

/// `UFFDIO_API` features: `"missing_hugetlbfs|missing_shmem|event_fork|..."`.
pub(super) fn parse_uffd_features(s: &str) -> Result<u64, String> {
    use mm::types::userfaultfd::feature;
    let table = [
        ("missing_hugetlbfs", feature::MISSING_HUGETLBFS),
        ("missing_shmem", feature::MISSING_SHMEM),
        ("event_fork", feature::EVENT_FORK),
        ("event_remap", feature::EVENT_REMAP),
        ("event_remove", feature::EVENT_REMOVE),
        ("event_unmap", feature::EVENT_UNMAP),
        ("sigbus", feature::SIGBUS),
        ("thread_id", feature::THREAD_ID),
        ("exact_address", feature::EXACT_ADDRESS),
        ("minor_hugetlbfs", feature::MINOR_HUGETLBFS),
        ("minor_shmem", feature::MINOR_SHMEM),
        ("pagefault_flag_wp", feature::PAGEFAULT_FLAG_WP),
    ];
    uffd_words(s, &table)
}

/// `UFFDIO_COPY`, `UFFDIO_ZEROPAGE` and `UFFDIO_CONTINUE` modes: `"dontwake"`, `"wp"`
/// (`UFFDIO_COPY_MODE_WP`, the same bit as `UFFDIO_CONTINUE_MODE_WP`).
pub(super) fn parse_uffd_copy_mode(s: &str) -> Result<u64, String> {
    use mm::types::userfaultfd::copy_mode;
    uffd_words(s, &[("dontwake", copy_mode::DONTWAKE), ("wp", copy_mode::WP)])
}

/// `UFFDIO_REGISTER` modes: `"missing"`, `"wp"`, `"minor"`, `"missing|wp"`, ...
pub(super) fn parse_uffd_mode(s: &str) -> Result<u64, String> {
    use mm::types::userfaultfd::register_mode;
    let table = [
        ("missing", register_mode::MISSING),
        ("wp", register_mode::WP),
        ("minor", register_mode::MINOR),
    ];
    uffd_words(s, &table)
}

/// `UFFDIO_WRITEPROTECT` modes: `"wp"`, `"dontwake"`, `""` (resolve and wake).
pub(super) fn parse_uffd_wp_mode(s: &str) -> Result<u64, String> {
    use mm::types::userfaultfd::writeprotect_mode;
    uffd_words(s, &[("wp", writeprotect_mode::WP), ("dontwake", writeprotect_mode::DONTWAKE)])
}

/// `msync` flags: `"sync"`, `"async|invalidate"`, ...
pub fn parse_msync_flags(s: &str) -> Result<u32, String> {
    use mm::msync::ms;
    let table = [("async", ms::ASYNC), ("sync", ms::SYNC), ("invalidate", ms::INVALIDATE)];
    flag_words_or_none(s, &table)
}

/// A `prctl` option the model has, by name (`"PR_SET_MEMORY_MERGE"`).
pub fn parse_prctl_option(s: &str) -> Result<mm::syscall::Prctl, String> {
    use mm::syscall::Prctl;
    Prctl::from_name(s).ok_or_else(|| {
        let names: Vec<String> = Prctl::ALL.iter().map(|(_, n, _)| format!("\"{n}\"")).collect();
        format!("option `{s}` is not modelled: expected {}", names.join(", "))
    })
}

/// `shmget` flags: `"creat|excl"`, `"hugetlb|huge_1gb|noreserve"`, with the permission bits
/// as an octal word (`"creat|0600"`; 0600 when there are no flags at all).
pub(super) fn parse_shmget_flags(s: &str) -> Result<u32, String> {
    use mm::shm::shmflg;
    let table = [
        ("creat", shmflg::IPC_CREAT),
        ("excl", shmflg::IPC_EXCL),
        ("hugetlb", shmflg::SHM_HUGETLB),
        ("noreserve", shmflg::SHM_NORESERVE),
        ("huge_2mb", map::HUGE_2MB),
        ("huge_1gb", map::HUGE_1GB),
    ];
    let (modes, words): (Vec<&str>, Vec<&str>) =
        s.split('|').map(str::trim).partition(|w| w.len() > 1 && w.starts_with('0'));
    let mut mode = 0;
    for m in modes {
        mode |= u32::from_str_radix(m, 8)
            .ok()
            .filter(|&m| m <= 0o777)
            .ok_or_else(|| format!("`{m}`: expected permission bits in octal, at most 0777"))?;
    }
    let flags =
        if words.is_empty() { 0 } else { flag_words(&words.join("|"), &table, |a, b| a | b)? };
    Ok(flags | mode)
}

/// `shmat` flags: `"rdonly"`, `"rnd"`, `"remap"`, `"exec"`, `"none"`.
pub(super) fn parse_shmat_flags(s: &str) -> Result<u32, String> {
    use mm::shm::shmflg;
    let table = [
        ("none", 0),
        ("rdonly", shmflg::SHM_RDONLY),
        ("rnd", shmflg::SHM_RND),
        ("remap", shmflg::SHM_REMAP),
        ("exec", shmflg::SHM_EXEC),
    ];
    flag_words(s, &table, |a, b| a | b)
}

/// `mremap` flags: `"maymove"`, `"maymove|fixed"`, `"maymove|dontunmap"`, `"none"`.
pub(super) fn parse_mremap_flags(s: &str) -> Result<u32, String> {
    use mm::mremap_flags as mf;
    let table =
        [("none", 0), ("maymove", mf::MAYMOVE), ("fixed", mf::FIXED), ("dontunmap", mf::DONTUNMAP)];
    flag_words(s, &table, |a, b| a | b)
}

/// `posix_fadvise` advice: `"noreuse"`, `"dontneed"`, ...
pub fn parse_fadvice(s: &str) -> Result<i32, String> {
    use mm::fadvise::advice;
    let table = [
        ("normal", advice::NORMAL),
        ("random", advice::RANDOM),
        ("sequential", advice::SEQUENTIAL),
        ("willneed", advice::WILLNEED),
        ("dontneed", advice::DONTNEED),
        ("noreuse", advice::NOREUSE),
    ];
    flag_words(s, &table, |_, b| b)
}

/// `"dontneed"`, `"random"`, ...
pub fn parse_advice(s: &str) -> Result<u32, String> {
    let table = [
        ("normal", madv::NORMAL),
        ("random", madv::RANDOM),
        ("sequential", madv::SEQUENTIAL),
        ("dontneed", madv::DONTNEED),
        ("cold", madv::COLD),
        ("pageout", madv::PAGEOUT),
        ("hugepage", madv::HUGEPAGE),
        ("nohugepage", madv::NOHUGEPAGE),
        ("collapse", madv::COLLAPSE),
        ("dontfork", madv::DONTFORK),
        ("dofork", madv::DOFORK),
        ("wipeonfork", madv::WIPEONFORK),
        ("keeponfork", madv::KEEPONFORK),
        ("free", madv::FREE),
        ("mergeable", madv::MERGEABLE),
        ("unmergeable", madv::UNMERGEABLE),
        ("populate_read", madv::POPULATE_READ),
        ("populate_write", madv::POPULATE_WRITE),
        ("willneed", madv::WILLNEED),
        ("remove", madv::REMOVE),
        ("dontdump", madv::DONTDUMP),
        ("dodump", madv::DODUMP),
        ("dontneed_locked", madv::DONTNEED_LOCKED),
        ("guard_install", madv::GUARD_INSTALL),
        ("guard_remove", madv::GUARD_REMOVE),
    ];
    flag_words(s, &table, |_, b| b)
}

/// The advice numbers of `UNMODELLED_WORDS`' advice (`include/uapi/asm-generic/mman-common.h`).
const UNMODELLED_ADVICE: [(i32, &str); 2] = [(100, "hwpoison"), (101, "soft_offline")];

/// `madvise`'s advice given as the number the syscall takes: any `int` (the kernel answers one
/// it lacks with EINVAL), but the number of an advice mmsim does not model is refused by name.
pub(super) fn parse_advice_number(n: i32) -> Result<u32, String> {
    match UNMODELLED_ADVICE.iter().find(|(v, _)| *v == n) {
        Some((_, name)) => Err(unmodelled(UNMODELLED_WORDS, name).expect("listed")),
        None => Ok(n as u32),
    }
}

/// `"read"`, `"write"`, `"exec"`.
pub fn parse_access(s: &str) -> Result<mm::Access, String> {
    let table =
        [("read", mm::Access::Read), ("write", mm::Access::Write), ("exec", mm::Access::Exec)];
    flag_words(s, &table, |_, b| b)
}

/// `"rdonly"`, `"rdwr|direct"`, `"wronly|trunc"`, ...
pub fn parse_open_flags(s: &str) -> Result<OpenFlags, String> {
    let none = OpenFlags::default();
    let table = [
        ("rdonly", OpenFlags::RDONLY),
        ("wronly", OpenFlags::WRONLY),
        ("rdwr", OpenFlags::RDWR),
        ("direct", OpenFlags { direct: true, ..none }),
        ("append", OpenFlags { append: true, ..none }),
        ("trunc", OpenFlags { truncate: true, ..none }),
    ];
    let merge = |a: OpenFlags, b: OpenFlags| OpenFlags {
        read: a.read || b.read,
        write: a.write || b.write,
        direct: a.direct || b.direct,
        append: a.append || b.append,
        truncate: a.truncate || b.truncate,
    };
    let flags = flag_words(s, &table, merge)?;
    if !flags.read && !flags.write {
        return Err("needs one of rdonly, wronly, rdwr".into());
    }
    Ok(flags)
}

/// A duration like `"10us"`, `"2ms"` or `"1s"`.
pub fn parse_duration(s: &str) -> Option<SimDuration> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit())?;
    let n: u64 = s[..split].parse().ok()?;
    let ns_per_unit: u64 = match &s[split..] {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ => return None,
    };
    n.checked_mul(ns_per_unit).map(SimDuration::from_ns)
}

pub(super) fn parse_hex(s: &str) -> Option<Vec<u8>> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok()).collect()
}

/// `">=v5.11"`, `"<v6.5"`, `"<=5.18"`, `">v6.1"` or an exact `"v5.12"`.
pub(super) fn parse_kernel_cond(
    s: &str,
) -> Result<(std::cmp::Ordering, bool, KernelVersion), String> {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let (ord, eq, rest) = if let Some(r) = s.strip_prefix(">=") {
        (Greater, true, r)
    } else if let Some(r) = s.strip_prefix("<=") {
        (Less, true, r)
    } else if let Some(r) = s.strip_prefix('>') {
        (Greater, false, r)
    } else if let Some(r) = s.strip_prefix('<') {
        (Less, false, r)
    } else {
        (Equal, true, s)
    };
    Ok((ord, eq, rest.trim().parse()?))
}

/// `smaps:NAME`, `vmstat`, ... (also used for the CLI's `--show`).
pub fn parse_show(s: &str) -> Result<Show, String> {
    let (kind, arg) = s.split_once(':').map_or((s, None), |(k, a)| (k, Some(a.to_string())));
    let need = |a: Option<String>| {
        a.filter(|x| !x.is_empty()).ok_or_else(|| format!("`{s}`: expected {kind}:PROCESS"))
    };
    Ok(match kind {
        "smaps" => Show::Smaps(need(arg)?),
        "smaps_rollup" => Show::SmapsRollup(need(arg)?),
        "maps" => Show::Maps(need(arg)?),
        "status" => Show::Status(need(arg)?),
        "stat" => Show::Stat(need(arg)?),
        "vmstat" if arg.is_none() => Show::Vmstat,
        "meminfo" if arg.is_none() => Show::Meminfo,
        "lock_stat" if arg.is_none() => Show::LockStat,
        "lockdep" if arg.is_none() => Show::Lockdep,
        "lru_gen" if arg.is_none() => Show::LruGen,
        "inspect" | "kpageflags" => {
            let arg = need(arg)?;
            let bad = || format!("`{s}`: expected {kind}:PROCESS:ADDR");
            let (process, at) = arg.split_once(':').ok_or_else(bad)?;
            let at = parse_addr(at).ok_or_else(bad)?;
            if kind == "inspect" {
                Show::Inspect(process.to_string(), at)
            } else {
                Show::PageTypes(process.to_string(), at)
            }
        }
        "memory.stat" => Show::MemoryStat(
            arg.filter(|a| a.starts_with('/'))
                .ok_or_else(|| format!("`{s}`: expected memory.stat:/CGROUP"))?,
        ),
        _ => return Err(format!("unknown observable `{s}`: expected one of {}", Show::NAMES)),
    })
}

/// `"90%"`: a percentage from 0 to 100.
pub(super) fn parse_percent(text: &str) -> Result<simcore::Ratio, String> {
    let bad = || format!("`{text}`: expected a percentage like \"90%\"");
    let n: u64 = text.strip_suffix('%').ok_or_else(bad)?.trim().parse().map_err(|_| bad())?;
    simcore::Ratio::percent(n).map_err(|_| bad())
}

/// Kernel features a scenario may name that mmsim does not model, each with what it is in the
/// kernel: operations by name ...
pub(super) const UNMODELLED_OPS: &[(&str, &str)] = &[
    ("uffdio_poison", "UFFDIO_POISON (v6.6)"),
    ("uffdio_move", "UFFDIO_MOVE (v6.8)"),
    ("mbind", "NUMA memory policy, mbind(2) (mm/mempolicy.c): the model has one node"),
    (
        "set_mempolicy",
        "NUMA memory policy, set_mempolicy(2) (mm/mempolicy.c): the model has one node",
    ),
    (
        "get_mempolicy",
        "NUMA memory policy, get_mempolicy(2) (mm/mempolicy.c): the model has one node",
    ),
    (
        "migrate_pages",
        "NUMA page migration, migrate_pages(2) (mm/mempolicy.c): the model has one node",
    ),
    ("move_pages", "NUMA page migration, move_pages(2) (mm/migrate.c): the model has one node"),
    ("process_madvise", "process_madvise(2) (mm/madvise.c)"),
    ("pkey_mprotect", "memory protection keys, pkey_mprotect(2) (mm/mprotect.c)"),
    ("pkey_alloc", "memory protection keys, pkey_alloc(2) (mm/mprotect.c)"),
    ("swapon", "swapon(2) (mm/swapfile.c): the swap device is the machine's `swap`"),
    ("swapoff", "swapoff(2) (mm/swapfile.c)"),
    (
        "io_uring_setup",
        "an io_uring ring (io_uring/io_uring.c): only registered buffers are modelled (`io_uring_register_buffers`)",
    ),
    (
        "io_submit",
        "Linux AIO (fs/aio.c): an O_DIRECT read is submitted with `pread_direct` and `async = true`",
    ),
];

/// ... and flag or advice words.
const UNMODELLED_WORDS: &[(&str, &str)] = &[
    ("hwpoison", "MADV_HWPOISON, memory failure injection (mm/memory-failure.c)"),
    ("soft_offline", "MADV_SOFT_OFFLINE, memory failure injection (mm/memory-failure.c)"),
    ("uninitialized", "MAP_UNINITIALIZED (no-MMU kernels only)"),
    ("32bit", "MAP_32BIT"),
];

/// Why `name` is refused when `table` lists it: the kernel feature it names is not modelled.
pub(super) fn unmodelled(table: &[(&str, &str)], name: &str) -> Option<String> {
    let (_, what) = table.iter().find(|(n, _)| *n == name)?;
    Some(format!("`{name}`: {what} is not modelled by mmsim"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("90%").unwrap(), simcore::Ratio::percent(90).unwrap());
        for bad in ["90", "150%", "x%", ""] {
            assert!(parse_percent(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes_addresses_and_flags() {
        assert_eq!(parse_size("64KiB"), Some(Bytes::kib(64)));
        assert_eq!(parse_size("2M"), Some(Bytes::mib(2)));
        assert_eq!(parse_size("4096"), Some(Bytes(4096)));
        assert_eq!(parse_size("4 kB"), Some(Bytes(4096)));
        assert_eq!(parse_size("3 parsecs"), None);
        assert_eq!(
            parse_addr("buf+4KiB"),
            Some(AddrExpr { base: Some("buf".into()), offset: 4096 })
        );
        assert_eq!(
            parse_addr("exe.text-0x1000"),
            Some(AddrExpr { base: Some("exe.text".into()), offset: -4096 })
        );
        assert_eq!(parse_addr("0x10000000"), Some(AddrExpr { base: None, offset: 0x1000_0000 }));
        assert_eq!(parse_addr("1buf"), None);
        assert_eq!(parse_prot("r-x"), Ok(prot::READ | prot::EXEC));
        assert!(parse_prot("rq").is_err());
        assert_eq!(parse_map_flags("private|anonymous"), Ok(map::PRIVATE | map::ANONYMOUS));
        assert_eq!(
            parse_map_flags("private|anon").unwrap_err(),
            "unknown `anon`, expected private, shared, anonymous, fixed, fixed_noreplace, populate, locked, growsdown, noreserve, denywrite, hugetlb, huge_2mb, huge_1gb, shared_validate, sync, stack, executable, nonblock, file"
        );
        // A word each table knows is its own: msync's MS_SYNC, mmap's MAP_SYNC.
        assert_eq!(parse_msync_flags("sync|invalidate"), Ok(4 | 2));
        assert_eq!(parse_map_flags("shared_validate|sync"), Ok(map::SHARED_VALIDATE | map::SYNC));
        assert!(parse_map_flags("private|32bit").unwrap_err().contains("MAP_32BIT"));
        assert!(parse_advice_number(101).unwrap_err().contains("MADV_SOFT_OFFLINE"));
        assert_eq!(parse_advice_number(102), Ok(madv::GUARD_INSTALL));
        assert_eq!(parse_advice("guard_remove"), Ok(madv::GUARD_REMOVE));
        assert_eq!(parse_advice_number(1212), Ok(1212));
        assert_eq!(parse_mcl_flags(""), Ok(0));
        assert_eq!(
            parse_map_flags("shared|anonymous|hugetlb|huge_1gb"),
            Ok(map::SHARED | map::ANONYMOUS | map::HUGETLB | map::HUGE_1GB)
        );
        assert_eq!(
            parse_fs("hugetlbfs:1GiB"),
            Ok(mm::types::fs::FsType::Hugetlbfs(mm::types::hugetlb::HugeSize::Size1G))
        );
        assert!(parse_fs("hugetlbfs:4KiB").unwrap_err().contains("hugetlbfs:1GiB"));
        assert_eq!(
            parse_fs("tmpfs:huge=within_size"),
            Ok(mm::types::fs::FsType::Tmpfs(mm::types::fs::TmpfsMount::Mount(
                mm::types::fs::ShmemHuge::WithinSize
            )))
        );
        assert!(parse_fs("tmpfs:huge=sometimes").unwrap_err().contains("tmpfs:huge=advise"));
        assert_eq!(parse_open_flags("append").unwrap_err(), "needs one of rdonly, wronly, rdwr");
        assert_eq!(parse_hex("68 69"), Some(b"hi".to_vec()));
        assert_eq!(parse_content("pattern:7"), Ok(Some(7)));
        assert_eq!(parse_content("zeros"), Ok(None));
        assert!(parse_content("pattern:x").is_err());
        assert_eq!(parse_hole(Bytes::kib(8), Bytes::kib(4)), Ok((2, 1)));
        assert!(parse_hole(Bytes(100), Bytes::kib(4)).is_err());
        assert_eq!(parse_duration("15us"), Some(SimDuration::from_us(15)));
    }
}
