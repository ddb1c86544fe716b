//! The `--requests FILE` format: entries separated by blank lines; an entry is a line
//! `METHOD PATH-OR-URL [weight=N] [name=NAME]`, then `Name: value` header lines and at most
//! one `@FILE` line (the body, read from FILE, relative to the mix file's directory). Lines
//! starting with `#` are comments.
//!
//! ```text
//! # two reads of the home page for each search, one post now and then
//! GET /            name=home weight=6
//!
//! GET /search?q=a  name=search weight=3
//! Accept: application/json
//!
//! POST /api/items  name=create
//! Content-Type: application/json
//! @item.json
//! ```

use std::path::Path;

/// Most entries in one mix, and the most their weights may add up to (the cycle's length).
pub const MAX_ENTRIES: usize = 10_000;
pub const MAX_TOTAL_WEIGHT: u64 = 1_000_000;

/// One entry as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub name: String,
    pub method: String,
    /// A path (`/x?y`) or an absolute URL.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub weight: u64,
}

/// Parses `text` (read from `path`); errors say `FILE:LINE: what`.
pub fn parse(text: &str, path: &Path) -> Result<Vec<Entry>, String> {
    let file = path.display().to_string();
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut entries: Vec<Entry> = Vec::new();
    let mut open = false;
    for (k, raw) in text.lines().enumerate() {
        let at = |why: String| format!("{file}:{}: {why}", k + 1);
        let line = raw.trim();
        if line.starts_with('#') {
            continue;
        }
        if line.is_empty() {
            open = false;
            continue;
        }
        if !open {
            entries.push(first_line(line).map_err(at)?);
            open = true;
            if entries.len() > MAX_ENTRIES {
                return Err(at(format!("more than {MAX_ENTRIES} entries")));
            }
            continue;
        }
        let entry = entries.last_mut().ok_or_else(|| at("no entry".into()))?;
        if let Some(body) = line.strip_prefix('@') {
            if !entry.body.is_empty() {
                return Err(at("a second @body line; an entry has one body".into()));
            }
            let p = dir.join(body.trim());
            entry.body = std::fs::read(&p)
                .map_err(|e| at(format!("cannot read body file {}: {e}", p.display())))?;
        } else if let Some((name, value)) = line.split_once(':') {
            let name = name.trim();
            if !crate::http::is_header_name(name) {
                return Err(at(format!("{name:?} is not a header name")));
            }
            if !crate::http::is_header_value(value) {
                return Err(at(format!(
                    "header {name:?} contains a control character (a CR, NUL, escape or DEL)"
                )));
            }
            entry
                .headers
                .push((name.to_string(), value.trim().to_string()));
        } else {
            return Err(at(format!(
                "{line:?} is neither a header (Name: value) nor a body (@FILE); a new entry follows a blank line"
            )));
        }
    }
    check(&entries, &file)?;
    Ok(entries)
}

fn first_line(line: &str) -> Result<Entry, String> {
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_ascii_uppercase();
    if !method.bytes().all(|b| b.is_ascii_alphabetic()) {
        return Err(format!(
            "{method:?} is not a method; an entry starts with METHOD PATH, e.g. GET /"
        ));
    }
    if method == "HEAD" {
        return Err("HEAD is not supported in a request mix".into());
    }
    let target = words
        .next()
        .ok_or("an entry starts with METHOD PATH, e.g. GET /")?
        .to_string();
    if !target.starts_with('/') && !target.contains("://") {
        return Err(format!(
            "{target:?} is neither a path (/…) nor a URL (http://…)"
        ));
    }
    let mut name = None;
    let mut weight = 1;
    for w in words {
        match w.split_once('=') {
            Some(("name", n)) if !n.is_empty() => name = Some(n.to_string()),
            Some(("weight", n)) => {
                weight = n
                    .parse()
                    .ok()
                    .filter(|&n| (1..=MAX_TOTAL_WEIGHT).contains(&n))
                    .ok_or_else(|| {
                        format!("weight={n}: a whole number from 1 to {MAX_TOTAL_WEIGHT}")
                    })?
            }
            _ => return Err(format!("{w:?}: after the path come weight=N and name=NAME")),
        }
    }
    Ok(Entry {
        name: name.unwrap_or_else(|| format!("{method} {target}")),
        method,
        target,
        headers: Vec::new(),
        body: Vec::new(),
        weight,
    })
}

fn check(entries: &[Entry], file: &str) -> Result<(), String> {
    if entries.is_empty() {
        return Err(format!(
            "{file}: no entry; write one per paragraph, e.g. GET /"
        ));
    }
    for (k, e) in entries.iter().enumerate() {
        if entries[..k].iter().any(|o| o.name == e.name) {
            return Err(format!(
                "{file}: two entries are named {:?}; give one a name=…",
                e.name
            ));
        }
    }
    let total: u64 = entries.iter().map(|e| e.weight).sum();
    if total > MAX_TOTAL_WEIGHT {
        return Err(format!(
            "{file}: the weights add up to {total}, above {MAX_TOTAL_WEIGHT}; scale them down"
        ));
    }
    Ok(())
}

/// The order connections take the entries in, one cycle: each entry as often as its weight,
/// spread evenly (smooth weighted round robin: each step the entry furthest behind its share).
pub fn cycle(weights: &[u64]) -> Vec<u32> {
    let total: i64 = weights.iter().map(|&w| w as i64).sum();
    let mut current = vec![0i64; weights.len()];
    let mut order = Vec::with_capacity(total as usize);
    for _ in 0..total {
        let mut best = 0;
        for (k, &w) in weights.iter().enumerate() {
            current[k] += w as i64;
            if current[k] > current[best] {
                best = k;
            }
        }
        current[best] -= total;
        order.push(best as u32);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("item.json"), b"{\"a\":1}").unwrap();
        let path = dir.path().join("mix.txt");
        let text = "# two reads of the home page for each search, one post now and then\nGET /            name=home weight=6\n\nGET /search?q=a  name=search weight=3\nAccept: application/json\n\nPOST /api/items  name=create\nContent-Type: application/json\n@item.json\n";
        let e = parse(text, &path).unwrap();
        assert_eq!(e.len(), 3);
        assert_eq!((e[0].name.as_str(), e[0].weight), ("home", 6));
        assert_eq!(
            e[1].headers,
            vec![("Accept".into(), "application/json".into())]
        );
        assert_eq!(
            (e[2].method.as_str(), &e[2].body[..]),
            ("POST", &b"{\"a\":1}"[..])
        );
        assert_eq!(e[2].weight, 1);
    }

    #[test]
    fn mistakes_name_their_line() {
        let p = Path::new("m.txt");
        for (text, said) in [
            ("GET /\nnot a header\n", "m.txt:2:"),
            ("GET / weight=0\n", "m.txt:1: weight=0"),
            ("GET x\n", "m.txt:1:"),
            ("GET / name=a\n\nPOST / name=a\n", "named \"a\""),
            ("", "no entry"),
            ("GET /\n@/nonexistent/b\n", "m.txt:2: cannot read body file"),
            (
                "GET /\nX-A: \u{1b}[1m\n",
                "m.txt:2: header \"X-A\" contains a control",
            ),
            ("GET /\nX(a): 1\n", "m.txt:2: \"X(a)\" is not a header name"),
        ] {
            let e = parse(text, p).unwrap_err();
            assert!(e.contains(said), "{text:?}: {e}");
        }
    }

    #[test]
    fn a_cycle_holds_each_entry_by_its_weight_spread_out() {
        let c = cycle(&[3, 1, 2]);
        assert_eq!(c.len(), 6);
        for (k, w) in [3, 1, 2].iter().enumerate() {
            assert_eq!(c.iter().filter(|&&e| e == k as u32).count(), *w);
        }
        // Not three of the first in a row.
        assert!(
            c.windows(3).all(|w| !(w[0] == w[1] && w[1] == w[2])),
            "{c:?}"
        );
    }
}
