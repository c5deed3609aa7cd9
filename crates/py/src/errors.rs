//! What the simulator reports, as Python exceptions.
//!
//! The exception classes live in Python (`mmsim/errors.py`, with their attributes and
//! docstrings); this module instantiates them:
//! - a syscall's errno: `OSError(errno, strerror[, filename])`, which Python turns into the
//!   matching subclass (`ENOENT` gives `FileNotFoundError`), with a note naming the call and pid;
//! - a signal raised by a memory access: `SegmentationFault`, `BusError`, or `OutOfMemory` (the
//!   OOM killer's `SIGKILL`);
//! - a panic inside the simulator (a broken invariant): `SimulatorBug` with the run's seed;
//! - a stopped simulation (every task blocked, the event bound): `SimulationStopped`;
//! - an impossible machine: `ConfigError`; a bad scenario file: `ScenarioError` with file and line.

use lab::scenario::ScenarioError;
use mm::{Pid, Signal, SysError};
use pyo3::call::PyCallArgs;
use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use std::any::Any;

/// An instance of the exception class `class` of `mmsim.errors`, built from `args`.
fn mmsim_error<'py, A: PyCallArgs<'py>>(py: Python<'py>, class: &str, args: A) -> PyErr {
    let made = py.import("mmsim.errors").and_then(|m| m.getattr(class)).and_then(|c| c.call1(args));
    match made {
        Ok(instance) => PyErr::from_value(instance),
        Err(e) => e,
    }
}

pub(crate) fn config_error(py: Python<'_>, message: &str) -> PyErr {
    mmsim_error(py, "ConfigError", (message,))
}

pub(crate) fn scenario_error(py: Python<'_>, e: &ScenarioError) -> PyErr {
    mmsim_error(py, "ScenarioError", (e.to_string(), e.file.as_str(), e.line))
}

/// A broken invariant: the message names the seed that reproduces it (the engine's panics
/// already do; others get it appended).
pub(crate) fn simulator_bug(py: Python<'_>, message: &str, seed: u64) -> PyErr {
    let message = if message.contains("seed=") {
        message.to_string()
    } else {
        format!("{message}\n  reproduce with seed={seed}")
    };
    mmsim_error(py, "SimulatorBug", (message, seed))
}

pub(crate) fn simulation_stopped(py: Python<'_>, message: &str, seed: u64) -> PyErr {
    mmsim_error(py, "SimulationStopped", (format!("{message}\n  seed={seed}"), seed))
}

/// The text of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Where a failing call came from, for messages.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Origin<'a> {
    /// The syscall or access (`"open"`, `"touch"`).
    pub(crate) call: &'a str,
    pub(crate) pid: Pid,
    /// The path the call named, reported as the `OSError`'s filename.
    pub(crate) path: Option<&'a str>,
}

/// An errno or a signal, as the matching Python exception.
pub(crate) fn sys_error(py: Python<'_>, e: SysError, at: Origin<'_>) -> PyErr {
    match e {
        SysError::Errno(errno) => {
            let code = errno.code();
            let strerror = py
                .import("os")
                .and_then(|os| os.call_method1("strerror", (code,)))
                .and_then(|s| s.extract::<String>())
                .unwrap_or_else(|_| errno.name().to_string());
            let err = match at.path {
                Some(path) => PyOSError::new_err((code, strerror, path.to_string())),
                None => PyOSError::new_err((code, strerror)),
            };
            let note = format!("mmsim: {} in pid {} returned {errno}", at.call, at.pid);
            match err.add_note(py, note) {
                Ok(()) => err,
                Err(e) => e,
            }
        }
        SysError::Signal(signal) => {
            let class = match signal {
                Signal::SIGSEGV => "SegmentationFault",
                Signal::SIGBUS => "BusError",
                Signal::SIGKILL => "OutOfMemory",
            };
            let message = format!("{signal} in pid {} during {}", at.pid, at.call);
            mmsim_error(py, class, (message, at.pid.0))
        }
    }
}
