//! Command lines archbench writes for another process or for a person — a run's reproduce
//! line, an in-cluster worker's arguments, an in-cluster load's — spelled from the parser's
//! own definitions. A flag is named by its argument id (the field's name in `args`), looked
//! up in the command as clap builds it, so a renamed or re-lettered flag changes every line
//! that writes it; each writer's tests parse what it wrote back into the same plan.

use clap::CommandFactory;

use super::args::Cli;

/// The parser's definition of `archbench SUB` (`run`, `agent`, …).
pub fn command_of(sub: &str) -> clap::Command {
    let mut cli = Cli::command();
    cli.build();
    cli.find_subcommand(sub).cloned().unwrap_or(cli)
}

/// How the parser spells argument `id` of `cmd`: its long form (`--name`), or with `short`
/// its one-letter form when it has one. An id the command does not know is spelled `--id`
/// (hyphenated), which the writers' round-trip tests refuse.
pub fn spelling(cmd: &clap::Command, id: &str, short: bool) -> String {
    let arg = cmd.get_arguments().find(|a| a.get_id() == id);
    match arg {
        Some(a) => match (short.then(|| a.get_short()).flatten(), a.get_long()) {
            (Some(c), _) => format!("-{c}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => a.get_short().map_or(id.to_string(), |c| format!("-{c}")),
        },
        None => format!("--{}", id.replace('_', "-")),
    }
}

/// A command line being written for one of archbench's commands.
pub struct Argv {
    cmd: clap::Command,
    words: Vec<String>,
}

impl Argv {
    /// `lead` (e.g. `archbench run`), then what is added, for the subcommand `sub`.
    pub fn new(sub: &str, lead: &[&str]) -> Argv {
        Argv::of(command_of(sub), lead)
    }

    /// The same for any command's definition (the Kubernetes commands' own parser).
    pub fn of(cmd: clap::Command, lead: &[&str]) -> Argv {
        Argv {
            cmd,
            words: lead.iter().map(|w| w.to_string()).collect(),
        }
    }

    /// A positional word.
    pub fn word(&mut self, w: impl Into<String>) -> &mut Argv {
        self.words.push(w.into());
        self
    }

    /// A flag without a value, by its long name.
    pub fn switch(&mut self, id: &str) -> &mut Argv {
        let f = spelling(&self.cmd, id, false);
        self.words.push(f);
        self
    }

    /// A flag by its long name, and its value.
    pub fn value(&mut self, id: &str, v: impl Into<String>) -> &mut Argv {
        let f = spelling(&self.cmd, id, false);
        self.words.push(f);
        self.words.push(v.into());
        self
    }

    /// A flag by its one-letter name (as wrk's users write `-c`, `-t`, `-d`), and its value.
    pub fn short(&mut self, id: &str, v: impl Into<String>) -> &mut Argv {
        let f = spelling(&self.cmd, id, true);
        self.words.push(f);
        self.words.push(v.into());
        self
    }

    pub fn into_words(self) -> Vec<String> {
        self.words
    }
}

/// A worker's orders as `archbench agent`'s arguments (its image's entrypoint is archbench):
/// every flag spelled from the agent's own definitions.
#[cfg(feature = "k8s")]
pub fn agent_args(o: &crate::k8s::AgentOrders) -> Vec<String> {
    let ms = |d: std::time::Duration| format!("{}ms", d.as_millis());
    let mut w = Argv::new("agent", &["agent"]);
    w.word(o.url.clone())
        .short("connections", o.connections.to_string())
        .short("threads", o.threads.to_string());
    // Stages are the run's length (a duration beside them, rounded, would contradict them).
    match &o.stages {
        Some(stages) => w.value("stages", stages.clone()),
        None => w.short("duration", ms(o.duration)),
    };
    w.value("timeout", ms(o.timeout))
        .value("part", o.part.clone())
        .value("control", o.control.clone())
        .value("start_timeout", format!("{}s", o.start_timeout.as_secs()));
    if let Some(r) = o.rate {
        w.value("rate", r.to_string());
    }
    if let Some(streams) = o.http2_streams {
        w.switch("http2").value("streams", streams.to_string());
    }
    if let Some(streams) = o.http3_streams {
        w.switch("http3").value("streams", streams.to_string());
        if o.zero_rtt {
            w.switch("zero_rtt");
        }
    }
    if let Some(h) = &o.host {
        w.short("headers", format!("Host: {h}"));
    }
    if let Some(p) = &o.pinned_cert {
        w.value("pinned_cert", p.clone());
    }
    w.into_words()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_spelled_as_the_parser_defines_them() {
        let run = command_of("run");
        assert_eq!(spelling(&run, "connections", true), "-c");
        assert_eq!(spelling(&run, "connections", false), "--connections");
        assert_eq!(spelling(&run, "pacing_slack", true), "--pacing-slack");
        assert_eq!(spelling(&run, "no_such_flag", false), "--no-such-flag");
        let agent = command_of("agent");
        assert_eq!(spelling(&agent, "start_timeout", false), "--start-timeout");
        assert_eq!(spelling(&agent, "connections", true), "-c");
        let mut a = Argv::new("run", &["archbench", "run"]);
        a.word("http://x/").short("threads", "2").switch("insecure");
        assert_eq!(
            a.into_words(),
            ["archbench", "run", "http://x/", "-t", "2", "--insecure"]
        );
    }

    /// An in-cluster worker's HTTP/3 orders, --0rtt included, parse back as the agent's own.
    #[cfg(feature = "k8s")]
    #[test]
    fn a_workers_http3_orders_parse_back_with_0rtt() {
        let orders = crate::k8s::AgentOrders {
            url: "https://10.0.0.1:443/".into(),
            connections: 2,
            threads: 1,
            duration: std::time::Duration::from_secs(1),
            timeout: std::time::Duration::from_secs(2),
            part: "1/2".into(),
            control: "$(POD_IP):9090".into(),
            start_timeout: std::time::Duration::from_secs(60),
            rate: None,
            stages: None,
            http2_streams: None,
            http3_streams: Some(4),
            zero_rtt: true,
            host: None,
            pinned_cert: Some("/tls/tls.crt".into()),
        };
        let words = agent_args(&orders);
        assert!(words.iter().any(|w| w == "--0rtt"), "{words:?}");
        let m = command_of("agent").try_get_matches_from(&words).unwrap();
        assert!(m.get_flag("zero_rtt") && m.get_flag("http3"), "{words:?}");
        let without = agent_args(&crate::k8s::AgentOrders {
            zero_rtt: false,
            ..orders
        });
        assert!(!without.iter().any(|w| w == "--0rtt"), "{without:?}");
    }
}
