//! The two programs of seed `001`'s cover letter ("hugetlb: Use new vma mutex for huge pmd
//! sharing synchronization", Mike Kravetz, 2022): (1) map a shared hugetlb area, write-fault
//! every page, unmap, in a loop ("faults per second": pages written per second); (2) map a
//! shared hugetlb area, write-fault a few pages, then fork in a loop, the child exiting at once
//! and the parent waiting for it ("forks per second"). The programs themselves were not
//! published; this is their description turned into code.
//!
//! Both map one hugetlbfs file with `mmap(NULL, ...)`. Where a mapping lands (Linux v6.1-rc7,
//! krr-io/linux-6.1.0 2a410d07e): x86-64 randomises each process's `mmap_base` by
//! `mmap_rnd_bits` (28 by default) bits of 4 KiB pages (`arch/x86/mm/mmap.c`, `arch_rnd`), and
//! `hugetlb_get_unmapped_area_topdown` (`arch/x86/mm/hugetlbpage.c`) searches down from it
//! asking only for huge-page alignment (`align_mask` of the 2 MiB size), so each process's
//! mapping sits at a random 2 MiB position modulo 1 GiB ([`Placement::Aslr`], drawn from the run
//! seed per process). `page_table_shareable` (`mm/hugetlb.c`) lets two processes share a PMD
//! table only when the file offset sits at the same place in the table in both (equal
//! `pmd_index`), one chance in 512 for two random positions; the seed's programs pass no address
//! hint and the cover letter says nothing of disabling ASLR, so this is the headline's placement.
//! [`Placement::PudAligned`] maps every process at the same 1 GiB-aligned address instead, where
//! every full GiB is shareable (a diagnostic). A process maps at the same address on every pass,
//! as a top-down search from a fixed `mmap_base` does.
//!
//! Where a fault program starts: [`Loops::spawn`] starts it at the first page of its first
//! pass, so instances started together run their passes in step; [`Loops::spread`] places each
//! at a page of its pass drawn uniformly from the run seed, its mapping written below that page,
//! as instances that have run for many passes would be found at a random instant (their munmaps
//! queue on the file's `i_mmap_rwsem` for write one behind another, which pulls instances that
//! ran in step apart), and [`Loops::resume`] starts them there.
//!
//! Counting: a page counts as written when its store completes inside the measurement window;
//! `minflt` counts the stores that faulted (the MMU found no usable entry), as the kernel's
//! per-task counter does for the program. Stores that hit the TLB or an existing (possibly
//! shared) table run synchronously through [`mm::Thread::access_run`]; only faults enter the
//! fault handler. A fork counts when the parent's wait for that child returns inside the window.
//!
//! The program's own image ([`Image`], optional): a dynamically linked program's executable,
//! `ld.so` and `libc.so.6`, each mapped as the loader leaves it (read-only, text, read-only
//! data, RELRO written then made read-only, writable data written), shared by every instance,
//! so that fork links and exit unlinks those VMAs under the three files' `i_mmap_rwsem`s.
//!
//! Where the child runs: on its parent's CPU (the parent sleeps in `wait` while the child runs;
//! with every CPU busy, as in the combined runs, that is where the fork balancer finds room).

use mm::{Access, Machine, MmapArgs, OpenFlags, Pid, Thread, map, prot};
use simcore::{Bytes, Prng, SimTime, VirtAddr};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// A huge page of the file (2 MiB).
pub const HUGE: Bytes = Bytes(2 << 20);
/// `PUD_SIZE`.
const PUD: u64 = 1 << 30;
/// The top of the area mappings are placed in (1 GiB aligned, below the stack).
const MAP_TOP: u64 = 0x7e00_0000_0000;
/// Stores made without blocking per run through the MMU.
const BATCH: usize = 64;

/// Where each process maps the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// A random 2 MiB position modulo 1 GiB per process (ASLR).
    Aslr,
    /// The same 1 GiB-aligned address in every process (PMD sharing wherever possible).
    PudAligned,
}

/// The measurement window in virtual time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    pub start: SimTime,
    pub end: SimTime,
}

impl Window {
    fn contains(&self, t: SimTime) -> bool {
        self.start <= t && t < self.end
    }

    /// The window's length in seconds.
    pub fn seconds(&self) -> f64 {
        self.end.since(self.start).as_ns() as f64 / 1e9
    }
}

/// What one instance counted inside the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Pages written (program 1) or forks completed (program 2).
    pub ops: u64,
    /// Stores that took a page fault.
    pub minflt: u64,
}

/// One program's configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// The hugetlbfs file both programs map.
    pub path: String,
    /// How much of the file each fault program maps, from offset 0.
    pub len: Bytes,
    /// How much of the file each fork program maps, from offset 0.
    pub fork_len: Bytes,
    /// Pages the fork program writes before its loop.
    pub touched_before_fork: u64,
    pub placement: Placement,
    pub window: Window,
    /// The files the fork program maps before its own mapping (none: only the hugetlb file).
    pub images: &'static [Image],
}

/// One segment of a program image as mapped: its first file page, its pages, and how the
/// loader left it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub first_page: u64,
    pub pages: u64,
    pub kind: SegmentKind,
}

/// How the loader leaves a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// `r--p` or `r-xp`, never written.
    ReadOnly,
    /// `r--p` after relocation: written (private copies), then `mprotect`ed read-only.
    Relro,
    /// `rw-p`, written.
    Data,
}

/// A file of a program image and its segments, in address order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Image {
    pub path: &'static str,
    pub segments: &'static [Segment],
}

const fn seg(first_page: u64, pages: u64, kind: SegmentKind) -> Segment {
    Segment { first_page, pages, kind }
}

/// `cat`'s image on the development machine (Debian 12, glibc 2.36, `/proc/self/maps`): the
/// executable, `libc.so.6` and `ld-linux-x86-64.so.2`, five mappings each, in 4 KiB pages.
pub const DYNAMIC_PROGRAM: [Image; 3] = {
    use SegmentKind::{Data, ReadOnly, Relro};
    [
        Image {
            path: "/usr/bin/forks",
            segments: &[
                seg(0, 2, ReadOnly),
                seg(2, 5, ReadOnly),
                seg(7, 3, ReadOnly),
                seg(9, 1, Relro),
                seg(10, 1, Data),
            ],
        },
        Image {
            path: "/usr/lib/x86_64-linux-gnu/libc.so.6",
            segments: &[
                seg(0, 38, ReadOnly),
                seg(38, 342, ReadOnly),
                seg(380, 83, ReadOnly),
                seg(463, 4, Relro),
                seg(467, 2, Data),
            ],
        },
        Image {
            path: "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2",
            segments: &[
                seg(0, 1, ReadOnly),
                seg(1, 38, ReadOnly),
                seg(39, 10, ReadOnly),
                seg(49, 2, Relro),
                seg(51, 2, Data),
            ],
        },
    ]
};

impl Image {
    /// The file's size: its last segment's end.
    pub fn size(&self) -> Bytes {
        let end = self.segments.iter().map(|s| s.first_page + s.pages).max().unwrap_or(0);
        Bytes(end * Bytes::PAGE.as_u64())
    }

    /// Maps every segment privately and touches each as the loader leaves it.
    async fn map(&self, t: &Thread) -> Result<(), String> {
        let fd = t.open(self.path, OpenFlags::RDONLY).await.map_err(|e| format!("{e:?}"))?;
        for s in self.segments {
            let writes = s.kind != SegmentKind::ReadOnly;
            let rw = if writes { prot::READ | prot::WRITE } else { prot::READ };
            let len = Bytes(s.pages * Bytes::PAGE.as_u64());
            let args = MmapArgs {
                addr: None,
                len,
                prot: rw,
                flags: map::PRIVATE,
                fd: Some(fd),
                offset: s.first_page * Bytes::PAGE.as_u64(),
            };
            let at = t.mmap(args).await.map_err(|e| format!("{}: {e:?}", self.path))?;
            let access = if writes { Access::Write } else { Access::Read };
            t.access_all(&[(at, access)]).await.map_err(|e| format!("{}: {e:?}", self.path))?;
            if s.kind == SegmentKind::Relro {
                t.mprotect(at, len, prot::READ).await.map_err(|e| format!("{e:?}"))?;
            }
        }
        Ok(())
    }
}

impl Config {
    fn validate(&self) -> Result<(), String> {
        for len in [self.len, self.fork_len] {
            if len < HUGE
                || !len.as_u64().is_multiple_of(HUGE.as_u64())
                || len.as_u64() > MAP_TOP / 4
            {
                return Err(format!(
                    "hugetlb loop: mapping of {len}: expected whole 2 MiB pages, at most {}",
                    Bytes(MAP_TOP / 4)
                ));
            }
        }
        if self.touched_before_fork > self.fork_len.as_u64() / HUGE.as_u64() {
            return Err(format!(
                "hugetlb loop: {} pages touched in a mapping of {}",
                self.touched_before_fork, self.fork_len
            ));
        }
        Ok(())
    }

    /// The address an instance mapping `len` maps at, drawn once per process.
    fn address(&self, len: Bytes, rng: &mut Prng) -> VirtAddr {
        let base = (MAP_TOP - len.as_u64().next_multiple_of(PUD) - PUD) & !(PUD - 1);
        let offset = match self.placement {
            Placement::Aslr => rng.below(PUD / HUGE.as_u64()) * HUGE.as_u64(),
            Placement::PudAligned => 0,
        };
        VirtAddr(base + offset)
    }

    fn args(&self, addr: VirtAddr, len: Bytes, fd: i32) -> MmapArgs {
        MmapArgs {
            addr: Some(addr),
            len,
            prot: prot::READ | prot::WRITE,
            flags: map::SHARED,
            fd: Some(fd),
            offset: 0,
        }
    }
}

/// Which program an instance runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    Faults,
    Forks,
    /// One pass of the fault program, whatever the window (puts the pages in the page cache).
    WarmUp,
}

/// Where a fault program stands when it resumes: its file, its mapping, and the first page of
/// the pass it is in.
#[derive(Clone, Copy, Debug)]
struct Resume {
    fd: i32,
    at: VirtAddr,
    page: u64,
}

/// A fault program placed inside its pass by [`Loops::spread`], to be started by
/// [`Loops::resume`].
#[derive(Debug)]
struct Placed {
    pid: Pid,
    cpu: u32,
    name: String,
    counts: Rc<RefCell<Counts>>,
    resume: Rc<Cell<Option<Resume>>>,
}

/// Instances of the two programs on a machine, with their counts.
#[derive(Debug)]
pub struct Loops {
    config: Rc<Config>,
    counts: Vec<(Program, Rc<RefCell<Counts>>)>,
    placed: Vec<Placed>,
}

impl Loops {
    pub fn new(config: Config) -> Result<Loops, String> {
        config.validate()?;
        Ok(Loops { config: Rc::new(config), counts: Vec::new(), placed: Vec::new() })
    }

    /// Sets the measurement window of the instances started from now on.
    pub fn set_window(&mut self, window: Window) {
        self.config = Rc::new(Config { window, ..(*self.config).clone() });
    }

    /// Places one fault program in a new process on CPU `cpu` at a page of its pass drawn
    /// uniformly (from the process's stream of `seed`, after its address): its thread maps the
    /// file and writes the pages before that one, then ends, leaving the process as a program
    /// that ran long would be at a random instant. [`Loops::resume`] starts it there.
    pub fn spread(&mut self, machine: &mut Machine, cpu: u32, seed: u64) -> Result<(), String> {
        let name = format!("{}-{}", program_name(Program::Faults), self.counts.len());
        let pid = machine.new_process(&name).map_err(|e| e.to_string())?;
        let mut rng = Prng::from_seed(seed).stream(&name);
        let addr = self.config.address(self.config.len, &mut rng);
        let page = rng.below(self.config.len.as_u64() / HUGE.as_u64());
        let counts = Rc::new(RefCell::new(Counts::default()));
        self.counts.push((Program::Faults, counts.clone()));
        let resume = Rc::new(Cell::new(None));
        let (config, slot) = (self.config.clone(), resume.clone());
        machine.spawn_thread(pid, cpu, &name, move |t| async move {
            if let Ok(r) = place(&t, &config, addr, page).await {
                slot.set(Some(r));
            }
        })?;
        self.placed.push(Placed { pid, cpu, name, counts, resume });
        Ok(())
    }

    /// Starts every program [`Loops::spread`] placed, each from where it stands; an error if
    /// one could not be placed.
    pub fn resume(&mut self, machine: &mut Machine) -> Result<(), String> {
        for p in std::mem::take(&mut self.placed) {
            let r = p.resume.get().ok_or_else(|| format!("{}: could not be placed", p.name))?;
            let (config, counts) = (self.config.clone(), p.counts);
            machine.spawn_thread(p.pid, p.cpu, &p.name, move |t| async move {
                let _ = fault_loop(&t, &config, r.at, &counts, u64::MAX, Some(r)).await;
            })?;
        }
        Ok(())
    }

    /// Starts one instance of `program` in a new process on CPU `cpu`; the process's mapping
    /// address is drawn from stream `name` of `seed`.
    pub fn spawn(
        &mut self,
        machine: &mut Machine,
        program: Program,
        cpu: u32,
        seed: u64,
    ) -> Result<(), String> {
        let name = format!("{}-{}", program_name(program), self.counts.len());
        let pid = machine.new_process(&name).map_err(|e| e.to_string())?;
        let len = if program == Program::Forks { self.config.fork_len } else { self.config.len };
        let addr = self.config.address(len, &mut Prng::from_seed(seed).stream(&name));
        let counts = Rc::new(RefCell::new(Counts::default()));
        self.counts.push((program, counts.clone()));
        let config = self.config.clone();
        let kernel = machine.kernel_rc();
        machine.spawn_thread(pid, cpu, &name, move |t| async move {
            let _ = match program {
                Program::Faults => fault_loop(&t, &config, addr, &counts, u64::MAX, None).await,
                Program::WarmUp => fault_loop(&t, &config, addr, &counts, 1, None).await,
                Program::Forks => fork_loop(&t, &config, addr, &counts, &kernel).await,
            };
        })?;
        Ok(())
    }

    /// Each instance of `program`'s counts, in start order.
    pub fn counts(&self, program: Program) -> Vec<Counts> {
        self.counts.iter().filter(|(p, _)| *p == program).map(|(_, c)| *c.borrow()).collect()
    }
}

fn program_name(p: Program) -> &'static str {
    match p {
        Program::Faults => "faults",
        Program::Forks => "forks",
        Program::WarmUp => "warm-up",
    }
}

/// Program 1 until the window ends (or `passes` passes): map, write every page, unmap; with
/// `resume`, the first pass continues in the mapping it names.
async fn fault_loop(
    t: &Thread,
    config: &Config,
    addr: VirtAddr,
    counts: &RefCell<Counts>,
    passes: u64,
    mut resume: Option<Resume>,
) -> Result<(), String> {
    let fd = match resume {
        Some(r) => r.fd,
        None => t.open(&config.path, OpenFlags::RDWR).await.map_err(|e| format!("{e:?}"))?,
    };
    let pages = config.len.as_u64() / HUGE.as_u64();
    let window = config.window;
    let going = |pass: u64, now: SimTime| pass < passes && (passes == 1 || now < window.end);
    for pass in 0.. {
        if !going(pass, t.now()) {
            break;
        }
        let (at, mut page) = match resume.take() {
            Some(r) => (r.at, r.page),
            None => {
                let args = config.args(addr, config.len, fd);
                (t.mmap(args).await.map_err(|e| format!("{e:?}"))?, 0)
            }
        };
        while page < pages && going(pass, t.now()) {
            page += write_pages(t, at, page, pages, window, counts).await?;
        }
        t.munmap(at, config.len).await.map_err(|e| format!("{e:?}"))?;
    }
    Ok(())
}

/// [`Loops::spread`]'s placing: opens and maps the file and writes its first `page` pages,
/// uncounted.
async fn place(t: &Thread, config: &Config, addr: VirtAddr, page: u64) -> Result<Resume, String> {
    let fd = t.open(&config.path, OpenFlags::RDWR).await.map_err(|e| format!("{e:?}"))?;
    let at = t.mmap(config.args(addr, config.len, fd)).await.map_err(|e| format!("{e:?}"))?;
    let never = Window { start: SimTime::ZERO, end: SimTime::ZERO };
    let uncounted = RefCell::new(Counts::default());
    let mut done = 0;
    while done < page {
        done += write_pages(t, at, done, page, never, &uncounted).await?;
    }
    Ok(Resume { fd, at, page })
}

/// Writes pages from `first` on: a run of stores that need no fault, then the one that does;
/// returns how many pages were written.
async fn write_pages(
    t: &Thread,
    at: VirtAddr,
    first: u64,
    pages: u64,
    window: Window,
    counts: &RefCell<Counts>,
) -> Result<u64, String> {
    let last = pages.min(first + BATCH as u64);
    let refs: Vec<(VirtAddr, Access)> =
        (first..last).map(|p| (at + Bytes(p * HUGE.as_u64()), Access::Write)).collect();
    let done = t.access_run(&refs);
    t.access_settle(done as u64).await;
    let mut written = done as u64;
    if let Some(&(a, access)) = refs.get(done) {
        t.access_fault(a, access).await.map_err(|s| format!("store at {a}: {s:?}"))?;
        written += 1;
        if window.contains(t.now()) {
            counts.borrow_mut().minflt += 1;
        }
    }
    if window.contains(t.now()) {
        counts.borrow_mut().ops += written;
    }
    Ok(written)
}

/// Program 2 until the window ends: map, write a few pages, then fork; the child exits at
/// once and the parent waits for it.
async fn fork_loop(
    t: &Thread,
    config: &Config,
    addr: VirtAddr,
    counts: &RefCell<Counts>,
    kernel: &Rc<mm::kernel::Kernel>,
) -> Result<(), String> {
    for image in config.images {
        image.map(t).await?;
    }
    let fd = t.open(&config.path, OpenFlags::RDWR).await.map_err(|e| format!("{e:?}"))?;
    let args = config.args(addr, config.fork_len, fd);
    let at = t.mmap(args).await.map_err(|e| format!("{e:?}"))?;
    for p in 0..config.touched_before_fork {
        let a = at + Bytes(p * HUGE.as_u64());
        t.access_all(&[(a, Access::Write)]).await.map_err(|s| format!("store at {a}: {s:?}"))?;
    }
    let cpu = t.cx().cpu().0;
    while t.now() < config.window.end {
        let child: Pid = t.fork().await.map_err(|e| format!("{e:?}"))?;
        let task =
            mm::spawn_user_thread(t.cx(), kernel, child, cpu, "forks-child", |c| async move {
                let _ = c.exit().await;
            })?;
        t.cx().join(task).await;
        t.wait(child).await.map_err(|e| format!("{e:?}"))?;
        if config.window.contains(t.now()) {
            counts.borrow_mut().ops += 1;
        }
    }
    Ok(())
}
