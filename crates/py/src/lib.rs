//! `mmsim._core`, the compiled half of the Python package `mmsim` (`python/mmsim`).
//!
//! A thin edge: it converts Python arguments (sizes, flags and names through lab's parsers), runs
//! each call on [`lab::session::Session`] (one simulated thread to completion) or
//! [`lab::scenario::run`], and converts results and errors. It holds no simulation semantics;
//! the pure-Python layer turns the kernel's text formats into pandas objects.
//!
//! Errors become the Python exceptions of `mmsim.errors` ([`errors`]): an errno is an `OSError`
//! of the right subclass, a signal a `MemoryAccessError`, a panic inside the simulator (a broken
//! invariant) a `SimulatorBug` carrying the seed. Every call that touches the kernel runs under
//! `catch_unwind`, so a simulator bug never aborts the interpreter; the machine then refuses
//! further use, since the engine's state is inconsistent after a panic.
//!
//! The simulation is single-threaded and uses `Rc`, so `Machine` is `unsendable` (used from
//! another Python thread it raises) and every call holds the GIL. The workspace's
//! `unsafe_code = "deny"` holds here too: PyO3's macros need no exemption.

mod args;
mod cli;
mod errors;
mod machine;
mod process;
mod scenario;

use pyo3::prelude::*;

/// The compiled core of mmsim: `Machine`, `Process`, `run_scenario`, `reproduce`, `diff` and
/// the command line `cli_main`. Use the `mmsim` package,
/// which wraps these with pandas results.
#[pymodule]
mod _core {
    use pyo3::prelude::*;

    #[pymodule_export]
    use crate::cli::{cli_main, diff, experiments, reproduce};
    #[pymodule_export]
    use crate::machine::Machine;
    #[pymodule_export]
    use crate::process::Process;
    #[pymodule_export]
    use crate::scenario::run_scenario;

    #[pymodule_init]
    fn init(m: &Bound<'_, PyModule>) -> PyResult<()> {
        m.add("__version__", env!("CARGO_PKG_VERSION"))
    }
}
