//! The file-system seam holds: outside `fs/ops.rs`, no code in `crates/mm/src` compares `FsType`
//! values. Every question whose answer differs by file system is one method there (the
//! `file_operations`/`address_space_operations` of `include/linux/fs.h`); elsewhere `FsType`
//! values are only made and passed on.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("crates/mm/src is readable") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Whether a line of code (comments stripped) tests which file system a value is.
fn compares_fs_type(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or_default();
    let names = code.contains("FsType::");
    ["==", "!=", "=>", "matches!", "assert", " | "].iter().any(|op| names && code.contains(op))
        || [".fs ==", ".fs !=", ".fs {"].iter().any(|p| code.contains(p))
}

#[test]
fn only_the_fs_ops_ask_which_file_system() {
    let mut files = Vec::new();
    sources(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    let mut found = Vec::new();
    for path in files.iter().filter(|p| !p.ends_with("fs/ops.rs")) {
        let text = std::fs::read_to_string(path).expect("a source file is readable");
        for (n, line) in text.lines().enumerate().filter(|(_, l)| compares_fs_type(l)) {
            found.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
        }
    }
    assert!(found.is_empty(), "FsType compared outside fs/ops.rs:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_comparison() {
    assert!(compares_fs_type("    if i.fs == FsType::Tmpfs {"));
    assert!(compares_fs_type("        match st.inodes[inode].fs {"));
    assert!(compares_fs_type("            FsType::Dax => true,"));
    assert!(!compares_fs_type("        FileSpec { size, fs: FsType::Disk, pattern: None };"));
    assert!(!compares_fs_type("    if i.fs.swap_backed() { // not i.fs == FsType::Tmpfs"));
}
