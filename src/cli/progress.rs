//! The one-line progress on stderr.

use std::io::{self, IsTerminal};

use crate::engine::Progress;

/// A one-line live status on stderr: rewritten in place on a terminal, one line per second
/// otherwise (so CI logs show progress without drowning).
pub struct ProgressLine {
    enabled: bool,
    terminal: bool,
    last_second: u64,
}

impl ProgressLine {
    pub fn new(enabled: bool) -> ProgressLine {
        ProgressLine {
            enabled,
            terminal: io::stderr().is_terminal(),
            last_second: 0,
        }
    }

    pub fn update(&mut self, p: &Progress) {
        if !self.enabled {
            return;
        }
        let secs = p.elapsed.as_secs_f64();
        let rate = if secs > 0.0 {
            p.completed as f64 / secs
        } else {
            0.0
        };
        let line = format!(
            "  {secs:6.1}s  {} requests  {rate:.0} req/s  {} errors",
            p.completed, p.errors
        );
        if self.terminal {
            crate::stderr_text!("\r\x1b[K{line}");
        } else if p.elapsed.as_secs() > self.last_second {
            self.last_second = p.elapsed.as_secs();
            crate::stderr_line!("{line}");
        }
    }

    /// A status line that changes now and then (waiting for a rollout): rewritten in place
    /// on a terminal, one line per change otherwise.
    #[cfg(feature = "k8s")]
    pub fn message(&mut self, line: &str) {
        if !self.enabled {
            return;
        }
        if self.terminal {
            crate::stderr_text!("\r\x1b[K  {line}");
        } else {
            crate::stderr_line!("  {line}");
        }
    }

    pub fn finish(&self) {
        if self.enabled && self.terminal {
            crate::stderr_text!("\r\x1b[K");
        }
    }
}
