//! The state floor: the types `KState` holds, their ids, and nothing that acts on them.
//!
//! The kernel declares what `mm/*.c` works on in its headers (`mm_types.h`, `mmzone.h`,
//! `hugetlb.h`, `swap.h`, `memcontrol.h`, `fs.h`), and a header never includes a `.c` file.
//! These modules are mmsim's headers, named after the kernel's: each holds the structs and
//! enums of one header's concern, and imports only the rest of the state floor (`types/`, the
//! ids in `types/ids.rs`, and the data-structure modules `folio.rs`, `pgtable.rs`, `xarray.rs`,
//! `vma.rs`, `mm_struct.rs`, `process.rs`, `vmstat.rs`, `page_alloc/buddy.rs`, `arch/tlb`). The code
//! that acts on a type, its `impl` blocks included, stays with its mechanism. The floors and
//! their check are in ARCHITECTURE.md and `xtask/tests/floors.rs`.

pub mod delayacct;
pub mod fs;
pub mod huge_mm;
pub mod hugetlb;
pub mod ids;
pub mod ksm;
pub mod memcontrol;
pub mod mm_types;
pub mod mmzone;
pub mod shm;
pub mod swap;
pub mod userfaultfd;
