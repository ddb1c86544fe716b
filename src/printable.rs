//! Text from elsewhere (a stored document's URLs, names and labels; what the user typed)
//! made safe to print on a terminal: control characters as Rust escapes them (`\n`,
//! `\u{1b}`), so that an escape sequence in a document cannot recolour or rewrite the
//! screen, and a line break cannot cut a one-line message short. Imports nothing of ours.

use std::io::{self, Write};

/// `text` with its control characters escaped, the rest as is.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_char(&mut out, c, false);
    }
    out
}

/// `c`, escaped when it is a control character (line breaks and tabs kept when `layout`:
/// a report's own).
fn push_char(out: &mut String, c: char, layout: bool) {
    if c.is_control() && !(layout && matches!(c, '\n' | '\t')) {
        out.extend(c.escape_debug());
    } else {
        out.push(c);
    }
}

/// Writes `write`'s output to `out` with every control character but a report's line breaks
/// and tabs escaped: what a report of a stored document prints on stdout.
pub fn escaped(
    out: &mut dyn Write,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let mut w = Escaping {
        inner: out,
        pending: Vec::new(),
    };
    write(&mut w)?;
    w.flush()
}

/// A writer escaping control characters on their way to `inner`. A character split across
/// two writes waits in `pending` for its other bytes.
struct Escaping<'a> {
    inner: &'a mut dyn Write,
    pending: Vec<u8>,
}

impl Write for Escaping<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.pending.extend_from_slice(buf);
        let (text, rest) = match std::str::from_utf8(&self.pending) {
            Ok(t) => (t.to_string(), Vec::new()),
            // An incomplete character at the end waits; invalid bytes are shown as U+FFFD.
            Err(e) if e.error_len().is_none() => {
                let (done, rest) = self.pending.split_at(e.valid_up_to());
                (String::from_utf8_lossy(done).into_owned(), rest.to_vec())
            }
            Err(_) => (
                String::from_utf8_lossy(&self.pending).into_owned(),
                Vec::new(),
            ),
        };
        self.pending = rest;
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            push_char(&mut out, c, true);
        }
        self.inner.write_all(out.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.pending.is_empty() {
            let rest = String::from_utf8_lossy(&std::mem::take(&mut self.pending)).into_owned();
            self.inner.write_all(rest.as_bytes())?;
        }
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_a_reports_layout_kept() {
        assert_eq!(
            escape_controls("a\u{1b}[31mb\nc\u{9b}"),
            "a\\u{1b}[31mb\\nc\\u{9b}"
        );
        let mut out = Vec::new();
        escaped(&mut out, |w| {
            w.write_all("URL  \u{1b}[31mred\r\u{7f}\n\tnext é".as_bytes())?;
            // A character split across two writes, as a buffered writer may hand it over.
            let c1 = "\u{85}".as_bytes();
            w.write_all(&c1[..1])?;
            w.write_all(&c1[1..])
        })
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "URL  \\u{1b}[31mred\\r\\u{7f}\n\tnext é\\u{85}"
        );
    }
}
