//! Replaying a trace inside a simulated process.
//!
//! The process's address space is built from a maps description: each file mapping becomes a
//! file of the simulated file system (as large as its furthest mapping) mapped with `MAP_FIXED`
//! at its address, offset and permissions; anonymous ones (heap, stack, nameless, `[vdso]`)
//! become anonymous mappings. Mappings above the user address space (`[vsyscall]`) are left out.
//! One thread on CPU 0 then reads the trace in batches and runs each batch through the MMU
//! synchronously (`Thread::access_run`: TLB hits and walks, no blocking); only an access that
//! must fault enters the async fault handler (`Thread::access_fault`). A refused access
//! (SIGSEGV) is counted, as outside every mapping or as a protection fault, and the replay goes
//! on. The batch's virtual time is charged once per batch.
//!
//! With [`TextThp::Collapse`] the executable file mappings are collapsed with `MADV_COLLAPSE`
//! (khugepaged's `collapse_file`, `mm/khugepaged.c`) before the first reference: every 2 MiB-aligned
//! range inside such a mapping at a file offset of the same colour becomes a page-cache THP mapped
//! by one PMD, so 4 KiB and 2 MiB text can be compared on one trace. The collapse makes no
//! reference and no fault, so the TLB and fault counters measure the trace alone; its time (the
//! reads of the text) is in the run's virtual time.
//!
//! At the end the TLBs must agree with the page tables (`KState::check_tlb`) and the
//! whole-system checkers must hold.

use crate::InputError;
use crate::footprint::Collapsible;
use crate::input::TraceReader;
use crate::maps::Mapping;
use crate::rebase::Relocation;
use crate::record::{MemRef, RefKind};
use mm::arch::tlb::TlbEvent;
use mm::{
    FileSpec, KernelVersion, Machine, MachineConfig, MmapArgs, OpenFlags, Pid, Profile, Thread,
    map, prot,
};
use serde::Serialize;
use simcore::{Bytes, CounterKey, VirtAddr};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

/// References read per batch.
const BATCH: usize = 4096;

/// Everything a replay reports.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ReplayReport {
    pub trace: String,
    pub format: String,
    pub profile: String,
    /// The core whose TLB geometry was simulated.
    pub tlb: String,
    /// Trace records replayed, by kind.
    pub references: u64,
    pub instructions: u64,
    pub loads: u64,
    pub stores: u64,
    pub modifies: u64,
    /// Malformed lines skipped (`--skip-bad`).
    pub skipped_lines: u64,
    /// Accesses refused because no mapping covers them.
    pub outside_mappings: u64,
    /// Accesses refused by a mapping's permissions.
    pub protection_faults: u64,
    /// Mappings of the description left out (above the user address space).
    pub mappings_left_out: u64,
    /// What backs the executable file mappings (`off` or `collapse`).
    pub text_thp: String,
    /// Text THPs mapped by PMDs during the replay (`thp_file_mapped`).
    pub text_thps_mapped: u64,
    /// `perf`-style TLB counters (CPU 0).
    pub counters: BTreeMap<String, u64>,
    /// The same counters when [`ReplayOptions::mark`] references had replayed.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub counters_at_mark: BTreeMap<String, u64>,
    /// `pgfault` and `pgmajfault` during the replay.
    pub page_faults: u64,
    pub major_faults: u64,
    pub virtual_time_ns: u64,
}

impl ReplayReport {
    pub fn counter(&self, e: TlbEvent) -> u64 {
        self.counters.get(e.name()).copied().unwrap_or(0)
    }
}

/// What backs the executable file mappings of a replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TextThp {
    /// 4 KiB page-cache pages, as faulted.
    Off,
    /// 2 MiB page-cache THPs, collapsed with `MADV_COLLAPSE` before the first reference.
    Collapse,
}

impl TextThp {
    pub fn name(self) -> &'static str {
        match self {
            TextThp::Off => "off",
            TextThp::Collapse => "collapse",
        }
    }

    /// The value named `s`, or an error naming the values.
    pub fn parse(s: &str) -> Result<TextThp, String> {
        [TextThp::Off, TextThp::Collapse]
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| format!("expected off or collapse, found `{s}`"))
    }
}

/// How to replay.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    pub profile: Profile,
    /// `Collapse` backs executable file mappings with 2 MiB page-cache THPs where alignment
    /// allows.
    pub text_thp: TextThp,
    /// Check the TLBs against the page tables after every batch (slow).
    pub check_every_batch: bool,
    /// The events budget: a replay that takes more scheduling events is refused.
    pub max_events: u64,
    /// Snapshot the TLB counters once this many references have replayed (at a batch boundary,
    /// a multiple of 4096), into [`ReplayReport::counters_at_mark`]: a benchmark's untimed
    /// warm-up is then told from its timed part.
    pub mark: Option<u64>,
    /// Run at the mark, on the host, between two batches (a benchmark starts its timer there:
    /// the run loop's progress calls can come many batches late, as a task carries on).
    pub at_mark: Option<fn()>,
}

impl ReplayOptions {
    /// A replay on `profile` with the default events budget and no checks between batches.
    pub fn new(profile: Profile, text_thp: TextThp) -> ReplayOptions {
        ReplayOptions {
            profile,
            text_thp,
            check_every_batch: false,
            max_events: engine::DEFAULT_EVENT_BUDGET,
            mark: None,
            at_mark: None,
        }
    }
}

/// Why a replay stopped.
#[derive(Debug)]
pub enum ReplayError {
    /// Bad trace or maps input (exit 2).
    Input(InputError),
    /// The simulation could not run or an invariant broke.
    Sim(String),
    /// The replay outgrew the events budget (exit 2).
    Refused(String),
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Input(e) => e.fmt(f),
            ReplayError::Sim(e) | ReplayError::Refused(e) => f.write_str(e),
        }
    }
}

fn mapping_prot(m: &Mapping) -> u32 {
    let mut p = 0;
    for (on, bit) in [(m.read, prot::READ), (m.write, prot::WRITE), (m.exec, prot::EXEC)] {
        if on {
            p |= bit;
        }
    }
    p
}

/// Whether `addr` lies in one of `maps` (sorted, disjoint).
fn covered(maps: &[(u64, u64)], addr: VirtAddr) -> bool {
    let i = maps.partition_point(|&(_, end)| end <= addr.0);
    maps.get(i).is_some_and(|&(start, _)| start <= addr.0)
}

/// Replays `trace` in a process laid out as `maps` (named `maps_file` in messages); `progress`
/// is called after every simulation step with the references replayed so far.
pub fn replay(
    trace: TraceReader,
    trace_name: &str,
    maps: &[Mapping],
    maps_file: &str,
    options: &ReplayOptions,
    progress: &mut dyn FnMut(u64, &TraceReader),
) -> Result<ReplayReport, ReplayError> {
    let sim = |e: String| ReplayError::Sim(e);
    let top = mm::pgtable::TASK_SIZE;
    let kept: Vec<Mapping> = maps.iter().filter(|m| m.end <= top).cloned().collect();
    let (mut machine, pid) = build_machine(&kept, options)?;
    let report = Rc::new(RefCell::new(ReplayReport {
        trace: trace_name.to_string(),
        format: trace.format.name().to_string(),
        profile: options.profile.name.to_string(),
        tlb: options.profile.tlb.core.to_string(),
        mappings_left_out: (maps.len() - kept.len()) as u64,
        text_thp: options.text_thp.name().to_string(),
        ..ReplayReport::default()
    }));
    let failure: Rc<RefCell<Option<ReplayError>>> = Rc::new(RefCell::new(None));
    let done = Rc::new(Cell::new(0u64));
    let trace = Rc::new(RefCell::new(trace));
    let run = Run {
        report: report.clone(),
        trace: trace.clone(),
        done: done.clone(),
        ranges: kept.iter().map(|m| (m.start, m.end)).collect(),
        check: options.check_every_batch,
        remaining: Cell::new(u64::MAX),
        fetch: FetchStream::new(options.profile.tlb.fetch_bytes),
        mark: options.mark,
        at_mark: options.at_mark,
        relocation: Relocation::default(),
        misses_inside: None,
    };
    let (f, maps_file, text_thp) = (failure.clone(), maps_file.to_string(), options.text_thp);
    machine
        .spawn_thread(pid, 0, "replay", move |t| async move {
            let result = match map_all(&t, &kept, &maps_file).await {
                Ok(()) => {
                    if text_thp == TextThp::Collapse {
                        collapse_text(&t, &kept).await;
                    }
                    run.batches(&t).await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = result {
                *f.borrow_mut() = Some(e);
            }
        })
        .map_err(sim)?;
    let before = machine.vmstat();
    let run = machine.run_observed(&mut |_| {
        progress(done.get(), &trace.borrow());
        Ok(())
    });
    run.map_err(|e| crate::stopped(&e, ReplayError::Refused, ReplayError::Sim))?;
    if let Some(e) = failure.borrow_mut().take() {
        return Err(e);
    }
    let mut rep = report.borrow().clone();
    rep.skipped_lines = trace.borrow().skipped();
    finish(&machine, &before, rep)
}

/// The machine of a replay, with the files its mappings name (each as large as its furthest
/// mapping) and the process that replays.
fn build_machine(kept: &[Mapping], options: &ReplayOptions) -> Result<(Machine, Pid), ReplayError> {
    let sim = |e: String| ReplayError::Sim(e);
    let mut config = MachineConfig::new(options.profile.clone(), KernelVersion::DEFAULT);
    config.max_events = options.max_events;
    let mut machine = Machine::new(config).map_err(sim)?;
    let mut sizes: BTreeMap<&str, u64> = BTreeMap::new();
    for m in kept {
        if let Some(f) = &m.file {
            let end = m.offset + (m.end - m.start);
            let e = sizes.entry(f.as_str()).or_default();
            *e = (*e).max(end);
        }
    }
    for (path, size) in &sizes {
        machine
            .create_file(path, &FileSpec::zeros(Bytes(*size)))
            .map_err(|e| sim(format!("creating {path}: {e:?}")))?;
    }
    let pid = machine.new_process("replay").map_err(|e| sim(format!("{e:?}")))?;
    Ok((machine, pid))
}

/// Maps every mapping of the description at its address, as the traced process had it.
async fn map_all(t: &Thread, kept: &[Mapping], maps_file: &str) -> Result<(), ReplayError> {
    for m in kept {
        let fd = match &m.file {
            Some(path) => {
                let flags = if m.shared && m.write { OpenFlags::RDWR } else { OpenFlags::RDONLY };
                Some(t.open(path, flags).await.expect("the file was created"))
            }
            None => None,
        };
        let sharing = if m.shared { map::SHARED } else { map::PRIVATE };
        let args = MmapArgs {
            addr: Some(VirtAddr(m.start)),
            len: Bytes(m.end - m.start),
            prot: mapping_prot(m),
            flags: map::FIXED | sharing | if fd.is_none() { map::ANONYMOUS } else { 0 },
            fd,
            offset: if fd.is_some() { m.offset } else { 0 },
        };
        let mapped = t.mmap(args).await;
        if let Some(fd) = fd {
            t.close(fd).await.expect("opened above");
        }
        if let Err(e) = mapped {
            return Err(ReplayError::Input(InputError {
                file: maps_file.to_string(),
                line: Some(m.line),
                message: format!("the simulated mmap refuses this mapping: {e:?}"),
            }));
        }
    }
    Ok(())
}

/// `MADV_COLLAPSE` over every executable file mapping: the ranges that cannot be collapsed
/// (misaligned, too small) stay in 4 KiB pages, which the report's `text_thps_mapped` shows.
async fn collapse_text(t: &Thread, kept: &[Mapping]) {
    for m in kept.iter().filter(|m| m.exec && m.file.is_some()) {
        let len = Bytes(m.end - m.start);
        let _ = t.madvise(VirtAddr(m.start), len, mm::madv::COLLAPSE).await;
    }
}

/// What the replaying thread shares with the caller.
pub(crate) struct Run {
    pub report: Rc<RefCell<ReplayReport>>,
    pub trace: Rc<RefCell<TraceReader>>,
    /// References replayed so far.
    pub done: Rc<Cell<u64>>,
    /// The mappings' ranges, to tell a protection fault from an access outside them.
    pub ranges: Vec<(u64, u64)>,
    pub check: bool,
    /// References still to replay at most (the rest of the trace is left unread).
    pub remaining: Cell<u64>,
    /// The thread's instruction fetch stream.
    pub fetch: FetchStream,
    /// When to snapshot the counters ([`ReplayOptions::mark`]), and what to run then.
    pub mark: Option<u64>,
    pub at_mark: Option<fn()>,
    /// Where moved libraries' references go ([`crate::rebase`]).
    pub relocation: Relocation,
    /// Counts the iTLB misses of fetches inside these 2 MiB ranges on this thread's CPU.
    pub misses_inside: Option<(Rc<Collapsible>, Rc<Cell<u64>>)>,
}

/// One thread's instruction fetch as the front end makes it (`TlbGeometry::fetch_bytes`): the
/// first-level iTLB is looked up once per aligned fetch block, so a run of sequential
/// instructions in one block makes one lookup; a taken branch (an instruction that does not
/// follow the previous one) starts a new fetch even inside the same block. Without fetch blocks,
/// every instruction looks up the pages it spans.
#[derive(Debug)]
pub(crate) struct FetchStream {
    /// log2 of the fetch block's bytes; `None`: one lookup per instruction.
    shift: Option<u32>,
    /// Where the stream continues (the end of the last instruction) and the last block fetched.
    next: Cell<u64>,
    block: Cell<u64>,
}

impl FetchStream {
    pub(crate) fn new(fetch_bytes: u32) -> FetchStream {
        let shift = (fetch_bytes != 0).then(|| fetch_bytes.trailing_zeros());
        FetchStream { shift, next: Cell::new(u64::MAX), block: Cell::new(0) }
    }

    /// The iTLB lookups of instruction `x`: one per fetch block it needs that the stream has not
    /// fetched yet, each at an address of that block.
    fn lookups(&self, x: MemRef, out: &mut Vec<(VirtAddr, mm::Access)>) {
        let Some(shift) = self.shift else { return x.lookups(out) };
        let start = x.addr.0;
        let end = start.saturating_add(u64::from(x.size.max(1)));
        let (first, last) = (start >> shift, (end - 1) >> shift);
        let from = if start == self.next.get() && first <= self.block.get() {
            self.block.get() + 1
        } else {
            first
        };
        for b in from..=last {
            out.push((VirtAddr((b << shift).max(start)), mm::Access::Exec));
        }
        self.next.set(end);
        self.block.set(last);
    }
}

impl Run {
    /// Reads and replays the trace batch by batch.
    pub(crate) async fn batches(&self, t: &Thread) -> Result<(), ReplayError> {
        let mut refs = Vec::with_capacity(BATCH * 2);
        loop {
            refs.clear();
            let (n, finished) = self.read_batch(&mut refs).map_err(ReplayError::Input)?;
            self.run_batch(t, &refs).await;
            self.done.set(self.done.get() + n);
            if self.mark == Some(self.done.get()) {
                let st = t.cx().kernel().state();
                let counters = st.tlb.stats(t.cx().cpu().0 as usize).iter();
                self.report.borrow_mut().counters_at_mark =
                    counters.map(|(k, v)| (k.to_string(), v)).collect();
                if let Some(hook) = self.at_mark {
                    hook();
                }
            }
            if self.check {
                t.cx().kernel().state().check_tlb(true).map_err(ReplayError::Sim)?;
            }
            if finished {
                return Ok(());
            }
        }
    }

    /// Reads up to [`BATCH`] references into `refs` (their page lookups), counting them by
    /// kind: how many were read, and whether the trace ended.
    fn read_batch(
        &self,
        refs: &mut Vec<(VirtAddr, mm::Access)>,
    ) -> Result<(u64, bool), InputError> {
        let mut reader = self.trace.borrow_mut();
        let mut rep = self.report.borrow_mut();
        let mut n = 0u64;
        let mut finished = false;
        let most = (BATCH as u64).min(self.remaining.get());
        while n < most {
            let Some(mut x) = reader.next_ref()? else {
                finished = true;
                break;
            };
            x.addr = self.relocation.apply(x.addr);
            match x.kind {
                RefKind::Instr => rep.instructions += 1,
                RefKind::Load => rep.loads += 1,
                RefKind::Store => rep.stores += 1,
                RefKind::Modify => rep.modifies += 1,
            }
            if x.kind == RefKind::Instr {
                self.fetch.lookups(x, refs);
            } else {
                x.lookups(refs);
            }
            n += 1;
        }
        rep.references += n;
        self.remaining.set(self.remaining.get() - n);
        Ok((n, finished || self.remaining.get() == 0))
    }

    /// Runs one batch through the MMU: runs of translated accesses without blocking, each one
    /// that must fault through the fault handler; a refused one is counted. With
    /// [`Run::misses_inside`] the runs are cut where a fetch enters or leaves the ranges and
    /// this CPU's iTLB misses are read around each piece (data references go with the piece they
    /// fall in: they make no iTLB lookups); the time is charged at the same points either way.
    async fn run_batch(&self, t: &Thread, refs: &[(VirtAddr, mm::Access)]) {
        let (mut i, mut pending, mut unsettled) = (0, 0u64, false);
        while i < refs.len() {
            let (end, inside) = self.piece(refs, i);
            let before = self.itlb_misses(t);
            let ok = t.access_run(&refs[i..end]);
            (pending, unsettled, i) = (pending + ok as u64, true, i + ok);
            self.tally(inside, t, before);
            if i == end {
                continue;
            }
            t.access_settle(pending).await;
            (pending, unsettled) = (0, false);
            let (addr, access) = refs[i];
            let before = self.itlb_misses(t);
            let refused = t.access_fault(addr, access).await.is_err();
            self.tally(inside, t, before);
            if refused {
                let mut rep = self.report.borrow_mut();
                if covered(&self.ranges, addr) {
                    rep.protection_faults += 1;
                } else {
                    rep.outside_mappings += 1;
                }
            }
            i += 1;
        }
        if unsettled {
            t.access_settle(pending).await;
        }
    }

    /// Where the piece starting at `i` ends, and whether its fetches lie inside the ranges of
    /// [`Run::misses_inside`] (without them: the whole batch, outside).
    fn piece(&self, refs: &[(VirtAddr, mm::Access)], i: usize) -> (usize, bool) {
        let Some((ranges, _)) = &self.misses_inside else { return (refs.len(), false) };
        let exec = |r: &&(VirtAddr, mm::Access)| r.1 == mm::Access::Exec;
        let inside = refs[i..].iter().find(exec).is_some_and(|r| ranges.contains(r.0.0));
        let len = refs[i..]
            .iter()
            .position(|r| exec(&r) && ranges.contains(r.0.0) != inside)
            .unwrap_or(refs.len() - i);
        (i + len, inside)
    }

    /// This CPU's first-level iTLB misses so far (only read with [`Run::misses_inside`]).
    fn itlb_misses(&self, t: &Thread) -> u64 {
        if self.misses_inside.is_none() {
            return 0;
        }
        let st = t.cx().kernel().state();
        st.tlb.stats(t.cx().cpu().0 as usize).get(TlbEvent::ItlbLoadMisses)
    }

    /// Adds the misses since `before` to the tally when the piece lies inside the ranges.
    fn tally(&self, inside: bool, t: &Thread, before: u64) {
        if let Some((_, tally)) = self.misses_inside.as_ref().filter(|_| inside) {
            tally.set(tally.get() + self.itlb_misses(t) - before);
        }
    }
}

/// Checks the end state and completes the report with the counters and vmstat deltas.
fn finish(
    machine: &Machine,
    before: &mm::vmstat::VmStats,
    mut rep: ReplayReport,
) -> Result<ReplayReport, ReplayError> {
    let sim = |e: String| ReplayError::Sim(e);
    let st = machine.kernel().state();
    st.check_tlb(true).map_err(|e| sim(format!("TLB checker: {e}")))?;
    drop(st);
    machine.check().map_err(|e| sim(format!("checker: {e}")))?;
    let after = machine.vmstat();
    let st = machine.kernel().state();
    rep.counters = st.tlb.stats(0).iter().map(|(k, v)| (k.to_string(), v)).collect();
    let pgfault = mm::vmstat::vmstat_key("pgfault").expect("a vmstat key");
    let pgmajfault = mm::vmstat::vmstat_key("pgmajfault").expect("a vmstat key");
    let thp_mapped = mm::vmstat::VmStat::ThpFileMapped;
    rep.page_faults = after.get(pgfault) - before.get(pgfault);
    rep.major_faults = after.get(pgmajfault) - before.get(pgmajfault);
    rep.text_thps_mapped = after.get(thp_mapped) - before.get(thp_mapped);
    rep.virtual_time_ns = machine.handle().now().since(simcore::SimTime::ZERO).as_ns();
    Ok(rep)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_finds_the_mapping() {
        let maps = [(0x1000, 0x3000), (0x8000, 0x9000)];
        assert!(covered(&maps, VirtAddr(0x1000)) && covered(&maps, VirtAddr(0x2fff)));
        assert!(!covered(&maps, VirtAddr(0x3000)) && !covered(&maps, VirtAddr(0)));
        assert!(covered(&maps, VirtAddr(0x8800)) && !covered(&maps, VirtAddr(0x9000)));
    }

    fn fetches(stream: &FetchStream, instrs: &[(u64, u32)]) -> Vec<u64> {
        let mut out = Vec::new();
        for &(addr, size) in instrs {
            let x = MemRef { kind: RefKind::Instr, addr: VirtAddr(addr), size };
            stream.lookups(x, &mut out);
        }
        out.iter().map(|(va, _)| va.0).collect()
    }

    #[test]
    fn one_itlb_lookup_per_fetch_block() {
        // Four sequential 4-byte instructions in one 16-byte block, then the next block.
        let s = FetchStream::new(16);
        let seq = [(0x1000, 4), (0x1004, 4), (0x1008, 4), (0x100c, 4), (0x1010, 4)];
        assert_eq!(fetches(&s, &seq), [0x1000, 0x1010]);
        // A taken branch back into the same block starts a new fetch.
        assert_eq!(fetches(&s, &[(0x1010, 4)]), [0x1010]);
        // An instruction spanning two blocks fetches both; its successor continues the second,
        // and the one crossing the page needs the next page's block too.
        let span = [(0x1ffa, 8), (0x2002, 4), (0x2006, 4)];
        assert_eq!(fetches(&FetchStream::new(16), &span), [0x1ffa, 0x2000]);
    }

    #[test]
    fn without_fetch_blocks_every_instruction_looks_up() {
        let s = FetchStream::new(0);
        let seq = [(0x1000, 4), (0x1004, 4), (0x1ffe, 4)];
        assert_eq!(fetches(&s, &seq), [0x1000, 0x1004, 0x1ffe, 0x2000]);
    }
}
