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

/// Runs each scenario file natively beside the model (`mmsim diff`): on the host, or in one boot
/// of a Debian guest of series `guest` (`6.1`, `6.12`); returns a JSON list of
/// `{scenario, outcome}` where the outcome is `{"compared": DiffReport}`, `{"refused": why}`
/// or `{"lost": why}` (the package turns it into a DataFrame).
#[pyfunction]
#[pyo3(signature = (files, guest=None, timeout=120))]
pub(crate) fn diff(files: Vec<String>, guest: Option<String>, timeout: u64) -> PyResult<String> {
    use host::guest::{GuestKernel, GuestOptions, GuestResult, Outcome};
    let timeout = std::time::Duration::from_secs(timeout.clamp(1, 3600));
    let results: Vec<GuestResult> = match guest {
        Some(v) => {
            let kernel = GuestKernel::parse(&v).map_err(|r| PyValueError::new_err(r.reason))?;
            let o = GuestOptions { kernel, timeout, memory_mib: 4096, accel: "tcg".into() };
            host::guest::diff_in_guest(&files, &o, &mut |_| {})
                .map_err(|r| PyValueError::new_err(r.reason))?
                .results
        }
        None => files
            .into_iter()
            .map(|f| {
                let o = host::NativeOptions { timeout, ..host::NativeOptions::default() };
                let outcome = match lab::scenario::run::load(&f) {
                    Err(e) => return Err(PyValueError::new_err(e.to_string())),
                    Ok(s) => match host::diff::diff(&s, &o) {
                        Ok(r) => Outcome::Compared(r),
                        Err(r) => Outcome::Refused(r.reason),
                    },
                };
                Ok(GuestResult { scenario: f, outcome })
            })
            .collect::<PyResult<_>>()?,
    };
    serde_json::to_string(&results).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The experiments: (name, title, source).
#[pyfunction]
pub(crate) fn experiments() -> Vec<(&'static str, &'static str, &'static str)> {
    lab::reproduce::EXPERIMENTS.iter().map(|e| (e.name, e.title, e.source)).collect()
}
