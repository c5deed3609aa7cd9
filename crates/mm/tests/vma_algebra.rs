//! Property test of the mapping algebra (issue 22, item 6): any sequence of `mmap`, `munmap`,
//! `mprotect` and touches on a window of an address space keeps the VMAs sorted and
//! non-overlapping, the `/proc/PID/maps` text in step with them, and every counter the
//! whole-system checkers verify (RSS, refcounts, LRU, page tables) consistent after every step.

mod common;

use common::{machine, run_in};
use mm::{Access, MmapArgs, map, prot};
use proptest::prelude::*;
use simcore::{Bytes, VirtAddr};

/// The window the operations act on: 64 pages.
const BASE: u64 = 0x4000_0000;
const PAGES: u64 = 64;

#[derive(Clone, Copy, Debug)]
enum Op {
    Mmap { page: u64, pages: u64, prot: u32 },
    Munmap { page: u64, pages: u64 },
    Mprotect { page: u64, pages: u64, prot: u32 },
    Touch { page: u64, pages: u64, write: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let range = (0..PAGES).prop_flat_map(|page| (Just(page), 1..=PAGES - page));
    let protection = prop_oneof![
        Just(prot::NONE),
        Just(prot::READ),
        Just(prot::READ | prot::WRITE),
        Just(prot::READ | prot::EXEC)
    ];
    prop_oneof![
        (range.clone(), protection.clone()).prop_map(|((page, pages), prot)| Op::Mmap {
            page,
            pages,
            prot
        }),
        range.clone().prop_map(|(page, pages)| Op::Munmap { page, pages }),
        (range.clone(), protection).prop_map(|((page, pages), prot)| Op::Mprotect {
            page,
            pages,
            prot
        }),
        (range, any::<bool>()).prop_map(|((page, pages), write)| Op::Touch { page, pages, write }),
    ]
}

async fn apply(t: &mm::Thread, op: Op) {
    let at = |page: u64| VirtAddr(BASE + page * 4096);
    let len = |pages: u64| Bytes(pages * 4096);
    // Errors (EACCES-like signals on touches of unmapped or protected pages) are outcomes, not
    // failures: the property is about the state every outcome leaves.
    match op {
        Op::Mmap { page, pages, prot } => {
            let flags = map::PRIVATE | map::ANONYMOUS | map::FIXED;
            let args = MmapArgs {
                addr: Some(at(page)),
                len: len(pages),
                prot,
                flags,
                fd: None,
                offset: 0,
            };
            assert_eq!(t.mmap(args).await, Ok(at(page)), "a fixed anonymous mapping succeeds");
        }
        Op::Munmap { page, pages } => t.munmap(at(page), len(pages)).await.unwrap(),
        Op::Mprotect { page, pages, prot } => {
            let _ = t.mprotect(at(page), len(pages), prot).await;
        }
        Op::Touch { page, pages, write } => {
            let access = if write { Access::Write } else { Access::Read };
            let _ = t.touch(at(page), len(pages), access).await;
        }
    }
}

/// `(start, end)` of every line of a maps text, in order.
fn ranges(maps: &str) -> Vec<(u64, u64)> {
    maps.lines()
        .map(|l| {
            let (a, b) = l.split(' ').next().unwrap().split_once('-').unwrap();
            (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap())
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn mappings_stay_sorted_disjoint_and_counted(ops in proptest::collection::vec(op(), 1..24)) {
        let mut m = machine(Bytes::mib(64));
        let pid = m.new_process("p").unwrap();
        // `run_in` runs the whole-system checkers after every simulation step.
        run_in(&mut m, pid, move |t| async move {
            for op in ops {
                apply(&t, op).await;
            }
        });
        let r = ranges(&m.maps(pid));
        for w in r.windows(2) {
            prop_assert!(w[0].1 <= w[1].0, "overlapping or unsorted VMAs: {:x?}", r);
        }
        for (start, end) in &r {
            prop_assert!(start < end && start % 4096 == 0 && end % 4096 == 0, "{:x?}", r);
        }
    }
}
