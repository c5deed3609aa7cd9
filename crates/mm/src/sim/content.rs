//! The contents of simulated memory and of backing stores.
//!
//! A frame's bytes are stored only when they are not all zero: either as explicit bytes (written
//! by `write_bytes`, a DMA, a `write()`), or as a *pattern* — 4 KiB generated from a 64-bit seed —
//! for pages read from a file whose contents are a pattern. A frame with no entry reads as zeros.
//! This keeps host memory proportional to the data a scenario actually uses, while every copy
//! (COW, page-cache read, writeback) moves real contents, so a lost write shows up as wrong bytes.
//!
//! Cost: clearing a frame (every free) descends the region map once and allocates nothing when
//! the frame holds no data (before: a lookup, then an insertion path); on a page-cache replay
//! `FrameContents::replace` was 3-4 % of the host time (P6, pure and mglru).

use simcore::Pfn;
use simcore::units::PAGE_SIZE;
use std::collections::BTreeMap;

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

/// Frames per [`Chunk`].
const CHUNK: u64 = 64;
/// Chunks per [`Region`] (32768 frames, 128 MiB).
const REGION: u64 = 512;

/// The contents of `CHUNK` consecutive frames, and how many hold any.
#[derive(Debug)]
struct Chunk {
    slots: [Option<Content>; CHUNK as usize],
    used: u32,
}

/// The chunks of `REGION * CHUNK` consecutive frames, and how many are allocated.
#[derive(Debug)]
struct Region {
    chunks: [Option<Box<Chunk>>; REGION as usize],
    used: u32,
}

/// Contents of physical frames, by pfn: regions of 128 MiB by number, each a table of chunks of
/// 64 frames, a chunk or region allocated while one of its frames holds data. A lookup or store
/// is a search among the few regions in use and two indexings; host memory stays proportional
/// to the data held, wherever it lies (a hugetlb page at the top of a large machine).
#[derive(Debug, Default)]
pub struct FrameContents {
    regions: BTreeMap<u64, Box<Region>>,
}

/// The region, chunk and slot of `pfn`.
fn locate(pfn: u64) -> (u64, usize, usize) {
    let chunk = pfn / CHUNK;
    (chunk / REGION, (chunk % REGION) as usize, (pfn % CHUNK) as usize)
}

impl FrameContents {
    pub fn get(&self, pfn: u64) -> Option<&Content> {
        let (r, c, i) = locate(pfn);
        self.regions.get(&r)?.chunks[c].as_ref()?.slots[i].as_ref()
    }

    /// Stores `content` (`None`: zeros) and returns what was there.
    fn replace(&mut self, pfn: u64, content: Option<Content>) -> Option<Content> {
        let (r, c, i) = locate(pfn);
        // One descent of the region map: clearing a frame that holds nothing (every freed page
        // of a page-cache replay whose pages were never written) allocates nothing.
        let region = match &content {
            None => self.regions.get_mut(&r)?,
            Some(_) => self.regions.entry(r).or_insert_with(|| {
                Box::new(Region { chunks: std::array::from_fn(|_| None), used: 0 })
            }),
        };
        if content.is_none() && region.chunks[c].as_ref().is_none_or(|k| k.slots[i].is_none()) {
            return None;
        }
        region.used += u32::from(region.chunks[c].is_none());
        let chunk = region.chunks[c].get_or_insert_with(|| {
            Box::new(Chunk { slots: std::array::from_fn(|_| None), used: 0 })
        });
        let new = u32::from(content.is_some());
        let old = std::mem::replace(&mut chunk.slots[i], content);
        chunk.used = chunk.used + new - u32::from(old.is_some());
        if chunk.used == 0 {
            region.chunks[c] = None;
            region.used -= 1;
            if region.used == 0 {
                self.regions.remove(&r);
            }
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

    /// The frames holding data among `pages` frames from `pfn`, in pfn order, visiting only
    /// the regions and chunks in use.
    fn written(&self, pfn: Pfn, pages: u64) -> impl Iterator<Item = (u64, &Content)> {
        let end = pfn.0.saturating_add(pages);
        let regions = (pfn.0 / CHUNK / REGION)..end.div_ceil(CHUNK * REGION);
        let chunks = self.regions.range(regions).flat_map(|(&r, region)| {
            let numbers = (r * REGION..).zip(&region.chunks);
            numbers.filter_map(|(c, chunk)| Some((c * CHUNK, chunk.as_ref()?)))
        });
        chunks
            .filter(move |&(base, _)| base + CHUNK > pfn.0 && base < end)
            .flat_map(|(base, chunk)| (base..).zip(&chunk.slots))
            .filter(move |&(p, _)| p >= pfn.0 && p < end)
            .filter_map(|(p, s)| Some((p, s.as_ref()?)))
    }

    /// Every frame holding data, in pfn order.
    fn all(&self) -> impl Iterator<Item = (u64, &Content)> {
        self.written(Pfn(0), u64::MAX)
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
    /// Ranges visit only the frames holding data, across chunks and regions, in pfn order.
    #[test]
    fn ranges_cross_chunks_and_regions() {
        let mut m = FrameContents::default();
        let far = 1 << 40;
        for (i, pfn) in [far, 5, 63, 64, 40_000].into_iter().enumerate() {
            m.set(pfn, Some(Content::Pattern(i as u64)));
        }
        let all: Vec<u64> = m.all().map(|(p, _)| p).collect();
        assert_eq!(all, [5, 63, 64, 40_000, far]);
        m.copy_range(Pfn(60), Pfn(40_000 - 4), 8);
        assert_eq!(m.get(40_000 - 1), Some(&Content::Pattern(2)), "63 copied to 39999");
        assert_eq!(m.get(40_000), Some(&Content::Pattern(3)), "64 copied over 40000");
        m.zero_range(Pfn(0), far);
        assert_eq!(m.all().map(|(p, _)| p).collect::<Vec<_>>(), [far]);
        m.zero(far);
        assert!(m.regions.is_empty(), "empty regions are freed");
    }
}
