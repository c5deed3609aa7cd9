//! mmsim's compact binary trace format (`mmsim trace convert IN OUT` writes it).
//!
//! Layout: the 8-byte magic `MMSIMTR1`, then one record per reference, then an end marker.
//! A record is a header byte, `kind | size << 2` (kind 0-3 = I, L, S, M; size 1-62 in place, 63
//! meaning a varint size follows), and the address as a zigzag LEB128 varint of its difference
//! from the previous address of the same stream (instruction fetches and data accesses keep
//! separate predictors, so sequential code and strided data take one or two bytes). The end
//! marker is a zero byte followed by the varint record count: a file that stops before it, or
//! whose count disagrees, is reported as truncated or corrupt. Typical lackey traces shrink to
//! 2-4 bytes per reference before compression (lackey text takes 12-20).

use crate::InputError;
use crate::record::{MemRef, RefKind};
use simcore::VirtAddr;
use std::io::{Read, Write};

/// The first bytes of every binary trace.
pub const MAGIC: &[u8; 8] = b"MMSIMTR1";
const SIZE_ESCAPE: u32 = 63;
/// The longest ordinary record: a header and a 10-byte varint address.
const MAX_RECORD: usize = 11;
/// The longest record: a header, a 5-byte varint size and a 10-byte varint address (and a
/// varint is written 8 bytes at a time: with the size's 5 bytes, that fits too).
const MAX_ESCAPED: usize = 16;
/// The writer passes its buffer on once it holds this many bytes.
const FLUSH_AT: usize = 1 << 16;

/// Writes `v` as a varint at the start of `out` (which has room for 10 bytes); returns its
/// length. Up to 8 bytes (56 bits), the 7-bit groups are spread over a word at once.
#[inline(always)]
fn put_varint(out: &mut [u8], v: u64) -> usize {
    if v < 0x80 {
        out[0] = v as u8;
        return 1;
    }
    if v >= 1 << 56 {
        return put_long_varint(out, v);
    }
    let len = (64 - v.leading_zeros()).div_ceil(7) as usize;
    let spread = (0..8).fold(0u64, |x, i| x | (v << i & 0x7fu64 << (8 * i)));
    let more = 0x8080_8080_8080_8080u64 & ((1u64 << (8 * (len - 1))) - 1);
    out[..8].copy_from_slice(&(spread | more).to_le_bytes());
    len
}

#[cold]
fn put_long_varint(out: &mut [u8], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

/// Writes references in the binary format.
#[derive(Debug)]
pub struct BinaryWriter<W: Write> {
    out: W,
    /// `len` bytes waiting, always fewer than [`FLUSH_AT`] between records.
    buf: Box<[u8]>,
    len: usize,
    last: [u64; 2],
    count: u64,
}

impl<W: Write> BinaryWriter<W> {
    pub fn new(mut out: W) -> std::io::Result<BinaryWriter<W>> {
        out.write_all(MAGIC)?;
        let buf = vec![0; FLUSH_AT + MAX_ESCAPED].into_boxed_slice();
        Ok(BinaryWriter { out, buf, len: 0, last: [0; 2], count: 0 })
    }

    #[inline(always)]
    pub fn write(&mut self, r: MemRef) -> std::io::Result<()> {
        let size = r.size.clamp(1, SIZE_ESCAPE);
        let stream = usize::from(r.kind != RefKind::Instr);
        let delta = r.addr.0.wrapping_sub(self.last[stream]) as i64;
        self.last[stream] = r.addr.0;
        self.count += 1;
        let record = &mut self.buf[self.len..self.len + MAX_ESCAPED];
        record[0] = r.kind as u8 | (size as u8) << 2;
        let mut n = 1;
        if size == SIZE_ESCAPE {
            n += put_varint(&mut record[n..], u64::from(r.size));
        }
        n += put_varint(&mut record[n..], ((delta << 1) ^ (delta >> 63)) as u64);
        self.len += n;
        if self.len >= FLUSH_AT {
            return self.pass_on();
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn pass_on(&mut self) -> std::io::Result<()> {
        self.out.write_all(&self.buf[..self.len])?;
        self.len = 0;
        Ok(())
    }

    /// Writes the end marker; returns the output and the number of records.
    pub fn finish(mut self) -> std::io::Result<(W, u64)> {
        // The count's varint may take 10 bytes, with 8 written at once: the slack holds them.
        self.buf[self.len] = 0;
        self.len += 1 + put_varint(&mut self.buf[self.len + 1..], self.count);
        self.out.write_all(&self.buf[..self.len])?;
        self.out.flush()?;
        Ok((self.out, self.count))
    }
}

/// Reads references in the binary format (after the magic, which [`crate::input`] checks).
#[derive(Debug)]
pub struct BinaryReader<R> {
    input: R,
    file: String,
    buf: Box<[u8]>,
    pos: usize,
    len: usize,
    last: [u64; 2],
    count: u64,
    done: bool,
}

impl<R: Read> BinaryReader<R> {
    /// A reader of `input` positioned just after the magic.
    pub fn new(input: R, file: &str) -> BinaryReader<R> {
        BinaryReader {
            input,
            file: file.to_string(),
            buf: vec![0; 1 << 16].into_boxed_slice(),
            pos: 0,
            len: 0,
            last: [0; 2],
            count: 0,
            done: false,
        }
    }

    fn error(&self, message: String) -> InputError {
        InputError { file: self.file.clone(), line: Some(self.count + 1), message }
    }

    /// The next byte, or `None` at the end of the input.
    #[inline]
    fn byte(&mut self) -> Result<Option<u8>, InputError> {
        if self.pos == self.len {
            self.len = loop {
                match self.input.read(&mut self.buf) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(self.error(e.to_string())),
                }
            };
            self.pos = 0;
            if self.len == 0 {
                return Ok(None);
            }
        }
        self.pos += 1;
        Ok(Some(self.buf[self.pos - 1]))
    }

    fn need(&mut self) -> Result<u8, InputError> {
        self.byte()?.ok_or_else(|| {
            self.error(format!("truncated binary trace inside record {}", self.count + 1))
        })
    }

    fn varint(&mut self) -> Result<u64, InputError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.need()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.error("corrupt binary trace: a varint longer than 64 bits".into()))
    }

    /// The next reference, `None` after the end marker.
    #[inline]
    pub fn next_ref(&mut self) -> Result<Option<MemRef>, InputError> {
        if self.len - self.pos >= MAX_RECORD
            && let Some(r) = self.next_in_buffer()
        {
            return Ok(Some(r));
        }
        self.next_ref_slow()
    }

    /// The fast path: a whole ordinary record (a header with its size in place, then the
    /// address) decoded straight from the buffer, which holds at least [`MAX_RECORD`] bytes.
    /// `None` (nothing consumed) for anything else: the end marker, an escaped size, a corrupt
    /// header or varint, which the slow path reports.
    #[inline]
    fn next_in_buffer(&mut self) -> Option<MemRef> {
        let bytes = &self.buf[self.pos..self.pos + MAX_RECORD];
        let h = bytes[0];
        let size = u32::from(h >> 2);
        if h == 0 || size == 0 || size == SIZE_ESCAPE {
            return None;
        }
        let mut z = 0u64;
        let mut used = 1;
        for (i, &b) in bytes[1..=10].iter().enumerate() {
            z |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                used += i + 1;
                break;
            }
            if i == 9 {
                return None;
            }
        }
        self.pos += used;
        let kind = RefKind::from_code(h);
        let delta = (z >> 1) as i64 ^ -((z & 1) as i64);
        let stream = usize::from(kind != RefKind::Instr);
        let addr = self.last[stream].wrapping_add(delta as u64);
        self.last[stream] = addr;
        self.count += 1;
        Some(MemRef { kind, addr: VirtAddr(addr), size })
    }

    fn next_ref_slow(&mut self) -> Result<Option<MemRef>, InputError> {
        if self.done {
            return Ok(None);
        }
        let Some(h) = self.byte()? else {
            return Err(self.error(format!(
                "truncated binary trace: it ends after {} records without its end marker",
                self.count
            )));
        };
        if h == 0 {
            let n = self.varint()?;
            if n != self.count {
                return Err(self.error(format!(
                    "corrupt binary trace: the end marker counts {n} records, {} were read",
                    self.count
                )));
            }
            if self.byte()?.is_some() {
                return Err(self.error("corrupt binary trace: data after the end marker".into()));
            }
            self.done = true;
            return Ok(None);
        }
        let kind = RefKind::from_code(h);
        let mut size = u32::from(h >> 2);
        if size == 0 {
            return Err(self.error(format!("corrupt binary trace: record header {h:#04x}")));
        }
        if size == SIZE_ESCAPE {
            size = u32::try_from(self.varint()?)
                .map_err(|_| self.error("corrupt binary trace: size out of range".into()))?;
        }
        let z = self.varint()?;
        let delta = (z >> 1) as i64 ^ -((z & 1) as i64);
        let stream = usize::from(kind != RefKind::Instr);
        let addr = self.last[stream].wrapping_add(delta as u64);
        self.last[stream] = addr;
        self.count += 1;
        Ok(Some(MemRef { kind, addr: VirtAddr(addr), size }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<MemRef> {
        let r = |kind, addr, size| MemRef { kind, addr: VirtAddr(addr), size };
        vec![
            r(RefKind::Instr, 0x40_1000, 3),
            r(RefKind::Load, 0x7ffd_0000_1000, 8),
            r(RefKind::Instr, 0x40_1003, 15),
            r(RefKind::Store, 0x7ffd_0000_0ff8, 8),
            r(RefKind::Modify, u64::MAX, 64),
            r(RefKind::Load, 0, 4096),
        ]
    }

    fn encode(refs: &[MemRef]) -> Vec<u8> {
        let mut w = BinaryWriter::new(Vec::new()).unwrap();
        for &r in refs {
            w.write(r).unwrap();
        }
        w.finish().unwrap().0
    }

    fn decode(bytes: &[u8]) -> Result<Vec<MemRef>, InputError> {
        assert_eq!(&bytes[..8], MAGIC);
        let mut r = BinaryReader::new(&bytes[8..], "t.mmt");
        let mut out = Vec::new();
        while let Some(x) = r.next_ref()? {
            out.push(x);
        }
        Ok(out)
    }

    /// The word-at-a-time varint writes what the byte loop writes, at every length.
    #[test]
    fn varints_match_the_byte_loop() {
        let edges = (0..64).flat_map(|b| [(1u64 << b) - 1, 1 << b, (1 << b) + 1]);
        for v in edges.chain([u64::MAX, 0x0123_4567_89ab_cdef]) {
            let (mut fast, mut slow) = ([0u8; 10], [0u8; 10]);
            let n = put_varint(&mut fast, v);
            assert_eq!((n, fast), (put_long_varint(&mut slow, v), slow), "{v:#x}");
        }
    }

    #[test]
    fn round_trips_and_is_compact() {
        let refs = sample();
        let bytes = encode(&refs);
        assert_eq!(decode(&bytes).unwrap(), refs);
        assert!(bytes.len() < 8 + refs.len() * 8, "{} bytes", bytes.len());
    }

    #[test]
    fn truncation_and_corruption_are_detected() {
        let bytes = encode(&sample());
        for cut in [bytes.len() - 1, bytes.len() - 2, 9, 8] {
            let e = decode(&bytes[..cut]).unwrap_err();
            assert!(e.message.contains("truncated"), "cut at {cut}: {e}");
        }
        let mut extra = bytes.clone();
        extra.push(7);
        assert!(decode(&extra).unwrap_err().message.contains("after the end marker"));
        let mut miscounted = bytes;
        let last = miscounted.len() - 1;
        miscounted[last] += 1;
        assert!(decode(&miscounted).unwrap_err().message.contains("counts 7 records, 6 were read"));
    }
}
