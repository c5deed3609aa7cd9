//! Python arguments in the scenario files' vocabulary: sizes as ints or strings (`"64KiB"`),
//! protections (`"rw"`), flags (`"private|anonymous"`), advice and access kinds, all read by lab's
//! parsers so that Python and scenario files accept exactly the same words. A bad word is a
//! `ValueError` naming the argument and what was expected.

use lab::scenario::parse::{
    parse_access, parse_advice, parse_duration, parse_fadvice, parse_map_flags, parse_mcl_flags,
    parse_mlock2_flags, parse_msync_flags, parse_open_flags, parse_prctl_option, parse_prot,
    parse_size,
};
use mm::{Access, OpenFlags};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyString;
use simcore::Bytes;

/// A size or offset in bytes: a non-negative int, or a string like `"64KiB"` or `"2MiB"`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Size(pub(crate) u64);

impl Size {
    pub(crate) fn bytes(self) -> Bytes {
        Bytes(self.0)
    }
}

impl<'a, 'py> FromPyObject<'a, 'py> for Size {
    type Error = PyErr;

    fn extract(ob: Borrowed<'a, 'py, PyAny>) -> PyResult<Size> {
        if let Ok(s) = ob.cast::<PyString>() {
            let s = s.to_str()?;
            return parse_size(s).map(|b| Size(b.as_u64())).ok_or_else(|| {
                PyValueError::new_err(format!(
                    "expected a size like 4096, \"64KiB\" or \"2MiB\", found \"{s}\""
                ))
            });
        }
        if ob.is_instance_of::<pyo3::types::PyInt>() {
            return ob.extract::<u64>().map(Size);
        }
        Err(PyTypeError::new_err(format!(
            "expected a size (an int or a string like \"64KiB\"), found {}",
            ob.get_type().name()?
        )))
    }
}

/// `what: message` as a `ValueError`.
fn bad(what: &str, message: &str) -> PyErr {
    PyValueError::new_err(format!("{what}: {message}"))
}

pub(crate) fn prot(s: &str) -> PyResult<u32> {
    parse_prot(s).map_err(|e| bad("prot", &e))
}

pub(crate) fn map_flags(s: &str) -> PyResult<u32> {
    parse_map_flags(s).map_err(|e| bad("flags", &e))
}

pub(crate) fn open_flags(s: &str) -> PyResult<OpenFlags> {
    parse_open_flags(s).map_err(|e| bad("flags", &e))
}

pub(crate) fn advice(s: &str) -> PyResult<u32> {
    parse_advice(s).map_err(|e| bad("advice", &e))
}

pub(crate) fn fadvice(s: &str) -> PyResult<i32> {
    parse_fadvice(s).map_err(|e| bad("advice", &e))
}

pub(crate) fn mlock2_flags(s: &str) -> PyResult<u32> {
    parse_mlock2_flags(s).map_err(|e| bad("flags", &e))
}

pub(crate) fn mcl_flags(s: &str) -> PyResult<u32> {
    parse_mcl_flags(s).map_err(|e| bad("flags", &e))
}

pub(crate) fn msync_flags(s: &str) -> PyResult<u32> {
    parse_msync_flags(s).map_err(|e| bad("flags", &e))
}

/// A duration like `"10us"` or `"2ms"`, at most a scenario's longest `sleep`.
pub(crate) fn duration(s: &str) -> PyResult<simcore::SimDuration> {
    let max = lab::scenario::limits::MAX_SLEEP;
    match parse_duration(s) {
        Some(d) if d <= max => Ok(d),
        Some(_) => Err(bad("duration", &format!("\"{s}\": expected at most {max}"))),
        None => Err(bad(
            "duration",
            &format!("expected a duration like \"10us\" or \"2ms\", found \"{s}\""),
        )),
    }
}

pub(crate) fn prctl_option(s: &str) -> PyResult<mm::syscall::Prctl> {
    parse_prctl_option(s).map_err(|e| bad("option", &e))
}

pub(crate) fn access(s: &str) -> PyResult<Access> {
    parse_access(s).map_err(|e| bad("access", &e))
}
