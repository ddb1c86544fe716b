//! A test that cannot run here is never a silent pass. By default it fails, saying what is
//! missing and what to install; with `ARCHBENCH_ALLOW_SKIPS=1` (a developer's quick run on a
//! machine without everything) it returns, and the test process ends by writing the list of
//! what it skipped, and why, straight to its standard error — past the test harness's
//! capture, after its summary — so a green run with skips cannot pass for a full one.

use std::io::Write as _;
use std::path::Path;
use std::sync::{Mutex, Once};

/// The opt-in.
pub const ALLOW: &str = "ARCHBENCH_ALLOW_SKIPS";

/// Every skip of this process: (test, why).
static SKIPPED: Mutex<Vec<(String, String)>> = Mutex::new(Vec::new());
static AT_EXIT: Once = Once::new();

/// Whether skips were asked for.
pub fn allowed() -> bool {
    std::env::var_os(ALLOW).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The calling test cannot run, because `why`: fails it, or (when [`allowed`]) records the
/// skip for the list this process prints as it ends, and returns so the test can.
#[track_caller]
pub fn cannot_run(why: &str) {
    if !allowed() {
        panic!("{why}. tools/test installs what the tests need; {ALLOW}=1 skips such tests instead and lists them at the end");
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    let mut list = SKIPPED.lock().unwrap_or_else(|p| p.into_inner());
    list.push((test, why.to_string()));
    drop(list);
    AT_EXIT.call_once(|| {
        // SAFETY: registers a plain function with no arguments; it runs once at exit.
        unsafe {
            libc::atexit(print_skipped);
        }
    });
}

/// The Debian package that provides `tool`, from `tools/packages` (one list for the tests,
/// `tools/test` and CI), or the tool's own name when that list does not say.
pub fn package_of(tool: &str) -> String {
    let list = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/packages");
    let text = std::fs::read_to_string(list).unwrap_or_default();
    packages_providing(&text, tool)
        .into_iter()
        .next()
        .unwrap_or_else(|| tool.to_string())
}

/// Which packages of a `tools/packages` text list `tool` among their commands.
fn packages_providing(text: &str, tool: &str) -> Vec<String> {
    text.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            let package = cols.next()?;
            let commands = cols.next()?;
            commands
                .split(',')
                .any(|c| c != "-" && c == tool)
                .then(|| package.to_string())
        })
        .collect()
}

extern "C" fn print_skipped() {
    let list = SKIPPED.lock().unwrap_or_else(|p| p.into_inner());
    if list.is_empty() {
        return;
    }
    let program = std::env::current_exe()
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut text = format!(
        "\nSKIPPED ({ALLOW} is set): {} test(s) of {program} did not run:\n",
        list.len()
    );
    for (test, why) in list.iter() {
        text.push_str(&format!("  {test}: {why}\n"));
    }
    // The raw standard error: the harness's capture of test output does not reach here.
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::packages_providing;

    #[test]
    fn a_tool_is_found_by_the_package_that_provides_it() {
        let text =
            "# comment\nnginx nginx why\napache2-utils ab,htpasswd  # ab\nnginx-extras - none\n";
        assert_eq!(packages_providing(text, "ab"), ["apache2-utils"]);
        assert_eq!(packages_providing(text, "nginx"), ["nginx"]);
        assert!(packages_providing(text, "htpass").is_empty());
        assert!(packages_providing(text, "-").is_empty());
    }

    #[test]
    fn the_real_list_names_the_packages_the_hints_need() {
        for (tool, package) in [
            ("ab", "apache2-utils"),
            ("h2load", "nghttp2-client"),
            ("unshare", "util-linux"),
            ("ip", "iproute2"),
            ("wrk", "wrk"),
            ("chromium", "chromium"),
        ] {
            assert_eq!(super::package_of(tool), package, "{tool}");
        }
    }
}
