//! Reading one TOML table: typed values by key (strings, integers, booleans, sizes, addresses,
//! keywords, durations, data), each error naming the value's line and the table it sits in, and
//! the keys a table did not use reported as unknown, with the keys it takes.

use super::Parser;
use super::words::{
    parse_access, parse_addr, parse_advice, parse_advice_number, parse_duration, parse_fadvice,
    parse_hex, parse_map_flags, parse_open_flags, parse_prot, parse_size,
};
use crate::scenario::ScenarioError;
use crate::scenario::limits::{MAX_DATA, MAX_DEVICE, MAX_MINCORE, MAX_SLEEP, check_tunable};
use crate::scenario::model::AddrExpr;
use crate::scenario::node::{Kind, Node};
use mm::OpenFlags;
use simcore::{Bytes, SimDuration};
use std::cell::RefCell;

/// A table being read: marks the keys it used, so that unknown keys are reported.
pub(super) struct Fields<'a> {
    p: &'a Parser<'a>,
    pub(super) line: usize,
    what: String,
    pub(super) entries: &'a [(String, Node)],
    used: RefCell<Vec<bool>>,
}

impl<'a> Parser<'a> {
    pub(super) fn fields(
        &'a self,
        node: &'a Node,
        what: impl Into<String>,
    ) -> Result<Fields<'a>, ScenarioError> {
        let what = what.into();
        match &node.kind {
            Kind::Table(entries) => Ok(Fields {
                p: self,
                line: node.line,
                what,
                entries,
                used: RefCell::new(vec![false; entries.len()]),
            }),
            k => {
                Err(self
                    .err(node.line, format!("{what}: expected a table, found {}", k.describe())))
            }
        }
    }

    pub(super) fn array(&'a self, node: &'a Node, what: &str) -> Result<&'a [Node], ScenarioError> {
        match &node.kind {
            Kind::Array(items) => Ok(items),
            k => {
                Err(self
                    .err(node.line, format!("{what}: expected an array, found {}", k.describe())))
            }
        }
    }

    pub(super) fn size_node(&self, node: &Node, what: &str) -> Result<Bytes, ScenarioError> {
        match &node.kind {
            Kind::Int(i) if *i >= 0 => Ok(Bytes(*i as u64)),
            Kind::Str(s) => parse_size(s).ok_or_else(|| {
                self.err(
                    node.line,
                    format!(
                        "{what}: expected a size like 4096, \"64KiB\" or \"2MiB\", found \"{s}\""
                    ),
                )
            }),
            k => Err(self.err(
                node.line,
                format!("{what}: expected a size like 4096 or \"64KiB\", found {}", k.describe()),
            )),
        }
    }
}

impl<'a> Fields<'a> {
    pub(super) fn get(&self, key: &str) -> Option<&'a Node> {
        let i = self.entries.iter().position(|(k, _)| k == key)?;
        self.used.borrow_mut()[i] = true;
        Some(&self.entries[i].1)
    }

    pub(super) fn mark_all(&self) {
        self.used.borrow_mut().fill(true);
    }

    pub(super) fn line_of(&self, key: &str) -> usize {
        self.entries.iter().find(|(k, _)| k == key).map_or(self.line, |(_, n)| n.line)
    }

    pub(super) fn list(&self, key: &str) -> Result<&'a [Node], ScenarioError> {
        match self.get(key) {
            None => Ok(&[]),
            Some(n) => self.p.array(n, key),
        }
    }

    pub(super) fn finish(&self, known: &[&str]) -> Result<(), ScenarioError> {
        let used = self.used.borrow();
        for (i, (k, n)) in self.entries.iter().enumerate() {
            if !used[i] {
                let hint = if known.is_empty() {
                    "it takes no keys".to_string()
                } else {
                    format!("expected one of {}", known.join(", "))
                };
                return Err(self
                    .p
                    .err(n.line, format!("unknown key `{k}` in {}: {hint}", self.what)));
            }
        }
        Ok(())
    }

    fn missing(&self, key: &str) -> ScenarioError {
        self.p.err(self.line, format!("{} needs `{key}`", self.what))
    }

    pub(super) fn opt_str(&self, key: &str) -> Result<Option<String>, ScenarioError> {
        match self.get(key) {
            None => Ok(None),
            Some(Node { kind: Kind::Str(s), .. }) => Ok(Some(s.clone())),
            Some(n) => Err(self.p.err(
                n.line,
                format!("`{key}` in {}: expected a string, found {}", self.what, n.kind.describe()),
            )),
        }
    }

    /// A string or a non-negative integer, as the text a sysfs write would carry.
    pub(super) fn scalar_text(&self, key: &str) -> Result<String, ScenarioError> {
        match self.get(key) {
            None => Err(self.missing(key)),
            Some(n) => scalar_node_text(self.p, key, &self.what, n),
        }
    }

    pub(super) fn string(&self, key: &str) -> Result<String, ScenarioError> {
        self.opt_str(key)?.ok_or_else(|| self.missing(key))
    }

    pub(super) fn opt_u64(&self, key: &str) -> Result<Option<u64>, ScenarioError> {
        match self.get(key) {
            None => Ok(None),
            Some(Node { kind: Kind::Int(i), .. }) if *i >= 0 => Ok(Some(*i as u64)),
            Some(n) => Err(self.p.err(
                n.line,
                format!(
                    "`{key}` in {}: expected a non-negative integer, found {}",
                    self.what,
                    n.kind.describe()
                ),
            )),
        }
    }

    pub(super) fn opt_bool(&self, key: &str) -> Result<Option<bool>, ScenarioError> {
        match self.get(key) {
            None => Ok(None),
            Some(Node { kind: Kind::Bool(b), .. }) => Ok(Some(*b)),
            Some(n) => Err(self.p.err(
                n.line,
                format!(
                    "`{key}` in {}: expected true or false, found {}",
                    self.what,
                    n.kind.describe()
                ),
            )),
        }
    }

    pub(super) fn opt_size(&self, key: &str) -> Result<Option<Bytes>, ScenarioError> {
        self.get(key).map(|n| self.p.size_node(n, &format!("`{key}` in {}", self.what))).transpose()
    }

    /// A size (`"4KiB"`) or an integer of either sign, as a syscall's signed length or offset
    /// carries it (`loff_t`): a negative value is the caller's to refuse or accept.
    pub(super) fn opt_signed_size(&self, key: &str) -> Result<Option<i64>, ScenarioError> {
        match self.get(key) {
            Some(Node { kind: Kind::Int(i), .. }) => Ok(Some(*i)),
            _ => Ok(self.opt_size(key)?.map(|b| b.as_u64() as i64)),
        }
    }

    /// `posix_fadvise`'s advice: a name (`"willneed"`) or the number the syscall takes, any
    /// `int` (an unknown one is the kernel's EINVAL).
    pub(super) fn fadvice(&self, key: &str) -> Result<i32, ScenarioError> {
        match self.opt_c_int(key)? {
            Some(i) => Ok(i),
            None => self.keyword(key, parse_fadvice, None),
        }
    }

    /// The value at `key` when it is an integer (`None` when absent or not one): a C `int`.
    fn opt_c_int(&self, key: &str) -> Result<Option<i32>, ScenarioError> {
        let Some(n @ Node { kind: Kind::Int(i), .. }) = self.get(key) else { return Ok(None) };
        i32::try_from(*i).map(Some).map_err(|_| {
            self.p.err(n.line, format!("`{key}` in {}: {i} does not fit an int", self.what))
        })
    }

    /// The size of a device (`swap`, `pmem`): a multiple of 4 KiB of at most [`MAX_DEVICE`].
    pub(super) fn opt_device(&self, key: &str) -> Result<Option<Bytes>, ScenarioError> {
        let size = self.opt_size(key)?;
        if let Some(s) = size.filter(|s| !s.is_page_aligned() || *s > MAX_DEVICE) {
            let e = format!("`{key}` = {s}: expected a multiple of 4 KiB of at most {MAX_DEVICE}");
            return Err(self.p.err(self.line_of(key), e));
        }
        Ok(size)
    }

    pub(super) fn size(&self, key: &str) -> Result<Bytes, ScenarioError> {
        self.opt_size(key)?.ok_or_else(|| self.missing(key))
    }

    pub(super) fn opt_addr(&self, key: &str) -> Result<Option<AddrExpr>, ScenarioError> {
        let Some(n) = self.get(key) else { return Ok(None) };
        let parsed = match &n.kind {
            Kind::Int(i) => Some(AddrExpr { base: None, offset: *i }),
            Kind::Str(s) => parse_addr(s),
            _ => None,
        };
        parsed.map(Some).ok_or_else(|| self.p.err(n.line, format!("`{key}` in {}: expected an address like \"buf\", \"buf+4KiB\" or \"0x10000000\"", self.what)))
    }

    pub(super) fn addr(&self, key: &str) -> Result<AddrExpr, ScenarioError> {
        self.opt_addr(key)?.ok_or_else(|| self.missing(key))
    }

    /// A keyword value parsed by `parse`, with the error placed at the key's line.
    pub(super) fn keyword<T>(
        &self,
        key: &str,
        parse: fn(&str) -> Result<T, String>,
        default: Option<T>,
    ) -> Result<T, ScenarioError> {
        match self.opt_str(key)? {
            None => default.ok_or_else(|| self.missing(key)),
            Some(s) => parse(&s).map_err(|e| {
                self.p.err(self.line_of(key), format!("`{key}` in {}: {e}", self.what))
            }),
        }
    }

    pub(super) fn prot(&self, key: &str) -> Result<u32, ScenarioError> {
        self.keyword(key, parse_prot, None)
    }

    pub(super) fn map_flags(&self, key: &str) -> Result<u32, ScenarioError> {
        self.keyword(key, parse_map_flags, None)
    }

    /// `madvise`'s advice: a name (`"dontneed"`) or the number the syscall takes, any `int`
    /// (one the kernel lacks is its EINVAL; one mmsim does not model is refused by name).
    pub(super) fn advice(&self, key: &str) -> Result<u32, ScenarioError> {
        match self.opt_c_int(key)? {
            Some(i) => parse_advice_number(i).map_err(|e| {
                self.p.err(self.line_of(key), format!("`{key}` in {}: {e}", self.what))
            }),
            None => self.keyword(key, parse_advice, None),
        }
    }

    pub(super) fn access(&self, key: &str) -> Result<mm::Access, ScenarioError> {
        self.keyword(key, parse_access, Some(mm::Access::Read))
    }

    pub(super) fn open_flags(&self, key: &str) -> Result<OpenFlags, ScenarioError> {
        self.keyword(key, parse_open_flags, Some(OpenFlags::RDONLY))
    }

    pub(super) fn duration(&self, key: &str) -> Result<SimDuration, ScenarioError> {
        let Some(n) = self.get(key) else { return Err(self.missing(key)) };
        let Kind::Str(s) = &n.kind else {
            return Err(self
                .p
                .err(n.line, format!("`{key}`: expected a duration like \"10us\" or \"2ms\"")));
        };
        let d = parse_duration(s).ok_or_else(|| {
            self.p.err(
                n.line,
                format!("`{key}`: expected a duration like \"10us\" or \"2ms\", found \"{s}\""),
            )
        })?;
        if d > MAX_SLEEP {
            return Err(self.p.err(n.line, format!("`{key}` = {s}: expected at most {MAX_SLEEP}")));
        }
        Ok(d)
    }

    /// A tunable, checked against its range ([`check_tunable`]).
    pub(super) fn opt_tunable(&self, key: &str) -> Result<Option<u64>, ScenarioError> {
        let value = self.opt_u64(key)?;
        if let Some(v) = value {
            check_tunable(key, v).map_err(|e| self.p.err(self.line_of(key), e))?;
        }
        Ok(value)
    }

    /// Bytes from `data` (text), `data_hex`, or `fill` (a byte) with `len`.
    /// A `mincore` length: its vector is a byte per page, so at most [`MAX_MINCORE`].
    pub(super) fn mincore_len(&self) -> Result<u64, ScenarioError> {
        let len = self.size("len")?;
        if len > MAX_MINCORE {
            return Err(self.p.err(
                self.line_of("len"),
                format!("`len` = {len} of `mincore`: expected at most {MAX_MINCORE}"),
            ));
        }
        Ok(len.as_u64())
    }

    pub(super) fn data(&self) -> Result<Vec<u8>, ScenarioError> {
        if let Some(text) = self.opt_str("data")? {
            return Ok(text.into_bytes());
        }
        if let Some(hex) = self.opt_str("data_hex")? {
            return parse_hex(&hex).ok_or_else(|| {
                self.p.err(
                    self.line_of("data_hex"),
                    "data_hex: expected an even number of hex digits",
                )
            });
        }
        if let Some(byte) = self.opt_u64("fill")? {
            let byte = u8::try_from(byte).map_err(|_| {
                self.p.err(self.line_of("fill"), "fill: expected a byte value 0..255")
            })?;
            let len = self.size("len")?;
            if len > MAX_DATA {
                return Err(self.p.err(
                    self.line_of("len"),
                    format!("`len` = {len} with `fill`: expected at most {MAX_DATA}"),
                ));
            }
            return Ok(vec![byte; len.as_u64() as usize]);
        }
        Err(self
            .p
            .err(self.line, format!("{} needs `data`, `data_hex` or `fill` with `len`", self.what)))
    }
}

/// The text of a string or non-negative integer value `n` of `key` in `what`.
pub(super) fn scalar_node_text(
    p: &Parser<'_>,
    key: &str,
    what: &str,
    n: &Node,
) -> Result<String, ScenarioError> {
    match &n.kind {
        Kind::Str(s) => Ok(s.clone()),
        Kind::Int(i) if *i >= 0 => Ok(i.to_string()),
        k => Err(p.err(
            n.line,
            format!("`{key}` in {what}: expected a string or a number, found {}", k.describe()),
        )),
    }
}
