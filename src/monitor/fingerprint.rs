//! What a watched server is: its executable, and for nginx its version, compiler and configure
//! arguments (`nginx -V`), with a warning for the known aarch64 atomics regression (nginx
//! built without outline atomics runs ~3x slower on CPUs with LSE atomics).

use std::io::Read;

use super::binary::{read_build, MAX_EXECUTABLE_BYTES};
use crate::os::cpu_has_lse;
use crate::stats::ServerFingerprint;

/// Fingerprints the process `pid`: its running executable read through /proc (the file on
/// disk may have been replaced since it started), and for nginx `-V`.
pub fn fingerprint_pid(pid: u32) -> ServerFingerprint {
    let link = format!("/proc/{pid}/exe");
    let exe = std::fs::read_link(&link).ok();
    let fp = with_executable(
        ServerFingerprint {
            executable: exe.as_ref().map(|p| p.display().to_string()),
            ..ServerFingerprint::default()
        },
        read_capped(&link),
    );
    // Only nginx is asked for -V: an unknown program given -V might do anything.
    let nginx_v = exe
        .filter(|e| {
            e.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("nginx"))
        })
        .and_then(|e| std::process::Command::new(e).arg("-V").output().ok())
        // nginx prints -V on stderr.
        .map(|out| {
            String::from_utf8_lossy(&out.stderr).into_owned()
                + &String::from_utf8_lossy(&out.stdout)
        });
    complete(
        fp,
        nginx_v.as_deref(),
        std::env::consts::ARCH,
        cpu_has_lse(),
    )
}

/// A whole file, up to [`MAX_EXECUTABLE_BYTES`].
fn read_capped(path: &str) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_EXECUTABLE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| format!("{path}: {e}"))?;
    if bytes.len() as u64 > MAX_EXECUTABLE_BYTES {
        return Err(format!("{path} is over {} MiB", MAX_EXECUTABLE_BYTES >> 20));
    }
    Ok(bytes)
}

/// Adds what the executable's bytes say it was built as, or why they could not be read.
pub fn with_executable(
    mut fp: ServerFingerprint,
    bytes: Result<Vec<u8>, String>,
) -> ServerFingerprint {
    match bytes.and_then(|b| read_build(&b).map_err(|e| e.to_string())) {
        Ok(b) => fp.binary = Some(b),
        Err(why) => fp.binary_unread = Some(why),
    }
    fp
}

/// Marks a fingerprint emulated when the executable that runs its process (a pod's PID 1, as
/// `readlink /proc/1/exe` gives it) is a qemu-user interpreter: the kernel runs qemu, which
/// runs the server's code, so every throughput and CPU figure is the emulator's.
pub fn with_runner(mut fp: ServerFingerprint, runner: &str) -> ServerFingerprint {
    let runner = runner.trim();
    let name = runner.rsplit('/').next().unwrap_or(runner);
    if name.starts_with("qemu-") {
        fp.warnings.push(format!(
            "the server runs under emulation ({runner} runs its code): its throughput and CPU figures are qemu-user's, not the CPU's; compare builds and counts here, not speed"
        ));
        fp.emulator = Some(runner.to_string());
    }
    fp
}

/// Completes a fingerprint with `nginx -V`'s text (for nginx) and the warnings for a server
/// seen on a machine of `arch` (`uname -m` spelling: x86_64, aarch64) with or without LSE
/// atomics: for a local process, or a pod read through exec.
pub fn complete(
    mut fp: ServerFingerprint,
    nginx_v: Option<&str>,
    arch: &str,
    cpu_lse: Option<bool>,
) -> ServerFingerprint {
    if let Some(v) = nginx_v {
        fill_from_nginx_v(&mut fp, v);
    }
    let warnings = build_warnings(&fp, nginx_v, arch, cpu_lse);
    fp.warnings.extend(warnings);
    fp
}

/// The executable is the first witness, `nginx -V` the second: where they disagree, both
/// are said.
fn build_warnings(
    fp: &ServerFingerprint,
    nginx_v: Option<&str>,
    arch: &str,
    cpu_lse: Option<bool>,
) -> Vec<String> {
    let from_v = nginx_v.and_then(|v| outline_atomics_warning(arch, cpu_lse, v));
    let Some(b) = &fp.binary else {
        return from_v
            .map(|w| format!("{w} (from nginx -V alone: its executable was not read)"))
            .into_iter()
            .collect();
    };
    let name = if nginx_v.is_some() {
        "nginx"
    } else {
        "the server"
    };
    if b.machine != arch {
        return vec![format!(
            "{name}'s executable is {} code on an {arch} machine (emulated, or the machine is mislabelled): its figures are not {arch} figures",
            b.machine
        )];
    }
    let Some(a) = b.atomics.filter(|_| cpu_lse == Some(true)) else {
        return Vec::new();
    };
    if a.lse == 0 && a.exclusive > 0 {
        let v_says = match (nginx_v, &from_v) {
            (Some(_), None) => "; nginx -V's flags do not show it",
            _ => "",
        };
        vec![format!(
            "{name}'s executable has only LL/SC atomics ({} exclusives, no LSE instruction) on a CPU with LSE atomics: expect a large slowdown under contention (rebuild with -moutline-atomics or -march=armv8.1-a){v_says}",
            a.exclusive
        )]
    } else if a.lse > 0 && from_v.is_some() {
        vec![format!(
            "nginx -V's flags suggest a build without LSE atomics, but its executable holds {} LSE instructions: the executable is what runs",
            a.lse
        )]
    } else {
        Vec::new()
    }
}

fn fill_from_nginx_v(fp: &mut ServerFingerprint, text: &str) {
    for line in text.lines() {
        if line.starts_with("nginx version:") {
            fp.version = Some(line.trim().to_string());
        } else if let Some(b) = line.strip_prefix("built by ") {
            fp.built_by = Some(format!("built by {}", b.trim()));
        } else if let Some(args) = line.strip_prefix("configure arguments:") {
            fp.configure_arguments = Some(args.trim().to_string());
        }
    }
}

/// The warning for an aarch64 nginx whose `nginx -V` suggests LL/SC-only atomics on a CPU with
/// LSE (the second opinion: the flags, not the code).
fn outline_atomics_warning(arch: &str, cpu_lse: Option<bool>, nginx_v: &str) -> Option<String> {
    if arch != "aarch64" || cpu_lse != Some(true) {
        return None;
    }
    let flags = nginx_v.to_ascii_lowercase();
    if flags.contains("-mno-outline-atomics") {
        return Some(
            "nginx was built with -mno-outline-atomics on a CPU with LSE atomics: expect a large slowdown under contention (rebuild with -moutline-atomics or -march=armv8.1-a+)".into(),
        );
    }
    let lse_at_build = flags.contains("-moutline-atomics")
        || flags.contains("+lse")
        || [
            "armv8.1", "armv8.2", "armv8.3", "armv8.4", "armv8.5", "armv8.6", "armv9",
        ]
        .iter()
        .any(|a| flags.contains(&format!("-march={a}")));
    // GCC 10.1+ and clang 12+ default to outline atomics on aarch64 Linux. Without a "built
    // by" line (reproducible builds, Debian's among them, leave it out) -V cannot tell.
    let old_compiler = compiler_major(&flags, "gcc ").is_some_and(|v| v < 10)
        || compiler_major(&flags, "clang ").is_some_and(|v| v < 12);
    (!lse_at_build && old_compiler).then(|| {
        "nginx appears to be built without -moutline-atomics (old compiler, no LSE flags) on a CPU with LSE atomics: the known ~3x regression; rebuild with -moutline-atomics".into()
    })
}

/// Major version after `name` on the "built by" line ("built by gcc 12.2.0 …").
fn compiler_major(text: &str, name: &str) -> Option<u32> {
    let line = text.lines().find(|l| l.starts_with("built by"))?;
    let rest = &line[line.find(name)? + name.len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN_ARM: &str = "nginx version: nginx/1.22.1\nbuilt by gcc 12.2.0 (Debian 12.2.0-14)\nbuilt with OpenSSL 3.0.9\nTLS SNI support enabled\nconfigure arguments: --with-cc-opt='-g -O2' --prefix=/usr/share/nginx\n";

    #[test]
    fn parses_nginx_v() {
        let mut fp = ServerFingerprint::default();
        fill_from_nginx_v(&mut fp, DEBIAN_ARM);
        assert_eq!(fp.version.as_deref(), Some("nginx version: nginx/1.22.1"));
        assert_eq!(
            fp.built_by.as_deref(),
            Some("built by gcc 12.2.0 (Debian 12.2.0-14)")
        );
        assert!(fp.configure_arguments.unwrap().starts_with("--with-cc-opt"));
    }

    #[test]
    fn warns_only_for_aarch64_lse_without_outline_atomics() {
        // GCC 12 defaults to outline atomics: fine.
        assert_eq!(
            outline_atomics_warning("aarch64", Some(true), DEBIAN_ARM),
            None
        );
        // Explicitly disabled: the regression of the test plan.
        let disabled = DEBIAN_ARM.replace("-g -O2", "-g -O2 -mno-outline-atomics");
        assert!(outline_atomics_warning("aarch64", Some(true), &disabled).is_some());
        // An old compiler without flags.
        let old = DEBIAN_ARM.replace("gcc 12.2.0", "gcc 9.4.0");
        assert!(outline_atomics_warning("aarch64", Some(true), &old).is_some());
        // ... unless it targets ARMv8.1 or asks for outline atomics.
        let march = old.replace("-g -O2", "-march=armv8.2-a");
        assert_eq!(outline_atomics_warning("aarch64", Some(true), &march), None);
        // No compiler named (a reproducible build): the flags cannot tell.
        let unnamed = DEBIAN_ARM.replace("built by gcc 12.2.0 (Debian 12.2.0-14)\n", "");
        assert_eq!(
            outline_atomics_warning("aarch64", Some(true), &unnamed),
            None
        );
        // No LSE on the CPU, or not aarch64: nothing to warn about.
        assert_eq!(
            outline_atomics_warning("aarch64", Some(false), &disabled),
            None
        );
        assert_eq!(outline_atomics_warning("x86_64", None, &disabled), None);
    }

    fn built(machine: &str, lse: u64, exclusive: u64) -> ServerFingerprint {
        ServerFingerprint {
            binary: Some(crate::stats::BinaryBuild {
                machine: machine.into(),
                build_id: None,
                atomics: (machine == "aarch64")
                    .then_some(crate::stats::AtomicInstructions { lse, exclusive }),
            }),
            ..ServerFingerprint::default()
        }
    }

    #[test]
    fn the_executable_speaks_first_and_nginx_v_second() {
        let disabled = DEBIAN_ARM.replace("-g -O2", "-g -O2 -mno-outline-atomics");
        let lse = Some(true);
        // LL/SC only, though -V shows no flag: the code decides, and says -V did not show it.
        let w = complete(built("aarch64", 0, 40), Some(DEBIAN_ARM), "aarch64", lse).warnings;
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("only LL/SC") && w[0].contains("do not show it"),
            "{w:?}"
        );
        // Both LSE and LL/SC (outline atomics): no warning, whatever the CPU.
        let w = complete(built("aarch64", 9, 40), Some(DEBIAN_ARM), "aarch64", lse).warnings;
        assert!(w.is_empty(), "{w:?}");
        // -V says disabled but the code has LSE: both are said.
        let w = complete(built("aarch64", 9, 0), Some(&disabled), "aarch64", lse).warnings;
        assert!(w[0].contains("holds 9 LSE instructions"), "{w:?}");
        // A CPU without LSE: LL/SC is all it can run.
        let w = complete(built("aarch64", 0, 40), None, "aarch64", Some(false)).warnings;
        assert!(w.is_empty(), "{w:?}");
        // x86 code on an arm64 node.
        let w = complete(built("x86_64", 0, 0), Some(DEBIAN_ARM), "aarch64", lse).warnings;
        assert!(w[0].contains("x86_64 code on an aarch64 machine"), "{w:?}");
        // Unread executable: -V alone, and it says so.
        let unread = with_executable(ServerFingerprint::default(), Err("gone".into()));
        assert_eq!(unread.binary_unread.as_deref(), Some("gone"));
        let w = complete(unread, Some(&disabled), "aarch64", lse).warnings;
        assert!(w[0].contains("from nginx -V alone"), "{w:?}");
    }

    #[test]
    fn a_server_qemu_runs_is_marked_emulated() {
        let fp = with_runner(
            ServerFingerprint::default(),
            "/usr/bin/qemu-aarch64-static\n",
        );
        assert_eq!(fp.emulator.as_deref(), Some("/usr/bin/qemu-aarch64-static"));
        assert!(
            fp.warnings[0].contains("under emulation"),
            "{:?}",
            fp.warnings
        );
        let native = with_runner(ServerFingerprint::default(), "/usr/sbin/nginx");
        assert_eq!(native.emulator, None);
        assert!(native.warnings.is_empty());
    }
}
