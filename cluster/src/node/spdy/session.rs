//! A SPDY/3.1 session, server side, over any byte stream. The client opens the streams
//! (SYN_STREAM); the session answers each with a SYN_REPLY and hands it to the caller as a
//! reader (the client's DATA, ending at its FIN or RST_STREAM) and a writer (our DATA, FIN).
//! PINGs are answered; SETTINGS, WINDOW_UPDATE and HEADERS are read and ignored.
//!
//! Not modelled: flow control. spdystream (kubectl's SPDY) neither sends WINDOW_UPDATE nor
//! honours windows, so each side's sending is paced by TCP alone, here by a bounded queue per
//! direction: a slow reader of one stream holds up the session's reading, as in spdystream.
//! Server-initiated streams, server PINGs, priorities and an idle timeout are not used.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, watch};

use super::frame::{self, Frame, HeaderCodec, Headers, FLAG_FIN};
use crate::error::{ClusterError, Result};

/// The most we put in one DATA frame (spdystream reads any size up to 16 MiB).
pub const MAX_DATA: usize = 32 * 1024;
/// Frames waiting for the connection, and DATA waiting for a stream's reader.
const QUEUE: usize = 64;

/// What the session keeps of an open stream.
struct Entry {
    /// The client's DATA to the stream's reader; dropped at the client's FIN.
    data: Option<mpsc::Sender<Bytes>>,
    /// True once the client reset the stream or the connection ended.
    reset: watch::Sender<bool>,
}

type Streams = Arc<Mutex<HashMap<u32, Entry>>>;

fn lock(s: &Streams) -> MutexGuard<'_, HashMap<u32, Entry>> {
    s.lock().unwrap_or_else(|e| e.into_inner())
}

/// A stream the client opened.
pub struct Stream {
    pub id: u32,
    pub headers: Headers,
    pub reader: StreamReader,
    pub writer: StreamWriter,
}

impl Stream {
    /// A header's value (names are lowercase on the wire).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// The client's bytes on one stream.
pub struct StreamReader {
    data: mpsc::Receiver<Bytes>,
}

impl StreamReader {
    /// The next chunk; None once the client finished or reset the stream.
    pub async fn recv(&mut self) -> Option<Bytes> {
        self.data.recv().await
    }
}

/// Our side of one stream.
#[derive(Clone)]
pub struct StreamWriter {
    id: u32,
    out: mpsc::Sender<Frame>,
    reset: watch::Receiver<bool>,
    streams: Streams,
}

impl StreamWriter {
    /// Sends `data` (in frames of at most `MAX_DATA`); Err once the stream or session is gone.
    pub async fn send(&self, data: &[u8]) -> Result<()> {
        for chunk in data.chunks(MAX_DATA) {
            self.frame(0, Bytes::copy_from_slice(chunk)).await?;
        }
        Ok(())
    }

    /// Ends our side of the stream (DATA with FIN).
    pub async fn finish(&self) -> Result<()> {
        self.frame(FLAG_FIN, Bytes::new()).await
    }

    async fn frame(&self, flags: u8, data: Bytes) -> Result<()> {
        if *self.reset.borrow() {
            return Err(ClusterError::Spdy(format!("stream {} was reset", self.id)));
        }
        let f = Frame::Data {
            stream_id: self.id,
            flags,
            data,
        };
        self.out
            .send(f)
            .await
            .map_err(|_| ClusterError::Spdy("the connection is closed".into()))
    }

    /// Resolves once the client resets the stream or the connection ends.
    pub async fn reset(&self) {
        let mut r = self.reset.clone();
        // the borrow is released before each wait, so the future stays Send
        while !*r.borrow_and_update() {
            if r.changed().await.is_err() {
                return;
            }
        }
    }

    /// Forgets the stream (both sides are done with it).
    pub fn close(&self) {
        lock(&self.streams).remove(&self.id);
    }
}

/// What the session's user decides about new streams: `check` sees a stream's headers
/// first (Err(reason) refuses it with a SYN_REPLY carrying FIN, as the kubelet's server
/// answers a stream it does not want), `accept` then gets the stream, once its SYN_REPLY is
/// queued ahead of anything written on it.
pub trait Acceptor {
    fn check(&mut self, headers: &Headers) -> std::result::Result<(), String>;
    fn accept(&mut self, stream: Stream);
}

/// Serves one session until the client goes away (EOF, GOAWAY) or breaks the protocol (Err).
pub async fn serve<T>(io: T, mut accept: impl Acceptor) -> Result<()>
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut rd, wr) = tokio::io::split(io);
    let (out, queued) = mpsc::channel::<Frame>(QUEUE);
    let writer = tokio::spawn(write_frames(wr, queued));
    let streams: Streams = Arc::default();
    let result = read_frames(&mut rd, &out, &streams, &mut accept).await;
    // the acceptor's streams not yet handed on (half a pair, say) go with it
    drop(accept);
    // the connection is over: every reader sees its end, every writer its reset
    for (_, e) in lock(&streams).drain() {
        let _ = e.reset.send(true);
    }
    drop(out);
    // the writer ends when the last stream writer is dropped (or its connection fails)
    let _ = writer.await;
    result
}

async fn read_frames<R: AsyncRead + Unpin>(
    rd: &mut R,
    out: &mpsc::Sender<Frame>,
    streams: &Streams,
    accept: &mut impl Acceptor,
) -> Result<()> {
    let mut codec = HeaderCodec::new()?;
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut start = 0usize;
    loop {
        while let Some((f, n)) = frame::decode(&buf[start..], &mut codec)? {
            start += n;
            if !on_frame(f, out, streams, accept).await {
                return Ok(());
            }
        }
        // keep the unread tail at the front, so the buffer only grows for a frame that needs it
        buf.drain(..start);
        start = 0;
        if buf.capacity() - buf.len() < 16 * 1024 {
            buf.reserve(64 * 1024);
        }
        let n = rd
            .read_buf(&mut buf)
            .await
            .map_err(ClusterError::io("read the SPDY connection"))?;
        if n == 0 {
            return Ok(());
        }
    }
}

/// Handles one frame; false ends the session.
async fn on_frame(
    f: Frame,
    out: &mpsc::Sender<Frame>,
    streams: &Streams,
    accept: &mut impl Acceptor,
) -> bool {
    match f {
        Frame::SynStream {
            stream_id,
            flags,
            headers,
            ..
        } => open(stream_id, flags, headers, out, streams, accept).await,
        Frame::Data {
            stream_id,
            flags,
            data,
        } => {
            let tx = lock(streams).get(&stream_id).and_then(|e| e.data.clone());
            if let Some(tx) = tx {
                // a reader that is gone no longer wants the bytes
                if !data.is_empty() {
                    let _ = tx.send(data).await;
                }
            }
            if flags & FLAG_FIN != 0 {
                if let Some(e) = lock(streams).get_mut(&stream_id) {
                    e.data = None;
                }
            }
            true
        }
        Frame::RstStream { stream_id, .. } => {
            if let Some(e) = lock(streams).remove(&stream_id) {
                let _ = e.reset.send(true);
            }
            true
        }
        Frame::Ping { id } => out.send(Frame::Ping { id }).await.is_ok(),
        Frame::GoAway { .. } => false,
        Frame::SynReply { .. }
        | Frame::Settings { .. }
        | Frame::Headers { .. }
        | Frame::WindowUpdate { .. }
        | Frame::Unknown { .. } => true,
    }
}

async fn open(
    id: u32,
    flags: u8,
    headers: Headers,
    out: &mpsc::Sender<Frame>,
    streams: &Streams,
    accept: &mut impl Acceptor,
) -> bool {
    let reply = |flags| Frame::SynReply {
        stream_id: id,
        flags,
        headers: vec![],
    };
    if let Err(why) = accept.check(&headers) {
        eprintln!("node agent: port-forward: refused stream {id}: {why}");
        return out.send(reply(FLAG_FIN)).await.is_ok();
    }
    let (data_tx, data_rx) = mpsc::channel(QUEUE);
    let (reset_tx, reset_rx) = watch::channel(false);
    let entry = Entry {
        data: (flags & FLAG_FIN == 0).then_some(data_tx),
        reset: reset_tx,
    };
    lock(streams).insert(id, entry);
    // the reply goes out before anything the stream's handler writes on it
    if out.send(reply(0)).await.is_err() {
        return false;
    }
    accept.accept(Stream {
        id,
        headers,
        reader: StreamReader { data: data_rx },
        writer: StreamWriter {
            id,
            out: out.clone(),
            reset: reset_rx,
            streams: streams.clone(),
        },
    });
    true
}

async fn write_frames<W: AsyncWrite + Unpin>(mut wr: W, mut queued: mpsc::Receiver<Frame>) {
    let Ok(mut codec) = HeaderCodec::new() else {
        return;
    };
    let mut bytes = Vec::with_capacity(64 * 1024);
    while let Some(f) = queued.recv().await {
        bytes.clear();
        let mut next = Some(f);
        // what is queued goes out in one write
        while let Some(f) = next.take() {
            if let Err(e) = frame::encode(&f, &mut codec, &mut bytes) {
                eprintln!("node agent: port-forward: {e}");
                return;
            }
            if bytes.len() < 256 * 1024 {
                next = queued.try_recv().ok();
            }
        }
        if wr.write_all(&bytes).await.is_err() || wr.flush().await.is_err() {
            return;
        }
    }
    let _ = wr.shutdown().await;
}

#[cfg(test)]
mod tests;
