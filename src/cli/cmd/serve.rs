//! `archbench serve`: the embedded server, or a local nginx of a known profile, until Ctrl-C.

use crate::cli::args::ServeArgs;
use crate::cli::signals::{wait_for, StopSignals};
use crate::cli::PlanError;
use crate::serve::{ServeOptions, Server};

pub fn cmd_serve(a: &ServeArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    if let Some(profile) = a.nginx {
        let mut nginx = profile.start(a.workers)?;
        println!(
            "archbench serve: nginx ({}) listening on {} pid {} (Ctrl-C to stop)",
            profile.name(),
            nginx.url(),
            nginx.pid()
        );
        wait_for(&signals.stop);
        nginx.stop();
        return Ok(signals.exit_code());
    }
    if a.workers.is_some() {
        // clap's `requires` lets it through beside --addr (which --nginx conflicts with).
        return Err(PlanError::Invalid(
            "--workers applies to --nginx only (the embedded server takes --threads)".into(),
        )
        .into());
    }
    let addr = a.addr.parse().map_err(|_| {
        PlanError::Invalid(format!(
            "invalid --addr {:?}; use e.g. 127.0.0.1:8080",
            a.addr
        ))
    })?;
    let mut opts = ServeOptions {
        addr,
        delay: a.delay,
        burn: a.burn,
        ..ServeOptions::default()
    };
    if let Some(t) = a.threads {
        opts.threads = usize::from(t);
    }
    let server = Server::start(opts)?;
    println!(
        "archbench serve: listening on {} (Ctrl-C to stop)",
        server.url()
    );
    wait_for(&signals.stop);
    let served = server.requests();
    server.stop();
    crate::stderr_line!("archbench serve: answered {served} requests");
    Ok(signals.exit_code())
}
