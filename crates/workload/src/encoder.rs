//! A streaming video encoder reading its input through `mmap`, in the manner of SVT-AV1's
//! `SvtAv1EncApp` (the workload of seed `003`, "mm: support POSIX_FADV_NOREUSE": SVT-AV1
//! encoding the 4K Bosphorus clip from a RAM disk, with the app's input file mapped).
//!
//! The input is a YUV4MPEG2 stream: a stream header, then per frame a `FRAME` line and the
//! three planes of an 8-bit 4:2:0 picture (luma, then the two chroma planes of a quarter of
//! its size each). The app reads it as its mmap reader does (`Source/App/app_process_cmd.c`,
//! `mmap_read_input_frames`, `svt_mmap`, `release_memory_mapped_file`): for every frame it maps
//! each plane on its own, `mmap(PROT_READ, MAP_PRIVATE)` at the plane's file offset rounded
//! down to a page, hands the picture to the library (`svt_av1_enc_send_picture`, which copies
//! it into one of the library's input pictures), and unmaps the three planes at once — three
//! `mmap`/`munmap` pairs per frame. The process also maps its own executable text and
//! anonymous buffers, initialises them, then runs `threads` worker threads.
//!
//! Every step `f` of the stream is one *input* job (the app's send of frame `f`) followed by
//! `threads` horizontal segments, and a worker takes the next job of the next step from a
//! queue shared by all workers, as SVT-AV1's processes take segments from their FIFOs (the
//! library starts tens of threads — the `SvtMalloc` report logged in
//! Patman86/SVT-AV1-Mods-by-Patman issue 16 counts 94 — so work is not tied to a CPU, and other
//! work on a CPU, such as kswapd, delays all workers a little rather than one share a lot).
//!
//! 1. *input*: maps frame `f`'s planes, copies them into picture slot `f % picture_slots` and
//!    unmaps them;
//! 2. for segment `s`, *analysis*: writes the segment's share of picture slot `f` (the
//!    picture's analysis data) and reads the picture that arrived `lookahead / 2` frames ago;
//! 3. *encoding*: the picture that arrived `lookahead` frames ago is encoded: its slot and the
//!    `references` most recent reconstructed pictures are read, its own reconstruction is
//!    written (into a pool of `reference_slots`), a part of the encoder state is read and
//!    written (all of it every `state_cycle` frames), and the code is executed;
//! 4. the segment's computation, `compute_per_frame / threads` of CPU time.
//!
//! After the last input frame the pictures still in the lookahead are encoded. Each worker
//! records when it found the queue empty; frames per second are the frames over the time until
//! the last worker finished. `noreuse` is the seed's patch to the app: `posix_fadvise(fd, 0, 0,
//! POSIX_FADV_NOREUSE)` on the input right after it is opened.
//!
//! Approximations: jobs are taken in stream order without waiting for the ones they depend on
//! (a worker may start step `f + 1` while another still runs step `f`; SVT-AV1's pipeline
//! bounds that skew with its queues too, and the app's sends block on the library's pool of
//! input pictures, which the queue's stream order stands for); the app's sends run on
//! whichever worker takes them, where SvtAv1EncApp runs them on its main thread (the same
//! process and mm, so the same shootdowns and `mmap_lock`); one worker per CPU, each pinned (the
//! queue, not migration, balances the load); every page of a segment is touched once per step;
//! no output file.

use mm::fadvise::advice;
use mm::{Access, Machine, MmapArgs, OpenFlags, Pid, Signal, Thread, map, prot};
use simcore::{Bytes, SimDuration, SimTime, VirtAddr};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The input stream (at least [`Config::input_bytes`] long) and the executable.
    pub input: String,
    pub code: String,
    pub frames: u64,
    /// The luma plane of one input picture (one byte per pixel); each chroma plane is a quarter
    /// of it (8-bit 4:2:0).
    pub luma_bytes: Bytes,
    /// The YUV4MPEG2 stream header before the first frame.
    pub stream_header: Bytes,
    pub threads: u32,
    pub first_cpu: u32,
    /// Frames between a picture's arrival and its encoding.
    pub lookahead: u64,
    /// Picture buffers in the pool (more than `lookahead`).
    pub picture_slots: u64,
    /// The encoder's memory per picture slot.
    pub picture_bytes: Bytes,
    /// Reference pictures read per encoded frame.
    pub references: u64,
    /// Reconstructed pictures in the pool (more than `references`): frame `e`'s
    /// reconstruction is written to slot `e % reference_slots`, so a slot waits that many frames
    /// between writes.
    pub reference_slots: u64,
    /// Memory per reconstructed picture.
    pub reference_bytes: Bytes,
    /// Encoder state beside the pools.
    pub state_bytes: Bytes,
    /// Frames over which the whole state is touched once: encoded frame `e` touches the
    /// `e % state_cycle`-th of `state_cycle` equal parts (1: all of it every frame).
    pub state_cycle: u64,
    /// Executable text touched every frame.
    pub code_bytes: Bytes,
    /// CPU time of encoding one frame, all threads together.
    pub compute_per_frame: SimDuration,
    /// Advise `POSIX_FADV_NOREUSE` on the input.
    pub noreuse: bool,
}

/// The encoder's mappings.
#[derive(Clone, Copy, Debug, Default)]
struct Layout {
    input_fd: i32,
    code: VirtAddr,
    pictures: VirtAddr,
    references: VirtAddr,
    state: VirtAddr,
}

/// What a run measured.
#[derive(Clone, Debug, Default)]
pub struct Results {
    pub start: Option<SimTime>,
    /// When each thread finished.
    pub ends: Vec<SimTime>,
    /// Threads that stopped on a signal.
    pub failed: u32,
}

impl Results {
    /// Encoded frames per second of virtual time.
    pub fn fps(&self, frames: u64) -> f64 {
        let (Some(start), Some(end)) = (self.start, self.ends.iter().max()) else { return 0.0 };
        frames as f64 * 1e9 / end.since(start).as_ns().max(1) as f64
    }
}

/// An encoder installed on a machine.
#[derive(Debug)]
pub struct Encoder {
    config: Config,
    pid: Pid,
    layout: Rc<RefCell<Option<Layout>>>,
    results: Rc<RefCell<Results>>,
}

/// Touches pages `[first, first + n)` of the region at `base` through the MMU's batch path,
/// faulting where needed.
async fn sweep(
    t: &Thread,
    base: VirtAddr,
    first: u64,
    n: u64,
    access: Access,
) -> Result<(), Signal> {
    let refs: Vec<(VirtAddr, Access)> =
        (first..first + n).map(|p| (base + Bytes::from_pages(p), access)).collect();
    t.access_all(&refs).await
}

impl Encoder {
    pub fn new(machine: &mut Machine, config: Config) -> Result<Encoder, String> {
        if config.threads == 0
            || config.picture_slots <= config.lookahead
            || config.reference_slots <= config.references
            || config.frames == 0
            || config.state_cycle == 0
        {
            return Err(format!(
                "encoder: {} threads, {} picture slots for a lookahead of {}, {} reconstructed \
                 pictures for {} references, {} frames, a state cycle of {} frames: expected \
                 threads, more slots than the lookahead, more reconstructed pictures than \
                 references, frames and a cycle of at least one frame",
                config.threads,
                config.picture_slots,
                config.lookahead,
                config.reference_slots,
                config.references,
                config.frames,
                config.state_cycle
            ));
        }
        if config.luma_bytes.as_u64() < 4 || config.picture_bytes < config.frame_bytes() {
            return Err(format!(
                "encoder: a luma plane of {} and pictures of {}: expected a plane of at least 4 \
                 bytes and pictures that hold a frame of {}",
                config.luma_bytes,
                config.picture_bytes,
                config.frame_bytes()
            ));
        }
        let pid = machine.new_process("SvtAv1EncApp").map_err(|e| e.to_string())?;
        Ok(Encoder { config, pid, layout: Rc::default(), results: Rc::default() })
    }

    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Phase one: open and map the input and the code, allocate and initialise the buffers.
    pub fn spawn_setup(&self, machine: &mut Machine) -> Result<(), String> {
        let c = self.config.clone();
        let slot = self.layout.clone();
        machine.spawn_thread(self.pid, c.first_cpu, "SvtAv1EncApp", move |t| async move {
            if let Ok(layout) = setup(&t, &c).await {
                *slot.borrow_mut() = Some(layout);
            }
        })?;
        Ok(())
    }

    /// Phase two: the encoding threads, taking segments from one queue.
    pub fn spawn_measured(&self, machine: &mut Machine) -> Result<(), String> {
        let layout = (*self.layout.borrow()).ok_or("encoder: the setup did not finish")?;
        let queue = Rc::new(Cell::new(0));
        for i in 0..self.config.threads {
            let c = self.config.clone();
            let results = self.results.clone();
            let queue = queue.clone();
            let cpu = c.first_cpu + i;
            machine.spawn_thread(self.pid, cpu, "svt-enc", move |t| async move {
                {
                    let mut r = results.borrow_mut();
                    let now = t.now();
                    r.start = Some(r.start.map_or(now, |s| s.min(now)));
                }
                let ok = encode(&t, &c, layout, &queue).await.is_ok();
                let mut r = results.borrow_mut();
                r.ends.push(t.now());
                if !ok {
                    r.failed += 1;
                }
            })?;
        }
        Ok(())
    }

    pub fn results(&self) -> Results {
        self.results.borrow().clone()
    }
}

fn pages(b: Bytes) -> u64 {
    b.as_u64().div_ceil(4096)
}

/// The `FRAME` line before every picture of a YUV4MPEG2 stream.
const FRAME_LINE: u64 = 6;

impl Config {
    /// One input picture: the luma plane and two chroma planes.
    pub fn frame_bytes(&self) -> Bytes {
        Bytes(self.luma_bytes.as_u64() + 2 * (self.luma_bytes.as_u64() / 4))
    }

    /// The input stream's length: the header, and every frame with its `FRAME` line.
    pub fn input_bytes(&self) -> Bytes {
        Bytes(
            self.stream_header.as_u64() + self.frames * (FRAME_LINE + self.frame_bytes().as_u64()),
        )
    }

    /// Frame `f`'s planes as `(file offset, length)`: luma, then the two chroma planes.
    fn planes(&self, f: u64) -> [(u64, u64); 3] {
        let (luma, chroma) = (self.luma_bytes.as_u64(), self.luma_bytes.as_u64() / 4);
        let y = self.stream_header.as_u64()
            + f * (FRAME_LINE + self.frame_bytes().as_u64())
            + FRAME_LINE;
        [(y, luma), (y + luma, chroma), (y + luma + chroma, chroma)]
    }

    /// The anonymous buffers: the picture pool, the reconstructed pictures (the references and
    /// the one being written), the state.
    fn anon_lens(&self) -> [Bytes; 3] {
        let anon = |b: Bytes, n: u64| Bytes::from_pages(pages(b) * n);
        [
            anon(self.picture_bytes, self.picture_slots),
            anon(self.reference_bytes, self.reference_slots),
            anon(self.state_bytes, 1),
        ]
    }

    /// The encoder's resident footprint once set up: its anonymous buffers and its code, all of
    /// which it writes or executes before encoding (the input stream not included).
    pub fn resident_bytes(&self) -> Bytes {
        let anon: u64 = self.anon_lens().iter().map(|b| b.as_u64()).sum();
        Bytes(anon + Bytes::from_pages(pages(self.code_bytes)).as_u64())
    }
}

async fn setup(t: &Thread, c: &Config) -> Result<Layout, mm::SysError> {
    let fd = t.open(&c.input, OpenFlags::RDONLY).await?;
    if c.noreuse {
        t.fadvise(fd, 0, 0, advice::NOREUSE).await?;
    }
    let file_map = |fd, len: u64, p| MmapArgs {
        addr: None,
        len: Bytes(len.div_ceil(4096) * 4096),
        prot: p,
        flags: map::SHARED,
        fd: Some(fd),
        offset: 0,
    };
    let code_fd = t.open(&c.code, OpenFlags::RDONLY).await?;
    let code = t
        .mmap(MmapArgs {
            flags: map::PRIVATE,
            ..file_map(code_fd, c.code_bytes.as_u64(), prot::READ | prot::EXEC)
        })
        .await?;
    let rw = prot::READ | prot::WRITE;
    let [pictures_len, references_len, state_len] = c.anon_lens();
    let pictures = t.mmap_anon(pictures_len, rw).await?;
    let references = t.mmap_anon(references_len, rw).await?;
    let state = t.mmap_anon(state_len, rw).await?;
    sweep(t, pictures, 0, pages(c.picture_bytes) * c.picture_slots, Access::Write).await?;
    sweep(t, references, 0, pages(c.reference_bytes) * c.reference_slots, Access::Write).await?;
    sweep(t, state, 0, pages(c.state_bytes), Access::Write).await?;
    sweep(t, code, 0, pages(c.code_bytes), Access::Exec).await?;
    Ok(Layout { input_fd: fd, code, pictures, references, state })
}

/// Thread `i`'s share `[first, first + n)` of a region of `total` pages.
fn share(total: u64, threads: u32, i: u32) -> (u64, u64) {
    let (t, i) = (u64::from(threads), u64::from(i));
    let first = total * i / t;
    (first, total * (i + 1) / t - first)
}

/// The workers' queue: the index of the next job, `step * (threads + 1) + job`.
type Queue = Rc<Cell<u64>>;

/// A job of the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Job {
    /// The app's send of frame `f` (the step's first job).
    Input(u64),
    /// Segment `i` of step `f`.
    Segment(u64, u32),
}

/// Takes the next job from the queue, or `None` when every step is taken. Steps after the last
/// frame have no input to send.
fn next_job(queue: &Queue, c: &Config) -> Option<Job> {
    let per_step = u64::from(c.threads) + 1;
    loop {
        let n = queue.get();
        if n >= (c.frames + c.lookahead) * per_step {
            return None;
        }
        queue.set(n + 1);
        let (f, j) = (n / per_step, n % per_step);
        match j {
            0 if f < c.frames => return Some(Job::Input(f)),
            0 => continue,
            _ => return Some(Job::Segment(f, (j - 1) as u32)),
        }
    }
}

async fn encode(t: &Thread, c: &Config, l: Layout, queue: &Queue) -> Result<(), mm::SysError> {
    while let Some(job) = next_job(queue, c) {
        match job {
            Job::Input(f) => send_picture(t, c, l, f).await?,
            Job::Segment(f, i) => segment(t, c, l, f, i).await?,
        }
    }
    Ok(())
}

/// The app's send of frame `f`: each plane mapped privately at its offset rounded down to a
/// page (`svt_mmap`), the planes copied into the library's input picture
/// (`svt_av1_enc_send_picture`), the three unmapped (`release_memory_mapped_file`).
async fn send_picture(t: &Thread, c: &Config, l: Layout, f: u64) -> Result<(), mm::SysError> {
    let mut maps = Vec::with_capacity(3);
    for (offset, len) in c.planes(f) {
        let align = offset % 4096;
        let len = Bytes((len + align).div_ceil(4096) * 4096);
        let args = MmapArgs {
            addr: None,
            len,
            prot: prot::READ,
            flags: map::PRIVATE,
            fd: Some(l.input_fd),
            offset: offset - align,
        };
        maps.push((t.mmap(args).await?, len));
    }
    let slot = (f % c.picture_slots) * pages(c.picture_bytes);
    let mut copied = 0;
    for &(base, len) in &maps {
        let n = pages(len);
        sweep(t, base, 0, n, Access::Read).await?;
        let into = n.min(pages(c.picture_bytes) - copied);
        sweep(t, l.pictures, slot + copied, into, Access::Write).await?;
        copied += into;
    }
    for (base, len) in maps {
        t.munmap(base, len).await?;
    }
    Ok(())
}

/// Segment `i` of step `f`: the analysis of the picture that arrived and the one that arrived
/// `lookahead / 2` frames ago, then the encoding of the one that arrived `lookahead` ago.
async fn segment(t: &Thread, c: &Config, l: Layout, f: u64, i: u32) -> Result<(), Signal> {
    let picture = pages(c.picture_bytes);
    let reference = pages(c.reference_bytes);
    let slot = |f: u64| (f % c.picture_slots) * picture;
    let (pic_first, pic_n) = share(picture, c.threads, i);
    let (ref_first, ref_n) = share(reference, c.threads, i);
    let part = pages(c.state_bytes).div_ceil(c.state_cycle);
    if f < c.frames {
        sweep(t, l.pictures, slot(f) + pic_first, pic_n, Access::Write).await?;
    }
    if let Some(a) = f.checked_sub(c.lookahead / 2).filter(|&a| a < c.frames) {
        sweep(t, l.pictures, slot(a) + pic_first, pic_n, Access::Read).await?;
    }
    let Some(e) = f.checked_sub(c.lookahead) else { return Ok(()) };
    sweep(t, l.pictures, slot(e) + pic_first, pic_n, Access::Read).await?;
    for r in 1..=c.references.min(e) {
        let s = ((e - r) % c.reference_slots) * reference;
        sweep(t, l.references, s + ref_first, ref_n, Access::Read).await?;
    }
    let s = (e % c.reference_slots) * reference;
    sweep(t, l.references, s + ref_first, ref_n, Access::Write).await?;
    let (st_first, st_n) = share(part, c.threads, i);
    let st_base = (e % c.state_cycle) * part;
    let st_n = st_n.min(pages(c.state_bytes).saturating_sub(st_base + st_first));
    sweep(t, l.state, st_base + st_first, st_n, Access::Write).await?;
    sweep(t, l.code, 0, pages(c.code_bytes), Access::Exec).await?;
    t.compute(c.compute_per_frame / u64::from(c.threads)).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mm::vmstat::VmStat;
    use mm::{FileSpec, KernelVersion, MachineConfig, Profile};

    #[test]
    fn shares_cover_the_region() {
        let parts: Vec<(u64, u64)> = (0..3).map(|i| share(10, 3, i)).collect();
        assert_eq!(parts, [(0, 3), (3, 3), (6, 4)]);
    }

    /// Given two workers on two CPUs encoding 40 small frames, when the encode ends, then every
    /// frame's planes were mapped and unmapped again: of the file pages only the code's are
    /// still mapped, and every input page was read into the page cache once.
    #[test]
    fn the_app_maps_each_frame_and_unmaps_it_after_sending() {
        let profile = Profile::named("tiny").unwrap().resized(Some(2), None).unwrap();
        let mut m = Machine::new(MachineConfig::new(profile, KernelVersion::new(6, 3))).unwrap();
        let frame = Bytes::from_pages(4);
        let c = Config {
            input: "/in".into(),
            code: "/code".into(),
            frames: 40,
            luma_bytes: frame,
            stream_header: Bytes(60),
            threads: 2,
            first_cpu: 0,
            lookahead: 4,
            picture_slots: 6,
            picture_bytes: Bytes::from_pages(6),
            references: 1,
            reference_slots: 2,
            reference_bytes: frame,
            state_bytes: frame,
            state_cycle: 1,
            code_bytes: frame,
            compute_per_frame: SimDuration::from_ns(2_000_000),
            noreuse: false,
        };
        m.create_file(&c.input, &FileSpec::zeros(c.input_bytes())).unwrap();
        m.create_file(&c.code, &FileSpec::zeros(frame)).unwrap();
        let e = Encoder::new(&mut m, c.clone()).unwrap();
        e.spawn_setup(&mut m).unwrap();
        m.run().unwrap();
        let before = m.vmstat();
        e.spawn_measured(&mut m).unwrap();
        m.run().unwrap();
        let r = e.results();
        assert_eq!((r.failed, r.ends.len()), (0, 2));
        let after = m.vmstat();
        assert_eq!(after.get(VmStat::NrMapped), pages(c.code_bytes));
        let input_pages = pages(c.input_bytes());
        // `pgpgin` counts KiB.
        let read_kib = after.get(VmStat::Pgpgin) - before.get(VmStat::Pgpgin);
        assert_eq!(read_kib / 4, input_pages);
    }

    #[test]
    fn the_queue_hands_out_every_job_once_in_stream_order() {
        let c = Config {
            input: String::new(),
            code: String::new(),
            frames: 2,
            luma_bytes: Bytes::PAGE,
            stream_header: Bytes(0),
            threads: 2,
            first_cpu: 0,
            lookahead: 1,
            picture_slots: 2,
            picture_bytes: Bytes::from_pages(2),
            references: 0,
            reference_slots: 1,
            reference_bytes: Bytes::PAGE,
            state_bytes: Bytes::PAGE,
            state_cycle: 1,
            code_bytes: Bytes::PAGE,
            compute_per_frame: SimDuration::from_ns(1),
            noreuse: false,
        };
        let q = Queue::default();
        let got: Vec<Job> = std::iter::from_fn(|| next_job(&q, &c)).collect();
        use Job::{Input, Segment};
        let want = [
            Input(0),
            Segment(0, 0),
            Segment(0, 1),
            Input(1),
            Segment(1, 0),
            Segment(1, 1),
            Segment(2, 0),
            Segment(2, 1),
        ];
        assert_eq!(got, want);
    }
}
