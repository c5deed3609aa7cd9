//! The `mmsim` binary: the command line of `mmsim_cli`.

use std::process::ExitCode;

fn main() -> ExitCode {
    // `mmsim` as a guest kernel's `/init` (`mmsim diff --guest`): boot, run the job, power off.
    if host::guest::is_guest_init() {
        host::guest::guest_main();
    }
    // `mmsim ... | head`: a closed stdout ends the program quietly, with the status a shell gives
    // a process killed by SIGPIPE, instead of a panic report.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info.payload().downcast_ref::<String>().map_or("", String::as_str);
        if msg.contains("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(141);
        }
        report(info);
    }));
    ExitCode::from(mmsim_cli::main_with_args(std::env::args_os()))
}
