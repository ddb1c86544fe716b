//! `archbench demo`: two servers on loopback compared side by side, under a minute, nothing to
//! set up. With nginx installed: a stock Debian-style configuration against the tuned one from
//! the multi-arch guide. Without (or with `--embedded`): two embedded servers (one and two
//! threads). Either way each server is a process of its own, watched, so the table has the
//! same rows (server CPU, requests per server CPU-second, peak memory) and the limiter can
//! name the server.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use clap::Parser as _;

use crate::cli::args::{Cli, Command as Sub, CompareArgs, DemoArgs};
use crate::cli::argv::Argv;
use crate::cli::output::{results_directory, write_html};
use crate::cli::plan;
use crate::cli::signals::StopSignals;
use crate::nginx::{nginx_binary, Nginx, NginxProfile};

/// How long an embedded server may take to say where it listens.
const STARTS_WITHIN: Duration = Duration::from_secs(10);

/// `archbench serve` as a child process of the demo's own.
pub struct EmbeddedServer {
    child: Child,
    url: String,
}

impl EmbeddedServer {
    fn start(threads: u32) -> anyhow::Result<EmbeddedServer> {
        let exe = std::env::current_exe().context("cannot find archbench's own binary")?;
        let mut cmd = Command::new(exe);
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--threads"])
            .arg(threads.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        // SAFETY: prctl is async-signal-safe; the server dies with the demo, even a killed one.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .context("cannot start an embedded server (archbench serve)")?;
        let Some(out) = child.stdout.take() else {
            anyhow::bail!("the embedded server has no output");
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(out).read_line(&mut line);
            let _ = tx.send(line);
        });
        let mut server = EmbeddedServer {
            child,
            url: String::new(),
        };
        let line = rx
            .recv_timeout(STARTS_WITHIN)
            .context("the embedded server did not say where it listens")?;
        server.url = line
            .split_whitespace()
            .find(|w| w.starts_with("http://"))
            .with_context(|| format!("the embedded server said {line:?}"))?
            .to_string();
        Ok(server)
    }

    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for EmbeddedServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The two servers of the demo.
pub enum DemoServers {
    Nginx(Nginx, Nginx),
    Embedded(EmbeddedServer, EmbeddedServer),
}

pub fn start_servers(embedded: bool) -> anyhow::Result<DemoServers> {
    if !embedded && nginx_binary().is_some() {
        let stock = NginxProfile::Stock.start(None)?;
        let tuned = NginxProfile::Tuned.start(None)?;
        return Ok(DemoServers::Nginx(stock, tuned));
    }
    Ok(DemoServers::Embedded(
        EmbeddedServer::start(1)?,
        EmbeddedServer::start(2)?,
    ))
}

impl DemoServers {
    /// (name, URL, watch spec) of each target, baseline first.
    pub fn targets(&self) -> Vec<(String, String, String)> {
        let (a, b) = match self {
            DemoServers::Nginx(a, b) => (("stock", a.url(), a.pid()), ("tuned", b.url(), b.pid())),
            DemoServers::Embedded(a, b) => (
                ("embedded-1-thread", a.url(), a.pid()),
                ("embedded-2-threads", b.url(), b.pid()),
            ),
        };
        [a, b]
            .into_iter()
            .map(|(name, url, pid)| (name.to_string(), url, format!("{name}=pid:{pid}")))
            .collect()
    }

    pub fn description(&self, asked_embedded: bool) -> &'static str {
        match (self, asked_embedded) {
            (DemoServers::Nginx(..), _) => "two nginx instances on loopback: Debian's stock configuration vs the multi-arch guide's tuned one",
            (DemoServers::Embedded(..), true) => "two embedded servers on loopback (1 vs 2 threads), as asked",
            (DemoServers::Embedded(..), false) => "nginx is not installed, so: two embedded servers on loopback (1 vs 2 threads); install nginx for the real comparison",
        }
    }
}

pub fn cmd_demo(a: &DemoArgs, signals: &StopSignals) -> anyhow::Result<i32> {
    // Every flag is checked before a server starts or a line is printed, so that a bad one
    // is the only line: the comparison's plan, of stand-ins on ports nothing is sent to.
    let stand_ins: Vec<(String, String, String)> = ["baseline", "other"]
        .iter()
        .map(|n| {
            let watch = format!("{n}=pid:{}", std::process::id());
            (n.to_string(), "http://127.0.0.1:1/".to_string(), watch)
        })
        .collect();
    plan::compare_plan(&comparison_args(a, &stand_ins, &a.out_dir.out_dir)?)?;
    let dir = results_directory(&a.out_dir.out_dir)?;
    let servers = start_servers(a.embedded)?;
    crate::stderr_line!("archbench demo: {}", servers.description(a.embedded));
    let args = comparison_args(a, &servers.targets(), &dir)?;
    let code = super::compare::cmd_compare(&args, signals)?;
    drop(servers);
    // The HTML report is drawn from the JSON just written, the way `report --html` would,
    // so what the page shows is what the file holds.
    let (json, md, html) = demo_files(&dir);
    let doc = match crate::document::read(&json)? {
        crate::document::Document::Comparison(c) => crate::report::HtmlDoc::Comparison(c),
        _ => anyhow::bail!("internal error: {} holds no comparison", json.display()),
    };
    write_html(&[doc], Some(&html), None)?;
    crate::stderr_line!(
        "archbench demo: wrote {}, {} and {}",
        json.display(),
        md.display(),
        html.display()
    );
    Ok(code)
}

/// The demo's files in `dir`: the comparison as JSON, Markdown and HTML.
fn demo_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let file = |ext: &str| dir.join(format!("comparison.{ext}"));
    (file("json"), file("md"), file("html"))
}

/// `compare`'s arguments for the demo's `targets` (name, URL, watch spec), its files in
/// `dir`: spelled from compare's own flag definitions and parsed by its parser.
fn comparison_args(
    a: &DemoArgs,
    targets: &[(String, String, String)],
    dir: &Path,
) -> anyhow::Result<CompareArgs> {
    let mut argv = Argv::new("compare", &["archbench", "compare"]);
    for (n, u, _) in targets {
        argv.word(format!("{n}={u}"));
    }
    for (_, _, w) in targets {
        argv.value("watch", w.clone());
    }
    argv.short("connections", a.connections.connections.to_string())
        .short("duration", format!("{}ms", a.duration.duration.as_millis()))
        .value("runs", a.runs.runs.to_string());
    let (json, md, _) = demo_files(dir);
    argv.value("json", json.display().to_string())
        .value("markdown", md.display().to_string());
    let Sub::Compare(args) = Cli::try_parse_from(argv.into_words())?.command else {
        anyhow::bail!("internal error: demo arguments did not parse as a comparison");
    };
    Ok(args)
}
