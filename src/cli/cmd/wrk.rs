//! `archbench wrk`: wrk's command line and report, byte for byte, and its Lua scripts.

use std::io;
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use crate::cli::args::WrkArgs;
use crate::cli::execute::execute;
use crate::cli::output::{finish_code, notes_on_stderr, write_stdout, FrontEnd, OutputPlan};
use crate::cli::signals::StopSignals;
use crate::cli::wrk_plan;
use crate::cli::EXIT_FAILURE;
use crate::engine::Plan;
use crate::http::{Addresses, Scheme, Target};
use crate::report::WrkReport;
use crate::script::{ScriptFile, Session};

pub fn cmd_wrk(a: &WrkArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if a.version {
        // wrk's first word, as scripts read it, then what answers.
        println!(
            "wrk archbench/{} [epoll] (wrk 4.x compatible front end)",
            env!("CARGO_PKG_VERSION")
        );
        return Ok(0);
    }
    let mut plan = wrk_plan(a)?;
    let outputs = OutputPlan::json_only(&a.json)?;
    // The script runs its setup and init before any load, as in wrk: a failure is a usage
    // error (exit 2) with nothing sent.
    if let Some(path) = &a.script {
        let file = ScriptFile {
            path: path.clone(),
            args: a.script_args.clone(),
        };
        let url = a.url.as_deref().unwrap_or_default();
        let session = Session::start(&file, url, &plan.target, &a.headers, plan.local_threads())
            .map_err(crate::cli::PlanError::from)?;
        plan.hooks = Some(Arc::new(session));
    }
    let typed = a.url.as_deref().unwrap_or_default();
    match first_reachable(&plan) {
        Ok(addr) => plan.addrs = Addresses::one(addr),
        Err(e) => {
            crate::stderr_line!(
                "unable to connect to {}:{} {}",
                plan.target.host,
                service(&plan.target),
                os_message(&e)
            );
            return Ok(EXIT_FAILURE);
        }
    }
    let report = WrkReport { latency: a.latency };
    let mut shown = plan.summary();
    if !typed_with_path(typed) {
        // wrk says the URL as typed: without the path it did not give.
        shown.url = shown.url.trim_end_matches('/').to_string();
    }
    write_stdout(|out| WrkReport::preamble(&shown, out))?;
    let result = execute(&plan, &[], &signals.stop, |_, _| {})?;
    crate::script::flush_lua_output();
    // The report reaches stdout even when the file could not be written.
    let saved = outputs.save_json(&result);
    write_stdout(|out| report.write_body(&result, out))?;
    saved?;
    notes_on_stderr(&result, FrontEnd::Wrk);
    if let Some(h) = &plan.hooks {
        if let Some(e) = h.failure() {
            // What was measured until the script failed is reported and saved above.
            crate::stderr_line!("archbench: the script failed, the load stopped: {e}");
            return Ok(EXIT_FAILURE);
        }
        h.done(&result)?;
    }
    Ok(finish_code(&result, signals))
}

/// How long wrk's check connect may take (wrk's own blocks until the system gives up).
const CHECK_CONNECT_WITHIN: Duration = Duration::from_secs(10);

/// wrk connects once before its run, to each of the host's addresses in turn, and loads the
/// first that takes the connection; when none does it refuses to start. The address, or the
/// last error.
fn first_reachable(plan: &Plan) -> io::Result<SocketAddr> {
    let mut last = io::Error::from(io::ErrorKind::NotFound);
    for addr in plan.addrs.all() {
        match TcpStream::connect_timeout(&addr, CHECK_CONNECT_WITHIN) {
            Ok(_) => return Ok(addr),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// What wrk names the port by in its refusal: the URL's port, or its scheme's name when the
/// URL gave none (or gave the scheme's own).
fn service(t: &Target) -> String {
    match (t.scheme, t.port) {
        (Scheme::Http, 80) => "http".into(),
        (Scheme::Https, 443) => "https".into(),
        (_, port) => port.to_string(),
    }
}

/// Whether the typed URL has a path (or query) after its authority.
fn typed_with_path(url: &str) -> bool {
    url.split_once("://")
        .is_some_and(|(_, rest)| rest.contains(['/', '?']))
}

/// The system's words for an error, without Rust's " (os error N)".
fn os_message(e: &io::Error) -> String {
    let text = e.to_string();
    match text.find(" (os error") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrk_names_the_service_and_the_path_as_typed() {
        let service_of = |url: &str| service(&Target::parse(url).unwrap());
        assert_eq!(service_of("http://127.0.0.1:8080/x"), "8080");
        assert_eq!(service_of("http://127.0.0.1/x"), "http");
        assert_eq!(service_of("https://[::1]/"), "https");
        assert_eq!(service_of("http://[::1]:81"), "81");
        assert_eq!(service_of("http://u:p@h:82/"), "82");
        assert!(!typed_with_path("http://127.0.0.1:8080"));
        assert!(typed_with_path("http://127.0.0.1:8080/"));
        assert!(typed_with_path("http://h?x=1"));
        let refused = io::Error::from_raw_os_error(libc::ECONNREFUSED);
        assert_eq!(os_message(&refused), "Connection refused");
    }
}
