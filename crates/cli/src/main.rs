//! The `mmsim` binary: the command line of `mmsim_cli`.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(mmsim_cli::main_with_args(std::env::args_os()))
}
