//! Replaying a recorded program with the OS in the loop (`mmsim replay FILE.mmprog`).
//!
//! The address space is rebuilt as the real one was made: files of the recorded sizes are
//! created in the simulated file system; a driver task `exec`s the executable through the ELF
//! loader (`mm::fs::binfmt_elf`: its segments and its interpreter's, deny-write by era); maps
//! the recorded anonymous memory (around the loader's objects); maps each shared library
//! through the dynamic-linker model ([`crate::ld_so`], never deny-write, optionally advising
//! `MADV_HUGEPAGE`); and maps the program's other file mappings as recorded.
//!
//! Then, in virtual time:
//! 1. warm-up pass: every recorded thread replays its window as its own task on its own CPU
//!    (the profile's CPUs are raised to the thread count), faulting the text and data in (and,
//!    under `enabled=always`, registering the mm with khugepaged at its first anonymous THP);
//! 2. warm-up wait: the program stays resident for `warmup` while khugepaged runs with the
//!    machine's `khugepaged/` knobs (the recorded window is far shorter than a scan period);
//! 3. measured pass: the same window again; the report's counters are this pass's alone.
//!
//! With `one_cpu` the machine has one CPU and every thread runs on it, as the seed measured
//! dex2oat "on a single ARM core": the engine time-slices them (its `timeslice`, 4 ms) and
//! charges each switch between them the profile's `thread_switch` (`engine::cpu`: threads of
//! one process, tagged by their pid), and the report counts the measured pass's switches and
//! their time. The threads share the CPU's TLBs as the hardware shares them: entries are tagged
//! with the mm's ASID (`mm::arch::tlb`), and a switch between threads of one mm changes
//! nothing, since `context_switch` calls `switch_mm_irqs_off` with the loaded mm and it returns
//! at once (`real_prev == next`, arch/x86/mm/tlb.c v6.8; arm64's `switch_mm` skips
//! `__switch_mm` when `prev == next`, arch/arm64/include/asm/mmu_context.h), so no profile
//! flushes there. Between address spaces the TLB model does what the profile's ASIDs allow
//! (`TlbGeometry::asid_slots`: an mm without a slot on the CPU takes the oldest and flushes
//! it; one slot is a CPU without ASIDs, flushed at every switch between processes), which
//! a replay of one process never asks. Approximation: iTLB misses of a fault's retry are
//! attributed to the faulting thread's piece though another thread may run during the fault.
//!
//! So a collapse the kernel's rules allow has had its chance before the measurement, in every
//! era alike, and the 2 MiB mappings the measurement sees are the ones khugepaged made.

use crate::footprint::Collapsible;
use crate::program::{Loader, Object, Program};
use crate::rebase::Relocation;
use crate::replay::{FetchStream, ReplayError, ReplayReport, Run};
use mm::arch::tlb::TlbEvent;
use mm::{ElfExec, FileSpec, Machine, MachineConfig, MmapArgs, OpenFlags, Pid, Thread, map};
use serde::Serialize;
use simcore::{Bytes, CounterKey, SimDuration, VirtAddr};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// How to replay a recorded program.
#[derive(Clone, Debug)]
pub struct ProgramOptions {
    /// The machine: profile, kernel, switches, THP knobs.
    pub config: MachineConfig,
    /// The linker model advises `MADV_HUGEPAGE` on 2 MiB-aligned library segments.
    pub advise_hugepage: bool,
    /// How long the program stays resident between the passes.
    pub warmup: SimDuration,
    /// References each thread replays per pass at most (all when `None`): a shorter window.
    pub max_refs_per_thread: Option<u64>,
    /// Shared libraries (by file name) placed at a 2 MiB base, their references moved with them
    /// ([`crate::rebase`]).
    pub rebase_2m: Vec<String>,
    /// Every thread on one CPU (the machine has one), as the seed measured: see the module note.
    pub one_cpu: bool,
}

/// Counters of the measured pass.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Window {
    pub references: u64,
    pub instructions: u64,
    /// `perf`-style TLB counters summed over the CPUs.
    pub counters: BTreeMap<String, u64>,
    pub page_faults: u64,
    pub virtual_time_ns: u64,
    /// First-level iTLB misses of fetches inside collapsible 2 MiB ranges
    /// ([`crate::footprint::Collapsible`]).
    pub itlb_misses_in_collapsible: u64,
    /// Context switches on the CPUs (`engine::CpuStats`), and the time they charged.
    pub context_switches: u64,
    pub switching_ns: u64,
}

impl Window {
    pub fn counter(&self, e: TlbEvent) -> u64 {
        self.counters.get(e.name()).copied().unwrap_or(0)
    }
}

/// What a program replay reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ProgramReport {
    pub program: String,
    pub threads: u64,
    pub measured: Window,
    /// File THPs khugepaged made (`thp_collapse_alloc` over the whole run, and
    /// `nr_file_hugepages` at the end).
    pub collapse_allocs: u64,
    pub file_hugepages: u64,
    /// `FilePmdMapped` (kB) per mapped file, from smaps at the end.
    pub file_pmd_mapped_kb: BTreeMap<String, u64>,
    /// `AnonHugePages` (kB) of executable anonymous mappings (a JIT's code), from smaps.
    pub exec_anon_huge_kb: u64,
    /// Libraries whose recorded base is not aligned to their largest `p_align`.
    pub misaligned_libraries: Vec<String>,
    pub outside_mappings: u64,
    pub protection_faults: u64,
}

/// The kernel-loaded objects' spans, which anonymous memory must not cover.
fn loader_spans(p: &Program) -> Vec<(u64, u64)> {
    let mut spans: Vec<(u64, u64)> = p
        .objects
        .iter()
        .filter(|o| o.loader != Loader::Lib)
        .flat_map(|o| o.elf.segments.iter().filter_map(|s| s.pages(o.elf.bias)))
        .map(|(start, _, end)| (start.0, end.0))
        .collect();
    spans.sort_unstable();
    spans
}

/// `[start, end)` without the `holes` (sorted).
fn clip(start: u64, end: u64, holes: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut at = start;
    for &(hs, he) in holes.iter().filter(|&&(hs, he)| he > start && hs < end) {
        if hs > at {
            out.push((at, hs));
        }
        at = at.max(he);
    }
    if at < end {
        out.push((at, end));
    }
    out
}

/// Replays the recorded program `path`.
pub fn replay_program(
    path: &str,
    options: &ProgramOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<ProgramReport, ReplayError> {
    let (mut program, data) = Program::open(path).map_err(ReplayError::Input)?;
    let relocation = crate::rebase::rebase_2m(&mut program, &options.rebase_2m).map_err(|e| {
        ReplayError::Input(crate::InputError { file: path.to_string(), line: None, message: e })
    })?;
    let sim = |e: String| ReplayError::Sim(e);
    let mut config = options.config.clone();
    let threads = if options.one_cpu { 1 } else { program.threads.len().max(1) as u32 };
    config.profile = config
        .profile
        .clone()
        .resized(Some(if options.one_cpu { 1 } else { config.profile.cpus.max(threads) }), None)
        .map_err(sim)?;
    let mut machine = Machine::new(config).map_err(sim)?;
    create_files(&mut machine, &program)?;
    let pid = machine.new_process("replay").map_err(|e| sim(format!("{e:?}")))?;
    let shared = Rc::new(Shared::new(&program, path, data, options, relocation));
    let (s, advise, warmup) = (shared.clone(), options.advise_hugepage, options.warmup);
    let kernel = machine.kernel_rc();
    machine
        .spawn_thread(pid, 0, "driver", move |t| async move {
            let result = s.drive(&t, &kernel, pid, advise, warmup).await;
            if let Err(e) = result {
                *s.failure.borrow_mut() = Some(e);
            }
        })
        .map_err(sim)?;
    let done = shared.done.clone();
    let run = machine.run_observed(&mut |_| {
        progress(done.get());
        Ok(())
    });
    run.map_err(|e| crate::stopped(&e, ReplayError::Refused, ReplayError::Sim))?;
    if let Some(e) = shared.failure.borrow_mut().take() {
        return Err(e);
    }
    finish(&machine, pid, &shared, &program)
}

/// Creates every file the program maps, as large as its recorded size.
fn create_files(machine: &mut Machine, p: &Program) -> Result<(), ReplayError> {
    let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
    let objects = p.objects.iter().map(|o| (o.elf.path.as_str(), o.size.as_u64()));
    let files =
        p.files.iter().map(|f| (f.path.as_str(), f.size.0.max(f.offset.0.saturating_add(f.len.0))));
    for (path, size) in objects.chain(files) {
        let e = sizes.entry(path).or_default();
        *e = (*e).max(size);
    }
    for (path, size) in sizes {
        let size = Bytes(size).align_up(Bytes::PAGE).unwrap_or(Bytes(size));
        machine.create_file(path, &FileSpec::zeros(size)).map_err(|e| {
            let message = format!("the simulated file system refuses {path}: {e:?}");
            ReplayError::Input(crate::InputError { file: path.to_string(), line: None, message })
        })?;
    }
    Ok(())
}

/// What the driver and the replaying threads share with the caller.
struct Shared {
    program: Program,
    path: String,
    data: u64,
    report: Rc<RefCell<ReplayReport>>,
    done: Rc<Cell<u64>>,
    failure: RefCell<Option<ReplayError>>,
    /// Counters at the start and end of the measured pass.
    marks: RefCell<Vec<Mark>>,
    max_refs: Option<u64>,
    /// The profile's instruction fetch block (`TlbGeometry::fetch_bytes`).
    fetch_bytes: u32,
    relocation: Relocation,
    one_cpu: bool,
    collapsible: Rc<Collapsible>,
    /// iTLB misses inside the collapsible ranges, all threads, both passes.
    misses_inside: Rc<Cell<u64>>,
}

/// A snapshot of the counters the report differences.
#[derive(Clone, Debug)]
struct Mark {
    tlb: mm::arch::tlb::TlbStats,
    vmstat: mm::vmstat::VmStats,
    time: simcore::SimTime,
    references: u64,
    instructions: u64,
    misses_inside: u64,
    /// Context switches summed over the CPUs, and their time.
    switches: (u64, u64),
}

impl Shared {
    fn new(
        program: &Program,
        path: &str,
        data: u64,
        options: &ProgramOptions,
        relocation: Relocation,
    ) -> Shared {
        Shared {
            program: program.clone(),
            path: path.to_string(),
            data,
            report: Rc::default(),
            done: Rc::default(),
            failure: RefCell::new(None),
            marks: RefCell::new(Vec::new()),
            max_refs: options.max_refs_per_thread,
            fetch_bytes: options.config.profile.tlb.fetch_bytes,
            relocation,
            one_cpu: options.one_cpu,
            collapsible: Rc::new(Collapsible::of(program)),
            misses_inside: Rc::default(),
        }
    }

    /// The driver: builds the address space, then warm-up pass, wait, measured pass.
    async fn drive(
        &self,
        t: &Thread,
        kernel: &Rc<mm::kernel::Kernel>,
        pid: Pid,
        advise: bool,
        warmup: SimDuration,
    ) -> Result<(), ReplayError> {
        self.build(t, advise).await?;
        self.pass(t, kernel, pid).await?;
        t.cx().sleep(warmup).await;
        self.mark(t);
        self.pass(t, kernel, pid).await?;
        self.mark(t);
        Ok(())
    }

    fn mark(&self, t: &Thread) {
        let h: &engine::Handle = t.cx();
        let cpus = (0..h.cpus()).map(|n| h.cpu_stats(engine::CpuId(n)));
        let switches =
            cpus.fold((0, 0), |(n, ns), c| (n + c.context_switches, ns + c.switching.as_ns()));
        let st = t.cx().kernel().state();
        let rep = self.report.borrow();
        self.marks.borrow_mut().push(Mark {
            tlb: st.tlb.total_stats(),
            vmstat: st.vmstat_snapshot(),
            time: t.now(),
            references: rep.references,
            instructions: rep.instructions,
            misses_inside: self.misses_inside.get(),
            switches,
        });
    }

    /// `exec`, anonymous memory, libraries, other file mappings.
    async fn build(&self, t: &Thread, advise: bool) -> Result<(), ReplayError> {
        let p = &self.program;
        let bad = |what: &str, e: mm::Errno| {
            let message = format!("the simulated kernel refuses {what}: {e:?}");
            ReplayError::Input(crate::InputError { file: self.path.clone(), line: None, message })
        };
        let object = |l: Loader| p.objects.iter().find(|o| o.loader == l).map(|o| o.elf.clone());
        let exe = object(Loader::Exe)
            .ok_or_else(|| ReplayError::Sim(format!("{}: no executable", self.path)))?;
        let image = ElfExec {
            exe,
            interp: object(Loader::Interp),
            stack_top: VirtAddr(mm::pgtable::TASK_SIZE - (1 << 30)),
            stack: Bytes::kib(132),
        };
        t.exec_elf(&image).await.map_err(|e| bad("exec", e))?;
        let holes = loader_spans(p);
        for a in &p.anon {
            for (s, e) in clip(a.start.0, a.end.0, &holes) {
                map_anon(t, s, e, a.prot).await.map_err(|err| bad("an anonymous mapping", err))?;
            }
        }
        for lib in p.objects.iter().filter(|o| o.loader == Loader::Lib) {
            crate::ld_so::map_library(t, lib, advise).await.map_err(|e| bad(&lib.elf.path, e))?;
        }
        for f in &p.files {
            let fd = t.open(&f.path, OpenFlags::RDONLY).await.map_err(|e| bad(&f.path, e))?;
            let sharing = if f.shared { map::SHARED } else { map::PRIVATE };
            let prot = if f.shared { f.prot & !mm::prot::WRITE } else { f.prot };
            let args = MmapArgs {
                addr: Some(f.start),
                len: f.len,
                prot,
                flags: map::FIXED | sharing,
                fd: Some(fd),
                offset: f.offset.0,
            };
            let mapped = t.mmap(args).await;
            t.close(fd).await.map_err(|e| bad(&f.path, e))?;
            mapped.map_err(|e| bad(&f.path, e))?;
        }
        Ok(())
    }

    /// One pass: every thread's window, each as its own task on its own CPU; waits for all.
    async fn pass(
        &self,
        t: &Thread,
        kernel: &Rc<mm::kernel::Kernel>,
        pid: Pid,
    ) -> Result<(), ReplayError> {
        let ranges = Rc::new(self.ranges());
        let mut tasks = Vec::new();
        for k in 0..self.program.threads.len() {
            let reader =
                self.program.thread_trace(&self.path, self.data, k).map_err(ReplayError::Input)?;
            let run = Run {
                report: self.report.clone(),
                trace: Rc::new(RefCell::new(reader)),
                done: self.done.clone(),
                ranges: ranges.to_vec(),
                check: false,
                remaining: Cell::new(self.max_refs.unwrap_or(u64::MAX)),
                fetch: FetchStream::new(self.fetch_bytes),
                mark: None,
                at_mark: None,
                relocation: self.relocation.clone(),
                misses_inside: Some((self.collapsible.clone(), self.misses_inside.clone())),
            };
            let failure: Rc<RefCell<Option<ReplayError>>> = Rc::default();
            let f = failure.clone();
            let task = mm::spawn_user_thread(
                t.cx(),
                kernel,
                pid,
                if self.one_cpu { 0 } else { k as u32 },
                &format!("thread {k}"),
                move |t| async move {
                    if let Err(e) = run.batches(&t).await {
                        *f.borrow_mut() = Some(e);
                    }
                },
            )
            .map_err(ReplayError::Sim)?;
            tasks.push((task, failure));
        }
        for (task, failure) in tasks {
            t.cx().join(task).await;
            if let Some(e) = failure.borrow_mut().take() {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Every recorded mapping's range, sorted, to tell protection faults from stray accesses.
    fn ranges(&self) -> Vec<(u64, u64)> {
        self.program.mapped_ranges(0)
    }
}

/// Anonymous private memory from `start` to `end`.
async fn map_anon(t: &Thread, start: u64, end: u64, prot: u32) -> Result<(), mm::Errno> {
    let args = MmapArgs {
        addr: Some(VirtAddr(start)),
        len: Bytes(end - start),
        prot,
        flags: map::FIXED | map::PRIVATE | map::ANONYMOUS,
        fd: None,
        offset: 0,
    };
    t.mmap(args).await.map(drop)
}

/// The report: the measured pass's counters, the collapses, `FilePmdMapped` per file.
fn finish(
    machine: &Machine,
    pid: Pid,
    shared: &Shared,
    program: &Program,
) -> Result<ProgramReport, ReplayError> {
    machine.check().map_err(|e| ReplayError::Sim(format!("checker: {e}")))?;
    let marks = shared.marks.borrow();
    let [before, after] = [&marks[0], &marks[1]];
    let counters = <TlbEvent as CounterKey>::ALL
        .iter()
        .map(|&e| (e.name().to_string(), after.tlb.get(e) - before.tlb.get(e)))
        .collect();
    let vm = |name: &str| mm::vmstat::vmstat_key(name).expect("a vmstat key");
    let end = machine.vmstat();
    let rep = shared.report.borrow();
    let smaps = machine.smaps(pid);
    Ok(ProgramReport {
        program: program.program.clone(),
        threads: program.threads.len() as u64,
        measured: Window {
            references: after.references - before.references,
            instructions: after.instructions - before.instructions,
            counters,
            page_faults: after.vmstat.get(vm("pgfault")) - before.vmstat.get(vm("pgfault")),
            virtual_time_ns: after.time.since(before.time).as_ns(),
            itlb_misses_in_collapsible: after.misses_inside - before.misses_inside,
            context_switches: after.switches.0 - before.switches.0,
            switching_ns: after.switches.1 - before.switches.1,
        },
        collapse_allocs: end.get(vm("thp_collapse_alloc")),
        file_hugepages: end.get(vm("nr_file_hugepages")),
        file_pmd_mapped_kb: file_pmd_mapped(&smaps),
        exec_anon_huge_kb: exec_anon_huge(&smaps),
        misaligned_libraries: program
            .objects
            .iter()
            .filter(|o| o.loader == Loader::Lib && !crate::ld_so::base_is_aligned(o))
            .map(|o: &Object| o.elf.path.clone())
            .collect(),
        outside_mappings: rep.outside_mappings,
        protection_faults: rep.protection_faults,
    })
}

/// `FilePmdMapped` (kB) summed per file over smaps' entries.
pub fn file_pmd_mapped(smaps: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut file = None;
    for line in smaps.lines() {
        if let Some(kb) = line.strip_prefix("FilePmdMapped:") {
            let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
            if let Some(f) = &file {
                *out.entry(String::clone(f)).or_insert(0) += kb;
            }
        } else if line
            .split_whitespace()
            .next()
            .is_some_and(|w| w.contains('-') && !w.ends_with(':'))
        {
            file =
                line.split_whitespace().nth(5).filter(|p| p.starts_with('/')).map(str::to_string);
        }
    }
    out.retain(|_, kb| *kb > 0);
    out
}

/// `AnonHugePages` (kB) summed over smaps' executable entries without a path.
pub fn exec_anon_huge(smaps: &str) -> u64 {
    let mut exec_anon = false;
    let mut kb = 0;
    for line in smaps.lines() {
        if let Some(v) = line.strip_prefix("AnonHugePages:") {
            if exec_anon {
                kb += v.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap_or(0);
            }
        } else if line
            .split_whitespace()
            .next()
            .is_some_and(|w| w.contains('-') && !w.ends_with(':'))
        {
            let mut w = line.split_whitespace();
            let perms = w.nth(1).unwrap_or("");
            exec_anon = perms.contains('x') && w.nth(3).is_none_or(|p| !p.starts_with('/'));
        }
    }
    kb
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_anon_huge_counts_executable_anonymous_entries() {
        let smaps = "400000-800000 rwxp 00000000 00:00 0 \nAnonHugePages:      2048 kB\n\
                     800000-a00000 rw-p 00000000 00:00 0 \nAnonHugePages:      2048 kB\n\
                     a00000-c00000 r-xp 00000000 00:00 1 /lib/a.so\nAnonHugePages:      2048 kB\n";
        assert_eq!(exec_anon_huge(smaps), 2048);
    }

    #[test]
    fn clip_leaves_out_the_holes() {
        let holes = [(0x2000, 0x3000), (0x5000, 0x6000)];
        assert_eq!(
            clip(0x1000, 0x7000, &holes),
            vec![(0x1000, 0x2000), (0x3000, 0x5000), (0x6000, 0x7000)]
        );
        assert_eq!(clip(0x2000, 0x3000, &holes), vec![]);
    }

    #[test]
    fn file_pmd_mapped_sums_per_file() {
        let smaps = "400000-800000 r-xp 00000000 00:00 1 /lib/a.so\nFilePmdMapped:      2048 kB\n\
                     800000-a00000 r-xp 00400000 00:00 1 /lib/a.so\nFilePmdMapped:      2048 kB\n\
                     a00000-b00000 rw-p 00000000 00:00 0 \nFilePmdMapped:         0 kB\n";
        let m = file_pmd_mapped(smaps);
        assert_eq!(m.get("/lib/a.so"), Some(&4096));
        assert_eq!(m.len(), 1);
    }
}
