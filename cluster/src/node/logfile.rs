//! Container logs in the CRI format the kubelet writes
//! (`2026-12-01T12:33:22.123456789Z stdout F text`), one file per container run, so `logs`
//! can offer timestamps, sinceSeconds/sinceTime, tailLines, limitBytes and `--previous`.

use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::io::{AsyncRead, AsyncReadExt};

use super::clock;

/// Longest line kept whole; longer ones are split into partial (`P`) records, as CRI does.
const MAX_LINE: usize = 16 * 1024;

/// Appends records to one run's log file.
pub struct LogWriter {
    file: Mutex<std::fs::File>,
}

impl LogWriter {
    pub fn create(path: &Path) -> std::io::Result<Arc<LogWriter>> {
        if let Some(p) = path.parent() {
            std::fs::create_dir_all(p)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        Ok(Arc::new(LogWriter {
            file: Mutex::new(file),
        }))
    }

    fn record(&self, stream: &str, partial: bool, content: &[u8]) {
        let mut rec = Vec::with_capacity(content.len() + 48);
        rec.extend_from_slice(clock::rfc3339_nanos(SystemTime::now()).as_bytes());
        rec.push(b' ');
        rec.extend_from_slice(stream.as_bytes());
        rec.extend_from_slice(if partial { b" P " } else { b" F " });
        rec.extend_from_slice(content);
        rec.push(b'\n');
        let mut f = self.file.lock().unwrap_or_else(|e| e.into_inner());
        // a full disk loses log lines, not the pod
        let _ = f.write_all(&rec);
    }
}

/// Copies a process's output stream into the log until EOF, each chunk also to `tee` (the
/// attached clients) as it comes.
pub async fn pump(
    mut r: impl AsyncRead + Unpin,
    stream: &'static str,
    w: Arc<LogWriter>,
    tee: impl Fn(&[u8]),
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let n = match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        tee(&buf[..n]);
        pending.extend_from_slice(&buf[..n]);
        while let Some(i) = pending.iter().position(|b| *b == b'\n') {
            w.record(stream, false, &pending[..i]);
            pending.drain(..=i);
        }
        while pending.len() > MAX_LINE {
            w.record(stream, true, &pending[..MAX_LINE]);
            pending.drain(..MAX_LINE);
        }
    }
    if !pending.is_empty() {
        w.record(stream, false, &pending);
    }
}

/// One record of a log file.
pub struct Record<'a> {
    pub time: &'a str,
    pub partial: bool,
    pub content: &'a [u8],
}

pub fn parse(line: &[u8]) -> Option<Record<'_>> {
    let mut parts = line.splitn(4, |b| *b == b' ');
    let time = std::str::from_utf8(parts.next()?).ok()?;
    let _stream = parts.next()?;
    let tag = parts.next()?;
    let content = parts.next().unwrap_or(b"");
    Some(Record {
        time,
        partial: tag == b"P",
        content,
    })
}

/// What `logs` asks for.
#[derive(Debug, Clone, Default)]
pub struct Read {
    pub tail_lines: Option<usize>,
    pub limit_bytes: Option<usize>,
    pub since: Option<SystemTime>,
    pub timestamps: bool,
}

/// Complete lines of a log file (partial records joined), each as the client sees it.
pub fn lines(data: &[u8], opts: &Read) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut first_time: Option<String> = None;
    for raw in data.split(|b| *b == b'\n') {
        let Some(r) = parse(raw) else { continue };
        if let Some(since) = opts.since {
            if clock::parse(r.time).is_some_and(|t| t < since) {
                continue;
            }
        }
        if first_time.is_none() {
            first_time = Some(r.time.to_string());
        }
        cur.extend_from_slice(r.content);
        if !r.partial {
            let mut line = Vec::new();
            if opts.timestamps {
                line.extend_from_slice(first_time.take().unwrap_or_default().as_bytes());
                line.push(b' ');
            }
            first_time = None;
            line.append(&mut cur);
            line.push(b'\n');
            out.push(line);
        }
    }
    out
}

/// The text `logs` returns for a whole file.
pub fn render(data: &[u8], opts: &Read) -> Vec<u8> {
    let mut ls = lines(data, opts);
    if let Some(n) = opts.tail_lines {
        let skip = ls.len().saturating_sub(n);
        ls.drain(..skip);
    }
    let mut out: Vec<u8> = ls.concat();
    if let Some(limit) = opts.limit_bytes {
        out.truncate(limit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cri_records_back_to_text() {
        let data = b"2026-12-01T12:00:00.000000001Z stdout F first\n\
2026-12-01T12:00:01.000000000Z stderr P par\n\
2026-12-01T12:00:02.000000000Z stderr F tial\n\
2026-12-01T12:00:03.000000000Z stdout F last\n";
        assert_eq!(render(data, &Read::default()), b"first\npartial\nlast\n");
        let tail = Read {
            tail_lines: Some(1),
            ..Read::default()
        };
        assert_eq!(render(data, &tail), b"last\n");
        let ts = Read {
            timestamps: true,
            tail_lines: Some(2),
            ..Read::default()
        };
        assert_eq!(
            render(data, &ts),
            b"2026-12-01T12:00:01.000000000Z partial\n2026-12-01T12:00:03.000000000Z last\n"
        );
        let since = Read {
            since: clock::parse("2026-12-01T12:00:02Z"),
            ..Read::default()
        };
        assert_eq!(render(data, &since), b"tial\nlast\n");
        let limited = Read {
            limit_bytes: Some(3),
            ..Read::default()
        };
        assert_eq!(render(data, &limited), b"fir");
    }
}
