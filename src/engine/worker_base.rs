//! What both workers — HTTP/1.1 (`worker`) and HTTP/2 (`h2`) — are built from, below both:
//! the spec without a protocol in it (the protocol's own part is handed to its worker at
//! spawn), the outcome, the open-loop send timer, the wait for a common start, their shared
//! constants and small conversions. A change to pacing or stopping made here is made for both.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Poll, Token};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;

use super::hook::WorkerScript;
use super::live::IntervalShipper;
use super::tickets::Tickets;
use super::Pacing;
use crate::stages::Stages;
use crate::stats::{Recorder, TlsFailure};

/// Each worker's read buffer.
pub(super) const READ_BUFFER: usize = 64 * 1024;
/// Longest sleep in epoll_wait, so a stop signal is seen promptly.
pub(super) const MAX_POLL_WAIT: Duration = Duration::from_millis(50);
/// wrk samples each thread's request rate this often.
pub(super) const RATE_SAMPLE: Duration = Duration::from_millis(100);
/// The poll token of the open-loop send timer; connections use their index.
pub(super) const TIMER: Token = Token(usize::MAX);

#[derive(Clone)]
pub struct TlsSetup {
    pub config: Arc<ClientConfig>,
    pub name: ServerName<'static>,
}

pub struct WorkerSpec {
    pub addr: SocketAddr,
    pub request: Arc<[u8]>,
    pub head_request: bool,
    pub keepalive: bool,
    pub tls: Option<TlsSetup>,
    pub connections: usize,
    /// Where this worker's connections stand in the global open-loop schedule: its
    /// connection i is global connection `first + stride * i` of `total_connections` (all
    /// workers of all processes taking part).
    pub schedule: SchedulePosition,
    pub total_connections: usize,
    /// Requests this worker's connections may still begin.
    pub tickets: Tickets,
    pub deadline: Option<Instant>,
    pub pacing: Pacing,
    /// Open loop with a rate that changes (`--stages`); None: a steady rate.
    pub stages: Option<Stages>,
    pub timeout: Duration,
    pub start: Instant,
    pub expected: Option<Duration>,
    /// Hands each quarter second's latencies to the calling thread.
    pub live: IntervalShipper,
    /// A script's hooks; None: every request is `request`.
    pub script: Option<WorkerScript>,
}

/// When an open-loop sender's requests are due: global sender k (of `senders` in the whole
/// load, all processes' together) first at `k / rate`, then every `senders / rate`; with
/// stages, where the target count reaches its next turn (`Stages::next_after`).
#[derive(Debug, Clone)]
pub(super) struct Cadence {
    start: Instant,
    rate: f64,
    interval: Duration,
    senders: f64,
    stages: Option<Stages>,
}

impl Cadence {
    /// The spec's open-loop cadence for `senders` senders; None for the closed loop.
    pub fn of(spec: &WorkerSpec, senders: usize) -> Option<Cadence> {
        let Pacing::Open { rate, .. } = spec.pacing else {
            return None;
        };
        Some(Cadence {
            start: spec.start,
            rate,
            interval: super::seconds(senders as f64 / rate),
            senders: senders as f64,
            stages: spec.stages.clone(),
        })
    }

    /// Global sender `k`'s first due time.
    pub fn first(&self, k: usize) -> Instant {
        match &self.stages {
            None => super::after(self.start, k as f64 / self.rate),
            Some(s) => self.at(s.time_of(k as f64)),
        }
    }

    /// A sender's next due time after the one at `prev`.
    #[inline]
    pub fn next(&self, prev: Instant) -> Instant {
        match &self.stages {
            None => prev + self.interval,
            Some(s) => {
                let t = prev.saturating_duration_since(self.start).as_secs_f64();
                self.at(s.next_after(t, self.senders))
            }
        }
    }

    /// `t` seconds after the start; past the last stage, never (the run ends with it).
    fn at(&self, t: Option<f64>) -> Instant {
        super::after(self.start, t.unwrap_or(f64::INFINITY))
    }
}

/// See [`WorkerSpec::schedule`].
#[derive(Debug, Clone, Copy)]
pub struct SchedulePosition {
    pub first: usize,
    pub stride: usize,
}

pub struct WorkerOutcome {
    pub recording: Recorder,
    /// When this worker sent its first request, if it sent one.
    pub first_send: Option<Instant>,
    /// A signal (the stop flag) ended the loop.
    pub interrupted: bool,
    /// When the loop ended, before sockets were closed.
    pub stopped_at: Instant,
    /// This worker thread's own CPU: (user, system) seconds.
    pub cpu_s: (f64, f64),
    /// Seconds this thread ran or waited to run (schedstat), if the kernel reports it.
    pub demand_s: Option<f64>,
}

/// A timerfd in the worker's poll: epoll_wait alone counts whole milliseconds, so waiting for
/// a send time with it means either sleeping past it or polling without sleeping through
/// the last millisecond (a whole core at any rate, with enough connections). It blocks
/// (no TFD_NONBLOCK): a worker with nothing but the clock to wait for reads it (`sleep`).
pub(super) struct SendTimer {
    fd: OwnedFd,
    /// The instant it is set to fire at (or fired at).
    armed: Option<Instant>,
}

impl SendTimer {
    pub(super) fn new(poll: &Poll) -> io::Result<SendTimer> {
        // SAFETY: timerfd_create returns a new descriptor we own, or -1.
        let raw = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a valid descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        poll.registry()
            .register(&mut SourceFd(&fd.as_raw_fd()), TIMER, Interest::READABLE)?;
        Ok(SendTimer { fd, armed: None })
    }

    /// Makes the timer fire at `at`. Setting it also clears an earlier expiry, so a fired
    /// timer need not be read (the polls never read it): one syscall per send time, none when
    /// `at` is already set.
    pub(super) fn arm(&mut self, at: Instant, now: Instant) -> io::Result<()> {
        if self.armed == Some(at) {
            return Ok(());
        }
        // An all-zero value would disarm it: at least one nanosecond.
        let d = at
            .saturating_duration_since(now)
            .max(Duration::from_nanos(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a fully initialised itimerspec; no old value wanted.
        let rc =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed = Some(at);
        Ok(())
    }

    /// Sleeps until the armed time (at once if it has passed): a read of the blocking timerfd.
    /// The read takes the expiry, so the next `arm` sets the timer again whatever its time: a
    /// read of a timer that has fired and been read would never return.
    pub(super) fn sleep(&mut self) -> io::Result<()> {
        if self.armed.is_none() {
            return Ok(());
        }
        let mut expirations = [0u8; 8];
        // SAFETY: reads at most 8 bytes into an 8-byte buffer we own.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), expirations.as_mut_ptr().cast(), 8) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed = None;
        Ok(())
    }
}

/// Sleeps until `start` (a run's common start instant), waking to check the stop flag;
/// false when the flag stopped it first.
pub(super) fn wait_for_start(start: Instant, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = start.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(MAX_POLL_WAIT));
    }
}

pub(super) fn micros(d: Duration) -> u64 {
    d.as_micros() as u64
}

/// Why TLS refused, by what the user can do about it.
pub(super) fn tls_failure(e: &rustls::Error) -> TlsFailure {
    use rustls::{CertificateError as C, Error as E};
    match e {
        E::InvalidCertificate(C::UnknownIssuer | C::BadSignature) => {
            TlsFailure::UntrustedCertificate
        }
        E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            TlsFailure::NameMismatch
        }
        E::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => TlsFailure::CertificateDates,
        E::InvalidCertificate(C::ApplicationVerificationFailure) => TlsFailure::NotPinned,
        E::InvalidCertificate(C::Other(o))
            if matches!(
                o.0.downcast_ref::<webpki::Error>(),
                Some(webpki::Error::CaUsedAsEndEntity)
            ) =>
        {
            TlsFailure::CaAsServerCertificate
        }
        E::InvalidCertificate(_) | E::NoCertificatesPresented => TlsFailure::BadCertificate,
        // The alerts a server sends when nothing offered is acceptable to it.
        E::AlertReceived(
            rustls::AlertDescription::ProtocolVersion
            | rustls::AlertDescription::HandshakeFailure
            | rustls::AlertDescription::InsufficientSecurity,
        ) => TlsFailure::NothingInCommon,
        E::AlertReceived(rustls::AlertDescription::NoApplicationProtocol) => {
            TlsFailure::AlpnRefused
        }
        E::AlertReceived(_) => TlsFailure::ServerAlert,
        E::PeerIncompatible(_) => TlsFailure::NothingInCommon,
        _ => TlsFailure::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timer_sleep_lasts_until_the_armed_time_and_each_arming_sleeps_again() {
        let poll = Poll::new().unwrap();
        let mut timer = SendTimer::new(&poll).unwrap();
        // Not armed: nothing to wait for.
        let t0 = Instant::now();
        timer.sleep().unwrap();
        assert!(t0.elapsed() < Duration::from_millis(100));
        for _ in 0..2 {
            let now = Instant::now();
            let at = now + Duration::from_millis(3);
            timer.arm(at, now).unwrap();
            timer.sleep().unwrap();
            assert!(Instant::now() >= at, "woke before the armed time");
        }
        // Armed at a time already past: at once, and the same time armed again (after its
        // expiry was read) returns too. A timer left disarmed would block that read for good:
        // a thread, and a deadline on it.
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let now = Instant::now();
            let past = now - Duration::from_millis(1);
            timer.arm(past, now).unwrap();
            timer.sleep().unwrap();
            timer.arm(past, Instant::now()).unwrap();
            timer.sleep().unwrap();
            let _ = done.send(());
        });
        assert!(
            finished.recv_timeout(Duration::from_secs(5)).is_ok(),
            "a sleep did not return (or woke before its time: see the thread's panic)"
        );
    }
}
