//! Tidy checks over the source tree (TigerBeetle's `tidy.zig`, rust-analyzer's `tidy.rs`):
//! every Rust file opens with a `//!` design note, simulation crates use no ambient IO, time or
//! threads, and no stubs are left behind.

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn crate_sources(krate: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let dir = if krate == "xtask" { root.join("xtask") } else { root.join("crates").join(krate) };
    let mut files = Vec::new();
    for sub in ["src", "tests", "benches"] {
        if dir.join(sub).is_dir() {
            rust_files(&dir.join(sub), &mut files);
        }
    }
    files.sort();
    files
}

fn all_crates() -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut names: Vec<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.push("xtask".into());
    names.sort();
    names
}

#[test]
fn every_rust_file_opens_with_a_module_note() {
    for krate in all_crates() {
        for file in crate_sources(&krate) {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(
                text.starts_with("//!"),
                "{} must open with a `//!` design note",
                file.display()
            );
        }
    }
}

#[test]
fn simulation_crates_use_no_ambient_io_time_or_threads() {
    const BANNED: &[&str] = &[
        "std::fs",
        "std::time",
        "std::thread::spawn",
        "std::net",
        "std::env",
        "println!",
        "eprintln!",
    ];
    for krate in ["simcore", "engine", "mm", "workload", "explore"] {
        for file in crate_sources(krate)
            .into_iter()
            .filter(|f| f.components().any(|c| c.as_os_str() == "src"))
        {
            let text = std::fs::read_to_string(&file).unwrap();
            for banned in BANNED {
                assert!(
                    !text.contains(banned),
                    "{} uses `{banned}` (simulation crates do no IO)",
                    file.display()
                );
            }
        }
    }
}

#[test]
fn no_stubs_left_behind() {
    for krate in all_crates() {
        for file in crate_sources(&krate) {
            if file.ends_with("tidy.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            for stub in ["todo!(", "unimplemented!(", "dbg!("] {
                assert!(!text.contains(stub), "{} contains `{stub}`", file.display());
            }
        }
    }
}

/// Every text file of the repository that code, tests, benchmarks, scripts or docs are made of:
/// walked from the root, skipping build output, the virtualenv and version control.
fn repository_text_files(dir: &Path, out: &mut Vec<PathBuf>) {
    const SKIP: &[&str] = &["target", ".git", ".venv", "mmsim-report", "node_modules"];
    const TEXT: &[&str] = &["rs", "py", "pyi", "md", "toml", "sh", "c", "txt", "json", "cfg"];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !SKIP.contains(&name.as_str()) && !name.starts_with("__pycache__") {
                repository_text_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| TEXT.iter().any(|t| e == *t)) || name == "run" {
            out.push(path);
        }
    }
}

/// A clone stands alone: nothing reads, and nothing tells a user to read, a path outside the
/// repository. Sources are cited by name (a kernel commit, a paper, a seed's title), and what is
/// read (traces, excerpts) lives under `traces/`.
#[test]
fn no_path_outside_the_repository() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    // Spelled in pieces so that this file does not match itself.
    let banned = [
        format!("{}/{}", "..", "shared"),
        format!("{}/{}/", "", "work"),
        format!("{}/{}", "shared", "data"),
        format!("{}/{}", "shared", "seeds"),
        format!("{}/{}", "shared", "reference"),
        format!("{}/{}/{}/", "..", "..", ".."),
    ];
    let mut files = Vec::new();
    repository_text_files(root, &mut files);
    files.sort();
    assert!(files.len() > 50, "the walk found the repository's files");
    let mut found = Vec::new();
    for file in files {
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        for (n, line) in text.lines().enumerate() {
            if let Some(b) = banned.iter().find(|b| line.contains(b.as_str())) {
                found.push(format!("{}:{}: `{b}`: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "paths outside the repository:\n{}", found.join("\n"));
}

/// Functions longer than this many lines (from the `fn` line to its closing brace) are listed in
/// [`LONG_FUNCTIONS`] until they are shortened.
const MAX_FN_LINES: usize = 70;

/// Today's functions over [`MAX_FN_LINES`], with their length: a ratchet. A function may leave
/// the list (shortened to 70 lines or fewer) and an entry may only go down; no function joins it.
const LONG_FUNCTIONS: &[(&str, usize)] = &[
    ("crates/lab/src/scenario/parse.rs::Parser::machine", 81),
    ("crates/lab/src/scenario/parse/names.rs::Parser::check_names", 88),
    ("crates/mm/src/mglru.rs::try_to_inc_max_seq", 72),
    ("crates/trace/src/pagecache.rs::replay_page_cache", 111),
];

/// Rust source with comments, string and character literals blanked out (newlines kept), so
/// that braces and keywords can be counted.
fn code_only(text: &str) -> Vec<char> {
    let s: Vec<char> = text.chars().collect();
    let mut out = Vec::with_capacity(s.len());
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    // Blanks `s[from..to]`, keeping newlines.
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        out.extend(s[from..to.min(s.len())].iter().map(|&c| if c == '\n' { '\n' } else { ' ' }));
    };
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied().unwrap_or(' ');
        let prev = if i == 0 { ' ' } else { s[i - 1] };
        let end = if c == '/' && next == '/' {
            s[i..].iter().position(|&x| x == '\n').map_or(s.len(), |p| i + p)
        } else if c == '/' && next == '*' {
            let (mut depth, mut j) = (1, i + 2);
            while j < s.len() && depth > 0 {
                if s[j] == '/' && s.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 1;
                } else if s[j] == '*' && s.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 1;
                }
                j += 1;
            }
            j
        } else if (c == 'r' || (c == 'b' && next == 'r')) && !ident(prev) {
            let start = if c == 'b' { i + 2 } else { i + 1 };
            let hashes = s[start..].iter().take_while(|&&x| x == '#').count();
            if s.get(start + hashes) == Some(&'"') {
                let close: Vec<char> =
                    std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
                let body = start + hashes + 1;
                s[body..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(s.len(), |p| body + p + close.len())
            } else {
                i
            }
        } else if c == '"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != '"' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            j + 1
        } else if c == '\'' && next == '\\' {
            s[i + 2..].iter().position(|&x| x == '\'').map_or(s.len(), |p| i + 2 + p + 1)
        } else if c == '\'' && s.get(i + 2) == Some(&'\'') {
            i + 3
        } else {
            i
        };
        if end > i {
            blank(&mut out, i, end);
            i = end;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// The type an `impl` or `trait` header names: `impl<'a> Parser<'a>` is `Parser`,
/// `impl fmt::Display for ScenarioError` is `ScenarioError`.
fn impl_name(header: &str) -> String {
    let header = header.split(" where ").next().unwrap_or(header);
    let mut rest = header.trim();
    for keyword in ["impl", "trait", "unsafe"] {
        rest = rest.strip_prefix(keyword).unwrap_or(rest).trim_start();
    }
    if rest.starts_with('<') {
        let mut depth = 0;
        let close = rest
            .char_indices()
            .find(|&(_, c)| {
                depth += match c {
                    '<' => 1,
                    '>' => -1,
                    _ => 0,
                };
                depth == 0
            })
            .map_or(0, |(p, _)| p);
        rest = &rest[close + 1..];
    }
    let target = rest.rsplit(" for ").next().unwrap_or(rest);
    let path = target.split('<').next().unwrap_or(target).trim().trim_start_matches('&');
    path.rsplit("::").next().unwrap_or(path).trim().to_string()
}

/// Every function of one file longer than [`MAX_FN_LINES`]: `(Type::name or name, lines)`.
fn long_functions_in(text: &str) -> Vec<(String, usize)> {
    let code = code_only(text);
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let word_at = |i: usize| -> String { code[i..].iter().take_while(|&&c| ident(c)).collect() };
    // Open braces: the function or impl each one opens, if any.
    enum Open {
        Block,
        Fn(String, usize),
        Impl(String),
    }
    let mut stack: Vec<Open> = Vec::new();
    let mut pending: Option<Open> = None;
    let mut header_start = 0;
    let (mut line, mut out) = (1, Vec::new());
    let mut i = 0;
    while i < code.len() {
        let c = code[i];
        let starts_word = ident(c) && (i == 0 || !ident(code[i - 1]));
        if c == '\n' {
            line += 1;
        } else if starts_word
            && (word_at(i) == "impl" || word_at(i) == "trait")
            && !matches!(pending, Some(Open::Fn(..)))
        {
            pending = Some(Open::Impl(String::new()));
            header_start = i;
        } else if starts_word && word_at(i) == "fn" {
            let mut j = i + 2;
            while code.get(j).is_some_and(|c| c.is_whitespace()) {
                j += 1;
            }
            let name = word_at(j);
            if !name.is_empty() {
                let owner = stack.iter().rev().find_map(|o| match o {
                    Open::Impl(t) => Some(format!("{t}::")),
                    _ => None,
                });
                pending = Some(Open::Fn(format!("{}{name}", owner.unwrap_or_default()), line));
            }
        } else if c == ';' {
            pending = None;
        } else if c == '{' {
            stack.push(match pending.take() {
                Some(Open::Impl(_)) => {
                    Open::Impl(impl_name(&code[header_start..i].iter().collect::<String>()))
                }
                Some(open) => open,
                None => Open::Block,
            });
        } else if c == '}'
            && let Some(Open::Fn(name, start)) = stack.pop()
            && line - start + 1 > MAX_FN_LINES
        {
            // The pop above closes every block, whatever it opened.
            out.push((name, line - start + 1));
        }
        i += 1;
    }
    out
}

/// Functions stay under 70 lines: a function over 70 lines that [`LONG_FUNCTIONS`] does not
/// list fails, and so does a listed one whose length changed (shortened: lower or remove its
/// entry; grown: shorten it), so the list only shrinks.
#[test]
fn functions_stay_under_70_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut found = std::collections::BTreeMap::new();
    for krate in all_crates().into_iter().filter(|k| k != "xtask") {
        let mut files = Vec::new();
        rust_files(&root.join("crates").join(&krate).join("src"), &mut files);
        files.sort();
        for file in files {
            let rel = file.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
            for (name, lines) in long_functions_in(&std::fs::read_to_string(&file).unwrap()) {
                let mut key = format!("{rel}::{name}");
                while found.contains_key(&key) {
                    key.push('\'');
                }
                found.insert(key, lines);
            }
        }
    }
    let mut problems = Vec::new();
    for (key, &lines) in &found {
        match LONG_FUNCTIONS.iter().find(|(k, _)| k == key) {
            None => problems.push(format!(
                "{key} is {lines} lines (over {MAX_FN_LINES}): shorten it (no function joins LONG_FUNCTIONS)"
            )),
            Some(&(_, listed)) if lines > listed => problems.push(format!(
                "{key} grew from {listed} to {lines} lines: shorten it"
            )),
            Some(&(_, listed)) if lines < listed => problems.push(format!(
                "{key} shrank from {listed} to {lines} lines: lower its entry in LONG_FUNCTIONS to {lines}"
            )),
            Some(_) => {}
        }
    }
    for (key, listed) in LONG_FUNCTIONS {
        if !found.contains_key(*key) {
            problems.push(format!(
                "{key} (listed at {listed} lines) is now {MAX_FN_LINES} lines or fewer, or gone: remove it from LONG_FUNCTIONS"
            ));
        }
    }
    let listing: Vec<String> = found.iter().map(|(k, n)| format!("    (\"{k}\", {n}),")).collect();
    assert!(
        problems.is_empty(),
        "{}\n\nfunctions over {MAX_FN_LINES} lines now ({}):\n{}",
        problems.join("\n"),
        found.len(),
        listing.join("\n")
    );
}

/// The scanner counts from the `fn` line to the closing brace, names methods by their type, and
/// is not fooled by braces in strings, characters and comments, by `impl Trait` in a signature or
/// by declarations without a body.
#[test]
fn the_long_function_scanner_counts_lines_and_skips_literals() {
    let body = |n: usize| "    let x = 1;\n".repeat(n - 2);
    let text = format!(
        "impl<'a> Parser<'a> {{\n    fn long(&self) -> impl Iterator<Item = u8> + '_ {{\n{}    }}\n\
         fn fits() {{\n{}}}\n    fn short() {{ '{{'; \"}}\"; }}\n}}\n\
         trait T {{ fn decl(&self); }}\nfn free() {{\n    // }}\n    let s = r#\"{{\"#;\n{}}}\n",
        body(MAX_FN_LINES + 1),
        body(MAX_FN_LINES),
        body(MAX_FN_LINES),
    );
    let long = |n: &str, lines| (n.to_string(), lines);
    assert_eq!(
        long_functions_in(&text),
        [long("Parser::long", MAX_FN_LINES + 1), long("free", MAX_FN_LINES + 2)]
    );
    assert_eq!(impl_name("impl fmt::Display for ScenarioError "), "ScenarioError");
}
