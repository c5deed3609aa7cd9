//! Block traces for page-cache replay: each request names one 4 KiB page of one file.
//!
//! - **ARC** (`.lis`, the traces of Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead
//!   Replacement Cache", FAST '03; excerpts in `traces/arc/`): text lines `start_block n_blocks ignored
//!   request_number`, each expanded into pages `start_block .. start_block + n_blocks - 1`. A
//!   malformed line is an error naming its line.
//! - **oracleGeneral** (libCacheSim's binary format, `traceReader/customizedReader/
//!   oracleGeneralBin.h`): 24-byte little-endian records `u32 time, u64 obj_id, u32 obj_size,
//!   i64 next_access_vtime`. Records of size 0 are skipped, as libCacheSim skips them. Object ids
//!   are hashes, so each new id is given the next page of the file (first-seen order, which an
//!   LRU cannot tell from the original ids); every request is one page whatever its size, so the
//!   replay matches libCacheSim's byte-sized caches only for 4 KiB objects. A trailing partial
//!   record is an error naming the record.
//!
//! Either may be gzip or zstd compressed; reading streams in constant memory (plus, for
//! oracleGeneral, the id map). oracleGeneral is decoded in bulk: every whole record the input has
//! buffered at once, into a reused batch (no allocation per request), with the id map hashed by
//! `rustc-hash`'s fixed-seed Fx hash (deterministic, and only looked up, never iterated).

use crate::InputError;
use crate::input::{decompressed, open_counted};
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::io::{BufRead, Read};
use std::rc::Rc;

/// A block trace's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlockFormat {
    Arc,
    OracleGeneral,
}

impl BlockFormat {
    pub fn name(self) -> &'static str {
        match self {
            BlockFormat::Arc => "arc",
            BlockFormat::OracleGeneral => "oracleGeneral",
        }
    }

    /// `arc` or `oracleGeneral` (also `oracle-general`).
    pub fn parse(s: &str) -> Result<BlockFormat, String> {
        match s {
            "arc" => Ok(BlockFormat::Arc),
            "oracleGeneral" | "oracle-general" | "oraclegeneral" => Ok(BlockFormat::OracleGeneral),
            _ => Err(format!("unknown block trace format `{s}`: expected arc or oracleGeneral")),
        }
    }

    /// The format a file name suggests: libCacheSim names its traces `*.oracleGeneral*`.
    pub fn guess(path: &str) -> BlockFormat {
        if path.contains("oracleGeneral") { BlockFormat::OracleGeneral } else { BlockFormat::Arc }
    }
}

/// A stream of page requests.
pub struct BlockReader {
    input: Box<dyn BufRead>,
    name: String,
    format: BlockFormat,
    /// Line (ARC) or record (oracleGeneral) being read, 1-based.
    position: u64,
    /// ARC: pages of the current line still to hand out.
    run: std::ops::Range<u64>,
    line: Vec<u8>,
    /// oracleGeneral: the page given to each object id.
    ids: FxHashMap<u64, u64>,
    /// oracleGeneral: pages of the records decoded in bulk, and how many were handed out.
    batch: Vec<u64>,
    batch_at: usize,
    pub file_bytes: u64,
    pub bytes_read: Rc<Cell<u64>>,
}

impl std::fmt::Debug for BlockReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BlockReader({}, {}, at {})", self.name, self.format.name(), self.position)
    }
}

impl BlockReader {
    /// Opens `path` in `format`.
    pub fn open(path: &str, format: BlockFormat) -> Result<BlockReader, InputError> {
        let (raw, file_bytes, bytes_read) = open_counted(path)?;
        let mut r = BlockReader::from_reader(raw, path, format)?;
        r.file_bytes = file_bytes;
        r.bytes_read = bytes_read;
        Ok(r)
    }

    /// A trace from any reader (`name` is used in messages).
    pub fn from_reader(
        raw: Box<dyn BufRead>,
        name: &str,
        format: BlockFormat,
    ) -> Result<BlockReader, InputError> {
        Ok(BlockReader {
            input: decompressed(raw, name)?,
            name: name.to_string(),
            format,
            position: 0,
            run: 0..0,
            line: Vec::new(),
            ids: FxHashMap::default(),
            batch: Vec::new(),
            batch_at: 0,
            file_bytes: 0,
            bytes_read: Rc::new(Cell::new(0)),
        })
    }

    pub fn format(&self) -> BlockFormat {
        self.format
    }

    /// Distinct pages seen so far (oracleGeneral's id map; ARC does not keep one).
    pub fn distinct_ids(&self) -> u64 {
        self.ids.len() as u64
    }

    /// An error at the line or record being read.
    pub fn error(&self, message: String) -> InputError {
        InputError { file: self.name.clone(), line: Some(self.position), message }
    }

    /// An error reading the next line or record (a decoder's).
    fn read_error(&self, e: &std::io::Error) -> InputError {
        InputError {
            file: self.name.clone(),
            line: Some(self.position + 1),
            message: e.to_string(),
        }
    }

    /// The next requested page, `None` at the end.
    #[inline]
    pub fn next_page(&mut self) -> Result<Option<u64>, InputError> {
        if let Some(p) = self.run.next() {
            return Ok(Some(p));
        }
        match self.format {
            BlockFormat::Arc => self.next_arc(),
            BlockFormat::OracleGeneral => self.next_oracle(),
        }
    }

    fn next_arc(&mut self) -> Result<Option<u64>, InputError> {
        loop {
            self.line.clear();
            let n =
                self.input.read_until(b'\n', &mut self.line).map_err(|e| self.read_error(&e))?;
            if n == 0 {
                return Ok(None);
            }
            self.position += 1;
            let line = std::str::from_utf8(&self.line).map_err(|e| {
                self.error(format!("not UTF-8 text (byte {} of the line)", e.valid_up_to() + 1))
            })?;
            let mut fields = line.split_ascii_whitespace();
            let (Some(start), Some(count)) = (fields.next(), fields.next()) else {
                if line.trim().is_empty() {
                    continue;
                }
                return Err(self.error(format!(
                    "expected `start_block n_blocks ignored request_number`, found `{}`",
                    line.trim_end()
                )));
            };
            let number = |s: &str, what: &str| {
                s.parse::<u64>().map_err(|_| {
                    self.error(format!("{what}: expected a non-negative integer, found `{s}`"))
                })
            };
            let start = number(start, "start_block")?;
            let count = number(count, "n_blocks")?;
            if count == 0 {
                return Err(self.error("n_blocks: expected at least 1".into()));
            }
            let end = start
                .checked_add(count)
                .ok_or_else(|| self.error("start_block + n_blocks overflows".into()))?;
            self.run = start + 1..end;
            return Ok(Some(start));
        }
    }

    fn next_oracle(&mut self) -> Result<Option<u64>, InputError> {
        loop {
            if let Some(&p) = self.batch.get(self.batch_at) {
                self.batch_at += 1;
                return Ok(Some(p));
            }
            if !self.decode_batch()? {
                // Less than a record buffered: one record read across the buffer's end, or the
                // end of the trace.
                return self.next_oracle_record();
            }
        }
    }

    /// Decodes every whole record the input holds buffered into the batch; false if it holds
    /// less than one.
    fn decode_batch(&mut self) -> Result<bool, InputError> {
        let buf = match self.input.fill_buf() {
            Ok(buf) => buf,
            Err(e) => return Err(self.read_error(&e)),
        };
        let whole = buf.len() / 24 * 24;
        if whole == 0 {
            return Ok(false);
        }
        self.batch.clear();
        self.batch_at = 0;
        for rec in buf[..whole].chunks_exact(24) {
            self.position += 1;
            let id = u64::from_le_bytes(rec[4..12].try_into().expect("8 bytes"));
            let size = u32::from_le_bytes(rec[12..16].try_into().expect("4 bytes"));
            if size != 0 {
                self.batch.push(oracle_page(&mut self.ids, id));
            }
        }
        self.input.consume(whole);
        Ok(true)
    }

    /// One record read byte by byte from the input (across its buffer's end).
    fn next_oracle_record(&mut self) -> Result<Option<u64>, InputError> {
        let mut rec = [0u8; 24];
        loop {
            let mut got = 0;
            while got < rec.len() {
                let n = self.input.read(&mut rec[got..]).map_err(|e| self.read_error(&e))?;
                if n == 0 {
                    break;
                }
                got += n;
            }
            if got == 0 {
                return Ok(None);
            }
            self.position += 1;
            if got < rec.len() {
                return Err(self.error(format!(
                    "truncated record: {got} of 24 bytes (the file ends inside it)"
                )));
            }
            let id = u64::from_le_bytes(rec[4..12].try_into().expect("8 bytes"));
            let size = u32::from_le_bytes(rec[12..16].try_into().expect("4 bytes"));
            if size == 0 {
                continue;
            }
            return Ok(Some(oracle_page(&mut self.ids, id)));
        }
    }
}

/// The page of an oracleGeneral object id: the next page of the file on first sight.
#[inline]
fn oracle_page(ids: &mut FxHashMap<u64, u64>, id: u64) -> u64 {
    let next = ids.len() as u64;
    *ids.entry(id).or_insert(next)
}

/// Writes `pages` as an oracleGeneral trace (4 KiB objects, time in thousands of requests, no
/// next-access information): what `mmsim trace convert --to oracleGeneral` produces, so
/// libCacheSim can replay the same requests.
pub fn write_oracle_general(
    out: &mut dyn std::io::Write,
    pages: impl Iterator<Item = u64>,
) -> std::io::Result<u64> {
    let mut n = 0u64;
    let mut rec = [0u8; 24];
    for p in pages {
        rec[0..4].copy_from_slice(&((n / 1000) as u32).to_le_bytes());
        rec[4..12].copy_from_slice(&p.to_le_bytes());
        rec[12..16].copy_from_slice(&4096u32.to_le_bytes());
        rec[16..24].copy_from_slice(&(-1i64).to_le_bytes());
        out.write_all(&rec)?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pages(data: &[u8], format: BlockFormat) -> Result<Vec<u64>, InputError> {
        let mut r =
            BlockReader::from_reader(Box::new(std::io::Cursor::new(data.to_vec())), "t", format)?;
        let mut out = Vec::new();
        while let Some(p) = r.next_page()? {
            out.push(p);
        }
        Ok(out)
    }

    #[test]
    fn arc_lines_expand_into_pages() {
        assert_eq!(pages(b"10 3 0 0\n\n7 1 0 1\n", BlockFormat::Arc).unwrap(), [10, 11, 12, 7]);
        let e = pages(b"1 1 0 0\n1 x 0 1\n", BlockFormat::Arc).unwrap_err();
        assert_eq!(e.to_string(), "t:2: n_blocks: expected a non-negative integer, found `x`");
        let e = pages(b"5\n", BlockFormat::Arc).unwrap_err();
        assert!(e.to_string().starts_with("t:1: expected `start_block"), "{e}");
        assert!(
            pages(b"1 0 0 0\n", BlockFormat::Arc).unwrap_err().to_string().contains("at least 1")
        );
    }

    #[test]
    fn oracle_general_records_map_ids_to_pages() {
        let mut buf = Vec::new();
        write_oracle_general(&mut buf, [900, 5, 900].into_iter()).unwrap();
        // A zero-size record is skipped.
        let mut zero = [0u8; 24];
        zero[4..12].copy_from_slice(&77u64.to_le_bytes());
        buf.extend_from_slice(&zero);
        write_oracle_general(&mut buf, [5].into_iter()).unwrap();
        assert_eq!(pages(&buf, BlockFormat::OracleGeneral).unwrap(), [0, 1, 0, 1]);
        buf.truncate(buf.len() - 4);
        let e = pages(&buf, BlockFormat::OracleGeneral).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t:5: truncated record: 20 of 24 bytes (the file ends inside it)"
        );
        assert_eq!(BlockFormat::guess("x.oracleGeneral.zst"), BlockFormat::OracleGeneral);
        // Many buffers' worth, records straddling the buffer's end: the bulk decoder agrees.
        let ids: Vec<u64> = (0..20_000u64).map(|i| (i * 7919) % 3001 * 1_000_003).collect();
        buf.clear();
        write_oracle_general(&mut buf, ids.iter().copied()).unwrap();
        let mut seen = std::collections::BTreeMap::new();
        let want: Vec<u64> = ids
            .iter()
            .map(|&id| {
                let next = seen.len() as u64;
                *seen.entry(id).or_insert(next)
            })
            .collect();
        let small = std::io::BufReader::with_capacity(1000, std::io::Cursor::new(buf));
        let mut r =
            BlockReader::from_reader(Box::new(small), "t", BlockFormat::OracleGeneral).unwrap();
        let got: Vec<u64> = std::iter::from_fn(|| r.next_page().unwrap()).collect();
        assert_eq!(got, want);
        assert_eq!(BlockFormat::parse("arc"), Ok(BlockFormat::Arc));
    }
}
