//! The simulator's own glue, apart from both the kernel and the hardware it models: the machine
//! that owns them (`machine.rs`), machine profiles and the named cost table (`profile.rs`,
//! `cost.rs`), page contents (`content.rs`, the bytes a real machine would keep in its frames),
//! the whole-system checkers (`check.rs`), and the kernel names of the model's blocking points
//! (`sites.rs`, for the explorer's reports). Nothing here has a kernel counterpart; kernel
//! behaviour never lives here.

pub mod check;
pub mod content;
pub mod cost;
pub mod machine;
pub mod profile;
pub mod sites;
