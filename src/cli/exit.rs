//! Exit statuses and errors on one line: what every entry point maps its outcome to.

use std::ffi::OsString;
use std::io;

use super::signals::StopSignals;
use super::PlanError;

/// Exit statuses.
pub const EXIT_FAILURE: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// Parses `args` as `C`, installs the signal handlers, runs, and maps the outcome to an exit
/// status: the one way both executables start. `help_for` names the subcommand whose
/// `--help` a usage error points at; `missing` is said when a subcommand is required and
/// none was given.
pub fn run_main<C: clap::Parser>(
    args: impl IntoIterator<Item = OsString>,
    help_for: Option<&str>,
    missing: Option<&str>,
    run: impl FnOnce(C, &StopSignals) -> anyhow::Result<i32>,
) -> i32 {
    use clap::error::ErrorKind;
    let parsed = match C::try_parse_from(args) {
        Ok(c) => c,
        Err(e)
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                && missing.is_some() =>
        {
            crate::stderr_line!("archbench: {}", missing.unwrap_or_default());
            return EXIT_USAGE;
        }
        Err(e) if e.use_stderr() => {
            crate::stderr_line!("archbench: {}", one_line_usage_error(&e, help_for));
            return EXIT_USAGE;
        }
        Err(e) => {
            // --help and --version: clap's own text, on stdout; one that cannot be written
            // (a full disk) is a failure, a reader gone (`| head -1`) is not.
            let printed = e
                .print()
                .and_then(|()| std::io::Write::flush(&mut std::io::stdout()));
            return match printed {
                Err(w) if w.kind() != std::io::ErrorKind::BrokenPipe => {
                    crate::stderr_line!("archbench: cannot write the help: {w}");
                    EXIT_FAILURE
                }
                _ => 0,
            };
        }
    };
    let signals = match StopSignals::install() {
        Ok(s) => s,
        Err(e) => {
            crate::stderr_line!("archbench: cannot install signal handlers: {e}");
            return EXIT_FAILURE;
        }
    };
    match run(parsed, &signals) {
        Ok(code) => code,
        Err(e) => exit_for(&e),
    }
}

/// clap's message without its usage block: the first line, and where to read more.
fn one_line_usage_error(e: &clap::Error, subcommand: Option<&str>) -> String {
    let rendered = with_values_escaped(e);
    let mut lines = rendered.lines().skip_while(|l| l.trim().is_empty());
    let head = lines
        .next()
        .unwrap_or("invalid command line")
        .trim_start_matches("error: ");
    // "… were not provided:" lists what on the lines below, up to a blank line.
    let listed: Vec<&str> = if head.ends_with(':') {
        lines
            .take_while(|l| !l.trim().is_empty())
            .map(str::trim)
            .collect()
    } else {
        Vec::new()
    };
    let first = if listed.is_empty() {
        head.trim_end_matches('.').to_string()
    } else {
        format!("{} {}", head, listed.join(", "))
    };
    let help = match subcommand {
        // ab's -h is its help, as in ApacheBench (which has no --help).
        Some("ab") => "archbench ab -h".to_string(),
        Some(sub) => format!("archbench {sub} --help"),
        None => "archbench --help".to_string(),
    };
    format!("{first}; see `{help}`")
}

/// clap's message with the values it quotes (what was typed) escaped where they hold control
/// characters: a line break in a value would cut the line short of the reason, a carriage
/// return let the rest overwrite it on a terminal. `X-A: b\nc` reads as Rust's `{:?}` writes
/// it. (clap already strips escape sequences from what it renders.)
fn with_values_escaped(e: &clap::Error) -> String {
    use clap::error::ContextValue;
    let mut rendered = e.to_string();
    for (_, value) in e.context() {
        let typed: &[String] = match value {
            ContextValue::String(s) => std::slice::from_ref(s),
            ContextValue::Strings(list) => list,
            _ => &[],
        };
        for t in typed.iter().filter(|t| t.contains(char::is_control)) {
            rendered = rendered.replace(t.as_str(), &crate::printable::escape_controls(t));
        }
    }
    rendered
}

/// Prints the error on one line and picks the status: usage errors are 2, a closed stdout
/// (`archbench … | head`) is a quiet 0, everything else 1.
fn exit_for(e: &anyhow::Error) -> i32 {
    if let Some(io) = e.downcast_ref::<io::Error>() {
        if io.kind() == io::ErrorKind::BrokenPipe {
            return 0;
        }
    }
    // A message may quote a document's text (its kind, a URL): escaped, as reports are.
    crate::stderr_line!(
        "archbench: {}",
        crate::printable::escape_controls(&one_line(e))
    );
    if e.downcast_ref::<PlanError>().is_some()
        || e.downcast_ref::<crate::document::DocumentError>().is_some()
        || e.downcast_ref::<crate::stats::MergeError>().is_some()
        || e.downcast_ref::<crate::script::ScriptError>()
            .is_some_and(crate::script::ScriptError::is_usage)
        || tls_settings_contradict(e)
        || k8s_usage(e)
    {
        EXIT_USAGE
    } else {
        EXIT_FAILURE
    }
}

/// TLS flags that leave nothing to offer (a cipher of the other version, say) are a command
/// line that contradicts itself.
fn tls_settings_contradict(e: &anyhow::Error) -> bool {
    use crate::http::tls::TlsSetupError;
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<TlsSetupError>(),
            Some(TlsSetupError::Settings(_))
        )
    })
}

/// The error and its causes on one line, each cause once: messages that already quote their
/// source (`cannot read X: No such file`) are not followed by it again, and a k8s error's
/// sentence already says what its source means (the rest of the chain is for code to inspect).
pub fn one_line(e: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !line.contains(&text) {
            if !line.is_empty() {
                line.push_str(": ");
            }
            line.push_str(&text);
        }
        if says_its_cause(cause) {
            break;
        }
    }
    line.replace('\n', " ")
}

#[cfg(feature = "k8s")]
fn k8s_usage(e: &anyhow::Error) -> bool {
    e.downcast_ref::<crate::k8s::K8sError>()
        .is_some_and(crate::k8s::K8sError::is_usage)
}

#[cfg(not(feature = "k8s"))]
fn k8s_usage(_: &anyhow::Error) -> bool {
    false
}

/// Errors whose sentence already says what their source means: a k8s error.
#[cfg(feature = "k8s")]
fn says_its_cause(e: &(dyn std::error::Error + 'static)) -> bool {
    e.downcast_ref::<crate::k8s::K8sError>().is_some()
}

#[cfg(not(feature = "k8s"))]
fn says_its_cause(_: &(dyn std::error::Error + 'static)) -> bool {
    false
}

#[cfg(all(test, feature = "k8s"))]
mod tests {
    use super::*;

    #[test]
    fn a_k8s_error_is_one_sentence_however_deep_its_source() {
        // kube wraps the transport's error: its text ("ServiceError: …") is not the
        // sentence's, and must not trail it.
        let refused = io::Error::new(io::ErrorKind::ConnectionRefused, "Connection refused");
        let e = anyhow::Error::from(crate::k8s::K8sError::Unreachable {
            server: "https://127.0.0.1:1/".into(),
            source: kube::Error::Service(Box::new(refused)),
        })
        .context("k8s status");
        assert_eq!(
            one_line(&e),
            "k8s status: no cluster reachable at https://127.0.0.1:1/: Connection refused; check the address, the VPN or `kubectl cluster-info`"
        );
        // Other errors still show their causes once each.
        let e = anyhow::Error::from(io::Error::other("disk full")).context("cannot write r.json");
        assert_eq!(one_line(&e), "cannot write r.json: disk full");
    }
}
