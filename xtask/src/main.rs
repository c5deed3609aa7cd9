//! Project tooling (`cargo xtask <command>`), in Rust rather than shell (rust-analyzer's xtask).
//!
//! - `cargo xtask test`: the whole test suite, exactly what CI runs: formatting, clippy with
//!   warnings denied, then every test (the layering and tidy checks are tests of this crate).

#![allow(clippy::disallowed_types, clippy::disallowed_methods)]

use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let steps: &[(&str, &[&str])] = match args.first().map(String::as_str) {
        Some("test") => &[
            ("format", &["cargo", "fmt", "--all", "--", "--check"]),
            (
                "clippy",
                &[
                    "cargo",
                    "clippy",
                    "--workspace",
                    "--all-targets",
                    "--quiet",
                    "--",
                    "-D",
                    "warnings",
                ],
            ),
            ("tests", &["cargo", "test", "--workspace", "--quiet"]),
        ],
        _ => {
            eprintln!("usage: cargo xtask test");
            return ExitCode::from(2);
        }
    };
    for (name, cmd) in steps {
        eprintln!("xtask: {name}: {}", cmd.join(" "));
        let status = Command::new(cmd[0]).args(&cmd[1..]).status();
        match status {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("xtask: {name} failed ({s})");
                return ExitCode::FAILURE;
            }
            Err(e) => {
                eprintln!("xtask: cannot run {}: {e}", cmd[0]);
                return ExitCode::FAILURE;
            }
        }
    }
    eprintln!("xtask: all checks passed");
    ExitCode::SUCCESS
}
