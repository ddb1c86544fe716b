//! `archbench demo`: two servers on loopback compared side by side, under a minute, nothing to
//! set up. With nginx installed: a stock Debian-style configuration against the tuned one from
//! the multi-arch guide, both watched. Without: two embedded servers (one and two threads).

use crate::nginx::{nginx_binary, Nginx, NginxProfile};

/// The two servers of the demo.
pub enum DemoServers {
    Nginx(Nginx, Nginx),
    Embedded(crate::serve::Server, crate::serve::Server),
}

pub fn start_servers() -> anyhow::Result<DemoServers> {
    if nginx_binary().is_some() {
        let stock = NginxProfile::Stock.start(None)?;
        let tuned = NginxProfile::Tuned.start(None)?;
        return Ok(DemoServers::Nginx(stock, tuned));
    }
    let opts = |threads| crate::serve::ServeOptions {
        threads,
        ..crate::serve::ServeOptions::default()
    };
    Ok(DemoServers::Embedded(
        crate::serve::Server::start(opts(1))?,
        crate::serve::Server::start(opts(2))?,
    ))
}

impl DemoServers {
    /// (name, URL, watch spec) of each target, baseline first.
    pub fn targets(&self) -> Vec<(String, String, Option<String>)> {
        match self {
            DemoServers::Nginx(a, b) => vec![
                (
                    "stock".into(),
                    a.url(),
                    Some(format!("stock=pid:{}", a.pid())),
                ),
                (
                    "tuned".into(),
                    b.url(),
                    Some(format!("tuned=pid:{}", b.pid())),
                ),
            ],
            DemoServers::Embedded(a, b) => vec![
                ("embedded-1-thread".into(), a.url(), None),
                ("embedded-2-threads".into(), b.url(), None),
            ],
        }
    }

    pub fn description(&self) -> &'static str {
        match self {
            DemoServers::Nginx(..) => "two nginx instances on loopback: Debian's stock configuration vs the multi-arch guide's tuned one",
            DemoServers::Embedded(..) => "nginx is not installed, so: two embedded servers on loopback (1 vs 2 threads); install nginx for the real comparison",
        }
    }
}
