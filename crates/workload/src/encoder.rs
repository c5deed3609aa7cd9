//! A streaming video encoder reading its input through `mmap`, in the manner of SVT-AV1's
//! `SvtAv1EncApp` (the workload of seed `003`, "mm: support POSIX_FADV_NOREUSE": SVT-AV1
//! encoding the 4K Bosphorus clip from a RAM disk, with the app's input file mapped).
//!
//! The process maps its input file read-only and shared, its own executable text, and anonymous
//! buffers, initialises them, then runs `threads` worker threads. Every step `f` of the stream is
//! cut into `threads` horizontal segments, and a worker takes the next segment of the next step
//! from a queue shared by all workers, as SVT-AV1's processes take segments from their FIFOs
//! (the library starts tens of threads — the `SvtMalloc` report logged in
//! Patman86/SVT-AV1-Mods-by-Patman issue 16 counts 94 — so work is not tied to a CPU, and other
//! work on a CPU, such as kswapd, delays all workers a little rather than one share a lot). For segment `s` of step `f` the worker:
//!
//! 1. *input*: reads the segment of frame `f` from the mapping and writes it into picture slot
//!    `f % picture_slots` (the encoder's copy of the picture plus its analysis data);
//! 2. *analysis*: reads the picture that arrived `lookahead / 2` frames ago;
//! 3. *encoding*: the picture that arrived `lookahead` frames ago is encoded: its slot and the
//!    `references` most recent reconstructed pictures are read, its own reconstruction is
//!    written, the encoder state is read and written, and the code is executed;
//! 4. the segment's computation, `compute_per_frame / threads` of CPU time.
//!
//! After the last input frame the pictures still in the lookahead are encoded. Each worker
//! records when it found the queue empty; frames per second are the frames over the time until
//! the last worker finished. `noreuse` is the seed's patch to the app: `posix_fadvise(fd, 0, 0,
//! POSIX_FADV_NOREUSE)` on the input right after it is opened.
//!
//! Approximations: segments are taken in stream order without waiting for the ones they depend
//! on (a worker may start step `f + 1` while another still runs step `f`; SVT-AV1's pipeline
//! bounds that skew with its queues too); one worker per CPU, each pinned (the segment queue,
//! not migration, balances the load); every page of a segment is touched once per step; no
//! output file.

use mm::fadvise::advice;
use mm::{Access, Machine, MmapArgs, OpenFlags, Pid, Signal, Thread, map, prot};
use simcore::{Bytes, SimDuration, SimTime, VirtAddr};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The input file (at least `frames * frame_bytes` long) and the executable.
    pub input: String,
    pub code: String,
    pub frames: u64,
    /// One input picture (8-bit 4:2:0: 1.5 bytes per pixel).
    pub frame_bytes: Bytes,
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
    /// Memory per reconstructed picture.
    pub reference_bytes: Bytes,
    /// Encoder state touched every frame.
    pub state_bytes: Bytes,
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
    input: VirtAddr,
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
        if config.threads == 0 || config.picture_slots <= config.lookahead || config.frames == 0 {
            return Err(format!(
                "encoder: {} threads, {} picture slots for a lookahead of {}, {} frames: expected \
                 threads, more slots than the lookahead, and frames",
                config.threads, config.picture_slots, config.lookahead, config.frames
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

impl Config {
    /// The anonymous buffers: the picture pool, the reconstructed pictures (the references and
    /// the one being written), the state.
    fn anon_lens(&self) -> [Bytes; 3] {
        let anon = |b: Bytes, n: u64| Bytes::from_pages(pages(b) * n);
        [
            anon(self.picture_bytes, self.picture_slots),
            anon(self.reference_bytes, self.references + 1),
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
    let input = t.mmap(file_map(fd, c.frames * c.frame_bytes.as_u64(), prot::READ)).await?;
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
    sweep(t, references, 0, pages(c.reference_bytes) * (c.references + 1), Access::Write).await?;
    sweep(t, state, 0, pages(c.state_bytes), Access::Write).await?;
    sweep(t, code, 0, pages(c.code_bytes), Access::Exec).await?;
    Ok(Layout { input, code, pictures, references, state })
}

/// Thread `i`'s share `[first, first + n)` of a region of `total` pages.
fn share(total: u64, threads: u32, i: u32) -> (u64, u64) {
    let (t, i) = (u64::from(threads), u64::from(i));
    let first = total * i / t;
    (first, total * (i + 1) / t - first)
}

/// The workers' queue: the index of the next segment, `step * threads + segment`.
type Queue = Rc<Cell<u64>>;

/// Takes the next `(step, segment)` from the queue, or `None` when every step is taken.
fn next_segment(queue: &Queue, c: &Config) -> Option<(u64, u32)> {
    let n = queue.get();
    let per_step = u64::from(c.threads);
    if n >= (c.frames + c.lookahead) * per_step {
        return None;
    }
    queue.set(n + 1);
    Some((n / per_step, (n % per_step) as u32))
}

async fn encode(t: &Thread, c: &Config, l: Layout, queue: &Queue) -> Result<(), Signal> {
    let frame = pages(c.frame_bytes);
    let picture = pages(c.picture_bytes);
    let reference = pages(c.reference_bytes);
    let code = pages(c.code_bytes);
    let compute = c.compute_per_frame / u64::from(c.threads);
    let slot = |f: u64| (f % c.picture_slots) * picture;
    while let Some((f, i)) = next_segment(queue, c) {
        let (in_first, in_n) = share(frame, c.threads, i);
        let (pic_first, pic_n) = share(picture, c.threads, i);
        let (ref_first, ref_n) = share(reference, c.threads, i);
        let (st_first, st_n) = share(pages(c.state_bytes), c.threads, i);
        if f < c.frames {
            // The input picture: the app reads it from the mapping into a picture buffer.
            let frame_bytes = c.frame_bytes.as_u64();
            let first = f * frame_bytes / 4096 + in_first;
            sweep(t, l.input, first, in_n, Access::Read).await?;
            sweep(t, l.pictures, slot(f) + pic_first, pic_n, Access::Write).await?;
        }
        if let Some(a) = f.checked_sub(c.lookahead / 2).filter(|&a| a < c.frames) {
            sweep(t, l.pictures, slot(a) + pic_first, pic_n, Access::Read).await?;
        }
        let Some(e) = f.checked_sub(c.lookahead) else { continue };
        sweep(t, l.pictures, slot(e) + pic_first, pic_n, Access::Read).await?;
        for r in 1..=c.references.min(e) {
            let s = ((e - r) % (c.references + 1)) * reference;
            sweep(t, l.references, s + ref_first, ref_n, Access::Read).await?;
        }
        let s = (e % (c.references + 1)) * reference;
        sweep(t, l.references, s + ref_first, ref_n, Access::Write).await?;
        sweep(t, l.state, st_first, st_n, Access::Write).await?;
        sweep(t, l.code, 0, code, Access::Exec).await?;
        t.compute(compute).await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mm::{FileSpec, KernelVersion, MachineConfig, Profile};

    #[test]
    fn shares_cover_the_region() {
        let parts: Vec<(u64, u64)> = (0..3).map(|i| share(10, 3, i)).collect();
        assert_eq!(parts, [(0, 3), (3, 3), (6, 4)]);
    }

    /// Given two workers on two CPUs and a busy kernel-like thread sharing the second CPU, when
    /// they encode, then the workers share the lost CPU time through the segment queue: the run
    /// ends about half the busy time after the ideal, not the whole of it (as it would if each
    /// worker owned a fixed share of every frame).
    #[test]
    fn the_segment_queue_spreads_a_busy_cpu_over_the_workers() {
        let profile = Profile::named("tiny").unwrap().resized(Some(2), None).unwrap();
        let mut m = Machine::new(MachineConfig::new(profile, KernelVersion::new(6, 3))).unwrap();
        let frame = Bytes::from_pages(4);
        let c = Config {
            input: "/in".into(),
            code: "/code".into(),
            frames: 40,
            frame_bytes: frame,
            threads: 2,
            first_cpu: 0,
            lookahead: 4,
            picture_slots: 6,
            picture_bytes: frame,
            references: 1,
            reference_bytes: frame,
            state_bytes: frame,
            code_bytes: frame,
            compute_per_frame: SimDuration::from_ns(2_000_000),
            noreuse: false,
        };
        m.create_file(&c.input, &FileSpec::zeros(Bytes(c.frames * frame.as_u64()))).unwrap();
        m.create_file(&c.code, &FileSpec::zeros(frame)).unwrap();
        let e = Encoder::new(&mut m, c.clone()).unwrap();
        e.spawn_setup(&mut m).unwrap();
        m.run().unwrap();
        e.spawn_measured(&mut m).unwrap();
        let busy = SimDuration::from_ns(20_000_000);
        let hog = m.new_process("hog").unwrap();
        m.spawn_thread(hog, 1, "hog", move |t| async move { t.compute(busy).await }).unwrap();
        m.run().unwrap();
        let r = e.results();
        let elapsed = r.ends.iter().max().unwrap().since(r.start.unwrap());
        let ideal = c.compute_per_frame * c.frames / 2;
        assert!(elapsed > ideal + busy / 4, "{elapsed:?}");
        assert!(elapsed < ideal + busy * 3 / 4, "{elapsed:?} against {ideal:?} + {busy:?}");
    }

    #[test]
    fn the_queue_hands_out_every_segment_once_in_stream_order() {
        let c = Config {
            input: String::new(),
            code: String::new(),
            frames: 2,
            frame_bytes: Bytes::PAGE,
            threads: 2,
            first_cpu: 0,
            lookahead: 1,
            picture_slots: 2,
            picture_bytes: Bytes::PAGE,
            references: 0,
            reference_bytes: Bytes::PAGE,
            state_bytes: Bytes::PAGE,
            code_bytes: Bytes::PAGE,
            compute_per_frame: SimDuration::from_ns(1),
            noreuse: false,
        };
        let q = Queue::default();
        let got: Vec<(u64, u32)> = std::iter::from_fn(|| next_segment(&q, &c)).collect();
        assert_eq!(got, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]);
    }
}
