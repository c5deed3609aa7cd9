//! The `/proc/PID/maps` text format (`fs/proc/task_mmu.c` `show_map_vma`, Linux v6.8), which
//! describes the replayed process's address space:
//! `START-END PERMS OFFSET MAJOR:MINOR INODE [PATHNAME]`, with `PERMS` as `rwxp` or `rwxs`.
//! A pathname starting with `/` is a file mapping (a trailing ` (deleted)` is dropped);
//! `[heap]`, `[stack]`, `[vdso]`, `[vvar]` and nameless lines are anonymous memory. Errors name
//! the file and line.

use crate::InputError;

/// One mapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    pub shared: bool,
    /// File offset in bytes.
    pub offset: u64,
    /// The file of a file mapping.
    pub file: Option<String>,
    /// The name of a special anonymous mapping (`[heap]`, `[stack]`, ...).
    pub name: Option<String>,
    /// Its line in the maps file.
    pub line: u64,
}

fn hex(s: &str, what: &str) -> Result<u64, String> {
    if s.is_empty() || s.len() > 16 {
        return Err(format!("expected a hex {what}, found `{s}`"));
    }
    u64::from_str_radix(s, 16).map_err(|_| format!("expected a hex {what}, found `{s}`"))
}

fn parse_line(line: &str, n: u64) -> Result<Option<Mapping>, String> {
    let line = line.trim();
    if line.is_empty() {
        return Ok(None);
    }
    let mut fields = line.splitn(6, char::is_whitespace).filter(|f| !f.is_empty());
    let mut next = |what: &str| fields.next().ok_or_else(|| format!("expected {what}"));
    let range = next("`START-END`")?;
    let (s, e) = range.split_once('-').ok_or("expected `START-END`")?;
    let (start, end) = (hex(s, "start address")?, hex(e, "end address")?);
    if start >= end || !start.is_multiple_of(4096) || !end.is_multiple_of(4096) {
        return Err(format!("`{range}` is not a non-empty page-aligned range"));
    }
    let perms = next("permissions")?.as_bytes();
    let ok = perms.len() == 4
        && matches!(perms[0], b'r' | b'-')
        && matches!(perms[1], b'w' | b'-')
        && matches!(perms[2], b'x' | b'-')
        && matches!(perms[3], b'p' | b's');
    if !ok {
        return Err(format!(
            "expected permissions like `r-xp`, found `{}`",
            String::from_utf8_lossy(perms)
        ));
    }
    let offset = hex(next("an offset")?, "offset")?;
    let dev = next("a device")?;
    if dev.split_once(':').is_none() {
        return Err(format!("expected a device `MAJOR:MINOR`, found `{dev}`"));
    }
    let inode = next("an inode")?;
    if !inode.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected a decimal inode, found `{inode}`"));
    }
    let rest = fields.next().map(str::trim).unwrap_or_default();
    let (file, name) = match rest {
        "" => (None, None),
        p if p.starts_with('/') => (Some(p.trim_end_matches(" (deleted)").to_string()), None),
        other => (None, Some(other.to_string())),
    };
    if file.is_some() && !offset.is_multiple_of(4096) {
        return Err(format!("file offset {offset:#x} is not page-aligned"));
    }
    Ok(Some(Mapping {
        start,
        end,
        read: perms[0] == b'r',
        write: perms[1] == b'w',
        exec: perms[2] == b'x',
        shared: perms[3] == b's',
        offset,
        file,
        name,
        line: n,
    }))
}

/// Parses a maps description; mappings must be in address order and must not overlap.
pub fn parse(text: &str, file: &str) -> Result<Vec<Mapping>, InputError> {
    let mut out: Vec<Mapping> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let n = i as u64 + 1;
        let err = |message| InputError { file: file.to_string(), line: Some(n), message };
        let Some(m) = parse_line(line, n).map_err(err)? else { continue };
        if let Some(prev) = out.last()
            && m.start < prev.end
        {
            return Err(err(format!("overlaps or precedes the mapping of line {}", prev.line)));
        }
        out.push(m);
    }
    if out.is_empty() {
        return Err(InputError {
            file: file.to_string(),
            line: None,
            message: "no mappings".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_maps_lines() {
        let text = "\
00400000-00401000 r-xp 00000000 08:01 1234    /usr/bin/true
00401000-00402000 rw-p 00001000 08:01 1234    /usr/bin/true
01000000-01021000 rw-p 00000000 00:00 0       [heap]
7f0000000000-7f0000001000 rw-s 00000000 00:01 99  /dev/shm/x (deleted)
7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0
";
        let m = parse(text, "m").unwrap();
        assert_eq!(m.len(), 5);
        assert!(m[0].exec && !m[0].write && m[0].file.as_deref() == Some("/usr/bin/true"));
        assert_eq!(m[1].offset, 0x1000);
        assert_eq!(m[2].name.as_deref(), Some("[heap]"));
        assert!(m[3].shared && m[3].file.as_deref() == Some("/dev/shm/x"));
        assert!(m[4].file.is_none() && m[4].name.is_none());
    }

    #[test]
    fn errors_name_the_line() {
        for (text, expected) in [
            ("00400000 r-xp 0 08:01 1 /a\n", "m:1: expected `START-END`"),
            ("00400000-00400800 r-xp 0 08:01 1 /a\n", "not a non-empty page-aligned range"),
            ("00400000-00401000 rwzp 0 08:01 1 /a\n", "expected permissions"),
            ("00400000-00401000 r-xp 0 0801 1 /a\n", "expected a device"),
            (
                "\n00400000-00402000 r-xp 0 08:01 1 /a\n00401000-00403000 r-xp 0 08:01 1 /a\n",
                "m:3: overlaps",
            ),
            ("", "no mappings"),
        ] {
            let e = parse(text, "m").unwrap_err().to_string();
            assert!(e.contains(expected), "{text:?}: {e}");
        }
    }
}
