//! The build read from the executable: real binaries (this machine's nginx, Debian's arm64
//! nginx, arm64 programs from Debian's cross compiler with and without outline atomics), each
//! checked against what binutils' readelf and objdump say of it.

use std::path::{Path, PathBuf};
use std::process::Command;

use archbench::monitor::binary::read_build;
use archbench::monitor::fingerprint::{complete, with_executable};
use archbench::stats::{AtomicInstructions, ServerFingerprint};

use crate::util::nginx::{Nginx, NginxConfig};
use crate::util::{archbench, require_tool, stderr, stdout};

/// The GNU build id `readelf -n` prints.
fn readelf_build_id(readelf: &Path, exe: &Path) -> String {
    let o = Command::new(readelf).arg("-n").arg(exe).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build id in readelf -n {}: {text}", exe.display()))
        .trim()
        .to_string()
}

/// `cas`, `swp`, or ld/st + an atomic operation, then the ordering and size suffixes.
fn is_lse_mnemonic(m: &str) -> bool {
    const OPS: [&str; 8] = ["add", "clr", "eor", "set", "smax", "smin", "umax", "umin"];
    let rest = ["cas", "swp"]
        .iter()
        .find_map(|p| m.strip_prefix(p))
        .or_else(|| {
            let r = m.strip_prefix("ld").or_else(|| m.strip_prefix("st"))?;
            OPS.iter().find_map(|op| r.strip_prefix(op))
        });
    rest.is_some_and(|r| {
        ["", "a", "l", "al"]
            .iter()
            .any(|o| ["", "b", "h"].iter().any(|s| r == format!("{o}{s}")))
    })
}

/// ldxr, ldaxr, stxr, stlxr in each size.
fn is_exclusive_mnemonic(m: &str) -> bool {
    ["ldxr", "ldaxr", "stxr", "stlxr"]
        .iter()
        .any(|base| ["", "b", "h"].iter().any(|s| m == format!("{base}{s}")))
}

/// The atomics GNU objdump's disassembly of `exe` holds.
fn objdump_atomics(objdump: &Path, exe: &Path) -> AtomicInstructions {
    let o = Command::new(objdump)
        .args(["-d", "--no-show-raw-insn"])
        .arg(exe)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut count = AtomicInstructions::default();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        // "  4005d0:\tldaxr\tx1, [x0]"
        let Some(m) = line.split('\t').nth(1).map(str::trim) else {
            continue;
        };
        if is_lse_mnemonic(m) {
            count.lse += 1;
        } else if is_exclusive_mnemonic(m) {
            count.exclusive += 1;
        }
    }
    count
}

/// Debian's arm64 root filesystem, as tools/arm64/fetch leaves it.
fn arm64_root() -> Option<PathBuf> {
    // In the target directory this build is in (CARGO_TARGET_DIR or ./target), as
    // tools/arm64/fetch puts it.
    let built = Path::new(env!("CARGO_BIN_EXE_archbench"));
    if let Some(root) = archbench_cluster::lifecycle::arm64_root_beside(built) {
        return Some(root);
    }
    crate::util::cannot_run(
        "Debian's arm64 nginx is not fetched (tools/arm64/fetch, which tools/test runs)",
    );
    None
}

#[test]
fn debian_arm64_nginx_has_an_lse_path_and_no_warning() {
    let (Some(root), Some(objdump), Some(readelf), Some(qemu)) = (
        arm64_root(),
        require_tool("aarch64-linux-gnu-objdump"),
        require_tool("aarch64-linux-gnu-readelf"),
        require_tool("qemu-aarch64-static"),
    ) else {
        return;
    };
    let exe = root.join("usr/sbin/nginx");
    let b = read_build(&std::fs::read(&exe).unwrap()).unwrap();
    assert_eq!(b.machine, "aarch64");
    assert_eq!(
        b.build_id.as_deref(),
        Some(&*readelf_build_id(&readelf, &exe))
    );
    let atomics = b.atomics.unwrap();
    assert_eq!(atomics, objdump_atomics(&objdump, &exe));
    // GCC 12's default, outline atomics: helpers with both paths.
    assert!(atomics.lse > 0 && atomics.exclusive > 0, "{atomics:?}");
    // Its own -V, run under qemu-user: no "built by" line (a reproducible build), so the
    // flags alone cannot tell; the executable can, and there is nothing to warn about.
    let v = Command::new(qemu)
        .arg("-L")
        .arg(&root)
        .arg(&exe)
        .arg("-V")
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
    let v = String::from_utf8_lossy(&v.stderr).into_owned();
    let fp = complete(
        with_executable(
            ServerFingerprint::default(),
            Ok(std::fs::read(&exe).unwrap()),
        ),
        Some(&v),
        "aarch64",
        Some(true),
    );
    assert!(fp.version.unwrap().starts_with("nginx version: nginx/1."));
    assert_eq!(fp.warnings, Vec::<String>::new());
}

#[test]
fn cross_built_atomics_tell_lse_from_ll_sc() {
    let (Some(gcc), Some(objdump), Some(qemu)) = (
        require_tool("aarch64-linux-gnu-gcc"),
        require_tool("aarch64-linux-gnu-objdump"),
        require_tool("qemu-aarch64-static"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("count.c");
    std::fs::write(
        &src,
        "#include <stdatomic.h>\nstatic atomic_long counter;\nint main(int argc, char **argv) {\n  (void)argv;\n  for (long i = 0; i < argc * 1000L; i++) atomic_fetch_add(&counter, 1);\n  return (int)(atomic_load(&counter) % 2);\n}\n",
    )
    .unwrap();
    // (flags, LSE expected, LL/SC expected, warned on a CPU with LSE)
    let builds: [(&[&str], bool, bool, bool); 3] = [
        (&["-mno-outline-atomics"], false, true, true),
        (&[], true, true, false),
        (&["-march=armv8.1-a"], true, false, false),
    ];
    for (i, (flags, lse, llsc, warned)) in builds.into_iter().enumerate() {
        let exe = dir.path().join(format!("count{i}"));
        let o = Command::new(&gcc)
            .args(["-O2"])
            .args(flags)
            .arg(&src)
            .arg("-o")
            .arg(&exe)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // A real arm64 program: it runs (under qemu-user) and counts.
        let run = Command::new(&qemu)
            .args(["-L", "/usr/aarch64-linux-gnu"])
            .arg(&exe)
            .status()
            .unwrap();
        assert_eq!(run.code(), Some(0), "{flags:?}");
        let bytes = std::fs::read(&exe).unwrap();
        let b = read_build(&bytes).unwrap();
        let atomics = b.atomics.unwrap();
        assert_eq!(atomics, objdump_atomics(&objdump, &exe), "{flags:?}");
        assert_eq!(
            (atomics.lse > 0, atomics.exclusive > 0),
            (lse, llsc),
            "{flags:?}: {atomics:?}"
        );
        let fp = complete(
            with_executable(ServerFingerprint::default(), Ok(bytes)),
            None,
            "aarch64",
            Some(true),
        );
        assert_eq!(
            fp.warnings.len(),
            usize::from(warned),
            "{flags:?}: {:?}",
            fp.warnings
        );
        if warned {
            assert!(
                fp.warnings[0].contains("only LL/SC atomics"),
                "{:?}",
                fp.warnings
            );
        }
    }
}

#[test]
fn a_watched_nginx_is_read_from_its_running_executable() {
    let Some(readelf) = require_tool("readelf") else {
        return;
    };
    let Some(ng) = Nginx::start(NginxConfig::default()) else {
        return;
    };
    let watch = format!("ng=pid:{}", ng.pid());
    let o = archbench(&[
        "run",
        &ng.url("/"),
        "-n",
        "50",
        "-c",
        "2",
        "--watch",
        &watch,
        "-o",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    crate::util::schema::assert_valid(&doc);
    let binary = &doc["servers"][0]["fingerprint"]["binary"];
    let exe = std::fs::read_link(format!("/proc/{}/exe", ng.pid())).unwrap();
    assert_eq!(binary["machine"], std::env::consts::ARCH, "{binary}");
    assert_eq!(
        binary["build_id"],
        readelf_build_id(&readelf, &exe),
        "{binary}"
    );
    if std::env::consts::ARCH != "aarch64" {
        assert!(binary["atomics"].is_null(), "{binary}");
    }
    // The text report says it on the server's lines.
    let o = archbench(&[
        "run",
        &ng.url("/"),
        "-n",
        "20",
        "-c",
        "1",
        "--watch",
        &watch,
    ]);
    let text = stdout(&o);
    assert!(
        text.contains(&format!(
            "{} executable, build id {}",
            std::env::consts::ARCH,
            readelf_build_id(&readelf, &exe)
        )),
        "{text}"
    );
}
