//! The contents of simulated memory and of backing stores.
//!
//! A frame's bytes are stored only when they are not all zero: either as explicit bytes (written
//! by `write_bytes`, a DMA, a `write()`), or as a *pattern* — 4 KiB generated from a 64-bit seed —
//! for pages read from a file whose contents are a pattern. A frame with no entry reads as zeros.
//! This keeps host memory proportional to the data a scenario actually uses, while every copy
//! (COW, page-cache read, writeback) moves real contents, so a lost write shows up as wrong bytes.

use simcore::Pfn;
use simcore::units::PAGE_SIZE;

const PAGE: usize = PAGE_SIZE as usize;

/// The contents of one non-zero page.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Content {
    Bytes(Box<[u8; PAGE]>),
    /// Deterministic bytes generated from the seed.
    Pattern(u64),
}

impl Content {
    fn byte(&self, off: usize) -> u8 {
        match self {
            Content::Bytes(b) => b[off],
            Content::Pattern(seed) => pattern_word(*seed, off / 8).to_le_bytes()[off % 8],
        }
    }

    fn materialize(&self) -> Box<[u8; PAGE]> {
        match self {
            Content::Bytes(b) => b.clone(),
            Content::Pattern(seed) => {
                let mut b = Box::new([0u8; PAGE]);
                for (i, chunk) in b.chunks_exact_mut(8).enumerate() {
                    chunk.copy_from_slice(&pattern_word(*seed, i).to_le_bytes());
                }
                b
            }
        }
    }

    /// Reads `out.len()` bytes at `off` of a page whose content is `content` (`None`: zeros).
    pub fn read(content: Option<&Content>, off: usize, out: &mut [u8]) {
        assert!(off + out.len() <= PAGE, "read across a page boundary");
        match content {
            None => out.fill(0),
            Some(Content::Bytes(b)) => out.copy_from_slice(&b[off..off + out.len()]),
            Some(c) => {
                for (i, o) in out.iter_mut().enumerate() {
                    *o = c.byte(off + i);
                }
            }
        }
    }

    /// Writes `data` at `off` into `slot`, turning it into explicit bytes.
    pub fn write(slot: &mut Option<Content>, off: usize, data: &[u8]) {
        assert!(off + data.len() <= PAGE, "write across a page boundary");
        let mut bytes = match slot.take() {
            None => Box::new([0u8; PAGE]),
            Some(Content::Bytes(b)) => b,
            Some(c) => c.materialize(),
        };
        bytes[off..off + data.len()].copy_from_slice(data);
        *slot = if bytes.iter().all(|&b| b == 0) { None } else { Some(Content::Bytes(bytes)) };
    }
}

/// Word `i` of the pattern `seed` (SplitMix64 of the pair).
fn pattern_word(seed: u64, i: usize) -> u64 {
    let mut z = seed.wrapping_add((i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Frames per [`Chunk`] of [`FrameContents`].
const CHUNK: u64 = 64;

/// The contents of `CHUNK` consecutive frames, and how many hold any.
#[derive(Debug)]
struct Chunk {
    slots: [Option<Content>; CHUNK as usize],
    used: u32,
}

/// Contents of physical frames, by pfn: a table of chunks of 64 frames, a chunk allocated while
/// one of its frames holds data, so a lookup or store is O(1) and host memory stays
/// proportional to the data held (plus a pointer per 64 frames up to the highest written).
#[derive(Debug, Default)]
pub struct FrameContents {
    chunks: Vec<Option<Box<Chunk>>>,
}

/// The chunk and slot of `pfn`.
fn locate(pfn: u64) -> (usize, usize) {
    let chunk = usize::try_from(pfn / CHUNK).expect("pfn fits the host");
    (chunk, (pfn % CHUNK) as usize)
}

impl FrameContents {
    pub fn get(&self, pfn: u64) -> Option<&Content> {
        let (c, i) = locate(pfn);
        self.chunks.get(c)?.as_ref()?.slots[i].as_ref()
    }

    /// Stores `content` (`None`: zeros) and returns what was there.
    fn replace(&mut self, pfn: u64, content: Option<Content>) -> Option<Content> {
        let (c, i) = locate(pfn);
        if content.is_none() && self.get(pfn).is_none() {
            return None;
        }
        if self.chunks.len() <= c {
            self.chunks.resize_with(c + 1, || None);
        }
        let chunk = self.chunks[c].get_or_insert_with(|| {
            Box::new(Chunk { slots: std::array::from_fn(|_| None), used: 0 })
        });
        let new = u32::from(content.is_some());
        let old = std::mem::replace(&mut chunk.slots[i], content);
        chunk.used = chunk.used + new - u32::from(old.is_some());
        if chunk.used == 0 {
            self.chunks[c] = None;
        }
        old
    }

    pub(crate) fn set(&mut self, pfn: u64, content: Option<Content>) {
        self.replace(pfn, content);
    }

    pub fn read(&self, pfn: u64, off: usize, out: &mut [u8]) {
        Content::read(self.get(pfn), off, out);
    }

    pub(crate) fn write(&mut self, pfn: u64, off: usize, data: &[u8]) {
        let mut slot = self.replace(pfn, None);
        Content::write(&mut slot, off, data);
        self.set(pfn, slot);
    }

    /// `copy_page`.
    pub(crate) fn copy(&mut self, src: u64, dst: u64) {
        let c = self.get(src).cloned();
        self.set(dst, c);
    }

    /// `clear_page`.
    pub(crate) fn zero(&mut self, pfn: u64) {
        self.set(pfn, None);
    }

    /// The frames holding data among `pages` frames from `pfn`, in pfn order, skipping empty
    /// chunks.
    fn written(&self, pfn: Pfn, pages: u64) -> impl Iterator<Item = (u64, &Content)> {
        let end = pfn.0 + pages;
        let chunks = (pfn.0 / CHUNK)..end.div_ceil(CHUNK);
        chunks
            .filter_map(|c| Some((c, self.chunks.get(usize::try_from(c).ok()?)?.as_ref()?)))
            .flat_map(move |(c, chunk)| {
                let pfns = (c * CHUNK..).zip(&chunk.slots);
                pfns.filter(move |&(p, _)| p >= pfn.0 && p < end)
                    .filter_map(|(p, s)| Some((p, s.as_ref()?)))
            })
    }

    /// Every frame holding data, in pfn order.
    fn all(&self) -> impl Iterator<Item = (u64, &Content)> {
        self.written(Pfn(0), self.chunks.len() as u64 * CHUNK)
    }

    /// `clear_huge_page`: zeroes `pages` frames from `pfn`, visiting only those holding data.
    pub(crate) fn zero_range(&mut self, pfn: Pfn, pages: u64) {
        let written: Vec<u64> = self.written(pfn, pages).map(|(p, _)| p).collect();
        for p in written {
            self.zero(p);
        }
    }

    /// `copy_user_huge_page`: copies `pages` frames from `src` to `dst`, visiting only those
    /// holding data on either side.
    pub(crate) fn copy_range(&mut self, src: Pfn, dst: Pfn, pages: u64) {
        self.zero_range(dst, pages);
        let written: Vec<(u64, Content)> =
            self.written(src, pages).map(|(p, c)| (p - src.0, c.clone())).collect();
        for (off, c) in written {
            self.set(dst.0 + off, Some(c));
        }
    }

    /// A checksum of the page's contents (KSM's `calc_checksum`): equal contents, equal sums.
    pub(crate) fn checksum(&self, pfn: u64) -> u64 {
        let mut d = simcore::Digest::new();
        match self.get(pfn) {
            None => d.write_u64(0),
            Some(c) => {
                let bytes = c.materialize();
                if bytes.iter().all(|&b| b == 0) {
                    d.write_u64(0);
                } else {
                    for chunk in bytes.chunks_exact(8) {
                        d.write_u64(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
                    }
                }
            }
        }
        d.value()
    }

    /// Whether two frames hold the same bytes (`pages_identical`).
    pub(crate) fn same(&self, a: u64, b: u64) -> bool {
        match (self.get(a), self.get(b)) {
            (None, None) => true,
            (Some(Content::Pattern(x)), Some(Content::Pattern(y))) if x == y => true,
            (x, y) => {
                let bytes = |c: Option<&Content>| {
                    c.map_or_else(|| Box::new([0u8; PAGE]), |c| c.materialize())
                };
                bytes(x) == bytes(y)
            }
        }
    }

    /// A fingerprint of every stored page.
    pub fn fingerprint(&self) -> u64 {
        let mut d = simcore::Digest::new();
        for (pfn, c) in self.all() {
            d.write_u64(pfn);
            match c {
                Content::Pattern(seed) => d.write_u64(*seed),
                Content::Bytes(b) => {
                    for chunk in b.chunks_exact(8) {
                        d.write_u64(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
                    }
                }
            }
        }
        d.value()
    }

    /// Host bytes spent on contents (approximate: payloads only).
    pub fn host_bytes(&self) -> usize {
        self.all()
            .map(|(_, c)| c)
            .map(|c| if matches!(c, Content::Bytes(_)) { PAGE + 48 } else { 56 })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_patterns_and_zeros() {
        let mut m = FrameContents::default();
        let mut buf = [1u8; 4];
        m.read(9, 100, &mut buf);
        assert_eq!(buf, [0; 4]);
        m.set(9, Some(Content::Pattern(42)));
        m.read(9, 100, &mut buf);
        let before = buf;
        assert_ne!(before, [0; 4]);
        m.write(9, 0, b"hi");
        m.read(9, 100, &mut buf);
        assert_eq!(buf, before, "materialising keeps the pattern");
        m.copy(9, 10);
        m.read(10, 0, &mut buf[..2]);
        assert_eq!(&buf[..2], b"hi");
        m.zero(9);
        assert!(m.get(9).is_none());
        m.write(11, 5, &[0, 0]);
        assert!(m.get(11).is_none(), "an all-zero page stores nothing");
    }
}
