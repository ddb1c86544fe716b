//! Identifiers the API server makes up: uids, random name suffixes, template hashes.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;

/// The alphabet Kubernetes uses for generated names and hashes (no vowels, no look-alikes).
const SAFE: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Random enough for names and uids in a test cluster (std's per-process random SipHash keys
/// plus a counter), without a rand dependency.
pub fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// A version-4-shaped uid, as `metadata.uid` looks on a real cluster.
pub fn uid() -> String {
    let (a, b) = (random_u64(), random_u64());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | (b >> 48) & 0x3fff,
        b & 0xffff_ffff_ffff
    )
}

/// `generateName` suffix: five characters of the safe alphabet.
pub fn suffix() -> String {
    let mut r = random_u64();
    (0..5)
        .map(|_| {
            let c = SAFE[(r % SAFE.len() as u64) as usize] as char;
            r /= SAFE.len() as u64;
            c
        })
        .collect()
}

/// 32-hex-digit container ids (`containerd://…` in container statuses).
pub fn container_id() -> String {
    format!("{:016x}{:016x}", random_u64(), random_u64())
}

/// JSON with object keys sorted at every level, so equal values hash equally whatever order
/// their keys arrived in.
pub fn canonical_json(v: &Value) -> String {
    fn write(v: &Value, out: &mut String) {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                out.push('{');
                for (i, k) in keys.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    write(&m[k], out);
                }
                out.push('}');
            }
            Value::Array(a) => {
                out.push('[');
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(x, out);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut s = String::new();
    write(v, &mut s);
    s
}

/// `pod-template-hash` as the Deployment controller computes it: FNV-1a 32 of the template,
/// its decimal digits mapped through the safe alphabet (`rand.SafeEncodeString`).
pub fn template_hash(template: &Value) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for b in canonical_json(template).bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h.to_string()
        .bytes()
        .map(|b| SAFE[usize::from(b) % SAFE.len()] as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_ignores_key_order() {
        let a: Value = serde_json::from_str(r#"{"a":1,"b":{"c":2,"d":3}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b":{"d":3,"c":2},"a":1}"#).unwrap();
        assert_eq!(template_hash(&a), template_hash(&b));
        assert!(template_hash(&a).bytes().all(|c| SAFE.contains(&c)));
        assert_eq!(uid().len(), 36);
        assert_ne!(suffix(), suffix());
    }
}
