//! `mmsim record`: recording a real program's memory references under qemu-user with a TCG
//! plugin (`qemu/mmsim_plugin.c`, compiled with the host's C compiler on first use), into a
//! recorded program ([`crate::program`]).
//!
//! What it needs, and refuses clearly without: an x86-64 host; `qemu-x86_64` built with plugin
//! support (`-plugin` in its help: Debian 12's dynamically linked `qemu-user` 7.2 has it,
//! newer Debian's static `qemu-user` 10.x does not), and `cc` to build the plugin. The guest runs
//! with `-cpu max`, so glibc picks the code paths (string functions, ...) it picks natively.
//!
//! What it records: each guest thread's references (qemu-user gives each thread its own vCPU)
//! in a window of instructions (skip N, record M, counted over all threads; or M out of every P
//! from N on, windows spread over the run, each thread's windows back to back in its trace); the executable's
//! and interpreter's load biases (the mappings qemu made before the first instruction, and the
//! interpreter's entry point); every `mmap`, `munmap`, `mprotect` and `brk` with the path of a
//! mapped file. The address space is rebuilt from these: ELF objects (the executable, its
//! interpreter, each shared library the dynamic linker mapped — its first `mmap` at file offset
//! 0 of an ELF shared object, which glibc's ld.so makes with `MAP_DENYWRITE`) with their program headers read from the files, so their
//! segments keep their real permissions and `p_align`; other file mappings as mapped;
//! anonymous mappings as mapped, the heap from `brk`, and, for memory qemu set up itself (the
//! stack), the ranges of pages the trace touches outside every other mapping.
//!
//! How: the plugin calls back once per translation block run and once per data access, and
//! streams compact 64-bit records over an abstract Unix socket; [`stream`] turns them into each
//! thread's binary trace as they arrive, with zstd on a thread of its own, so the conversion
//! runs beside qemu (three host threads in all) and nothing is staged on disk but the plugin's
//! small `maps`, `syscalls` and `summary` files. The trace is the one a callback per
//! instruction gave (the recorder up to commit 4d3d14d): a deterministic single-threaded program
//! run at the same addresses (`setarch -R`) gives a byte-identical recording with either
//! (`mmsim bench record --baseline` compares them).
//!
//! Approximations: the address space is the union of every mapping seen during the run; an
//! `munmap` or `mprotect` is not replayed in time order, so a reference to memory unmapped
//! earlier still finds it mapped. Permissions are the union too: an anonymous range keeps every
//! permission an `mprotect` gave it (a thread stack glibc maps `PROT_NONE` and then opens for
//! reading and writing is read-write but for its guard page), and a file mapping keeps those
//! of its `mmap` (RELRO's later `mprotect` to read-only is not applied). Instructions are
//! counted a block at a time: a block left early (a guest fault; a store into a page holding
//! translated code, which qemu-user restarts in a block of its own; qemu's exit to run an atomic
//! operation alone, in a threaded guest) counts and fetches the instructions after the one that
//! left it, which a callback per instruction would not (a handful of references in rustc's
//! 12 M-reference window); in a threaded guest, which thread's instructions fall in a window
//! depends on how the host interleaves them, a block at a time; a process the guest forks
//! records nothing (its `exec` runs natively, unrecorded, as before).

mod stream;

use crate::elf;
use crate::program::{AnonMap, FileMap, Loader, Object, Program, ThreadSection};
use mm::ElfObject;
use simcore::{Bytes, VirtAddr};
use std::collections::BTreeMap;
use std::io::{BufRead, Read};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

/// The plugin's source, compiled on first use.
const PLUGIN_SOURCE: &str = include_str!("../qemu/mmsim_plugin.c");

/// What to record.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    pub program: String,
    pub args: Vec<String>,
    /// Instructions to let pass before recording.
    pub skip: u64,
    /// Instructions to record (0: to the end).
    pub count: u64,
    /// Record `count` instructions out of every `period` from `skip` on (0: one window).
    pub period: u64,
    pub out: String,
    /// zstd's level for the trace sections (1-22).
    pub zstd_level: i32,
}

/// Why recording could not run or failed.
#[derive(Debug)]
pub enum RecordError {
    /// The host lacks what the recorder needs (named).
    Missing(String),
    /// The recording ran but something failed.
    Failed(String),
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Missing(m) => write!(f, "mmsim record cannot run here: {m}"),
            RecordError::Failed(m) => f.write_str(m),
        }
    }
}

fn failed(what: &str, e: impl std::fmt::Display) -> RecordError {
    RecordError::Failed(format!("{what}: {e}"))
}

/// `name` on `PATH`.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Checks the host: returns qemu-user's path, or what is missing.
pub fn check_host() -> Result<PathBuf, RecordError> {
    if std::env::consts::ARCH != "x86_64" {
        return Err(RecordError::Missing(format!(
            "an x86-64 host (qemu-user maps an x86-64 guest 1:1 only there), found {}",
            std::env::consts::ARCH
        )));
    }
    let missing = |m: &str| RecordError::Missing(m.to_string());
    let qemu = on_path("qemu-x86_64").ok_or_else(|| {
        missing("qemu-x86_64 is not on PATH (Debian 12: apt-get install qemu-user)")
    })?;
    let help = Command::new(&qemu).arg("-h").output().map_err(|e| failed("qemu-x86_64 -h", e))?;
    if !String::from_utf8_lossy(&help.stdout).contains("-plugin") {
        return Err(missing(
            "this qemu-x86_64 has no TCG plugin support (no -plugin in its help; Debian 12's \
             dynamically linked qemu-user 7.2 has it, static builds do not)",
        ));
    }
    on_path("cc").ok_or_else(|| missing("cc (a C compiler, to build the recorder's plugin)"))?;
    Ok(qemu)
}

/// A small stable hash (FNV-1a) naming the plugin build by its source.
fn fnv(text: &str) -> u64 {
    text.bytes()
        .fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

/// The plugin, compiled into the user's cache directory on first use.
fn plugin() -> Result<PathBuf, RecordError> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(std::env::temp_dir)
        .join("mmsim");
    let so = base.join(format!("qemu-plugin-{:016x}.so", fnv(PLUGIN_SOURCE)));
    if so.is_file() {
        return Ok(so);
    }
    std::fs::create_dir_all(&base).map_err(|e| failed(&base.display().to_string(), e))?;
    let src = base.join("mmsim_plugin.c");
    std::fs::write(&src, PLUGIN_SOURCE).map_err(|e| failed(&src.display().to_string(), e))?;
    let out = Command::new("cc")
        .args(["-O2", "-shared", "-fPIC", "-o"])
        .arg(&so)
        .arg(&src)
        .arg("-lpthread")
        .output()
        .map_err(|e| failed("cc", e))?;
    if !out.status.success() {
        return Err(RecordError::Missing(format!(
            "the plugin does not compile with cc:\n{}",
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(so)
}

/// What a recording produced.
#[derive(Debug)]
pub struct Recorded {
    pub program: Program,
    /// Bytes of the recorded program file.
    pub file_bytes: u64,
    /// Host seconds from qemu's start to its exit (the conversion runs beside it).
    pub qemu_seconds: f64,
}

/// A name for the recorder's socket, unique on the host (an abstract Unix socket: no file).
fn socket_name() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let k = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("mmsim-record-{}-{k}", std::process::id())
}

/// The plugin's connection, or qemu's exit if it ends first.
fn accept(listener: &UnixListener, qemu: &mut Child) -> Result<UnixStream, RecordError> {
    listener.set_nonblocking(true).map_err(|e| failed("the recorder's socket", e))?;
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).map_err(|e| failed("the recorder's socket", e))?;
                return Ok(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(failed("the recorder's socket", e)),
        }
        if let Some(status) = qemu.try_wait().map_err(|e| failed("qemu-x86_64", e))? {
            return Err(RecordError::Failed(format!(
                "qemu-x86_64 exited ({status}) before the plugin connected"
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Runs `options.program` under qemu-user with the plugin, converting the references it streams
/// as they come; then builds the address space from the plugin's files (in `OUT.parts`,
/// removed at the end) and writes the recorded program to `options.out`.
pub fn record(options: &RecordOptions) -> Result<Recorded, RecordError> {
    let qemu = check_host()?;
    let so = plugin()?;
    let parts = PathBuf::from(format!("{}.parts", options.out));
    let _ = std::fs::remove_dir_all(&parts);
    std::fs::create_dir_all(&parts).map_err(|e| failed(&parts.display().to_string(), e))?;
    let name = socket_name();
    let listener = SocketAddr::from_abstract_name(name.as_bytes())
        .and_then(|a| UnixListener::bind_addr(&a))
        .map_err(|e| failed("the recorder's socket", e))?;
    let arg = format!(
        "{},dir={},sock={name},skip={},count={},period={}",
        so.display(),
        parts.display(),
        options.skip,
        options.count,
        options.period
    );
    let started = std::time::Instant::now();
    let mut child = Command::new(&qemu)
        .args(["-cpu", "max", "-plugin", &arg])
        .arg(&options.program)
        .args(&options.args)
        .spawn()
        .map_err(|e| failed("running qemu-x86_64", e))?;
    let mut converter = stream::Converter::new(options.zstd_level);
    let streamed = accept(&listener, &mut child).and_then(|s| converter.read_all(s));
    let status = child.wait().map_err(|e| failed("qemu-x86_64", e))?;
    let qemu_seconds = started.elapsed().as_secs_f64();
    if !status.success() {
        return Err(RecordError::Failed(format!(
            "{} under qemu-x86_64: {status}",
            options.program
        )));
    }
    streamed?;
    let recorded = write_program(&parts, options, converter.finish()?, qemu_seconds)?;
    let _ = std::fs::remove_dir_all(&parts);
    Ok(recorded)
}

/// Builds the recorded program from the plugin's files in `parts` and the converted threads,
/// and writes it to `options.out`.
fn write_program(
    parts: &Path,
    options: &RecordOptions,
    converted: stream::Converted,
    qemu_seconds: f64,
) -> Result<Recorded, RecordError> {
    let summary = read_summary(parts)?;
    let mut program = address_space(parts, options, &summary)?;
    let known = Known::of(&program);
    let touched: Vec<u64> = converted.pages.into_iter().filter(|&p| !known.covers(p)).collect();
    let mut sections = Vec::new();
    for (section, refs) in converted.sections {
        program.threads.push(ThreadSection { refs, bytes: section.len() as u64 });
        sections.push(section);
    }
    program.anon.extend(touched_ranges(&touched));
    let mut out = std::fs::File::create(&options.out).map_err(|e| failed(&options.out, e))?;
    program.write(&mut out, &sections).map_err(|e| failed(&options.out, e))?;
    let file_bytes = out.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(Recorded { program, file_bytes, qemu_seconds })
}

/// The plugin's summary: `key value` lines.
fn read_summary(parts: &Path) -> Result<BTreeMap<String, u64>, RecordError> {
    let path = parts.join("summary");
    let text =
        std::fs::read_to_string(&path).map_err(|e| failed(&path.display().to_string(), e))?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once(' '))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect())
}

/// A system call the plugin logged.
#[derive(Clone, Debug)]
struct Syscall {
    nr: u64,
    args: [u64; 6],
    ret: u64,
    path: String,
}

impl Syscall {
    /// Parses a line of the plugin's `syscalls` log: count, vCPU, number, six arguments (the
    /// fifth, the fd, in decimal), the result, then the mapped file's path if any.
    fn parse(line: &str) -> Option<Syscall> {
        let mut w = line.splitn(11, ' ');
        let num = |s: Option<&str>| -> Option<u64> {
            let s = s?;
            match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None if s.starts_with('-') => s.parse::<i64>().ok().map(|v| v as u64),
                None => s.parse().ok(),
            }
        };
        let (_count, _vcpu, nr) = (num(w.next())?, num(w.next())?, num(w.next())?);
        let mut args = [0; 6];
        for a in &mut args {
            *a = num(w.next())?;
        }
        let ret = num(w.next())?;
        let path = w.next().unwrap_or("").trim().to_string();
        Some(Syscall { nr, args, ret, path })
    }

    fn failed(&self) -> bool {
        self.ret > u64::MAX - 4095
    }
}

const NR_MMAP: u64 = 9;
const NR_MPROTECT: u64 = 10;
const NR_BRK: u64 = 12;
const MAP_SHARED: u64 = 1;
/// glibc's dynamic linker still passes `MAP_DENYWRITE` when it maps a shared object (the
/// kernel ignores it): what tells its mappings from a program's own `mmap` of an ELF file.
const MAP_DENYWRITE: u64 = 0x800;

/// The ELF object `path` at the bias that puts its first segment's page at `base`.
fn object_at(path: &str, loader: Loader, base: u64) -> Result<Object, RecordError> {
    let info = elf::read(path).map_err(|e| failed("reading program headers", e))?;
    let first = info.segments[0].vaddr.align_down(Bytes::PAGE).0;
    let bias = Bytes(base.wrapping_sub(first));
    let elf = ElfObject { path: path.to_string(), bias, segments: info.segments };
    Ok(Object { loader, elf, size: info.size })
}

fn canonical(path: &str) -> Result<String, RecordError> {
    std::fs::canonicalize(path).map(|p| p.display().to_string()).map_err(|e| failed(path, e))
}

/// The executable and its interpreter, where qemu loaded them.
fn kernel_objects(
    parts: &Path,
    exe: &str,
    summary: &BTreeMap<String, u64>,
) -> Result<Vec<Object>, RecordError> {
    let info = elf::read(exe).map_err(|e| failed("reading program headers", e))?;
    let maps_path = parts.join("maps");
    let maps = std::fs::read_to_string(&maps_path).map_err(|e| failed("the plugin's maps", e))?;
    let base = if info.dynamic {
        let line = maps
            .lines()
            .find(|l| l.ends_with(exe) && l.split_whitespace().nth(2) == Some("00000000"))
            .ok_or_else(|| RecordError::Failed(format!("{exe} is not in qemu's mappings")))?;
        let start = line.split('-').next().unwrap_or("");
        u64::from_str_radix(start, 16).map_err(|e| failed("qemu's mappings", e))?
    } else {
        info.segments[0].vaddr.align_down(Bytes::PAGE).0
    };
    let mut objects = vec![object_at(exe, Loader::Exe, base)?];
    if let Some(interp) = &info.interp {
        let interp = canonical(interp)?;
        let entry = elf::read(&interp).map_err(|e| failed("reading program headers", e))?.entry;
        let first_pc = summary.get("first_pc").copied().unwrap_or(0);
        let mut o = object_at(&interp, Loader::Interp, 0)?;
        o.elf.bias = Bytes(first_pc.wrapping_sub(entry.0));
        if !o.elf.bias.is_page_aligned() {
            return Err(RecordError::Failed(format!(
                "the first instruction {first_pc:#x} is not {interp}'s entry point at a page-aligned bias"
            )));
        }
        objects.push(o);
    }
    Ok(objects)
}

/// The address space: the kernel's objects, then what the `mmap` and `brk` log adds.
fn address_space(
    parts: &Path,
    options: &RecordOptions,
    summary: &BTreeMap<String, u64>,
) -> Result<Program, RecordError> {
    let exe = canonical(&options.program)?;
    let mut program = Program {
        program: exe.clone(),
        skip: options.skip,
        count: options.count,
        period: options.period,
        instructions: summary.get("instructions").copied().unwrap_or(0),
        objects: kernel_objects(parts, &exe, summary)?,
        ..Program::default()
    };
    let log_path = parts.join("syscalls");
    let log = std::fs::File::open(&log_path).map_err(|e| failed("the plugin's syscall log", e))?;
    let mut heap: Option<(u64, u64)> = None;
    for line in std::io::BufReader::new(log).lines() {
        let line = line.map_err(|e| failed("the plugin's syscall log", e))?;
        let Some(call) = Syscall::parse(&line) else {
            return Err(RecordError::Failed(format!(
                "the plugin's syscall log: bad line `{line}`"
            )));
        };
        if call.failed() {
            continue;
        }
        match call.nr {
            NR_MMAP => add_mmap(&mut program, &call)?,
            NR_MPROTECT => widen_anon(&mut program.anon, call.args[0], call.args[1], call.args[2]),
            NR_BRK => {
                let (lo, hi) = heap.unwrap_or((call.ret, call.ret));
                heap = Some((lo.min(call.ret), hi.max(call.ret)));
            }
            _ => {}
        }
    }
    if let Some((lo, hi)) = heap.filter(|(lo, hi)| hi > lo) {
        program.anon.push(AnonMap { start: VirtAddr(lo), end: VirtAddr(hi), prot: 3 });
    }
    Ok(program)
}

/// Adds one successful `mmap` to the address space.
fn add_mmap(program: &mut Program, call: &Syscall) -> Result<(), RecordError> {
    let [_, len, prot, flags, _, offset] = call.args;
    let len = Bytes(len).align_up(Bytes::PAGE).unwrap_or(Bytes(len));
    if call.path.is_empty() {
        let end = VirtAddr(call.ret) + len;
        program.anon.push(AnonMap { start: VirtAddr(call.ret), end, prot: prot as u32 });
        return Ok(());
    }
    let known = program.objects.iter().any(|o| o.elf.path == call.path);
    if known {
        return Ok(());
    }
    let is_library = offset == 0
        && flags & MAP_DENYWRITE != 0
        && std::fs::File::open(&call.path).ok().and_then(|f| {
            let mut head = [0u8; 4];
            f.take(4).read_exact(&mut head).ok()?;
            Some(elf::is_elf(&head))
        }) == Some(true)
        && elf::read(&call.path).is_ok_and(|i| i.dynamic);
    if is_library {
        program.objects.push(object_at(&call.path, Loader::Lib, call.ret)?);
        return Ok(());
    }
    let size = std::fs::metadata(&call.path).map(|m| m.len()).unwrap_or(offset + len.0);
    program.files.push(FileMap {
        start: VirtAddr(call.ret),
        len,
        offset: Bytes(offset),
        prot: prot as u32,
        shared: flags & MAP_SHARED != 0,
        size: Bytes(size),
        path: call.path.clone(),
    });
    Ok(())
}

/// Gives the anonymous memory from `start` for `len` bytes the permissions `prot` too (the
/// union of an `mprotect`'s and those it had), splitting the ranges it cuts.
fn widen_anon(anon: &mut Vec<AnonMap>, start: u64, len: u64, prot: u64) {
    let (lo, hi) =
        (start, start.saturating_add(Bytes(len).align_up(Bytes::PAGE).map_or(len, |b| b.0)));
    let mut out = Vec::with_capacity(anon.len() + 2);
    for a in anon.drain(..) {
        let (s, e) = (a.start.0, a.end.0);
        if e <= lo || s >= hi {
            out.push(a);
            continue;
        }
        let (cut_lo, cut_hi) = (s.max(lo), e.min(hi));
        let piece = |from: u64, to: u64, prot: u32| AnonMap {
            start: VirtAddr(from),
            end: VirtAddr(to),
            prot,
        };
        if s < cut_lo {
            out.push(piece(s, cut_lo, a.prot));
        }
        out.push(piece(cut_lo, cut_hi, a.prot | prot as u32));
        if cut_hi < e {
            out.push(piece(cut_hi, e, a.prot));
        }
    }
    *anon = out;
}

/// The page ranges the address space already covers (sorted, merged).
struct Known {
    ranges: Vec<(u64, u64)>,
}

impl Known {
    fn of(p: &Program) -> Known {
        Known { ranges: p.mapped_ranges(12) }
    }

    fn covers(&self, page: u64) -> bool {
        let i = self.ranges.partition_point(|&(_, e)| e <= page);
        self.ranges.get(i).is_some_and(|&(s, _)| s <= page)
    }
}

/// Anonymous read-write ranges over the touched pages (sorted), runs closer than 16 pages joined.
fn touched_ranges(pages: &[u64]) -> Vec<AnonMap> {
    let mut out: Vec<AnonMap> = Vec::new();
    for &p in pages {
        let (start, end) = (VirtAddr(p << 12), VirtAddr((p + 1) << 12));
        match out.last_mut() {
            Some(last) if last.end.0 + (16 << 12) >= start.0 => last.end = end,
            _ => out.push(AnonMap { start, end, prot: 3 }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syscall_lines_parse() {
        let l = "32500 0 9 0x4002c00000 0x7be2b8c 0x1 0x812 5 0 0x4002c00000 /lib/x.so";
        let c = Syscall::parse(l).unwrap();
        assert_eq!((c.nr, c.args[4], c.ret, c.path.as_str()), (9, 5, 0x40_02c0_0000, "/lib/x.so"));
        let anon = Syscall::parse("1 0 9 0 0x2000 0x3 0x22 -1 0 0x4002ad4000 ").unwrap();
        assert!(anon.path.is_empty() && !anon.failed());
        assert!(
            Syscall::parse("1 0 9 0 0x2000 0x3 0x22 -1 0 0xfffffffffffffff4 ").unwrap().failed()
        );
    }

    /// Given a thread stack mapped `PROT_NONE`, when glibc opens all but its guard page for
    /// reading and writing, then that part is read-write and the guard page keeps `PROT_NONE`.
    #[test]
    fn mprotect_widens_the_anonymous_range_it_covers() {
        let mut anon = vec![AnonMap { start: VirtAddr(0x10000), end: VirtAddr(0x20000), prot: 0 }];
        widen_anon(&mut anon, 0x11000, 0xf000, 3);
        let got: Vec<_> = anon.iter().map(|a| (a.start.0, a.end.0, a.prot)).collect();
        assert_eq!(got, [(0x10000, 0x11000, 0), (0x11000, 0x20000, 3)]);
        widen_anon(&mut anon, 0x11000, 0x1000, 1);
        assert_eq!(anon[1].prot, 3, "a narrower mprotect keeps the union");
    }

    #[test]
    fn touched_pages_join_into_ranges() {
        let r = touched_ranges(&[10, 11, 20, 100]);
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].start, r[0].end), (VirtAddr(10 << 12), VirtAddr(21 << 12)));
    }
}
