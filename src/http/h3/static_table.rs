//! QPACK's static table (RFC 9204 Appendix A): 99 fields, referred to by index. Unlike
//! HPACK's, it starts at 0 and holds whole common fields (`:method GET`, `:status 200`).

/// The table, in index order.
pub(crate) const STATIC_TABLE: [(&[u8], &[u8]); 99] = [
    (b":authority", b""),
    (b":path", b"/"),
    (b"age", b"0"),
    (b"content-disposition", b""),
    (b"content-length", b"0"),
    (b"cookie", b""),
    (b"date", b""),
    (b"etag", b""),
    (b"if-modified-since", b""),
    (b"if-none-match", b""),
    (b"last-modified", b""),
    (b"link", b""),
    (b"location", b""),
    (b"referer", b""),
    (b"set-cookie", b""),
    (b":method", b"CONNECT"),
    (b":method", b"DELETE"),
    (b":method", b"GET"),
    (b":method", b"HEAD"),
    (b":method", b"OPTIONS"),
    (b":method", b"POST"),
    (b":method", b"PUT"),
    (b":scheme", b"http"),
    (b":scheme", b"https"),
    (b":status", b"103"),
    (b":status", b"200"),
    (b":status", b"304"),
    (b":status", b"404"),
    (b":status", b"503"),
    (b"accept", b"*/*"),
    (b"accept", b"application/dns-message"),
    (b"accept-encoding", b"gzip, deflate, br"),
    (b"accept-ranges", b"bytes"),
    (b"access-control-allow-headers", b"cache-control"),
    (b"access-control-allow-headers", b"content-type"),
    (b"access-control-allow-origin", b"*"),
    (b"cache-control", b"max-age=0"),
    (b"cache-control", b"max-age=2592000"),
    (b"cache-control", b"max-age=604800"),
    (b"cache-control", b"no-cache"),
    (b"cache-control", b"no-store"),
    (b"cache-control", b"public, max-age=31536000"),
    (b"content-encoding", b"br"),
    (b"content-encoding", b"gzip"),
    (b"content-type", b"application/dns-message"),
    (b"content-type", b"application/javascript"),
    (b"content-type", b"application/json"),
    (b"content-type", b"application/x-www-form-urlencoded"),
    (b"content-type", b"image/gif"),
    (b"content-type", b"image/jpeg"),
    (b"content-type", b"image/png"),
    (b"content-type", b"text/css"),
    (b"content-type", b"text/html; charset=utf-8"),
    (b"content-type", b"text/plain"),
    (b"content-type", b"text/plain;charset=utf-8"),
    (b"range", b"bytes=0-"),
    (b"strict-transport-security", b"max-age=31536000"),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains",
    ),
    (
        b"strict-transport-security",
        b"max-age=31536000; includesubdomains; preload",
    ),
    (b"vary", b"accept-encoding"),
    (b"vary", b"origin"),
    (b"x-content-type-options", b"nosniff"),
    (b"x-xss-protection", b"1; mode=block"),
    (b":status", b"100"),
    (b":status", b"204"),
    (b":status", b"206"),
    (b":status", b"302"),
    (b":status", b"400"),
    (b":status", b"403"),
    (b":status", b"421"),
    (b":status", b"425"),
    (b":status", b"500"),
    (b"accept-language", b""),
    (b"access-control-allow-credentials", b"FALSE"),
    (b"access-control-allow-credentials", b"TRUE"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-allow-methods", b"get"),
    (b"access-control-allow-methods", b"get, post, options"),
    (b"access-control-allow-methods", b"options"),
    (b"access-control-expose-headers", b"content-length"),
    (b"access-control-request-headers", b"content-type"),
    (b"access-control-request-method", b"get"),
    (b"access-control-request-method", b"post"),
    (b"alt-svc", b"clear"),
    (b"authorization", b""),
    (
        b"content-security-policy",
        b"script-src 'none'; object-src 'none'; base-uri 'none'",
    ),
    (b"early-data", b"1"),
    (b"expect-ct", b""),
    (b"forwarded", b""),
    (b"if-range", b""),
    (b"origin", b""),
    (b"purpose", b"prefetch"),
    (b"server", b""),
    (b"timing-allow-origin", b"*"),
    (b"upgrade-insecure-requests", b"1"),
    (b"user-agent", b""),
    (b"x-forwarded-for", b""),
    (b"x-frame-options", b"deny"),
    (b"x-frame-options", b"sameorigin"),
];

/// How the static table can stand for a field when encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StaticMatch {
    /// Name and value both: an indexed field line.
    Field(u64),
    /// The name only: a literal with a name reference.
    Name(u64),
    None,
}

/// The best static entry for `name` (already in lower case) and `value`.
pub(crate) fn find_static(name: &[u8], value: &[u8]) -> StaticMatch {
    let mut found = StaticMatch::None;
    for (index, &(entry_name, entry_value)) in (0u64..).zip(STATIC_TABLE.iter()) {
        if entry_name != name {
            continue;
        }
        if entry_value == value {
            return StaticMatch::Field(index);
        }
        if found == StaticMatch::None {
            found = StaticMatch::Name(index);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_the_rfc_names() {
        // Spot checks against RFC 9204 Appendix A.
        assert_eq!(STATIC_TABLE[0], (&b":authority"[..], &b""[..]));
        assert_eq!(STATIC_TABLE[17], (&b":method"[..], &b"GET"[..]));
        assert_eq!(STATIC_TABLE[25], (&b":status"[..], &b"200"[..]));
        assert_eq!(STATIC_TABLE[71], (&b":status"[..], &b"500"[..]));
        assert_eq!(
            STATIC_TABLE[98],
            (&b"x-frame-options"[..], &b"sameorigin"[..])
        );
        assert_eq!(find_static(b":method", b"GET"), StaticMatch::Field(17));
        assert_eq!(find_static(b":scheme", b"https"), StaticMatch::Field(23));
        assert_eq!(find_static(b":path", b"/"), StaticMatch::Field(1));
        assert_eq!(find_static(b":path", b"/x"), StaticMatch::Name(1));
        assert_eq!(find_static(b":authority", b"h"), StaticMatch::Name(0));
        assert_eq!(find_static(b"accept", b"text/html"), StaticMatch::Name(29));
        assert_eq!(find_static(b"x-custom", b"1"), StaticMatch::None);
    }
}
