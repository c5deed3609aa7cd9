//! `_core.run_scenario`: runs a scenario file as `mmsim run --json` does and returns whether it
//! passed with the report as that same JSON (the Python layer builds its `ScenarioResult`).

use crate::errors::{config_error, panic_message, scenario_error, simulator_bug};
use lab::scenario::parse::parse_show;
use lab::scenario::run::{Overrides, load, run};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Runs the scenario file at `path`, overriding its seed, kernel and `sets` (`(key, value)`: a
/// switch, `cost.NAME` or a tunable, as `mmsim run --set`) and adding observables to `show`.
/// Returns `(passed, report_json)`.
#[pyfunction]
#[pyo3(signature = (path, seed=None, kernel=None, sets=Vec::new(), show=Vec::new()))]
pub(crate) fn run_scenario(
    py: Python<'_>,
    path: &str,
    seed: Option<u64>,
    kernel: Option<&str>,
    sets: Vec<(String, String)>,
    show: Vec<String>,
) -> PyResult<(bool, String)> {
    let mut o = Overrides { seed, sets, ..Overrides::default() };
    if let Some(k) = kernel {
        o.kernel = Some(k.parse().map_err(|e: String| config_error(py, &e))?);
    }
    o.show = show
        .into_iter()
        .map(|s| parse_show(&s).map_err(|e| PyValueError::new_err(format!("show: {e}"))))
        .collect::<PyResult<_>>()?;
    let scenario = load(path).map_err(|e| scenario_error(py, &e))?;
    let seed = o.seed.unwrap_or(scenario.machine.seed);
    let report = catch_unwind(AssertUnwindSafe(|| run(&scenario, &o, &mut |_| {})))
        .map_err(|payload| simulator_bug(py, &panic_message(&*payload), seed))?
        .map_err(|e| scenario_error(py, &e))?;
    let json = serde_json::to_string(&report).expect("a report serialises");
    Ok((report.passed(), json))
}
