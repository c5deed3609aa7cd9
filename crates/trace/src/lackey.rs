//! valgrind lackey's `--trace-mem=yes` output (`lackey/lk_main.c`, valgrind 3.x).
//!
//! Each reference is one line: an instruction fetch `I  04001a73,3` (the letter in column 0),
//! or a data access with one leading space: ` L 1ffefffd58,8` (load), ` S ...` (store),
//! ` M ...` (modify: load then store). The address is hex without `0x`, the size decimal.
//! Valgrind's own messages (`==PID== ...`, `--PID-- ...`) and blank lines are skipped; anything
//! else is malformed and reported with its line number. Leading and trailing blanks, lower- or
//! upper-case hex digits and CRLF line ends are accepted.

use crate::InputError;
use crate::record::{MemRef, RefKind};
use simcore::VirtAddr;
use std::io::BufRead;

/// Parses one line: `Ok(None)` for a line that carries no reference.
pub fn parse_line(line: &[u8]) -> Result<Option<MemRef>, String> {
    let line = line.trim_ascii();
    if line.is_empty() || line.starts_with(b"==") || line.starts_with(b"--") {
        return Ok(None);
    }
    let kind = match line[0] {
        b'I' => RefKind::Instr,
        b'L' => RefKind::Load,
        b'S' => RefKind::Store,
        b'M' => RefKind::Modify,
        c => {
            return Err(format!(
                "expected a lackey reference (I, L, S or M), found `{}`",
                char::from(c).escape_default()
            ));
        }
    };
    let rest = &line[1..];
    let body = rest.trim_ascii_start();
    if body.len() == rest.len() {
        return Err("expected a blank after the reference kind".into());
    }
    let comma = body.iter().position(|&b| b == b',').ok_or("expected `ADDRESS,SIZE`")?;
    let (hex, size) = (&body[..comma], &body[comma + 1..]);
    if hex.is_empty() || hex.len() > 16 {
        return Err(format!("expected 1 to 16 hex digits of address, found {}", hex.len()));
    }
    let mut addr = 0u64;
    for &b in hex {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => {
                return Err(format!(
                    "bad hex digit `{}` in the address",
                    char::from(b).escape_default()
                ));
            }
        };
        addr = addr << 4 | u64::from(d);
    }
    if size.is_empty() || size.len() > 9 || !size.iter().all(u8::is_ascii_digit) {
        return Err("expected a decimal size after the comma".into());
    }
    let size = size.iter().fold(0u32, |n, &b| n * 10 + u32::from(b - b'0'));
    if size == 0 {
        return Err("a reference of size 0".into());
    }
    Ok(Some(MemRef { kind, addr: VirtAddr(addr), size }))
}

/// Reads references from lackey text, line by line.
#[derive(Debug)]
pub struct LackeyReader<R> {
    input: R,
    file: String,
    line: u64,
    buf: Vec<u8>,
    skip_bad: bool,
    bad_lines: u64,
}

impl<R: BufRead> LackeyReader<R> {
    /// A reader of `input` (named `file` in messages); with `skip_bad`, malformed lines are
    /// counted and skipped instead of ending the read.
    pub fn new(input: R, file: &str, skip_bad: bool) -> LackeyReader<R> {
        LackeyReader {
            input,
            file: file.to_string(),
            line: 0,
            buf: Vec::new(),
            skip_bad,
            bad_lines: 0,
        }
    }

    /// Malformed lines skipped so far.
    pub fn bad_lines(&self) -> u64 {
        self.bad_lines
    }

    /// The next reference, `None` at the end.
    pub fn next_ref(&mut self) -> Result<Option<MemRef>, InputError> {
        loop {
            self.buf.clear();
            let n = self.input.read_until(b'\n', &mut self.buf).map_err(|e| InputError {
                file: self.file.clone(),
                line: Some(self.line + 1),
                message: e.to_string(),
            })?;
            if n == 0 {
                return Ok(None);
            }
            self.line += 1;
            match parse_line(&self.buf) {
                Ok(Some(r)) => return Ok(Some(r)),
                Ok(None) => {}
                Err(_) if self.skip_bad => self.bad_lines += 1,
                Err(message) => {
                    return Err(InputError {
                        file: self.file.clone(),
                        line: Some(self.line),
                        message,
                    });
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(s: &str) -> MemRef {
        parse_line(s.as_bytes()).unwrap().unwrap()
    }

    #[test]
    fn parses_each_kind_and_edge_cases() {
        assert_eq!(
            one("I  04001a73,3"),
            MemRef { kind: RefKind::Instr, addr: VirtAddr(0x4001a73), size: 3 }
        );
        assert_eq!(one(" L 1FFEFFFD58,8").addr, VirtAddr(0x1ffefffd58));
        assert_eq!(one(" S 0,1").kind, RefKind::Store);
        assert_eq!(one(" M ffffffffffffffff,16\r\n").addr, VirtAddr(u64::MAX));
        for skipped in
            ["", "   ", "==123== Lackey, an example Valgrind tool", "--9-- warning", "\r\n"]
        {
            assert_eq!(parse_line(skipped.as_bytes()), Ok(None), "{skipped:?}");
        }
    }

    #[test]
    fn malformed_lines_say_what_was_expected() {
        for (line, expected) in [
            ("X 1000,4", "expected a lackey reference"),
            ("L1000,4", "expected a blank"),
            (" L 1000", "expected `ADDRESS,SIZE`"),
            (" L ,4", "1 to 16 hex digits"),
            (" L 12345678123456789,4", "1 to 16 hex digits"),
            (" L 10g0,4", "bad hex digit `g`"),
            (" L 1000,", "decimal size"),
            (" L 1000,4x", "decimal size"),
            (" L 1000,0", "size 0"),
        ] {
            let e = parse_line(line.as_bytes()).unwrap_err();
            assert!(e.contains(expected), "{line:?}: {e}");
        }
    }

    #[test]
    fn errors_carry_line_numbers_and_skip_bad_counts() {
        let text = "==1== hi\nI  1000,2\n L 2000,4\n L zz,4\n S 3000,8\n";
        let mut r = LackeyReader::new(text.as_bytes(), "t.lackey", false);
        assert!(r.next_ref().unwrap().is_some());
        assert!(r.next_ref().unwrap().is_some());
        let e = r.next_ref().unwrap_err();
        assert_eq!(e.to_string(), "t.lackey:4: bad hex digit `z` in the address");
        let mut r = LackeyReader::new(text.as_bytes(), "t.lackey", true);
        let mut n = 0;
        while r.next_ref().unwrap().is_some() {
            n += 1;
        }
        assert_eq!((n, r.bad_lines()), (3, 1));
    }
}
