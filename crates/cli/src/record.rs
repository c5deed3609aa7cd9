//! `mmsim record [-o FILE] [--skip N] [--count M] [--period P] -- PROGRAM ARGS`: records a real program's
//! memory references and address space under qemu-user into a recorded program that
//! `mmsim replay FILE` reads (see `trace::qemu` for what is recorded and what the host needs).
//! Exit 2 when the host cannot record (naming what is missing) or the recording fails.

use clap::Args;
use std::time::Instant;
use trace::qemu::{RecordOptions, record};

#[derive(Debug, Args)]
pub(crate) struct RecordArgs {
    /// The recorded program to write.
    #[arg(short, long, default_value = "program.mmprog")]
    output: String,
    /// Instructions (all threads) to let pass before recording.
    #[arg(long, default_value_t = 0)]
    skip: u64,
    /// Instructions to record (0: until the program ends).
    #[arg(long, default_value_t = 0)]
    count: u64,
    /// Record COUNT instructions out of every PERIOD from SKIP on: windows spread over the run
    /// (0: one window).
    #[arg(long, default_value_t = 0)]
    period: u64,
    /// zstd's level for the traces (1-22; 19 for traces shipped in git).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(i32).range(1..=22))]
    zstd_level: i32,
    /// The program and its arguments.
    #[arg(required = true, last = true)]
    command: Vec<String>,
}

/// The program to run: a bare name is looked up on `PATH`, as a shell would (qemu-user takes
/// only a path).
fn program_path(name: &str) -> Result<String, String> {
    if name.contains('/') {
        return Ok(name.to_string());
    }
    which::which(name)
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|_| format!("record: `{name}` is not a path and no `{name}` is on PATH"))
}

pub(crate) fn run(a: &RecordArgs) -> u8 {
    let program = match program_path(&a.command[0]) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return 2;
        }
    };
    let options = RecordOptions {
        program,
        args: a.command[1..].to_vec(),
        skip: a.skip,
        count: a.count,
        period: a.period,
        out: a.output.clone(),
        zstd_level: a.zstd_level,
    };
    let started = Instant::now();
    let recorded = match record(&options) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("mmsim: {e}");
            return 2;
        }
    };
    let secs = started.elapsed().as_secs_f64();
    let p = &recorded.program;
    let refs: u64 = p.threads.iter().map(|t| t.refs).sum();
    let q = recorded.qemu_seconds;
    eprintln!(
        "mmsim record: qemu-user recorded {refs} references in {q:.1} s ({:.1} M references/s; \
         the conversion runs beside it)",
        refs as f64 / q / 1e6
    );
    eprintln!(
        "mmsim record: {} — {refs} references in {} threads (window: skip {}, count {}, period {} of {} \
         instructions), {:.1} M references/s with the conversion, {} objects, {} file and {} anonymous mappings; \
         {} ({:.2} MB)",
        p.program,
        p.threads.len(),
        p.skip,
        p.count,
        p.period,
        p.instructions,
        refs as f64 / secs / 1e6,
        p.objects.len(),
        p.files.len(),
        p.anon.len(),
        a.output,
        recorded.file_bytes as f64 / 1e6
    );
    0
}
