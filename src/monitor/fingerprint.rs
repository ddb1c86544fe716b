//! What a watched server is: its executable, and for nginx its version, compiler and configure
//! arguments (`nginx -V`), with a warning for the known aarch64 atomics regression (nginx
//! built without outline atomics runs ~3x slower on CPUs with LSE atomics).

use crate::os::cpu_has_lse;
use crate::stats::ServerFingerprint;

/// Fingerprints the process `pid` (nginx: runs its own binary with -V).
pub fn fingerprint_pid(pid: u32) -> ServerFingerprint {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let fp = ServerFingerprint {
        executable: exe.as_ref().map(|p| p.display().to_string()),
        ..ServerFingerprint::default()
    };
    let Some(exe) = exe else { return fp };
    // Only nginx is asked for -V: an unknown program given -V might do anything.
    if !exe
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("nginx"))
    {
        return fp;
    }
    let Ok(out) = std::process::Command::new(&exe).arg("-V").output() else {
        return fp;
    };
    // nginx prints -V on stderr.
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    from_nginx_v(fp, &text, std::env::consts::ARCH, cpu_has_lse())
}

/// Completes a fingerprint from `nginx -V`'s text, as seen on a machine of `arch` (`uname -m`
/// spelling: x86_64, aarch64) with or without LSE atomics: for a local process, or a pod
/// read through exec.
pub fn from_nginx_v(
    mut fp: ServerFingerprint,
    nginx_v: &str,
    arch: &str,
    cpu_lse: Option<bool>,
) -> ServerFingerprint {
    fill_from_nginx_v(&mut fp, nginx_v);
    if let Some(w) = outline_atomics_warning(arch, cpu_lse, nginx_v) {
        fp.warnings.push(w);
    }
    fp
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

/// The warning for an aarch64 nginx whose atomics are LL/SC-only on a CPU with LSE.
pub fn outline_atomics_warning(arch: &str, cpu_lse: Option<bool>, nginx_v: &str) -> Option<String> {
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
    // GCC 10.1+ and clang 12+ default to outline atomics on aarch64 Linux.
    let compiler_default = compiler_major(&flags, "gcc ").is_some_and(|v| v >= 10)
        || compiler_major(&flags, "clang ").is_some_and(|v| v >= 12);
    (!lse_at_build && !compiler_default).then(|| {
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
        // No LSE on the CPU, or not aarch64: nothing to warn about.
        assert_eq!(
            outline_atomics_warning("aarch64", Some(false), &disabled),
            None
        );
        assert_eq!(outline_atomics_warning("x86_64", None, &disabled), None);
    }
}
