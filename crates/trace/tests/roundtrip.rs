//! Property tests of the trace formats' writers and readers: what a writer wrote, its reader
//! reads back identically, plain or compressed (issue 22, item 6).

use proptest::prelude::*;
use simcore::VirtAddr;
use std::cell::Cell;
use std::io::{BufRead, Cursor, Write};
use std::rc::Rc;
use trace::binary::BinaryWriter;
use trace::block::{BlockFormat, BlockReader, write_oracle_general};
use trace::input::{Format, TraceReader};
use trace::record::{MemRef, RefKind};

fn mem_ref() -> impl Strategy<Value = MemRef> {
    let kind = prop_oneof![
        Just(RefKind::Instr),
        Just(RefKind::Load),
        Just(RefKind::Store),
        Just(RefKind::Modify)
    ];
    // Sizes past the one-byte code (escaped as a varint) and addresses anywhere in 64 bits.
    (kind, any::<u64>(), 1u32..100_000).prop_map(|(kind, addr, size)| MemRef {
        kind,
        addr: VirtAddr(addr),
        size,
    })
}

#[derive(Clone, Copy, Debug)]
enum Compression {
    None,
    Gzip,
    Zstd,
}

fn compress(bytes: Vec<u8>, c: Compression) -> Vec<u8> {
    match c {
        Compression::None => bytes,
        Compression::Gzip => {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            e.write_all(&bytes).unwrap();
            e.finish().unwrap()
        }
        Compression::Zstd => zstd::encode_all(Cursor::new(bytes), 1).unwrap(),
    }
}

fn reader(bytes: Vec<u8>) -> Box<dyn BufRead> {
    Box::new(Cursor::new(bytes))
}

proptest! {
    #[test]
    fn binary_traces_read_back_identically(
        refs in proptest::collection::vec(mem_ref(), 0..2000),
        c in prop_oneof![Just(Compression::None), Just(Compression::Gzip), Just(Compression::Zstd)],
    ) {
        let mut w = BinaryWriter::new(Vec::new()).unwrap();
        for r in &refs {
            w.write(*r).unwrap();
        }
        let (bytes, count) = w.finish().unwrap();
        prop_assert_eq!(count, refs.len() as u64);
        let input = reader(compress(bytes, c));
        let mut r = TraceReader::from_reader(input, "t", false, 0, Rc::new(Cell::new(0))).unwrap();
        prop_assert_eq!(r.format, Format::Binary);
        let mut back = Vec::new();
        while let Some(m) = r.next_ref().unwrap() {
            back.push(m);
        }
        prop_assert_eq!(back, refs);
    }

    /// oracleGeneral keeps object ids; the reader numbers them in order of first appearance.
    #[test]
    fn oracle_general_traces_read_back_as_written(
        ids in proptest::collection::vec(0u64..50, 0..3000),
        c in prop_oneof![Just(Compression::None), Just(Compression::Zstd)],
    ) {
        let mut bytes = Vec::new();
        let n = write_oracle_general(&mut bytes, ids.iter().copied()).unwrap();
        prop_assert_eq!(n, ids.len() as u64);
        let mut r = BlockReader::from_reader(reader(compress(bytes, c)), "t", BlockFormat::OracleGeneral)
            .unwrap();
        let mut first: Vec<u64> = Vec::new();
        let expected: Vec<u64> = ids
            .iter()
            .map(|id| match first.iter().position(|x| x == id) {
                Some(i) => i as u64,
                None => {
                    first.push(*id);
                    first.len() as u64 - 1
                }
            })
            .collect();
        let mut back = Vec::new();
        while let Some(p) = r.next_page().unwrap() {
            back.push(p);
        }
        prop_assert_eq!(back, expected);
    }
}
