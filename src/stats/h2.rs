//! A run's HTTP/2: what the servers allowed and how streams and connections ended, counted by
//! the engine's HTTP/2 connections and stored in the result beside the totals.

use serde::{Deserialize, Serialize};

/// How often one HTTP/2 error code was seen.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct H2CodeCount {
    /// RFC 9113's name in lower case (`refused_stream`), or `unknown`.
    pub code: String,
    pub count: u64,
}

/// HTTP/2 figures, counted as the run goes (in the recorder) and as stored (in the result).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct H2Figures {
    /// Concurrent streams asked for per connection (`--streams`).
    pub streams_asked: u32,
    /// The smallest SETTINGS_MAX_CONCURRENT_STREAMS a server sent, if any sent one.
    pub server_max_streams: Option<u32>,
    /// GOAWAY frames received.
    pub goaways: u64,
    /// Requests on streams above a GOAWAY's last stream id, or refused (REFUSED_STREAM): the
    /// server never processed them, so they were sent again (and are counted once, when
    /// answered).
    pub retried: u64,
    /// Streams the server reset (RST_STREAM), by error code. `refused_stream` ones were sent
    /// again (in `retried`), not errors; any other code is a protocol error of its request.
    pub resets: Vec<H2CodeCount>,
    /// Connections ended by a protocol error (ours: a GOAWAY we sent; theirs: a GOAWAY
    /// with an error code), by error code.
    pub connection_errors: Vec<H2CodeCount>,
}

impl H2Figures {
    /// Streams used per connection: what was asked for, within what the server allows.
    pub fn streams_used(&self) -> u32 {
        self.server_max_streams
            .map_or(self.streams_asked, |m| m.min(self.streams_asked))
    }

    pub fn server_max(&mut self, max: u32) {
        self.server_max_streams = Some(self.server_max_streams.map_or(max, |m| m.min(max)));
    }

    /// One RST_STREAM received with this code.
    pub fn reset(&mut self, code: &str) {
        bump(&mut self.resets, code, 1);
    }

    /// One connection ended by an error with this code.
    pub fn connection_error(&mut self, code: &str) {
        bump(&mut self.connection_errors, code, 1);
    }

    /// Adds another worker's (or document's) figures.
    pub fn add(&mut self, other: &H2Figures) {
        self.streams_asked = self.streams_asked.max(other.streams_asked);
        if let Some(m) = other.server_max_streams {
            self.server_max(m);
        }
        self.goaways += other.goaways;
        self.retried += other.retried;
        for c in &other.resets {
            bump(&mut self.resets, &c.code, c.count);
        }
        for c in &other.connection_errors {
            bump(&mut self.connection_errors, &c.code, c.count);
        }
    }
}

/// Counts `n` more of `code`; a code's first count allocates its entry, later ones do not.
pub(super) fn bump(counts: &mut Vec<H2CodeCount>, code: &str, n: u64) {
    match counts.iter_mut().find(|c| c.code == code) {
        Some(c) => c.count += n,
        None => counts.push(H2CodeCount {
            code: code.to_string(),
            count: n,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_add_up_across_workers() {
        let mut a = H2Figures {
            streams_asked: 10,
            ..H2Figures::default()
        };
        a.server_max(128);
        a.reset("refused_stream");
        a.reset("refused_stream");
        let mut b = H2Figures {
            streams_asked: 10,
            goaways: 2,
            retried: 3,
            ..H2Figures::default()
        };
        b.server_max(8);
        b.reset("cancel");
        b.connection_error("protocol_error");
        a.add(&b);
        assert_eq!(a.server_max_streams, Some(8));
        assert_eq!(a.streams_used(), 8);
        assert_eq!((a.goaways, a.retried), (2, 3));
        assert_eq!(
            a.resets,
            [
                H2CodeCount {
                    code: "refused_stream".into(),
                    count: 2
                },
                H2CodeCount {
                    code: "cancel".into(),
                    count: 1
                }
            ]
        );
        assert_eq!(a.connection_errors.len(), 1);
    }
}
