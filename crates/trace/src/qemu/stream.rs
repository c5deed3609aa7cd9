//! The recorder's side of the plugin's socket: the stream of block descriptors, block runs and
//! data accesses (`qemu/mmsim_plugin.c` gives its words) turned, as it arrives, into each
//! thread's binary trace ([`crate::binary`], zstd-compressed on a thread of its own), while qemu
//! runs on.
//!
//! A block run stands for the fetches of its instructions in the window; each fetch is written
//! just before the first data access of its instruction or of a later one in the block, and the
//! fetches left when the next block runs (or the stream ends) after everything else: the order
//! a callback before every instruction gives, so the trace is the one a per-instruction plugin
//! writes (an instruction qemu cut off at a page's end, which the plugin marks, has none). A
//! thread is the plugin's vCPU (qemu-user gives each guest thread its own; a thread that starts
//! after another has exited may take its number, and continues its trace).

use super::RecordError;
use crate::binary::BinaryWriter;
use crate::record::{MemRef, RefKind};
use simcore::VirtAddr;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;
use std::io::{Read, Write};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

const ADDR_BITS: u64 = 0xffff_ffff_ffff;
/// A chunk header's bit: block descriptors follow; a record's: a block run.
const TOP: u64 = 1 << 63;
/// A block run's bit: mask words follow.
const SOME_IN_WINDOW: u64 = 1 << 62;
/// With [`TOP`], instead of a block run: the last instruction of the block running did not run.
const LAST_NOT_RUN: u64 = 1 << 61;
/// The most instructions of a block (qemu 7.2's `TCG_MAX_INSNS`).
const MAX_INSNS: usize = 512;
/// The most words in a chunk the plugin sends (its descriptors wait for up to twice its buffer).
const MAX_CHUNK: usize = 1 << 24;

fn corrupt(what: &str) -> RecordError {
    RecordError::Failed(format!("the recorder's stream from the plugin: {what}"))
}

/// The blocks qemu translated: each one's instructions, as `address | length << 48` words.
#[derive(Debug, Default)]
struct Blocks {
    insns: Vec<u64>,
    /// Per descriptor id: where its instructions start in `insns`, and how many.
    starts: Vec<(usize, usize)>,
}

impl Blocks {
    fn add(&mut self, words: &[u64]) -> Result<(), RecordError> {
        let mut rest = words;
        while let Some((&head, tail)) = rest.split_first() {
            let (id, n) = ((head & 0xffff_ffff) as usize, (head >> 32) as usize);
            if id != self.starts.len() || n == 0 || n > MAX_INSNS || n > tail.len() {
                return Err(corrupt(&format!("descriptor {id} of {n} instructions")));
            }
            self.starts.push((self.insns.len(), n));
            self.insns.extend_from_slice(&tail[..n]);
            rest = &tail[n..];
        }
        Ok(())
    }
}

/// The block a thread is running: its instructions in [`Blocks::insns`], the next whose fetch
/// is not written yet, and which are in the window (all without a mask).
#[derive(Debug)]
struct Run {
    start: usize,
    n: usize,
    next: usize,
    mask: Option<[u64; MAX_INSNS / 64]>,
}

/// Pages in a region of [`Pages`]: 2^15 (128 MiB), a bit each.
const REGION_PAGES: u64 = 1 << 15;

/// The pages references touched: a bitmap per region, behind a direct-mapped filter of pages
/// seen lately (slot `page % 1024` holds `page + 1`), which most references pass.
#[derive(Debug)]
struct Pages {
    recent: Box<[u64; 1024]>,
    regions: BTreeMap<u64, Box<[u64; REGION_PAGES as usize / 64]>>,
}

impl Default for Pages {
    fn default() -> Pages {
        Pages { recent: Box::new([0; 1024]), regions: BTreeMap::new() }
    }
}

impl Pages {
    #[inline(always)]
    fn add(&mut self, addr: u64) {
        let page = addr >> 12;
        if self.recent[(page % 1024) as usize] != page + 1 {
            self.insert(page);
        }
    }

    #[cold]
    #[inline(never)]
    fn insert(&mut self, page: u64) {
        self.recent[(page % 1024) as usize] = page + 1;
        let bits = self
            .regions
            .entry(page / REGION_PAGES)
            .or_insert_with(|| Box::new([0; REGION_PAGES as usize / 64]));
        let bit = (page % REGION_PAGES) as usize;
        bits[bit / 64] |= 1 << (bit % 64);
    }

    /// The pages, in order.
    fn pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.regions.iter().flat_map(move |(&region, bits)| {
            bits.iter().enumerate().flat_map(move |(k, &w)| {
                (0..64)
                    .filter(move |b| w >> b & 1 == 1)
                    .map(move |b| region * REGION_PAGES + k as u64 * 64 + b)
            })
        })
    }
}

type Encoder = zstd::stream::write::Encoder<'static, Vec<u8>>;
/// A piece of a thread's binary trace, for the compressing thread: the thread's vCPU and bytes.
type Piece = (u64, Vec<u8>);

/// A thread's binary trace on its way to the compressing thread, in the writer's pieces (never
/// empty: an empty piece stands for a flush).
struct ToCompressor {
    vcpu: u64,
    tx: SyncSender<Piece>,
}

impl Write for ToCompressor {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let gone = |_| std::io::Error::other("the compressing thread stopped");
        self.tx.send((self.vcpu, buf.to_vec())).map_err(gone)?;
        Ok(buf.len())
    }

    /// An empty piece: the encoder flushes (ends its block) here, as it does when the writer
    /// writes straight into it.
    fn flush(&mut self) -> std::io::Result<()> {
        let gone = |_| std::io::Error::other("the compressing thread stopped");
        self.tx.send((self.vcpu, Vec::new())).map_err(gone)
    }
}

/// The compressing thread: each thread's pieces, in the order written, through its own zstd
/// encoder (the bytes a writer straight into the encoder gives); at the end, the compressed
/// traces by vCPU.
fn compress(rx: Receiver<Piece>, level: i32) -> std::io::Result<BTreeMap<u64, Vec<u8>>> {
    let mut encoders: BTreeMap<u64, Encoder> = BTreeMap::new();
    for (vcpu, piece) in rx {
        let encoder = match encoders.entry(vcpu) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(v) => v.insert(Encoder::new(Vec::new(), level)?),
        };
        if piece.is_empty() {
            encoder.flush()?;
        } else {
            encoder.write_all(&piece)?;
        }
    }
    encoders.into_iter().map(|(vcpu, e)| Ok((vcpu, e.finish()?))).collect()
}

#[inline(always)]
fn put(
    out: &mut BinaryWriter<ToCompressor>,
    kind: RefKind,
    addr: u64,
    size: u32,
) -> Result<(), RecordError> {
    out.write(MemRef { kind, addr: VirtAddr(addr), size: size.max(1) }).map_err(|e| io(&e))
}

/// One thread's trace being written.
struct Thread {
    out: BinaryWriter<ToCompressor>,
    run: Option<Run>,
}

fn io(e: &std::io::Error) -> RecordError {
    RecordError::Failed(format!("compressing a thread's trace: {e}"))
}

impl Thread {
    fn new(out: ToCompressor) -> Result<Thread, RecordError> {
        Ok(Thread { out: BinaryWriter::new(out).map_err(|e| io(&e))?, run: None })
    }

    /// Writes the running block's fetches up to instruction `end` (excluded).
    #[inline(always)]
    fn fetch_to(&mut self, insns: &[u64], end: usize) -> Result<(), RecordError> {
        let Some(run) = &mut self.run else { return Ok(()) };
        if run.next >= end {
            return Ok(());
        }
        let from = std::mem::replace(&mut run.next, end);
        for k in from..end {
            if run.mask.as_ref().is_none_or(|m| m[k / 64] >> (k % 64) & 1 == 1) {
                let w = insns[run.start + k];
                put(&mut self.out, RefKind::Instr, w & ADDR_BITS, (w >> 48 & 0xff) as u32)?;
            }
        }
        Ok(())
    }

    /// A data access: its instruction's fetch (and those before it) first.
    fn access(&mut self, insns: &[u64], pages: &mut Pages, w: u64) -> Result<(), RecordError> {
        let k = (w >> 52 & 0x3ff) as usize;
        match &self.run {
            Some(run) if k < run.n => {}
            _ => return Err(corrupt(&format!("an access of instruction {k} outside a block"))),
        }
        self.fetch_to(insns, k + 1)?;
        let kind = if w >> 51 & 1 == 1 { RefKind::Store } else { RefKind::Load };
        pages.add(w & ADDR_BITS);
        put(&mut self.out, kind, w & ADDR_BITS, (1u32 << (w >> 48 & 7)) & 0xff)
    }

    /// A block run starting at `words[0]`; returns the words it took. Every instruction of a
    /// block starts in its first one's page (qemu ends a block of several instructions before
    /// one that would leave it), which its fetches touch.
    fn block(
        &mut self,
        blocks: &Blocks,
        pages: &mut Pages,
        words: &[u64],
    ) -> Result<usize, RecordError> {
        self.end_block(&blocks.insns)?;
        let id = (words[0] & 0xffff_ffff) as usize;
        let &(start, n) =
            blocks.starts.get(id).ok_or_else(|| corrupt(&format!("block {id} never described")))?;
        pages.add(blocks.insns[start] & ADDR_BITS);
        let mut run = Run { start, n, next: 0, mask: None };
        if words[0] & SOME_IN_WINDOW == 0 {
            self.run = Some(run);
            return Ok(1);
        }
        let m = n.div_ceil(64);
        let given = words.get(1..=m).ok_or_else(|| corrupt(&format!("block {id}'s mask cut")))?;
        let mut mask = [0; MAX_INSNS / 64];
        mask[..m].copy_from_slice(given);
        run.mask = Some(mask);
        self.run = Some(run);
        Ok(1 + m)
    }

    fn end_block(&mut self, insns: &[u64]) -> Result<(), RecordError> {
        if let Some(n) = self.run.as_ref().map(|r| r.n) {
            self.fetch_to(insns, n)?;
        }
        self.run = None;
        Ok(())
    }

    /// The running block's last instruction did not run: it has no fetch.
    fn cut_last(&mut self) -> Result<(), RecordError> {
        match &mut self.run {
            Some(run) if run.next < run.n => {
                run.n -= 1;
                Ok(())
            }
            _ => Err(corrupt("a cut instruction outside a block, or fetched")),
        }
    }

    fn records(
        &mut self,
        blocks: &Blocks,
        pages: &mut Pages,
        words: &[u64],
    ) -> Result<(), RecordError> {
        let mut i = 0;
        while i < words.len() {
            if words[i] & (TOP | LAST_NOT_RUN) == TOP | LAST_NOT_RUN {
                self.cut_last()?;
                i += 1;
            } else if words[i] & TOP != 0 {
                i += self.block(blocks, pages, &words[i..])?;
            } else {
                self.access(&blocks.insns, pages, words[i])?;
                i += 1;
            }
        }
        Ok(())
    }
}

/// The stream being converted: the blocks described so far, the threads' traces, and the
/// compressing thread they feed (which runs beside this one: the conversion takes two host
/// threads, qemu-user a third).
pub(super) struct Converter {
    blocks: Blocks,
    threads: BTreeMap<u64, Thread>,
    /// The pages every thread's references touched.
    pages: Pages,
    tx: SyncSender<Piece>,
    compressor: std::thread::JoinHandle<std::io::Result<BTreeMap<u64, Vec<u8>>>>,
}

/// What the stream gave: each thread's compressed trace and references (in vCPU order, threads
/// without any left out), and every page the references touched.
#[derive(Debug)]
pub(super) struct Converted {
    pub(super) sections: Vec<(Vec<u8>, u64)>,
    pub(super) pages: Vec<u64>,
}

impl Converter {
    pub(super) fn new(level: i32) -> Converter {
        let (tx, rx) = sync_channel(256);
        let compressor = std::thread::spawn(move || compress(rx, level));
        let (blocks, threads, pages) = (Blocks::default(), BTreeMap::new(), Pages::default());
        Converter { blocks, threads, pages, tx, compressor }
    }

    /// Reads `input` to its end.
    pub(super) fn read_all(&mut self, mut input: impl Read) -> Result<(), RecordError> {
        let (mut bytes, mut words) = (Vec::new(), Vec::new());
        let read = |e: std::io::Error| corrupt(&format!("reading: {e}"));
        loop {
            let mut head = [0u8; 8];
            match input.read_exact(&mut head) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(read(e)),
            }
            let head = u64::from_le_bytes(head);
            let n = (head & 0xffff_ffff) as usize;
            if n > MAX_CHUNK {
                return Err(corrupt(&format!("a chunk of {n} words")));
            }
            if bytes.len() < n * 8 {
                bytes.resize(n * 8, 0);
            }
            let bytes = &mut bytes[..n * 8];
            input.read_exact(bytes).map_err(read)?;
            words.clear();
            words.extend(bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().unwrap())));
            if head & TOP != 0 {
                self.blocks.add(&words)?;
                continue;
            }
            let vcpu = head >> 32 & 0xffff;
            let thread = match self.threads.entry(vcpu) {
                Entry::Occupied(t) => t.into_mut(),
                Entry::Vacant(v) => {
                    v.insert(Thread::new(ToCompressor { vcpu, tx: self.tx.clone() })?)
                }
            };
            thread.records(&self.blocks, &mut self.pages, &words)?;
        }
    }

    /// Ends every thread's trace.
    pub(super) fn finish(self) -> Result<Converted, RecordError> {
        let mut refs = BTreeMap::new();
        for (vcpu, mut t) in self.threads {
            t.end_block(&self.blocks.insns)?;
            refs.insert(vcpu, t.out.finish().map_err(|e| io(&e))?.1);
        }
        drop(self.tx);
        let mut compressed = match self.compressor.join() {
            Ok(done) => done.map_err(|e| io(&e))?,
            Err(_) => return Err(io(&std::io::Error::other("the compressing thread panicked"))),
        };
        let sections = refs
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(vcpu, n)| (compressed.remove(&vcpu).unwrap_or_default(), n))
            .collect();
        Ok(Converted { sections, pages: self.pages.pages().collect() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(head: u64, words: &[u64]) -> Vec<u8> {
        let mut out = (head | words.len() as u64).to_le_bytes().to_vec();
        out.extend(words.iter().flat_map(|w| w.to_le_bytes()));
        out
    }

    fn decode(section: &[u8]) -> Vec<MemRef> {
        let plain = zstd::decode_all(section).unwrap();
        let mut r = crate::binary::BinaryReader::new(&plain[8..], "t");
        std::iter::from_fn(|| r.next_ref().unwrap()).collect()
    }

    /// Given a block of three instructions whose second loads and third stores, the trace has
    /// each fetch before its instruction's accesses; a block with a mask fetches only the
    /// instructions in the window (and the plugin sends only their accesses).
    #[test]
    fn fetches_interleave_with_accesses_as_per_instruction() {
        let insn = |a: u64, len: u64| a | len << 48;
        let mut stream = chunk(TOP, &[3 << 32, insn(0x1000, 2), insn(0x1002, 3), insn(0x1005, 4)]);
        let load = 0x8000 | 3 << 48 | 1 << 52;
        let store = 0x9000 | 2 << 48 | 1 << 51 | 2 << 52;
        stream.extend(chunk(2 << 32, &[TOP, load, store, TOP, TOP | SOME_IN_WINDOW, 0b101]));
        let mut c = Converter::new(3);
        c.read_all(&stream[..]).unwrap();
        let out = c.finish().unwrap();
        let r = |kind, addr, size| MemRef { kind, addr: VirtAddr(addr), size };
        let (i, l, s) = (RefKind::Instr, RefKind::Load, RefKind::Store);
        let expected = [
            r(i, 0x1000, 2),
            r(i, 0x1002, 3),
            r(l, 0x8000, 8),
            r(i, 0x1005, 4),
            r(s, 0x9000, 4),
            r(i, 0x1000, 2),
            r(i, 0x1002, 3),
            r(i, 0x1005, 4),
            r(i, 0x1000, 2),
            r(i, 0x1005, 4),
        ];
        assert_eq!(out.sections.len(), 1);
        assert_eq!(decode(&out.sections[0].0), expected);
        assert_eq!(out.pages, [1, 8, 9]);
    }

    /// Given a block whose last instruction qemu cut off at a page's end, when the stream says
    /// so, then that instruction has no fetch (the next block fetches it whole).
    #[test]
    fn a_cut_instruction_is_not_fetched() {
        let insn = |a: u64, len: u64| a | len << 48;
        let mut stream = chunk(TOP, &[2 << 32, insn(0x1ff8, 4), insn(0x1ffc, 3)]);
        stream.extend(chunk(TOP, &[1 | 1 << 32, insn(0x1ffc, 6)]));
        stream.extend(chunk(0, &[TOP, TOP | LAST_NOT_RUN, TOP | 1]));
        let mut c = Converter::new(3);
        c.read_all(&stream[..]).unwrap();
        let out = c.finish().unwrap();
        let got: Vec<(u64, u32)> =
            decode(&out.sections[0].0).iter().map(|r| (r.addr.0, r.size)).collect();
        assert_eq!(got, [(0x1ff8, 4), (0x1ffc, 6)]);
    }

    #[test]
    fn a_corrupt_stream_is_refused() {
        let bad = [
            chunk(0, &[0x1000]),                      // an access before any block
            chunk(0, &[TOP]),                         // a block never described
            chunk(TOP, &[1 << 32]),                   // a descriptor cut short
            chunk(TOP, &[5 | 1 << 32, 0x1000]),       // ids out of order
            chunk(0, &[TOP | LAST_NOT_RUN]),          // a cut outside a block
            (TOP | (1 << 30)).to_le_bytes().to_vec(), // a chunk beyond the limit
        ];
        for b in bad {
            let mut c = Converter::new(1);
            let e = c.read_all(&b[..]).unwrap_err();
            assert!(e.to_string().contains("plugin"), "{e}");
        }
    }
}
