//! A recorded program (`mmsim record` writes it, `mmsim replay FILE` reads it): one file holding
//! the address space the program ran in and one trace per thread, so a replay needs neither the
//! recording machine's files nor a maps description.
//!
//! Layout: the line `MMSIMPG1`, a text header (one item per line, numbers in hex where they are
//! addresses, the path last on its line so it may hold spaces), the line `end`, then each
//! thread's trace in mmsim's binary format ([`crate::binary`]), zstd-compressed, back to back
//! in the order of the `thread` lines, each as long as its line says.
//!
//! ```text
//! program PATH                       the recorded executable
//! window SKIP COUNT [PERIOD]         instructions let pass, then recorded (0: to the end);
//!                                    with PERIOD, COUNT out of every PERIOD from SKIP on
//! instructions N                     instructions the program executed in all
//! object exe|interp|lib BIAS SIZE PATH   an ELF object: who mapped it, its load bias, file size
//! load VADDR OFFSET FILESZ MEMSZ FLAGS ALIGN   a PT_LOAD of the object above (hex)
//! file START LEN OFFSET PROT SHARED SIZE PATH  a plain file mapping (not an ELF object's)
//! anon START END PROT                anonymous memory
//! thread REFS BYTES                  a thread's references, and its section's length
//! ```
//!
//! Objects carry their program headers as read from the ELF files on the recording machine, so
//! the replay rebuilds their segments with the real offsets, sizes, permissions and `p_align`
//! (qemu's view of the mappings merges segments and drops the execute bit).

use crate::InputError;
use crate::input::TraceReader;
use mm::{ElfObject, LoadSegment};
use simcore::{Bytes, VirtAddr};
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};

/// The first line of a recorded program.
pub const MAGIC: &str = "MMSIMPG1";

/// Who mapped an ELF object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loader {
    /// The kernel's ELF loader: the executable.
    Exe,
    /// The kernel's ELF loader: the executable's `PT_INTERP`.
    Interp,
    /// The dynamic linker, with `mmap`.
    Lib,
}

impl Loader {
    pub fn name(self) -> &'static str {
        match self {
            Loader::Exe => "exe",
            Loader::Interp => "interp",
            Loader::Lib => "lib",
        }
    }
}

/// An ELF object of the address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    pub loader: Loader,
    pub elf: ElfObject,
    pub size: Bytes,
}

/// A plain file mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMap {
    pub start: VirtAddr,
    pub len: Bytes,
    pub offset: Bytes,
    pub prot: u32,
    pub shared: bool,
    pub size: Bytes,
    pub path: String,
}

/// Anonymous memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AnonMap {
    pub start: VirtAddr,
    pub end: VirtAddr,
    pub prot: u32,
}

/// One thread's trace section.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadSection {
    pub refs: u64,
    pub bytes: u64,
}

/// A recorded program's header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    pub program: String,
    pub skip: u64,
    pub count: u64,
    /// Windows of `count` instructions every `period` (0: one window).
    pub period: u64,
    pub instructions: u64,
    pub objects: Vec<Object>,
    pub files: Vec<FileMap>,
    pub anon: Vec<AnonMap>,
    pub threads: Vec<ThreadSection>,
}

impl Program {
    /// Every range the recorded address space maps (the objects' segments, file and anonymous
    /// mappings), in units of `1 << shift` bytes rounded outwards, sorted and merged.
    pub fn mapped_ranges(&self, shift: u32) -> Vec<(u64, u64)> {
        let unit = |(s, e): (u64, u64)| (s >> shift, e.div_ceil(1 << shift));
        let mut r: Vec<(u64, u64)> = Vec::new();
        for o in &self.objects {
            let segments = o.elf.segments.iter().filter_map(|s| s.pages(o.elf.bias));
            r.extend(segments.map(|(s, _, e)| unit((s.0, e.0))));
        }
        r.extend(self.files.iter().map(|f| unit((f.start.0, (f.start + f.len).0))));
        r.extend(self.anon.iter().map(|a| unit((a.start.0, a.end.0))));
        merge_ranges(r)
    }

    /// The header's text.
    pub fn header(&self) -> String {
        let mut s = format!("{MAGIC}\nprogram {}\n", self.program);
        s += &format!("window {} {}", self.skip, self.count);
        if self.period != 0 {
            s += &format!(" {}", self.period);
        }
        s += &format!("\ninstructions {}\n", self.instructions);
        for o in &self.objects {
            let (b, z, p) = (o.elf.bias.as_u64(), o.size.as_u64(), &o.elf.path);
            s += &format!("object {} {b:#x} {z} {p}\n", o.loader.name());
            for l in &o.elf.segments {
                s += &format!(
                    "load {:#x} {:#x} {:#x} {:#x} {:#x} {:#x}\n",
                    l.vaddr.0, l.offset.0, l.filesz.0, l.memsz.0, l.flags, l.align.0
                );
            }
        }
        for f in &self.files {
            s += &format!(
                "file {:#x} {:#x} {:#x} {:#x} {} {} {}\n",
                f.start.0,
                f.len.0,
                f.offset.0,
                f.prot,
                u8::from(f.shared),
                f.size.0,
                f.path
            );
        }
        for a in &self.anon {
            s += &format!("anon {:#x} {:#x} {:#x}\n", a.start.0, a.end.0, a.prot);
        }
        for t in &self.threads {
            s += &format!("thread {} {}\n", t.refs, t.bytes);
        }
        s + "end\n"
    }

    /// Writes the header and the threads' compressed traces (`sections`, in thread order).
    pub fn write(&self, out: &mut dyn Write, sections: &[Vec<u8>]) -> std::io::Result<()> {
        out.write_all(self.header().as_bytes())?;
        for s in sections {
            out.write_all(s)?;
        }
        out.flush()
    }

    /// Reads the header of the recorded program `path`; returns it and where its first section
    /// starts.
    pub fn open(path: &str) -> Result<(Program, u64), InputError> {
        let file = std::fs::File::open(path).map_err(|e| crate::input::io_error(path, &e))?;
        Program::read_header(&mut BufReader::new(file), path)
    }

    /// Reads a recorded program's header from `input` (named `path` in errors); returns it and
    /// the bytes it took.
    pub fn read_header(input: &mut dyn BufRead, path: &str) -> Result<(Program, u64), InputError> {
        let mut parser = Parser { file: path, line: 0, program: Program::default() };
        let mut at = 0u64;
        let mut text = String::new();
        loop {
            text.clear();
            let n = input.read_line(&mut text).map_err(|e| parser.error(e.to_string()))?;
            at += n as u64;
            parser.line += 1;
            if n == 0 {
                return Err(
                    parser.error("expected the line `end` before the end of the file".into())
                );
            }
            if parser.take(text.trim_end_matches('\n'))? {
                return Ok((parser.program, at));
            }
        }
    }

    /// A reader of thread `k`'s references in the recorded program `path` (whose sections start
    /// at `data`).
    pub fn thread_trace(&self, path: &str, data: u64, k: usize) -> Result<TraceReader, InputError> {
        let before = self.threads[..k].iter().fold(0u64, |a, t| a.saturating_add(t.bytes));
        let start = data.saturating_add(before);
        let len = self.threads[k].bytes;
        let mut file = std::fs::File::open(path).map_err(|e| crate::input::io_error(path, &e))?;
        file.seek(SeekFrom::Start(start)).map_err(|e| crate::input::io_error(path, &e))?;
        let name = format!("{path} (thread {k})");
        let counted = Box::new(BufReader::with_capacity(1 << 16, file.take(len)));
        TraceReader::from_reader(counted, &name, false, len, Default::default())
    }
}

/// `ranges` sorted and merged where they overlap or touch.
pub(crate) fn merge_ranges(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (s, e) in ranges {
        match merged.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => merged.push((s, e)),
        }
    }
    merged
}

/// The header parser: the file, the line, what was read so far.
struct Parser<'a> {
    file: &'a str,
    line: u64,
    program: Program,
}

impl Parser<'_> {
    fn error(&self, message: String) -> InputError {
        InputError { file: self.file.to_string(), line: Some(self.line), message }
    }

    fn num(&self, word: Option<&str>, what: &str) -> Result<u64, InputError> {
        let w = word.ok_or_else(|| self.error(format!("expected {what}")))?;
        let parsed = match w.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => w.parse(),
        };
        parsed.map_err(|_| self.error(format!("expected {what} (a number), found `{w}`")))
    }

    /// Takes one header line; `true` at `end`.
    fn take(&mut self, text: &str) -> Result<bool, InputError> {
        if self.line == 1 {
            return if text == MAGIC {
                Ok(false)
            } else {
                Err(self.error(format!("expected `{MAGIC}`: not a recorded program")))
            };
        }
        let (key, rest) = text.split_once(' ').unwrap_or((text, ""));
        match key {
            "program" => self.program.program = rest.to_string(),
            "window" | "instructions" | "thread" | "anon" => self.numbers(key, rest)?,
            "object" => self.object(rest)?,
            "load" => self.load(rest)?,
            "file" => self.file_map(rest)?,
            "end" => return Ok(true),
            _ => return Err(self.error(format!("expected a header item, found `{key}`"))),
        }
        Ok(false)
    }

    /// The first `N` words of `rest` as numbers, each named by `what` in an error.
    fn words<const N: usize>(&self, rest: &str, what: [&str; N]) -> Result<[u64; N], InputError> {
        let mut w = rest.split(' ');
        let mut v = [0; N];
        for (slot, what) in v.iter_mut().zip(what) {
            *slot = self.num(w.next(), what)?;
        }
        Ok(v)
    }

    fn numbers(&mut self, key: &str, rest: &str) -> Result<(), InputError> {
        match key {
            "window" => {
                let [skip, count] = self.words(rest, ["the instructions skipped", "the count"])?;
                let period = rest.split(' ').nth(2);
                let period = if period.is_some() { self.num(period, "the period")? } else { 0 };
                (self.program.skip, self.program.count, self.program.period) =
                    (skip, count, period);
            }
            "instructions" => [self.program.instructions] = self.words(rest, ["a count"])?,
            "thread" => {
                let [refs, bytes] = self.words(rest, ["the references", "the section's bytes"])?;
                self.program.threads.push(ThreadSection { refs, bytes });
            }
            _ => {
                let [start, end, prot] =
                    self.words(rest, ["the start", "the end", "the protection"])?;
                if end <= start {
                    return Err(
                        self.error(format!("expected START < END, found {start:#x} {end:#x}"))
                    );
                }
                let prot = prot as u32;
                self.program.anon.push(AnonMap {
                    start: VirtAddr(start),
                    end: VirtAddr(end),
                    prot,
                });
            }
        }
        Ok(())
    }

    fn object(&mut self, rest: &str) -> Result<(), InputError> {
        let mut w = rest.splitn(4, ' ');
        let loader = match w.next() {
            Some("exe") => Loader::Exe,
            Some("interp") => Loader::Interp,
            Some("lib") => Loader::Lib,
            other => {
                return Err(self.error(format!("expected exe, interp or lib, found {other:?}")));
            }
        };
        let bias = Bytes(self.num(w.next(), "the load bias")?);
        let size = Bytes(self.num(w.next(), "the file size")?);
        let path = w
            .next()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| self.error("expected a path".into()))?;
        let elf = ElfObject { path: path.to_string(), bias, segments: Vec::new() };
        self.program.objects.push(Object { loader, elf, size });
        Ok(())
    }

    fn load(&mut self, rest: &str) -> Result<(), InputError> {
        let what = ["p_vaddr", "p_offset", "p_filesz", "p_memsz", "p_flags", "p_align"];
        let v = self.words(rest, what)?;
        let segment = LoadSegment {
            vaddr: VirtAddr(v[0]),
            offset: Bytes(v[1]),
            filesz: Bytes(v[2]),
            memsz: Bytes(v[3]),
            flags: v[4] as u32,
            align: Bytes(v[5].max(1)),
        };
        let Some(object) = self.program.objects.last() else {
            return Err(self.error("expected an `object` line before its `load` lines".into()));
        };
        let bad = |what: String| self.error(format!("expected a loadable segment: {what}"));
        let (start, _, end) = segment
            .pages(object.elf.bias)
            .ok_or_else(|| bad("it ends past the address space".into()))?;
        let taken = self.program.objects.iter().flat_map(|o| {
            o.elf.segments.iter().filter_map(|s| s.pages(o.elf.bias).map(|(a, _, b)| (a, b)))
        });
        if let Some((a, b)) = taken.into_iter().find(|&(a, b)| a < end && start < b) {
            return Err(bad(format!(
                "its pages {start}..{end} overlap an earlier segment's {a}..{b}"
            )));
        }
        self.program.objects.last_mut().expect("checked").elf.segments.push(segment);
        Ok(())
    }

    fn file_map(&mut self, rest: &str) -> Result<(), InputError> {
        let mut w = rest.splitn(7, ' ');
        let start = VirtAddr(self.num(w.next(), "the start")?);
        let len = Bytes(self.num(w.next(), "the length")?);
        let offset = Bytes(self.num(w.next(), "the file offset")?);
        let prot = self.num(w.next(), "the protection")? as u32;
        let shared = self.num(w.next(), "0 (private) or 1 (shared)")? == 1;
        let size = Bytes(self.num(w.next(), "the file size")?);
        let path = w
            .next()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| self.error("expected a path".into()))?;
        let path = path.to_string();
        self.program.files.push(FileMap { start, len, offset, prot, shared, size, path });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Program {
        let seg = LoadSegment {
            vaddr: VirtAddr(0x5000000),
            offset: Bytes(0x5000000),
            filesz: Bytes(0x2be2b8c),
            memsz: Bytes(0x2be2b8c),
            flags: mm::pf::R | mm::pf::X,
            align: Bytes::PMD,
        };
        let elf = ElfObject {
            path: "/lib/a b.so".into(),
            bias: Bytes(0x40_0000_0000),
            segments: vec![seg],
        };
        Program {
            program: "/bin/x".into(),
            skip: 5,
            count: 7,
            period: 70,
            instructions: 99,
            objects: vec![Object { loader: Loader::Lib, elf, size: Bytes(1 << 27) }],
            files: vec![FileMap {
                start: VirtAddr(0x1000),
                len: Bytes(0x2000),
                offset: Bytes(0),
                prot: 1,
                shared: false,
                size: Bytes(0x1800),
                path: "/data/f".into(),
            }],
            anon: vec![AnonMap { start: VirtAddr(0x8000), end: VirtAddr(0x9000), prot: 3 }],
            threads: vec![ThreadSection { refs: 0, bytes: 0 }],
        }
    }

    #[test]
    fn the_header_round_trips() {
        let dir = std::env::temp_dir().join(format!("mmsim-program-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.mmprog");
        let p = sample();
        p.write(&mut std::fs::File::create(&path).unwrap(), &[]).unwrap();
        let (back, data) = Program::open(path.to_str().unwrap()).unwrap();
        assert_eq!(back, p);
        assert_eq!(data, p.header().len() as u64);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn bad_headers_name_their_line() {
        let dir = std::env::temp_dir().join(format!("mmsim-program-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.mmprog");
        std::fs::write(&path, "MMSIMPG1\nload 0x0 0 0 0 5 0x1000\nend\n").unwrap();
        let e = Program::open(path.to_str().unwrap()).unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("`object` line"), "{e}");
        // The same segment twice (a fuzzer's header): refused at its second line.
        let object = "object exe 0x400000 0x10000 /bin/x\n";
        let load = "load 0x0 0 0x1000 0x1000 5 0x1000\n";
        std::fs::write(&path, format!("MMSIMPG1\n{object}{load}{load}end\n")).unwrap();
        let e = Program::open(path.to_str().unwrap()).unwrap_err();
        assert_eq!(e.line, Some(4), "{e}");
        assert!(e.message.contains("overlap an earlier segment"), "{e}");
        std::fs::write(&path, "MMSIMPG1\nanon 0x9000 0x8000 3\n").unwrap();
        let e = Program::open(path.to_str().unwrap()).unwrap_err();
        assert!(e.message.contains("START < END"), "{e}");
        std::fs::write(&path, "nope\n").unwrap();
        assert!(
            Program::open(path.to_str().unwrap())
                .unwrap_err()
                .message
                .contains("not a recorded program")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
