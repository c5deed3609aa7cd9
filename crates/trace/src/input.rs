//! Opening a trace: gzip (`1f 8b`) and zstd (`28 b5 2f fd`) input is decompressed as it streams,
//! then the binary format is recognised by its magic and anything else is read as lackey text.
//! Memory stays constant whatever the trace length: one buffer per stage.

use crate::InputError;
use crate::binary::{BinaryReader, MAGIC};
use crate::lackey::LackeyReader;
use crate::record::MemRef;
use std::cell::Cell;
use std::io::{BufRead, BufReader, Read};
use std::rc::Rc;

/// A trace's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Lackey,
    Binary,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Format::Lackey => "lackey",
            Format::Binary => "mmsim binary",
        }
    }
}

/// Counts the bytes read from the file (before decompression), for progress reports.
#[derive(Debug)]
struct Counting<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

enum Inner {
    Lackey(LackeyReader<Box<dyn BufRead>>),
    Binary(BinaryReader<Box<dyn BufRead>>),
}

/// A stream of references from a trace file.
pub struct TraceReader {
    inner: Inner,
    pub format: Format,
    /// The file's size, and how much of it has been read so far.
    pub file_bytes: u64,
    pub bytes_read: Rc<Cell<u64>>,
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TraceReader({}, {} of {} bytes read)",
            self.format.name(),
            self.bytes_read.get(),
            self.file_bytes
        )
    }
}

pub(crate) fn io_error(file: &str, e: &std::io::Error) -> InputError {
    InputError { file: file.to_string(), line: None, message: e.to_string() }
}

/// A file opened for streaming: the buffered reader, the file's size, and the count of bytes read
/// so far.
pub type Counted = (Box<dyn BufRead>, u64, Rc<Cell<u64>>);

/// Opens `path` for streaming.
pub fn open_counted(path: &str) -> Result<Counted, InputError> {
    let file = std::fs::File::open(path).map_err(|e| io_error(path, &e))?;
    let file_bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
    let bytes_read = Rc::new(Cell::new(0));
    let counted = Counting { inner: file, read: bytes_read.clone() };
    Ok((Box::new(BufReader::with_capacity(1 << 16, counted)), file_bytes, bytes_read))
}

/// Counts the compressed bytes a decoder consumed, so that its errors can say where they are.
struct Consumed<R> {
    inner: R,
    at: Rc<Cell<u64>>,
}

impl<R: BufRead> Read for Consumed<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.at.set(self.at.get() + n as u64);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Consumed<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, n: usize) {
        self.at.set(self.at.get() + n as u64);
        self.inner.consume(n);
    }
}

/// A decoder whose errors name the compression and the compressed byte offset reached.
struct Decoded<D> {
    decoder: D,
    what: &'static str,
    at: Rc<Cell<u64>>,
}

impl<D: Read> Read for Decoded<D> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.decoder.read(buf).map_err(|e| {
            let at = self.at.get();
            std::io::Error::new(
                e.kind(),
                format!("corrupt {} data after compressed byte {at}: {e}", self.what),
            )
        })
    }
}

/// `raw` decompressed as it streams if it starts with a gzip or zstd magic; a decoding error
/// names the compressed byte offset the decoder had reached.
pub fn decompressed(mut raw: Box<dyn BufRead>, name: &str) -> Result<Box<dyn BufRead>, InputError> {
    let head = raw.fill_buf().map_err(|e| io_error(name, &e))?.to_vec();
    let at = Rc::new(Cell::new(0));
    let raw_counted = Consumed { inner: raw, at: at.clone() };
    let boxed = |decoder: Box<dyn Read>, what| -> Box<dyn BufRead> {
        Box::new(BufReader::with_capacity(1 << 16, Decoded { decoder, what, at: at.clone() }))
    };
    Ok(if head.starts_with(&[0x1f, 0x8b]) {
        boxed(Box::new(flate2::bufread::MultiGzDecoder::new(raw_counted)), "gzip")
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        let d = zstd::stream::read::Decoder::with_buffer(raw_counted)
            .map_err(|e| io_error(name, &e))?;
        boxed(Box::new(d), "zstd")
    } else {
        raw_counted.inner
    })
}

impl TraceReader {
    /// Opens `path`; with `skip_bad`, malformed lackey lines are counted and skipped.
    pub fn open(path: &str, skip_bad: bool) -> Result<TraceReader, InputError> {
        let (raw, file_bytes, bytes_read) = open_counted(path)?;
        TraceReader::from_reader(raw, path, skip_bad, file_bytes, bytes_read)
    }

    /// A trace from any reader (`name` is used in messages).
    pub fn from_reader(
        raw: Box<dyn BufRead>,
        name: &str,
        skip_bad: bool,
        file_bytes: u64,
        bytes_read: Rc<Cell<u64>>,
    ) -> Result<TraceReader, InputError> {
        let mut input = decompressed(raw, name)?;
        let head = input.fill_buf().map_err(|e| io_error(name, &e))?;
        let binary = head.starts_with(MAGIC);
        let (inner, format) = if binary {
            input.consume(MAGIC.len());
            (Inner::Binary(BinaryReader::new(input, name)), Format::Binary)
        } else {
            (Inner::Lackey(LackeyReader::new(input, name, skip_bad)), Format::Lackey)
        };
        Ok(TraceReader { inner, format, file_bytes, bytes_read })
    }

    /// The next reference, `None` at the end.
    #[inline]
    pub fn next_ref(&mut self) -> Result<Option<MemRef>, InputError> {
        match &mut self.inner {
            Inner::Lackey(r) => r.next_ref(),
            Inner::Binary(r) => r.next_ref(),
        }
    }

    /// Malformed lines skipped (`--skip-bad`).
    pub fn skipped(&self) -> u64 {
        match &self.inner {
            Inner::Lackey(r) => r.bad_lines(),
            Inner::Binary(_) => 0,
        }
    }
}
