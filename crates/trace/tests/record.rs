//! `mmsim record` on a real program, then its replay: needs qemu-user with TCG plugins and cc
//! (`.ci/run` installs Debian 12's `qemu-user`). Without them the test says so on stderr and,
//! when `MMSIM_REQUIRE_QEMU` is set (CI), fails rather than passing silently.

use trace::program::{Loader, Program};
use trace::program_replay::{ProgramOptions, replay_program};
use trace::qemu::{RecordError, RecordOptions, check_host, record};

#[test]
fn records_and_replays_a_dynamically_linked_program() {
    if let Err(e @ RecordError::Missing(_)) = check_host() {
        assert!(std::env::var_os("MMSIM_REQUIRE_QEMU").is_none(), "{e}");
        trace::skip::skipped("records_and_replays_a_dynamically_linked_program", &e.to_string());
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("record");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("true.mmprog").display().to_string();
    let options = RecordOptions {
        program: "/bin/true".into(),
        args: Vec::new(),
        skip: 1000,
        count: 20_000,
        period: 0,
        out: out.clone(),
        zstd_level: 3,
    };
    let recorded = record(&options).unwrap();
    let (p, _) = Program::open(&out).unwrap();
    assert_eq!(p, recorded.program);
    let loaders: Vec<Loader> = p.objects.iter().map(|o| o.loader).collect();
    assert_eq!(&loaders[..2], [Loader::Exe, Loader::Interp], "{:?}", p.objects);
    assert!(p.objects.iter().any(|o| o.elf.path.contains("libc.so")), "{:?}", p.objects);
    let refs: u64 = p.threads.iter().map(|t| t.refs).sum();
    assert!(refs >= 20_000, "{refs} references");

    let profile = mm::Profile::named("arm-a76").unwrap();
    let options = ProgramOptions {
        config: mm::MachineConfig::new(profile, mm::KernelVersion::new(6, 1)),
        advise_hugepage: false,
        warmup: simcore::SimDuration::from_ms(1000),
        max_refs_per_thread: None,
        rebase_2m: Vec::new(),
        one_cpu: false,
    };
    let report = replay_program(&out, &options, &mut |_| {}).unwrap();
    assert_eq!(report.measured.references, refs);
    assert_eq!(report.outside_mappings, 0, "every reference lands in a rebuilt mapping");
}

/// `--period`: COUNT instructions out of every PERIOD from SKIP on, over the whole run; the
/// threads' traces hold exactly the instructions the windows cover.
#[test]
fn records_windows_spread_over_the_run() {
    if let Err(e @ RecordError::Missing(_)) = check_host() {
        assert!(std::env::var_os("MMSIM_REQUIRE_QEMU").is_none(), "{e}");
        trace::skip::skipped("records_windows_spread_over_the_run", &e.to_string());
        return;
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("record-period");
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("true.mmprog").display().to_string();
    let (skip, count, period) = (1000, 2000, 20_000);
    let options = RecordOptions {
        program: "/bin/true".into(),
        args: Vec::new(),
        skip,
        count,
        period,
        out: out.clone(),
        zstd_level: 3,
    };
    record(&options).unwrap();
    let (p, data) = Program::open(&out).unwrap();
    assert_eq!((p.skip, p.count, p.period), (skip, count, period));
    let n = p.instructions;
    assert!(n > skip + 2 * period, "{n} instructions: too few for two windows");
    let expected: u64 = (0..)
        .map(|k| skip + k * period)
        .take_while(|&start| start < n)
        .map(|start| count.min(n - start))
        .sum();
    let mut fetched = 0;
    for k in 0..p.threads.len() {
        let mut r = p.thread_trace(&out, data, k).unwrap();
        while let Some(x) = r.next_ref().unwrap() {
            fetched += u64::from(x.kind == trace::record::RefKind::Instr);
        }
    }
    assert_eq!(fetched, expected);
}
