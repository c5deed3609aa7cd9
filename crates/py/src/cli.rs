//! The `mmsim` command line and the reproduced experiments, for Python: `cli_main` runs the same
//! program as the `mmsim` binary (the package's console script calls it), `reproduce` runs one
//! experiment and returns its report as JSON text (the package turns it into a DataFrame).

use lab::reproduce::{NoProgress, Scale, find};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Runs `mmsim` with `argv` (the program name first); returns the exit status.
#[pyfunction]
pub(crate) fn cli_main(py: Python<'_>, argv: Vec<String>) -> u8 {
    // Flush what Python buffered, so the two writers to stdout do not interleave.
    let _ =
        py.import("sys").and_then(|s| s.getattr("stdout")).and_then(|o| o.call_method0("flush"));
    mmsim_cli::main_with_args(argv)
}

/// Runs experiment `name` and returns its report as JSON (`Report::json`).
#[pyfunction]
#[pyo3(signature = (name, seed=1, quick=false))]
pub(crate) fn reproduce(name: &str, seed: u64, quick: bool) -> PyResult<String> {
    let e = find(name).map_err(PyValueError::new_err)?;
    let scale = if quick { Scale::Quick } else { Scale::Full };
    let report = e.run(seed, scale, &mut NoProgress).map_err(PyValueError::new_err)?;
    Ok(report.json().to_string())
}

/// The experiments: (name, title, source).
#[pyfunction]
pub(crate) fn experiments() -> Vec<(&'static str, &'static str, &'static str)> {
    lab::reproduce::EXPERIMENTS.iter().map(|e| (e.name, e.title, e.source)).collect()
}
