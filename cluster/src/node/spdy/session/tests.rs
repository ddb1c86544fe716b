use std::time::Duration;

use super::*;
use crate::node::spdy::frame::{decode, encode, REFUSED_STREAM};

/// Takes the streams the session accepts; refuses port 0.
struct Collect(mpsc::UnboundedSender<Stream>);

impl Acceptor for Collect {
    fn check(&mut self, h: &Headers) -> std::result::Result<(), String> {
        match h.iter().find(|(n, _)| n == "port") {
            Some((_, p)) if p != "0" => Ok(()),
            _ => Err("port 0".into()),
        }
    }
    fn accept(&mut self, stream: Stream) {
        let _ = self.0.send(stream);
    }
}

/// The client's end: our framer, as kubectl's would write and read.
struct Client<R, W> {
    rd: R,
    wr: W,
    enc: HeaderCodec,
    dec: HeaderCodec,
    buf: Vec<u8>,
}

impl<R: AsyncRead + Unpin, W: AsyncWrite + Unpin> Client<R, W> {
    async fn send(&mut self, f: Frame) {
        let mut out = Vec::new();
        encode(&f, &mut self.enc, &mut out).unwrap();
        self.wr.write_all(&out).await.unwrap();
    }

    async fn next(&mut self) -> Frame {
        loop {
            if let Some((f, n)) = decode(&self.buf, &mut self.dec).unwrap() {
                self.buf.drain(..n);
                return f;
            }
            let read = self.rd.read_buf(&mut self.buf);
            let n = tokio::time::timeout(Duration::from_secs(5), read)
                .await
                .expect("a frame within 5 s")
                .unwrap();
            assert!(n > 0, "the server closed the connection");
        }
    }
}

fn syn(stream_id: u32, port: &str) -> Frame {
    Frame::SynStream {
        stream_id,
        associated: 0,
        priority: 0,
        slot: 0,
        flags: 0,
        headers: vec![("port".into(), port.into())],
    }
}

fn data(stream_id: u32, flags: u8, d: &'static [u8]) -> Frame {
    Frame::Data {
        stream_id,
        flags,
        data: Bytes::from_static(d),
    }
}

#[tokio::test]
async fn streams_are_replied_fed_answered_reset_and_ended() {
    let (client, server) = tokio::io::duplex(1 << 16);
    let (tx, mut accepted) = mpsc::unbounded_channel();
    let served = tokio::spawn(serve(server, Collect(tx)));
    let (rd, wr) = tokio::io::split(client);
    let mut c = Client {
        rd,
        wr,
        enc: HeaderCodec::new().unwrap(),
        dec: HeaderCodec::new().unwrap(),
        buf: Vec::new(),
    };
    c.send(syn(1, "80")).await;
    c.send(syn(3, "0")).await;
    c.send(data(1, 0, b"hel")).await;
    c.send(data(1, FLAG_FIN, b"lo")).await;
    c.send(Frame::Ping { id: 7 }).await;
    c.send(Frame::WindowUpdate {
        stream_id: 1,
        delta: 100,
    })
    .await;
    let reply = |stream_id, flags| Frame::SynReply {
        stream_id,
        flags,
        headers: vec![],
    };
    assert_eq!(c.next().await, reply(1, 0));
    assert_eq!(c.next().await, reply(3, FLAG_FIN), "port 0 is refused");
    assert_eq!(c.next().await, Frame::Ping { id: 7 });
    let mut s = accepted.recv().await.unwrap();
    assert_eq!((s.id, s.header("Port")), (1, Some("80")));
    assert_eq!(s.reader.recv().await.unwrap(), Bytes::from_static(b"hel"));
    assert_eq!(s.reader.recv().await.unwrap(), Bytes::from_static(b"lo"));
    assert_eq!(
        s.reader.recv().await,
        None,
        "the client's FIN ends the reader"
    );
    // our side: data in frames of at most MAX_DATA, then FIN
    let big = vec![b'x'; MAX_DATA + 10];
    s.writer.send(&big).await.unwrap();
    s.writer.finish().await.unwrap();
    let Frame::Data { data: d1, .. } = c.next().await else {
        panic!()
    };
    let Frame::Data { data: d2, .. } = c.next().await else {
        panic!()
    };
    assert_eq!((d1.len(), d2.len()), (MAX_DATA, 10));
    assert_eq!(c.next().await, data(1, FLAG_FIN, b""));
    // a reset stream: the writer learns it and refuses to send more
    c.send(Frame::RstStream {
        stream_id: 1,
        status: REFUSED_STREAM,
    })
    .await;
    tokio::time::timeout(Duration::from_secs(5), s.writer.reset())
        .await
        .expect("the reset reaches the writer");
    assert!(s.writer.send(b"more").await.is_err());
    // the client goes: the session ends once the last writer does
    drop(c);
    drop(s);
    let r = tokio::time::timeout(Duration::from_secs(5), served).await;
    assert!(r.expect("the session ends").unwrap().is_ok());
}

#[tokio::test]
async fn a_protocol_error_ends_the_session_with_an_error() {
    let (mut client, server) = tokio::io::duplex(1 << 16);
    let (tx, _accepted) = mpsc::unbounded_channel();
    let served = tokio::spawn(serve(server, Collect(tx)));
    // a SPDY/2 PING
    client
        .write_all(&[0x80, 2, 0, 6, 0, 0, 0, 4, 0, 0, 0, 1])
        .await
        .unwrap();
    let r = tokio::time::timeout(Duration::from_secs(5), served).await;
    let e = r.expect("the session ends").unwrap().unwrap_err();
    assert!(e.to_string().contains("version 2"), "{e}");
}
