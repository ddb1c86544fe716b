//! A run's QUIC (HTTP/3): what the QUIC stack's own counters say of each connection (the
//! datagrams, losses, congestion, path MTU), how connections and streams ended, and what the
//! servers allowed, counted by the engine's HTTP/3 connections and stored in the result.

use serde::{Deserialize, Serialize};

use super::h2::{bump, H2CodeCount as CodeCount};

/// HTTP/3 over QUIC figures, counted as the run goes (in the recorder) and as stored (in
/// the result). Every figure is a sum or an extreme, so workers' and processes' figures merge
/// exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuicFigures {
    /// Concurrent request streams asked for per connection (`--streams`).
    pub streams_asked: u32,
    /// QUIC handshakes completed (their times are the TLS figures' handshake times).
    pub handshakes: u64,
    /// Connections whose handshake did not complete.
    pub handshakes_failed: u64,
    /// `--0rtt`: connections whose first requests went in 0-RTT early data and the server
    /// accepted them, or refused them (they were sent again once the handshake was done,
    /// and are in `retried`); and connections opened with no session to resume (no 0-RTT).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub zero_rtt_accepted: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub zero_rtt_rejected: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub zero_rtt_unavailable: u64,
    /// `--0rtt`: session tickets fetched before the run, and the handshakes that fetched
    /// them (not counted in the run's handshakes or its time).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sessions_fetched: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub fetch_handshakes: u64,
    /// UDP datagrams and their bytes, as the QUIC stack sent and received them.
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    pub udp_bytes_sent: u64,
    pub udp_bytes_received: u64,
    /// Packets the loss detection declared lost (and so sent again, as frames), and their
    /// bytes.
    pub packets_lost: u64,
    pub bytes_lost: u64,
    /// Congestion events (the congestion window reduced).
    pub congestion_events: u64,
    /// The smallest and largest path MTU a connection ended with (bytes of UDP payload).
    pub path_mtu_min: Option<u16>,
    pub path_mtu_max: Option<u16>,
    /// Datagrams the socket would not take (its buffer full): QUIC sends them again as lost.
    pub datagrams_dropped_by_socket: u64,
    /// GOAWAY frames received.
    pub goaways: u64,
    /// Requests the server never processed (above a GOAWAY's id, or reset with
    /// H3_REQUEST_REJECTED): sent again, and counted once, when answered.
    pub retried: u64,
    /// Request streams the server reset, by HTTP/3 error code name (`h3_request_cancelled`).
    pub resets: Vec<CodeCount>,
    /// Connections that ended with an error, by its kind and code (`transport:0x2`,
    /// `application:h3_frame_error`, `idle_timeout`, `version_mismatch`, ...).
    pub connection_errors: Vec<CodeCount>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// What one connection's QUIC stack counted over its life, taken when it ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QuicConnectionCounts {
    pub datagrams_sent: u64,
    pub datagrams_received: u64,
    pub udp_bytes_sent: u64,
    pub udp_bytes_received: u64,
    pub packets_lost: u64,
    pub bytes_lost: u64,
    pub congestion_events: u64,
    pub path_mtu: u16,
}

impl QuicFigures {
    /// Adds one connection's counters, taken as it ended (mid-run, for live views, an open
    /// one's so far).
    pub fn connection_ended(&mut self, c: &QuicConnectionCounts) {
        self.datagrams_sent += c.datagrams_sent;
        self.datagrams_received += c.datagrams_received;
        self.udp_bytes_sent += c.udp_bytes_sent;
        self.udp_bytes_received += c.udp_bytes_received;
        self.packets_lost += c.packets_lost;
        self.bytes_lost += c.bytes_lost;
        self.congestion_events += c.congestion_events;
        if c.path_mtu > 0 {
            self.path_mtu(c.path_mtu, c.path_mtu);
        }
    }

    fn path_mtu(&mut self, min: u16, max: u16) {
        self.path_mtu_min = Some(self.path_mtu_min.map_or(min, |m| m.min(min)));
        self.path_mtu_max = Some(self.path_mtu_max.map_or(max, |m| m.max(max)));
    }

    /// One request stream reset by the server with this code.
    pub fn reset(&mut self, code: &str) {
        bump(&mut self.resets, code, 1);
    }

    /// One connection ended by this error.
    pub fn connection_error(&mut self, what: &str) {
        bump(&mut self.connection_errors, what, 1);
    }

    /// Adds another worker's (or document's) figures.
    pub fn add(&mut self, other: &QuicFigures) {
        self.streams_asked = self.streams_asked.max(other.streams_asked);
        self.handshakes += other.handshakes;
        self.handshakes_failed += other.handshakes_failed;
        self.zero_rtt_accepted += other.zero_rtt_accepted;
        self.zero_rtt_rejected += other.zero_rtt_rejected;
        self.zero_rtt_unavailable += other.zero_rtt_unavailable;
        self.sessions_fetched += other.sessions_fetched;
        self.fetch_handshakes += other.fetch_handshakes;
        self.connection_ended(&QuicConnectionCounts {
            datagrams_sent: other.datagrams_sent,
            datagrams_received: other.datagrams_received,
            udp_bytes_sent: other.udp_bytes_sent,
            udp_bytes_received: other.udp_bytes_received,
            packets_lost: other.packets_lost,
            bytes_lost: other.bytes_lost,
            congestion_events: other.congestion_events,
            path_mtu: 0,
        });
        if let (Some(min), Some(max)) = (other.path_mtu_min, other.path_mtu_max) {
            self.path_mtu(min, max);
        }
        self.datagrams_dropped_by_socket += other.datagrams_dropped_by_socket;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_of_workers_add_up_exactly() {
        let conn = |sent, mtu| QuicConnectionCounts {
            datagrams_sent: sent,
            datagrams_received: sent + 1,
            udp_bytes_sent: sent * 1200,
            udp_bytes_received: 10,
            packets_lost: 2,
            bytes_lost: 2400,
            congestion_events: 1,
            path_mtu: mtu,
        };
        let mut a = QuicFigures {
            streams_asked: 10,
            handshakes: 2,
            ..QuicFigures::default()
        };
        a.connection_ended(&conn(100, 1452));
        a.connection_ended(&conn(50, 1200));
        a.reset("h3_request_cancelled");
        let mut b = QuicFigures {
            streams_asked: 10,
            handshakes: 1,
            ..QuicFigures::default()
        };
        b.connection_ended(&conn(7, 1500));
        b.reset("h3_request_cancelled");
        b.connection_error("idle_timeout");
        a.add(&b);
        assert_eq!(a.handshakes, 3);
        assert_eq!((a.datagrams_sent, a.datagrams_received), (157, 160));
        assert_eq!(
            (a.packets_lost, a.bytes_lost, a.congestion_events),
            (6, 7200, 3)
        );
        assert_eq!((a.path_mtu_min, a.path_mtu_max), (Some(1200), Some(1500)));
        assert_eq!(a.resets.len(), 1);
        assert_eq!(a.resets[0].count, 2);
        assert_eq!(a.connection_errors[0].code, "idle_timeout");
        assert_eq!(a.streams_asked, 10);
    }

    #[test]
    fn counters_mid_run_are_the_ended_connections_plus_the_open_ones() {
        let open = QuicConnectionCounts {
            datagrams_sent: 5,
            datagrams_received: 6,
            udp_bytes_sent: 700,
            udp_bytes_received: 800,
            packets_lost: 1,
            bytes_lost: 1200,
            congestion_events: 1,
            path_mtu: 1452,
        };
        let mut ended = QuicFigures {
            handshakes: 2,
            handshakes_failed: 1,
            ..QuicFigures::default()
        };
        ended.connection_ended(&QuicConnectionCounts {
            datagrams_sent: 10,
            ..open
        });
        // Mid-run (as a worker publishes them): the ended ones' figures and the open one's
        // counters so far.
        let mut now = ended.clone();
        now.connection_ended(&open);
        assert_eq!((now.handshakes, now.handshakes_failed), (2, 1));
        assert_eq!((now.datagrams_sent, now.datagrams_received), (15, 12));
        assert_eq!((now.udp_bytes_sent, now.udp_bytes_received), (1400, 1600));
        assert_eq!((now.packets_lost, now.congestion_events), (2, 2));
        // Once every connection has ended, the counters are the figures'.
        ended.connection_ended(&open);
        let mut other_worker = now.clone();
        other_worker.add(&ended);
        assert_eq!(other_worker.datagrams_sent, 30);
        assert_eq!(ended.datagrams_sent, now.datagrams_sent);
    }
}
