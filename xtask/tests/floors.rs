//! The floors of `crates/mm`, checked from its imports (ARCHITECTURE.md, "Floors").
//!
//! The kernel keeps its types below its code: `mm_types.h`, `mmzone.h` and `hugetlb.h` declare
//! what `mm/*.c` works on, and a header never includes a `.c` file. mmsim's model is built the
//! same way, in four floors: the state (the types `KState` holds, their ids and the pure data
//! structures), `kernel.rs` (`KState` and `Cx`), the mechanisms, and the simulator's top
//! (`sim::machine`, the checkers, `syscall.rs`, `inspect.rs`). A file may import from its own
//! floor and those below it; an arrow running back up is a failure unless [`EXCEPTIONS`] lists
//! it, and that list only shrinks (an entry no longer needed fails too). The largest import
//! circle is bounded by [`MAX_CIRCLE`], ratcheted the same way.
//!
//! The import graph is computed from the source text: every `crate::`, `super::` and `self::`
//! path (use trees expanded) and every path through a child module the file declares, outside
//! comments, string literals and `#[cfg(test)]` items, resolved to the longest file module it
//! names. A file is one node (`foo.rs` and `foo/` are the module `foo`).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The floors, lowest first, each a list of module prefixes (`types` covers `types::*`). A
/// module takes the floor of its longest matching prefix; one no prefix names is a mechanism.
const FLOORS: &[(&str, &[&str])] = &[
    (
        "state",
        &[
            "types",
            "era",
            "errno",
            "folio",
            "pgtable",
            "xarray",
            "page_alloc::buddy",
            "vma",
            "mm_struct",
            "process",
            "vmstat",
            "arch::caches",
            "arch::tlb",
            "hugetlb::resv",
            "sim::content",
            "sim::cost",
            "sim::profile",
        ],
    ),
    ("kernel", &["kernel"]),
    ("mechanisms", &["arch::tlb::translate", "arch::tlb::check"]),
    ("top", &["", "sim", "sim::machine", "sim::check", "sim::sites", "syscall", "inspect"]),
];

/// Arrows that still run back up a floor, as (from, to). Shrink it; never grow it.
const EXCEPTIONS: &[(&str, &str)] = &[];

/// The largest import circle allowed (files that import each other around a cycle).
const MAX_CIRCLE: usize = 20;

/// Seams inside the mechanisms floor: a module and the only modules that may import it. The
/// fault handler is entered from the MMU access path, GUP, khugepaged's swap-in, KSM's
/// `break_ksm`, userfaultfd's fill of shared shmem and hugetlb pages and the ops table, as
/// `handle_mm_fault`'s callers are.
const SEAMS: &[(&str, &[&str])] =
    &[("fault", &["vm_ops", "gup", "arch::uaccess", "khugepaged", "ksm", "userfaultfd::mfill"])];

/// Arrows that must not exist: the fault handler and the library half of `mm/memory.c` reach a
/// file system's or hugetlb's code only through `VmOps` (`vm_ops.rs`).
const FORBIDDEN: &[(&str, &[&str])] = &[
    ("fault", &["fs::dax", "fs::daxfs", "fs::hugetlbfs", "shmem", "hugetlb", "huge_memory"]),
    ("memory", &["fs::dax", "fs::daxfs", "fs::hugetlbfs", "shmem", "hugetlb"]),
];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn mm_sources() -> BTreeMap<String, String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/mm/src");
    let mut files = Vec::new();
    collect(&src, &mut files);
    files
        .into_iter()
        .map(|p| {
            let rel = p.strip_prefix(&src).unwrap().with_extension("");
            let mut parts: Vec<String> =
                rel.iter().map(|s| s.to_string_lossy().into_owned()).collect();
            if matches!(parts.last().map(String::as_str), Some("lib" | "mod")) {
                parts.pop();
            }
            (parts.join("::"), std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source with comments, string and char literals blanked (lines kept).
fn code_only(text: &str) -> String {
    let c: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < c.len() {
        let end = literal_end(&c, i);
        if end > i {
            out.extend(c[i..end].iter().map(|&ch| if ch == '\n' { '\n' } else { ' ' }));
            i = end;
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// Where the comment or literal starting at `i` ends (`i` when none starts there).
fn literal_end(c: &[char], i: usize) -> usize {
    let at = |k: usize| c.get(k).copied().unwrap_or('\0');
    let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
    match (at(i), at(i + 1)) {
        ('/', '/') => (i..c.len()).find(|&k| c[k] == '\n').unwrap_or(c.len()),
        ('/', '*') => {
            let (mut k, mut depth) = (i + 2, 1);
            while k < c.len() && depth > 0 {
                match (c[k], at(k + 1)) {
                    ('/', '*') => (depth, k) = (depth + 1, k + 1),
                    ('*', '/') => (depth, k) = (depth - 1, k + 1),
                    _ => {}
                }
                k += 1;
            }
            k
        }
        ('"', _) => quoted_end(c, i + 1),
        ('r', '"' | '#') if !ident_before => raw_end(c, i),
        ('b', '"') if !ident_before => quoted_end(c, i + 2),
        ('\'', '\\') => {
            (i + 2..c.len()).find(|&k| c[k] == '\'' && k > i + 2).map_or(c.len(), |k| k + 1)
        }
        ('\'', _) if at(i + 2) == '\'' => i + 3,
        _ => i,
    }
}

fn quoted_end(c: &[char], mut k: usize) -> usize {
    while k < c.len() {
        match c[k] {
            '\\' => k += 2,
            '"' => return k + 1,
            _ => k += 1,
        }
    }
    k
}

fn raw_end(c: &[char], i: usize) -> usize {
    let hashes = c[i + 1..].iter().take_while(|&&ch| ch == '#').count();
    if c.get(i + 1 + hashes) != Some(&'"') {
        return i;
    }
    let close: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
    let mut k = i + 2 + hashes;
    while k + close.len() <= c.len() {
        if c[k..k + close.len()] == close[..] {
            return k + close.len();
        }
        k += 1;
    }
    c.len()
}

/// The code with every `#[cfg(test)]` item cut out.
fn without_tests(code: &str) -> String {
    let mut out = String::new();
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let item = &rest[at..];
        let semi = item.find(';').unwrap_or(item.len());
        let open = item.find('{').unwrap_or(item.len());
        let end = if semi < open { semi + 1 } else { matching_brace(item, open) };
        rest = &item[end.min(item.len())..];
    }
    out.push_str(rest);
    out
}

fn matching_brace(s: &str, open: usize) -> usize {
    let mut depth = 0;
    for (k, ch) in s.char_indices().skip_while(|&(k, _)| k < open) {
        match ch {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    s.len()
}

/// Every path the code names from `crate`, `super`, `self` or one of `children`, as absolute
/// segment lists (use trees expanded).
fn paths(module: &str, code: &str, children: &[&str]) -> Vec<Vec<String>> {
    let b = code.as_bytes();
    let word = |ch: u8| ch.is_ascii_alphanumeric() || ch == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !word(b[i]) || (i > 0 && (word(b[i - 1]) || (i > 1 && &b[i - 2..i] == b"::"))) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && word(b[i]) {
            i += 1;
        }
        let first = &code[start..i];
        let base: Vec<String> = match first {
            "crate" => Vec::new(),
            "super" => parent(module),
            "self" => split(module),
            _ if children.contains(&first) => [split(module), vec![first.to_string()]].concat(),
            _ => continue,
        };
        if !code[i..].starts_with("::") {
            continue;
        }
        let (tree, end) = use_tree(code, i + 2, base);
        out.extend(tree);
        i = end;
    }
    out
}

fn split(module: &str) -> Vec<String> {
    module.split("::").filter(|s| !s.is_empty()).map(str::to_string).collect()
}

fn parent(module: &str) -> Vec<String> {
    let mut p = split(module);
    p.pop();
    p
}

/// The paths of the use tree (or plain path) at `i`, after `prefix::`; returns where it ends.
fn use_tree(code: &str, mut i: usize, prefix: Vec<String>) -> (Vec<Vec<String>>, usize) {
    let b = code.as_bytes();
    let mut path = prefix;
    loop {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i < b.len() && b[i] == b'{' {
            return use_group(code, i + 1, &path);
        }
        let start = i;
        while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
            i += 1;
        }
        match &code[start..i] {
            "" => return (vec![path], i),
            "super" => path = parent(&path.join("::")),
            "self" => {}
            seg => path.push(seg.to_string()),
        }
        if !code[i..].starts_with("::") {
            return (vec![path], i);
        }
        i += 2;
    }
}

fn use_group(code: &str, mut i: usize, path: &[String]) -> (Vec<Vec<String>>, usize) {
    let skip_space = |i: usize| i + code[i..].len() - code[i..].trim_start().len();
    let mut out = Vec::new();
    loop {
        let (tree, end) = use_tree(code, i, path.to_vec());
        out.extend(tree);
        i = skip_space(end);
        if code[i..].starts_with(',') {
            i = skip_space(i + 1);
        }
        if code[i..].starts_with('}') {
            return (out, i + 1);
        }
        if end == i && !code[..i].ends_with(',') {
            return (out, i);
        }
    }
}

/// The file modules' import graph.
fn graph(sources: &BTreeMap<String, String>) -> Graph {
    let modules: BTreeSet<&str> = sources.keys().map(String::as_str).collect();
    let mut g = Graph::new();
    for (module, text) in sources {
        let code = without_tests(&code_only(text));
        let children: Vec<&str> = modules
            .iter()
            .filter_map(|m| {
                let rest = if module.is_empty() {
                    Some(*m)
                } else {
                    m.strip_prefix(module.as_str())?.strip_prefix("::")
                };
                rest.filter(|r| !r.is_empty() && !r.contains("::"))
            })
            .collect();
        let targets = g.entry(module.clone()).or_default();
        for path in paths(module, &code, &children) {
            if let Some(to) = resolve(&modules, &path).filter(|to| to != module) {
                targets.insert(to);
            }
        }
    }
    g
}

/// The longest file module `path` lies in (`None` for the crate root itself).
fn resolve(modules: &BTreeSet<&str>, path: &[String]) -> Option<String> {
    (1..=path.len()).rev().map(|k| path[..k].join("::")).find(|m| modules.contains(m.as_str()))
}

fn floor(module: &str) -> usize {
    let mut best: Option<(usize, usize)> = None;
    for (level, (_, prefixes)) in FLOORS.iter().enumerate() {
        for p in *prefixes {
            let hit = *p == module || (!p.is_empty() && module.starts_with(&format!("{p}::")));
            if hit && best.is_none_or(|(len, _)| p.len() >= len) {
                best = Some((p.len(), level));
            }
        }
    }
    best.map_or(2, |(_, level)| level)
}

/// The arrows running back up a floor.
fn upward(g: &Graph) -> BTreeSet<(String, String)> {
    g.iter()
        .flat_map(|(from, tos)| tos.iter().map(move |to| (from.clone(), to.clone())))
        .filter(|(from, to)| floor(to) > floor(from))
        .collect()
}

/// The strongly connected components, largest first (Tarjan's algorithm, iterative order over
/// the sorted graph, so the answer is the same on every run).
fn circles(g: &Graph) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, (n, n));
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let low = t.index[w].1.min(t.index[v].1);
                t.index.get_mut(v).unwrap().1 = low;
            } else if t.on.contains(w) {
                let low = t.index[w].0.min(t.index[v].1);
                t.index.get_mut(v).unwrap().1 = low;
            }
        }
        if t.index[v].0 == t.index[v].1 {
            let mut comp = BTreeSet::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                comp.insert(w.to_string());
                if w == v {
                    break;
                }
            }
            t.out.push(comp);
        }
    }
    let mut t =
        T { g, index: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), out: Vec::new() };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort_by_key(|c| std::cmp::Reverse(c.len()));
    t.out
}

/// What the floor, seam and circle rules find wrong in `g`.
fn failures(g: &Graph) -> Vec<String> {
    let mut out = Vec::new();
    let up = upward(g);
    for (from, to) in &up {
        if !EXCEPTIONS.contains(&(from.as_str(), to.as_str())) {
            out.push(format!(
                "`{from}` ({}) imports `{to}` ({}), a floor above it",
                FLOORS[floor(from)].0,
                FLOORS[floor(to)].0
            ));
        }
    }
    for (from, to) in EXCEPTIONS {
        if !up.contains(&(from.to_string(), to.to_string())) {
            out.push(format!("the exception `{from}` -> `{to}` is no longer needed: remove it"));
        }
    }
    for (seam, callers) in SEAMS {
        for (from, tos) in g {
            if tos.contains(*seam) && !callers.contains(&from.as_str()) {
                out.push(format!("`{from}` imports `{seam}`, which only {callers:?} may"));
            }
        }
    }
    for (from, banned) in FORBIDDEN {
        for to in g.get(*from).into_iter().flatten() {
            if banned.iter().any(|b| to == b || to.starts_with(&format!("{b}::"))) {
                out.push(format!("`{from}` imports `{to}`: it reaches it only through `VmOps`"));
            }
        }
    }
    let largest = circles(g).first().map_or(0, BTreeSet::len);
    if largest > MAX_CIRCLE {
        out.push(format!("the largest import circle has {largest} files, above {MAX_CIRCLE}"));
    }
    out
}

#[test]
fn crates_mm_stands_on_its_floors() {
    let g = graph(&mm_sources());
    let circle = circles(&g).into_iter().next().unwrap_or_default();
    eprintln!(
        "{} files; {} arrows; {} run back up; largest circle {} files: {circle:?}",
        g.len(),
        g.values().map(BTreeSet::len).sum::<usize>(),
        upward(&g).len(),
        circle.len()
    );
    for (from, to) in upward(&g) {
        eprintln!("  up: {from} -> {to}");
    }
    let found = failures(&g);
    assert!(found.is_empty(), "crates/mm's floors:\n{}", found.join("\n"));
}

#[test]
fn a_planted_import_back_up_a_floor_fails() {
    let mut sources = mm_sources();
    let planted = "//! planted\nuse crate::syscall::Thread;\n";
    sources.get_mut("folio").unwrap().push_str(planted);
    let found = failures(&graph(&sources));
    assert!(
        found.iter().any(|f| f.contains("`folio` (state) imports `syscall` (top)")),
        "{found:?}"
    );
}

#[test]
fn the_graph_reads_use_trees_and_skips_comments_and_tests() {
    let sources: BTreeMap<String, String> = [
        ("", "mod a; mod b; pub use a::X;"),
        ("a", "use crate::{b::{X, self}, c::d::y};\n// crate::e::f\nlet s = \"crate::e\";\n#[cfg(test)]\nmod tests { use crate::e::Z; }"),
        ("b", "pub fn f() { super::a::g(); child::h() }"),
        ("b::child", ""),
        ("c::d", ""),
        ("e", ""),
    ]
    .into_iter()
    .map(|(m, t)| (m.to_string(), t.to_string()))
    .collect();
    let g = graph(&sources);
    assert_eq!(g["a"], BTreeSet::from(["b".to_string(), "c::d".to_string()]));
    assert_eq!(g["b"], BTreeSet::from(["a".to_string(), "b::child".to_string()]));
    assert_eq!(g[""], BTreeSet::from(["a".to_string()]));
}

/// What kind a VMA is gets asked through `VmOps`'s exhaustive predicates (`types/mm_types.rs`)
/// or matched in `vm_ops.rs`, never by comparing with one variant, `matches!` or
/// `hstate_vma(..).is_some()` elsewhere: a new kind must answer each question, not fall into an
/// else-branch.
#[test]
fn kinds_of_vma_are_asked_through_predicates() {
    let mut found = Vec::new();
    for (module, text) in mm_sources() {
        if module == "vm_ops" || module.starts_with("types") {
            continue;
        }
        let code = without_tests(&code_only(&text));
        for (n, line) in code.lines().enumerate() {
            let compared = ["== VmOps::", "!= VmOps::"].iter().any(|w| line.contains(w))
                || line.split("matches!(").skip(1).any(|rest| rest.contains("VmOps::"))
                || (line.contains("hstate_vma(") && line.contains(").is_some()"));
            if compared {
                found.push(format!("{module}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "ask a VmOps predicate instead:\n{}", found.join("\n"));
}
