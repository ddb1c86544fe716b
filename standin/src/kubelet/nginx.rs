//! Running an nginx image's nginx on the host's nginx binary, one pod beside another.
//!
//! Pods share the host's network namespace, so `listen 80;` in every pod would collide. The
//! pod's own `/etc/nginx` (the host's files with the pod's volume mounts over them, e.g. the
//! ConfigMap's nginx.conf, byte for byte, at /etc/nginx/nginx.conf) is what `cat` and `nginx -t`
//! see inside the pod; nginx itself runs from a rewritten copy of that tree in the pod's
//! directory (`-c COPY/nginx.conf`), where:
//! - `listen [ADDR:]PORT` becomes `listen PODIP:PORT` (IPv6 listens are dropped, unix sockets
//!   kept), so each pod answers on its own 127.1.x.y only;
//! - `include /etc/nginx/…` points into the copy (relative includes already do: nginx resolves
//!   them against the directory of `-c`);
//! - `daemon` directives are dropped (the kubelet passes `-g 'daemon off;'`, as the image's CMD).
//!
//! pid file and logs need no rewriting: the pod has a private tmpfs on /run and, as the
//! official image, /var/log/nginx/access.log → /dev/stdout and error.log → /dev/stderr, which
//! become the pod's log.

use std::io;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

/// The host's nginx configuration directory, which pods start from.
pub const ETC_NGINX: &str = "/etc/nginx";

/// Copies a directory tree, following symlinks (sites-enabled/default links elsewhere).
fn copy_tree(src: &Path, dst: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        match std::fs::metadata(&from) {
            Ok(m) if m.is_dir() => copy_tree(&from, &to)?,
            Ok(_) => {
                std::fs::copy(&from, &to)?;
            }
            Err(_) => {} // a dangling link: nginx would not read it either
        }
    }
    Ok(())
}

/// Builds the rewritten configuration tree for a container and returns the path to pass as
/// `-c`. `overlays` are (path inside the pod under /etc/nginx, host source file or directory).
pub fn prepare(dest: &Path, overlays: &[(PathBuf, PathBuf)], ip: Ipv4Addr) -> io::Result<PathBuf> {
    if dest.exists() {
        std::fs::remove_dir_all(dest)?;
    }
    copy_tree(Path::new(ETC_NGINX), dest)?;
    for (target, src) in overlays {
        let Ok(rel) = target.strip_prefix(ETC_NGINX) else {
            continue;
        };
        let to = dest.join(rel);
        if std::fs::metadata(src)?.is_dir() {
            copy_tree(src, &to)?;
        } else {
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::copy(src, &to)?;
        }
    }
    rewrite_tree(dest, dest, ip)?;
    Ok(dest.join("nginx.conf"))
}

fn rewrite_tree(dir: &Path, root: &Path, ip: Ipv4Addr) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            rewrite_tree(&path, root, ip)?;
        } else if let Ok(text) = std::fs::read_to_string(&path) {
            let new = rewrite(&text, root, ip);
            if new != text {
                std::fs::write(&path, new)?;
            }
        }
    }
    Ok(())
}

/// A token of nginx's configuration syntax with its byte range.
struct Tok {
    start: usize,
    end: usize,
    text: String,
}

/// Splits into statements (`;`-terminated) and block heads (`{`), skipping comments, honouring
/// quotes. Each item: the statement's words and the end of its terminator.
fn statements(s: &str) -> Vec<(Vec<Tok>, usize)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut cur: Vec<Tok> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if c == b'#' {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b';' || c == b'{' {
            out.push((std::mem::take(&mut cur), i + 1));
            i += 1;
        } else if c == b'}' {
            cur.clear();
            i += 1;
        } else if c == b'"' || c == b'\'' {
            let start = i;
            i += 1;
            while i < b.len() && b[i] != c {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i = (i + 1).min(b.len());
            let inner = s.get(start + 1..i.saturating_sub(1)).unwrap_or("");
            cur.push(Tok {
                start,
                end: i,
                text: inner.to_string(),
            });
        } else {
            let start = i;
            while i < b.len() && !b[i].is_ascii_whitespace() && !b";{}".contains(&b[i]) {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            let i2 = i.min(b.len());
            cur.push(Tok {
                start,
                end: i2,
                text: s[start..i2].to_string(),
            });
            i = i2;
        }
    }
    out
}

/// The address a `listen` argument becomes; None drops the directive (IPv6).
fn listen_address(arg: &str, ip: Ipv4Addr) -> Option<String> {
    if arg.starts_with("unix:") {
        return Some(arg.to_string());
    }
    if arg.starts_with('[') {
        return None;
    }
    if let Some((_, port)) = arg.rsplit_once(':') {
        return Some(format!("{ip}:{port}"));
    }
    if !arg.is_empty() && arg.bytes().all(|b| b.is_ascii_digit()) {
        return Some(format!("{ip}:{arg}"));
    }
    Some(format!("{ip}:80"))
}

/// Rewrites one file's text (see the module docs).
pub fn rewrite(text: &str, root: &Path, ip: Ipv4Addr) -> String {
    let mut edits: Vec<(usize, usize, String)> = Vec::new();
    for (words, end) in statements(text) {
        let Some(first) = words.first() else { continue };
        match first.text.as_str() {
            "listen" if words.len() >= 2 => match listen_address(&words[1].text, ip) {
                Some(addr) => edits.push((words[1].start, words[1].end, addr)),
                None => edits.push((first.start, end, String::new())),
            },
            "include" if words.len() >= 2 => {
                if let Some(rest) = words[1].text.strip_prefix("/etc/nginx/") {
                    edits.push((
                        words[1].start,
                        words[1].end,
                        format!("{}/{rest}", root.display()),
                    ));
                }
            }
            "daemon" => edits.push((first.start, end, String::new())),
            _ => {}
        }
    }
    let mut out = text.to_string();
    for (start, end, with) in edits.into_iter().rev() {
        out.replace_range(start..end, &with);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listens_on_the_pod_ip() {
        let ip = Ipv4Addr::new(127, 1, 0, 7);
        let conf = "daemon on;\nevents {}\nhttp { # listen 1;\n  include /etc/nginx/mime.types;\n  server { listen 80 default_server; listen [::]:80; listen 0.0.0.0:8080;\n  location / { return 200 'listen 80;'; } }\n  server { listen unix:/tmp/s; listen localhost; }\n}\n";
        let out = rewrite(conf, Path::new("/tmp/p/nginx"), ip);
        assert!(out.contains("listen 127.1.0.7:80 default_server;"), "{out}");
        assert!(out.contains("listen 127.1.0.7:8080;"));
        assert!(!out.contains("[::]"));
        assert!(out.contains("return 200 'listen 80;'"), "strings untouched");
        assert!(out.contains("# listen 1;"), "comments untouched");
        assert!(out.contains("include /tmp/p/nginx/mime.types;"));
        assert!(out.contains("listen unix:/tmp/s;"));
        assert!(out.contains("listen 127.1.0.7:80;"));
        assert!(!out.contains("daemon"));
    }
}
