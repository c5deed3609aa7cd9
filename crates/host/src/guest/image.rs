//! What a guest boots: a Debian kernel package, fetched once into a cache outside the
//! repository, and an initramfs made for each run that carries the running `mmsim` binary as
//! `/init`, the shared libraries it links, the kernel modules the guest's disks need (in load
//! order), the job and the scenario files.
//!
//! - **The kernel.** Debian names its images `linux-image-<release>-amd64-unsigned`; the newest
//!   of a series (`6.1.0-N`, `6.12.N+debN`) that Debian's package index offers is fetched with
//!   `apt-get download` and unpacked with `dpkg-deb -x` (a progress line says so, the one time).
//! - **Modules.** Debian builds the virtio PCI transport (6.1), the virtio disk and ext4 as
//!   modules, and ext4 asks the crypto layer for crc32c at mount time, which a guest without
//!   `modprobe` cannot load on demand; each module's dependencies are read from its own
//!   `.modinfo` section (`depends=`), since the package ships no `modules.dep`, and an
//!   xz-compressed module (6.12) is unpacked here so the guest loads plain images.
//! - **Persistent memory** for DAX files is a gigabyte of the guest's RAM the kernel command
//!   line declares persistent (`memmap=1G!4G`: x86's legacy e820 pmem, `nd_e820`), whose
//!   namespace maps struct pages, as fs-DAX needs; `mkfs.ext4` comes along to format it.
//! - **The archive** is the kernel's `newc` cpio format (`cpio` crate), uncompressed, with
//!   `/dev/console` as a node so that `/init` has the console before devtmpfs is mounted.

use crate::support::{Refusal, refuse};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A guest kernel series mmsim boots: Debian's packaged kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GuestKernel {
    /// Debian 12's kernel, `linux-image-6.1.0-N-amd64`.
    V6_1,
    /// Debian 12's backports kernel, `linux-image-6.12.N+debN-amd64`.
    V6_12,
}

impl GuestKernel {
    pub const ALL: [GuestKernel; 2] = [GuestKernel::V6_1, GuestKernel::V6_12];

    /// `6.1` or `v6.12`; any other version is refused with the ones there are.
    pub fn parse(s: &str) -> Result<GuestKernel, Refusal> {
        match s.trim_start_matches('v') {
            "6.1" => Ok(GuestKernel::V6_1),
            "6.12" => Ok(GuestKernel::V6_12),
            _ => refuse(format!(
                "guest kernel {s}: the guest boots Debian's packaged kernels, 6.1 or 6.12"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GuestKernel::V6_1 => "6.1",
            GuestKernel::V6_12 => "6.12",
        }
    }

    /// The package names of the series, as `apt-cache search --names-only` takes them.
    fn package_pattern(self) -> &'static str {
        match self {
            GuestKernel::V6_1 => r"^linux-image-6\.1\.0-[0-9]+-amd64-unsigned$",
            GuestKernel::V6_12 => r"^linux-image-6\.12\.[0-9]+\+deb[0-9]+-amd64-unsigned$",
        }
    }
}

/// An unpacked kernel package.
#[derive(Clone, Debug)]
pub(super) struct KernelFiles {
    /// `uname -r` of the kernel.
    pub release: String,
    pub vmlinuz: PathBuf,
    /// `lib/modules/<release>`.
    pub modules: PathBuf,
    /// `boot/config-<release>`: the build configuration.
    pub config: PathBuf,
}

/// Where guest kernels are cached: `$MMSIM_GUEST_CACHE`, else `$XDG_CACHE_HOME/mmsim/guest`,
/// else `~/.cache/mmsim/guest`.
pub fn cache_dir() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    env("MMSIM_GUEST_CACHE")
        .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("mmsim/guest")))
        .or_else(|| env("HOME").map(|d| d.join(".cache/mmsim/guest")))
        .unwrap_or_else(|| PathBuf::from("/var/cache/mmsim/guest"))
}

/// The kernel of series `k`, fetched and unpacked into `cache` on first use.
pub(super) fn kernel_files(k: GuestKernel, cache: &Path) -> Result<KernelFiles, Refusal> {
    let dir = cache.join(k.name());
    let ready = dir.join("release");
    if !ready.exists() {
        fetch(k, &dir)?;
    }
    let release = std::fs::read_to_string(&ready).or_else(|e| refuse(format!("{ready:?}: {e}")))?;
    let release = release.trim().to_string();
    let root = dir.join("root");
    Ok(KernelFiles {
        vmlinuz: root.join(format!("boot/vmlinuz-{release}")),
        modules: root.join(format!("lib/modules/{release}")),
        config: root.join(format!("boot/config-{release}")),
        release,
    })
}

fn run_tool(cmd: &mut Command) -> Result<String, Refusal> {
    let name = cmd.get_program().to_string_lossy().into_owned();
    let out = cmd.output().or_else(|e| refuse(format!("cannot run {name}: {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return refuse(format!("{name} failed ({}): {}", out.status, err.trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The newest package of the series in Debian's index, downloaded and unpacked into `dir`.
fn fetch(k: GuestKernel, dir: &Path) -> Result<(), Refusal> {
    let listed = run_tool(
        Command::new("apt-cache").args(["search", "--names-only"]).arg(k.package_pattern()),
    )?;
    let package = listed
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .max_by_key(|p| release_key(p))
        .map(str::to_string)
        .ok_or_else(|| Refusal {
            reason: format!(
                "Debian's package index offers no {} kernel ({})",
                k.name(),
                k.package_pattern()
            ),
        })?;
    eprintln!(
        "mmsim: fetching Debian's {package} (first use of the {} guest; cached in {})",
        k.name(),
        dir.display()
    );
    let download = dir.join("download");
    let _ = std::fs::remove_dir_all(&download);
    std::fs::create_dir_all(&download).or_else(|e| refuse(format!("{download:?}: {e}")))?;
    run_tool(
        Command::new("apt-get").args(["download", "-q"]).arg(&package).current_dir(&download),
    )?;
    let deb = std::fs::read_dir(&download)
        .ok()
        .and_then(|mut d| {
            d.find_map(|e| {
                e.ok().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "deb"))
            })
        })
        .ok_or_else(|| Refusal { reason: format!("apt-get download {package} left no .deb") })?;
    let root = dir.join("root");
    let _ = std::fs::remove_dir_all(&root);
    run_tool(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
    let _ = std::fs::remove_dir_all(&download);
    let release = std::fs::read_dir(root.join("lib/modules"))
        .ok()
        .and_then(|mut d| d.find_map(|e| e.ok()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .ok_or_else(|| Refusal { reason: format!("{package} holds no lib/modules/<release>") })?;
    std::fs::write(dir.join("release"), release).or_else(|e| refuse(format!("{dir:?}: {e}")))
}

/// The numbers of a package name, for picking the newest (`6.1.0-57` after `6.1.0-9`).
fn release_key(package: &str) -> Vec<u64> {
    package.split(|c: char| !c.is_ascii_digit()).filter_map(|n| n.parse().ok()).collect()
}

/// The modules the guest loads, by name, before it mounts its disks.
const WANTED: [&str; 6] =
    ["virtio_pci", "virtio_blk", "crc32c_generic", "ext4", "nd_e820", "nd_pmem"];

/// The modules a scenario's run loads with its own parameters (`brd`: its swap device), which
/// need nothing the boot has not loaded.
const ON_DEMAND: [&str; 1] = ["brd"];

/// Every `.ko` or `.ko.xz` below `dir`, by module name (`-` written `_`, as the kernel does).
fn index_modules(dir: &Path, out: &mut BTreeMap<String, PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            index_modules(&p, out);
        } else if let Some(name) = p.file_name().and_then(|n| n.to_str())
            && let Some(stem) = name.strip_suffix(".ko").or_else(|| name.strip_suffix(".ko.xz"))
        {
            out.insert(stem.replace('-', "_"), p.clone());
        }
    }
}

/// A module's image, unpacked when the package ships it xz-compressed.
fn module_image(path: &Path) -> Result<Vec<u8>, Refusal> {
    let bytes = std::fs::read(path).or_else(|e| refuse(format!("{path:?}: {e}")))?;
    if path.extension().is_none_or(|x| x != "xz") {
        return Ok(bytes);
    }
    let mut out = Vec::new();
    lzma_rs::xz_decompress(&mut bytes.as_slice(), &mut out)
        .or_else(|e| refuse(format!("{path:?}: not an xz module: {e:?}")))?;
    Ok(out)
}

/// The `depends=` list of a module's `.modinfo` section.
fn module_depends(image: &[u8], path: &Path) -> Result<Vec<String>, Refusal> {
    use object::{Object, ObjectSection};
    let file = object::File::parse(image).or_else(|e| refuse(format!("{path:?}: {e}")))?;
    let info = file
        .section_by_name(".modinfo")
        .and_then(|s| s.data().ok())
        .ok_or_else(|| Refusal { reason: format!("{path:?}: no .modinfo section") })?;
    Ok(info
        .split(|b| *b == 0)
        .filter_map(|f| f.strip_prefix(b"depends="))
        .flat_map(|d| d.split(|b| *b == b','))
        .filter(|d| !d.is_empty())
        .map(|d| String::from_utf8_lossy(d).replace('-', "_"))
        .collect())
}

/// The wanted modules the kernel does not build in, each after its dependencies: `(name,
/// image)` in load order.
fn modules_in_order(modules: &Path, wanted: &[&str]) -> Result<Vec<(String, Vec<u8>)>, Refusal> {
    let mut index = BTreeMap::new();
    index_modules(&modules.join("kernel"), &mut index);
    let (mut order, mut seen) = (Vec::new(), BTreeSet::new());
    for w in wanted {
        if index.contains_key(*w) {
            visit(w, &index, &mut seen, &mut order)?;
        }
    }
    Ok(order)
}

fn visit(
    name: &str,
    index: &BTreeMap<String, PathBuf>,
    seen: &mut BTreeSet<String>,
    order: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), Refusal> {
    if !seen.insert(name.to_string()) {
        return Ok(());
    }
    let path = index
        .get(name)
        .ok_or_else(|| Refusal { reason: format!("module {name}: not in the package") })?;
    let image = module_image(path)?;
    for dep in module_depends(&image, path)? {
        visit(&dep, index, seen, order)?;
    }
    order.push((name.to_string(), image));
    Ok(())
}

/// The shared objects `exe` links, by their paths (`ldd`), the dynamic loader among them.
fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>, Refusal> {
    let text = run_tool(Command::new("ldd").arg(exe))?;
    Ok(text
        .lines()
        .filter_map(|l| {
            let path = l.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

/// The initramfs: `/init` (this binary), its libraries, the modules as `/modules/NN-name.ko`
/// (and `/modules/on-demand/name.ko`),
/// the kernel's build configuration as `/boot/config-<release>` (`support::kernel_config`),
/// `/job.json`, and the scenario files below `/work` at their own relative paths.
pub(super) fn initramfs(
    k: &KernelFiles,
    job: &[u8],
    files: &[(String, Vec<u8>)],
) -> Result<Vec<u8>, Refusal> {
    let exe = init_binary()?;
    let mut a = Archive::default();
    for d in ["dev", "proc", "sys", "tmp", "run", "modules", "work"] {
        a.dir(d);
    }
    a.node("dev/console", 0o020600, (5, 1));
    a.program(&exe, "init")?;
    let mkfs = super::which("mkfs.ext4")
        .ok_or_else(|| Refusal { reason: "mkfs.ext4 is not installed".into() })?;
    a.program(&mkfs, super::MKFS.trim_start_matches('/'))?;
    for (i, (name, image)) in modules_in_order(&k.modules, &WANTED)?.iter().enumerate() {
        a.file(&format!("modules/{i:02}-{name}.ko"), 0o644, image);
    }
    for (name, image) in modules_in_order(&k.modules, &ON_DEMAND)? {
        a.file(&format!("modules/on-demand/{name}.ko"), 0o644, &image);
    }
    let config = std::fs::read(&k.config).or_else(|e| refuse(format!("{:?}: {e}", k.config)))?;
    a.file(&format!("boot/config-{}", k.release), 0o644, &config);
    a.file("job.json", 0o644, job);
    for (path, text) in files {
        a.file(&format!("work/{}", path.trim_start_matches('/')), 0o644, text);
    }
    a.finish()
}

/// The guest's `/init`: this binary, or `$MMSIM_GUEST_INIT` where this process is not `mmsim`
/// (Python's, which runs the package's compiled module).
fn init_binary() -> Result<PathBuf, Refusal> {
    if let Some(p) = std::env::var_os("MMSIM_GUEST_INIT").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let exe = std::env::current_exe().or_else(|e| refuse(format!("this binary's path: {e}")))?;
    if exe.file_name().is_some_and(|n| n.to_string_lossy().starts_with("mmsim")) {
        Ok(exe)
    } else {
        refuse(format!(
            "the guest's /init is the mmsim binary, and this is {}: set MMSIM_GUEST_INIT to the \
             path of `mmsim` (cargo build --release -p mmsim-cli)",
            exe.display()
        ))
    }
}

/// A `newc` archive being written, with each file's parent directories made first.
#[derive(Default)]
struct Archive {
    out: Vec<u8>,
    dirs: BTreeSet<String>,
    /// The shared objects written, each once.
    files: BTreeSet<String>,
    ino: u32,
    error: Option<String>,
}

impl Archive {
    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) {
        self.ino += 1;
        let header = cpio::newc::Builder::new(name)
            .ino(self.ino)
            .mode(mode)
            .nlink(1)
            .rdev_major(rdev.0)
            .rdev_minor(rdev.1);
        let Ok(size) = u32::try_from(data.len()) else {
            self.error = Some(format!("{name}: {} bytes, over cpio's 4 GiB", data.len()));
            return;
        };
        let mut w = header.write(&mut self.out, size);
        if let Err(e) = w.write_all(data).and_then(|()| w.finish().map(|_| ())) {
            self.error = Some(format!("{name}: {e}"));
        }
    }

    fn dir(&mut self, path: &str) {
        let mut at = String::new();
        for part in path.split('/') {
            at = if at.is_empty() { part.to_string() } else { format!("{at}/{part}") };
            if self.dirs.insert(at.clone()) {
                self.entry(&at.clone(), 0o040755, (0, 0), &[]);
            }
        }
    }

    fn parent(&mut self, path: &str) {
        if let Some((parent, _)) = path.rsplit_once('/') {
            self.dir(parent);
        }
    }

    fn file(&mut self, path: &str, perm: u32, data: &[u8]) {
        self.parent(path);
        self.entry(path, 0o100000 | perm, (0, 0), data);
    }

    /// The executable `exe` at `path`, with every shared object it links at its own path.
    fn program(&mut self, exe: &Path, path: &str) -> Result<(), Refusal> {
        self.file(path, 0o755, &std::fs::read(exe).or_else(|e| refuse(format!("{exe:?}: {e}")))?);
        for lib in shared_libraries(exe)? {
            let name = lib.to_string_lossy().trim_start_matches('/').to_string();
            if self.files.insert(name.clone()) {
                let bytes = std::fs::read(&lib).or_else(|e| refuse(format!("{lib:?}: {e}")))?;
                self.file(&name, 0o755, &bytes);
            }
        }
        Ok(())
    }

    fn node(&mut self, path: &str, mode: u32, rdev: (u32, u32)) {
        self.parent(path);
        self.entry(path, mode, rdev, &[]);
    }

    fn finish(mut self) -> Result<Vec<u8>, Refusal> {
        if let Some(e) = self.error {
            return refuse(format!("the initramfs: {e}"));
        }
        cpio::newc::trailer(&mut self.out).or_else(|e| refuse(format!("the initramfs: {e}")))?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_named_and_others_refused() {
        assert_eq!(GuestKernel::parse("v6.12"), Ok(GuestKernel::V6_12));
        assert_eq!(GuestKernel::parse("6.1"), Ok(GuestKernel::V6_1));
        assert!(GuestKernel::parse("6.6").unwrap_err().reason.contains("6.1 or 6.12"));
    }

    #[test]
    fn the_newest_package_wins() {
        let mut names =
            ["linux-image-6.1.0-9-amd64-unsigned", "linux-image-6.1.0-57-amd64-unsigned"];
        names.sort_by_key(|p| release_key(p));
        assert_eq!(names[1], "linux-image-6.1.0-57-amd64-unsigned");
    }

    #[test]
    fn an_archive_ends_with_its_trailer_and_makes_parents() {
        let mut a = Archive::default();
        a.file("work/scenarios/a.toml", 0o644, b"x = 1\n");
        let out = a.finish().unwrap();
        let text = String::from_utf8_lossy(&out);
        assert!(text.starts_with("070701"));
        let (w, s, f) = (text.find("work\0"), text.find("work/scenarios\0"), text.find("a.toml\0"));
        assert!(w < s && s < f, "parents first: {w:?} {s:?} {f:?}");
        assert!(text.contains("TRAILER!!!"));
        assert_eq!(out.len() % 4, 0);
    }
}
