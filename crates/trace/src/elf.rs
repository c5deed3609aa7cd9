//! Reading an ELF file's program headers (the `object` crate, ELF64 little-endian only): its
//! `PT_LOAD` segments (`p_vaddr`, `p_offset`, `p_filesz`, `p_memsz`, `p_flags`, `p_align`), its
//! `PT_INTERP` path, its entry point and whether it is position-independent (`ET_DYN`). Only the
//! header, the program headers and the interpreter's path are read from the file.

use crate::InputError;
use mm::LoadSegment;
use object::elf::{ET_DYN, ET_EXEC, FileHeader64, PT_INTERP, PT_LOAD};
use object::read::ReadCache;
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, ReadRef};
use simcore::{Bytes, VirtAddr};

/// What the loader and the dynamic linker need of an ELF file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ElfInfo {
    pub segments: Vec<LoadSegment>,
    pub interp: Option<String>,
    pub entry: VirtAddr,
    /// `ET_DYN` (a shared object or a position-independent executable).
    pub dynamic: bool,
    /// The file's size in bytes.
    pub size: Bytes,
}

/// Whether `head` starts with the ELF magic.
pub fn is_elf(head: &[u8]) -> bool {
    head.starts_with(b"\x7fELF")
}

/// Reads `path`'s program headers, wherever in the file they are (BOLT-rewritten objects such
/// as rustc's `librustc_driver` keep them near the end).
pub fn read(path: &str) -> Result<ElfInfo, InputError> {
    let err = |message: String| InputError { file: path.to_string(), line: None, message };
    let file = std::fs::File::open(path).map_err(|e| err(e.to_string()))?;
    let size = file.metadata().map_err(|e| err(e.to_string()))?.len();
    let cache = ReadCache::new(file);
    parse(&cache, size).map_err(err)
}

/// Parses the headers of `data`, a file of `size` bytes.
pub fn parse<'a, R: ReadRef<'a>>(data: R, size: u64) -> Result<ElfInfo, String> {
    let head = data.read_bytes_at(0, 4).unwrap_or_default();
    if !is_elf(head) {
        return Err("expected an ELF file (magic 7f 45 4c 46)".into());
    }
    let hdr = FileHeader64::<Endianness>::parse(data)
        .map_err(|e| format!("expected a 64-bit ELF header: {e}"))?;
    let endian = hdr.endian().map_err(|e| format!("ELF header: {e}"))?;
    if endian != Endianness::Little {
        return Err("expected a little-endian ELF file".into());
    }
    let e_type = hdr.e_type(endian);
    if e_type != ET_DYN && e_type != ET_EXEC {
        return Err(format!("expected an executable or shared object, found e_type {e_type}"));
    }
    let phdrs = hdr
        .program_headers(endian, data)
        .map_err(|e| format!("expected program headers inside the file: {e}"))?;
    let mut info = ElfInfo {
        segments: Vec::new(),
        interp: None,
        entry: VirtAddr(hdr.e_entry(endian)),
        dynamic: e_type == ET_DYN,
        size: Bytes(size),
    };
    for ph in phdrs {
        match ph.p_type(endian) {
            PT_LOAD => info.segments.push(load_segment(ph, endian)),
            PT_INTERP => info.interp = Some(interp(ph, endian, data)?),
            _ => {}
        }
    }
    if info.segments.is_empty() {
        return Err("expected at least one PT_LOAD program header".into());
    }
    Ok(info)
}

fn load_segment(ph: &object::elf::ProgramHeader64<Endianness>, e: Endianness) -> LoadSegment {
    LoadSegment {
        vaddr: VirtAddr(ph.p_vaddr(e)),
        offset: Bytes(ph.p_offset(e)),
        filesz: Bytes(ph.p_filesz(e)),
        memsz: Bytes(ph.p_memsz(e)),
        flags: ph.p_flags(e),
        align: Bytes(ph.p_align(e).max(1)),
    }
}

fn interp<'a, R: ReadRef<'a>>(
    ph: &object::elf::ProgramHeader64<Endianness>,
    e: Endianness,
    data: R,
) -> Result<String, String> {
    let bytes = ph
        .interpreter(e, data)
        .map_err(|err| format!("PT_INTERP: {err}"))?
        .ok_or("PT_INTERP without a path")?;
    String::from_utf8(bytes.to_vec()).map_err(|_| "PT_INTERP: a path that is not UTF-8".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_test_binary() {
        let exe = std::env::current_exe().unwrap();
        let info = read(exe.to_str().unwrap()).unwrap();
        assert!(info.segments.iter().any(|s| s.flags & mm::pf::X != 0), "{info:?}");
        assert!(info.segments.iter().all(|s| s.align.as_u64().is_power_of_two()));
    }

    #[test]
    fn reads_the_host_libraries() {
        for lib in ["/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"] {
            if std::path::Path::new(lib).exists() {
                let info = read(lib).unwrap();
                assert!(info.dynamic && info.segments.len() >= 2, "{lib}: {info:?}");
            }
        }
    }

    #[test]
    fn refuses_what_is_not_elf() {
        assert!(parse(&b"#!/bin/sh\n"[..], 10).unwrap_err().contains("expected an ELF file"));
        let e = parse(&b"\x7fELF\x02"[..], 5).unwrap_err();
        assert!(e.contains("64-bit ELF header"), "{e}");
    }
}
