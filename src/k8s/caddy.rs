//! A variant whose image is Caddy (`image=caddy:2`): the server that answers HTTP/3 where
//! nginx cannot (Debian's nginx 1.22 has no QUIC; Caddy serves h3 by default, quic-go). Its
//! pods run the Caddyfile written here, never a user's: http on 80 (the readiness probe's
//! port, as for nginx), and with TLS https on 443 over TCP (h1, h2) and UDP (h3) with the
//! Secret's certificate, so `k8s load --http3` pins the same certificate as `--tls` does.
//! Each request is one JSON line of its access log on the container's output (the pod's
//! log), the kubelet's probes left out, as a deployment that counts its requests does.

use super::tls::{HTTPS_PORT, MOUNT};

/// The ConfigMap key, and the file name under /etc/caddy, of the Caddyfile.
pub const CADDYFILE_KEY: &str = "Caddyfile";
/// Where the official caddy image's command reads its configuration.
pub const CADDYFILE_PATH: &str = "/etc/caddy/Caddyfile";

/// The Caddyfile of a Caddy variant; with `tls`, the https site on 443 beside http on 80.
///
/// - `admin off`: nothing listens but the sites (the admin API would be a second port).
/// - `auto_https off`: no certificates fetched, no redirect of :80 to https.
/// - `default_sni localhost`: a client dialling an address sends no server name (RFC 6066
///   forbids an IP literal there); without a default Caddy would look for a certificate for
///   the pod's own address and fail the handshake. `localhost` is one of the certificate's
///   names (`tls::names`).
pub fn caddyfile(tls: bool) -> String {
    let mut text = String::from(
        "# archbench k8s: a Caddy variant. http on 80; with TLS, https on 443 over TCP (h1, h2)
# and UDP (h3) with the certificate of the Secret nginx-tls.
{
	admin off
	auto_https off
	default_sni localhost
	servers {
		protocols h1 h2 h3
	}
}

(answer) {
	@probe header User-Agent kube-probe/*
	skip_log @probe
	log {
		output stdout
		format json
	}
	respond \"caddy response from {system.hostname}\n\" 200
}

http://:80 {
	import answer
}
",
    );
    if tls {
        let port = HTTPS_PORT.1;
        text.push_str(&format!(
            "
https://:{port} {{
	tls {MOUNT}/tls.crt {MOUNT}/tls.key
	import answer
}}
"
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_https_site_comes_with_tls_only() {
        let plain = caddyfile(false);
        assert!(
            plain.contains("http://:80 {\n\timport answer\n}"),
            "{plain}"
        );
        assert!(!plain.contains("https://"), "{plain}");
        let tls = caddyfile(true);
        assert!(tls.starts_with(&plain), "{tls}");
        assert!(
            tls.ends_with("https://:443 {\n\ttls /run/secrets/nginx-tls/tls.crt /run/secrets/nginx-tls/tls.key\n\timport answer\n}\n"),
            "{tls}"
        );
        // Braces balance: Caddy refuses the file otherwise.
        assert_eq!(tls.matches('{').count(), tls.matches('}').count());
    }
}
