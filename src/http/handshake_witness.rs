//! What a QUIC stack does not say of a TLS handshake, witnessed on the thread that drives it:
//! whether the server's certificate was verified, and how many session tickets arrived.
//!
//! rustls inside quinn reports neither whether a handshake resumed a session nor when a
//! ticket came. But a TLS 1.3 client verifies the server's certificate in a full handshake
//! only (a resumed one has no Certificate message), and the client's session store is handed
//! each ticket. Both run synchronously inside the QUIC connection's datagram handling, on
//! the thread that called it, so thread-local counters read before and after that call say
//! what that one connection did. One verifier and one store serve the whole run (rustls
//! resumes a session only under the verifier that made it).

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Tls13ClientSessionValue;
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Tls12ClientSessionValue};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, NamedGroup, SignatureScheme};

/// Sessions a run's store keeps (rustls's own default).
const SESSIONS: usize = 256;

thread_local! {
    static VERIFIED: Cell<u64> = const { Cell::new(0) };
    static TICKETS: Cell<u64> = const { Cell::new(0) };
}

/// Server certificates verified on this thread so far (each a full handshake's).
pub fn certificates_verified_here() -> u64 {
    VERIFIED.with(Cell::get)
}

/// TLS 1.3 session tickets received on this thread so far.
pub fn tickets_received_here() -> u64 {
    TICKETS.with(Cell::get)
}

/// A verifier that counts, on the calling thread, that it was asked.
pub struct Witness {
    pub inner: Arc<dyn ServerCertVerifier>,
}

impl fmt::Debug for Witness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Witness")
            .field("inner", &self.inner)
            .finish()
    }
}

impl ServerCertVerifier for Witness {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        VERIFIED.with(|v| v.set(v.get() + 1));
        self.inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }

    fn requires_raw_public_keys(&self) -> bool {
        self.inner.requires_raw_public_keys()
    }
}

/// A run's session store: rustls's in-memory one, except for TLS 1.3 tickets, which it keeps
/// itself (rustls's keeps 8 per server; a run that resumes on each of thousands of
/// connections fetches as many first) and counts on the calling thread as they arrive.
#[derive(Debug)]
pub struct TicketStore {
    inner: ClientSessionMemoryCache,
    tickets: Mutex<HashMap<ServerName<'static>, VecDeque<Tls13ClientSessionValue>>>,
    /// Tickets kept per server at most (each holds the server's certificate chain): the
    /// oldest go first.
    per_server: usize,
}

impl TicketStore {
    /// A store keeping up to `per_server` TLS 1.3 tickets per server.
    pub fn new(per_server: usize) -> TicketStore {
        TicketStore {
            inner: ClientSessionMemoryCache::new(SESSIONS),
            tickets: Mutex::new(HashMap::new()),
            per_server: per_server.max(1),
        }
    }

    fn tickets(
        &self,
    ) -> MutexGuard<'_, HashMap<ServerName<'static>, VecDeque<Tls13ClientSessionValue>>> {
        // A thread that panicked while holding the lock leaves tickets that are still whole.
        self.tickets.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl ClientSessionStore for TicketStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(server_name, group)
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(server_name)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.inner.set_tls12_session(server_name, value)
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.inner.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.inner.remove_tls12_session(server_name)
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: Tls13ClientSessionValue,
    ) {
        TICKETS.with(|t| t.set(t.get() + 1));
        let mut all = self.tickets();
        let kept = all.entry(server_name).or_default();
        if kept.len() == self.per_server {
            kept.pop_front();
        }
        kept.push_back(value);
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<Tls13ClientSessionValue> {
        // The newest first, as rustls's own store does: it has the longest life left.
        self.tickets().get_mut(server_name)?.pop_back()
    }
}
