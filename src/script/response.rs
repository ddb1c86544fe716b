//! A response as response(status, headers, body) receives it, from the bytes the worker
//! framed: the final head's status and headers, the body de-chunked.

use std::borrow::Cow;

const MAX_HEADERS: usize = 128;

pub(super) struct Response<'a> {
    pub status: u16,
    pub headers: Vec<(&'a [u8], &'a [u8])>,
    pub body: Cow<'a, [u8]>,
}

/// None when the bytes are not a response (the worker framed them, so they are).
pub(super) fn split(raw: &[u8]) -> Option<Response<'_>> {
    let mut rest = raw;
    loop {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let httparse::Status::Complete(len) = resp.parse(rest).ok()? else {
            return None;
        };
        let status = resp.code?;
        if (100..200).contains(&status) {
            // An interim head: the final one follows.
            rest = &rest[len..];
            continue;
        }
        let mut chunked = false;
        let mut list = Vec::with_capacity(resp.headers.len());
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = h.value.to_ascii_lowercase().ends_with(b"chunked");
            }
            list.push((h.name.as_bytes(), h.value));
        }
        let body = &rest[len..];
        let body = if chunked {
            Cow::Owned(dechunk(body))
        } else {
            Cow::Borrowed(body)
        };
        return Some(Response {
            status,
            headers: list,
            body,
        });
    }
}

/// The data of a chunked body (extensions and trailers dropped).
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    loop {
        let Some(eol) = b.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let line = std::str::from_utf8(&b[..eol]).unwrap_or("");
        let hex = line.split(';').next().unwrap_or("").trim();
        let Ok(size) = usize::from_str_radix(hex, 16) else {
            return out;
        };
        b = &b[eol + 2..];
        if size == 0 || size > b.len() {
            return out;
        }
        out.extend_from_slice(&b[..size]);
        b = b.get(size + 2..).unwrap_or(&[]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunked_response_is_handed_over_whole() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nX-A: 1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let r = split(raw).unwrap();
        assert_eq!(r.status, 201);
        assert_eq!(r.headers[0], (&b"X-A"[..], &b"1"[..]));
        assert_eq!(&r.body[..], b"abcde");
        let plain = split(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi").unwrap();
        assert_eq!(&plain.body[..], b"hi");
    }
}
