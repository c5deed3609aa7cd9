//! The guest's side: `mmsim` as the guest kernel's `/init` (process 1 of an initramfs made by
//! `image.rs`). It makes the guest into a machine the native executor runs on, as a host's boot
//! would: `/proc`, `/sys`, devtmpfs, a tmpfs `/run` (the executor's journal), a cgroup v2
//! hierarchy with the memory controller, the disk modules, the first virtio disk as the ext4
//! `/tmp` (the scratch directory's file system, as on a host); each scenario swaps to a RAM
//! disk of its machine's swap size (`NativeOptions::swap_module`). Then it runs
//! `mmsim diff` on every scenario of `/job.json` (the model at the guest kernel's version
//! beside the native run), writes each comparison as one JSON line to the second serial port,
//! which only the job writes (the kernel's messages go to the first), and powers the guest off.

use super::{GuestResult, Job, Outcome, RESULT_PORT};
use crate::controller::NativeOptions;
use crate::sys;
use std::io::Write;
use std::time::{Duration, Instant};

/// Whether this process is a guest's `/init`: process 1, started by that name.
pub fn is_guest_init() -> bool {
    std::process::id() == 1 && std::env::args_os().next().is_some_and(|a| a == "/init")
}

/// The guest's whole life: boot, run the job, power off.
pub fn guest_main() -> ! {
    let booted = boot();
    // The port's device node exists once devtmpfs is mounted.
    match std::fs::OpenOptions::new().write(true).open(RESULT_PORT) {
        Ok(mut port) => match booted {
            Ok(dax) => run_job(&mut port, dax),
            Err(e) => {
                println!("mmsim-guest: boot failed: {e}");
                let _ = writeln!(port, "{}", serde_json::json!({ "boot_failed": e }));
            }
        },
        Err(e) => println!("mmsim-guest: {RESULT_PORT}: {e} (boot: {booted:?})"),
    }
    sys::power_off()
}

/// Boots the guest's machine; whether it has a DAX file system.
fn boot() -> Result<bool, String> {
    for (fstype, target) in
        [("proc", "/proc"), ("sysfs", "/sys"), ("devtmpfs", "/dev"), ("tmpfs", "/run")]
    {
        sys::mount(fstype, target, "").map_err(|e| format!("mount {fstype} on {target}: {e}"))?;
    }
    sys::mount("cgroup2", "/sys/fs/cgroup", "").map_err(|e| format!("mount cgroup2: {e}"))?;
    std::fs::write("/sys/fs/cgroup/cgroup.subtree_control", "+memory")
        .map_err(|e| format!("enabling the memory controller: {e}"))?;
    load_modules()?;
    wait_for_device("/dev/vda")?;
    sys::mount_device("/dev/vda", "ext4", "/tmp").map_err(|e| format!("mount /dev/vda: {e}"))?;
    // Without it DAX scenarios are refused by name, as on a host without pmem.
    let dax = pmem().map_err(|e| println!("mmsim-guest: no DAX file system: {e}")).is_ok();
    Ok(dax)
}

/// Formats the persistent memory and mounts it with DAX at `DAX_MOUNT`.
fn pmem() -> Result<(), String> {
    wait_for_device("/dev/pmem0")?;
    let out = std::process::Command::new(super::MKFS)
        .args(["-q", "-F", "/dev/pmem0"])
        .output()
        .map_err(|e| format!("{}: {e}", super::MKFS))?;
    if !out.status.success() {
        return Err(format!("mkfs.ext4: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    std::fs::create_dir_all(super::DAX_MOUNT).map_err(|e| e.to_string())?;
    sys::mount_device_with("/dev/pmem0", "ext4", super::DAX_MOUNT, "dax")
        .map_err(|e| format!("mount -o dax /dev/pmem0: {e}"))?;
    Ok(())
}

/// Loads `/modules/*.ko` in their names' order (the archive's load order).
fn load_modules() -> Result<(), String> {
    let mut paths: Vec<_> = std::fs::read_dir("/modules")
        .map_err(|e| format!("/modules: {e}"))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    paths.sort();
    for p in paths {
        let path = p.to_string_lossy();
        if p.is_dir() {
            continue;
        }
        match sys::load_module(&path, "") {
            Ok(_) | Err(sys::SysErr::Errno(mm::Errno::EEXIST)) => {}
            Err(e) => return Err(format!("loading {path}: {e}")),
        }
    }
    Ok(())
}

/// Waits (up to 30 s) for devtmpfs to show a disk the probe found.
fn wait_for_device(dev: &str) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::path::Path::new(dev).exists() {
        if Instant::now() > deadline {
            return Err(format!("{dev} never appeared"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

fn run_job(port: &mut std::fs::File, dax: bool) {
    let job: Job = match std::fs::read("/job.json")
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(j) => j,
        Err(e) => {
            println!("mmsim-guest: /job.json: {e}");
            return;
        }
    };
    let _ = std::env::set_current_dir("/work");
    let options = NativeOptions {
        timeout: Duration::from_secs(job.timeout_secs),
        swap_module: Some(super::BRD_MODULE.into()),
        dax_dir: dax.then(|| super::DAX_MOUNT.to_string()),
        ..NativeOptions::default()
    };
    for (i, file) in job.scenarios.iter().enumerate() {
        println!("mmsim-guest: [{}/{}] {file}", i + 1, job.scenarios.len());
        let outcome = match lab::scenario::run::load(file) {
            Err(e) => Outcome::Refused(e.to_string()),
            Ok(s) => match crate::diff::diff(&s, &options) {
                Ok(report) => Outcome::Compared(report),
                Err(r) => Outcome::Refused(r.reason),
            },
        };
        let line = serde_json::to_string(&GuestResult { scenario: file.clone(), outcome })
            .unwrap_or_default();
        let _ = writeln!(port, "{line}");
        let _ = port.flush();
    }
}
