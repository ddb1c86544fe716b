//! QUIC variable-length integers (RFC 9000 §16): HTTP/3 writes every frame type, frame length,
//! stream type and setting in this form. The two high bits of the first byte give the length
//! (1, 2, 4 or 8 bytes); the rest is the value, big-endian.

/// The largest value a varint can carry: 2^62 - 1.
pub(crate) const MAX_VARINT: u64 = (1 << 62) - 1;

/// The longest encoding: a reader that buffers a varint across chunks needs this much room.
pub(crate) const MAX_VARINT_LEN: usize = 8;

/// The input ended inside a varint: feed more bytes and decode again from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NeedMore;

/// Decodes the varint at the start of `input`: its value and how many bytes it took.
pub(crate) fn decode_varint(input: &[u8]) -> Result<(u64, usize), NeedMore> {
    let first = *input.first().ok_or(NeedMore)?;
    let len = 1usize << (first >> 6);
    let bytes = input.get(..len).ok_or(NeedMore)?;
    let value = bytes[1..]
        .iter()
        .fold(u64::from(first & 0x3f), |value, &b| {
            (value << 8) | u64::from(b)
        });
    Ok((value, len))
}

/// How many bytes `value` takes (values above [`MAX_VARINT`] are clamped by the encoders).
pub(crate) fn varint_len(value: u64) -> usize {
    match value {
        0..=63 => 1,
        64..=16_383 => 2,
        16_384..=1_073_741_823 => 4,
        _ => 8,
    }
}

/// Writes `value` into the start of `out`, returning the bytes used, or `None` when `out` is
/// too short or `value` is beyond [`MAX_VARINT`].
pub(crate) fn write_varint(value: u64, out: &mut [u8]) -> Option<usize> {
    if value > MAX_VARINT {
        return None;
    }
    let len = varint_len(value);
    let target = out.get_mut(..len)?;
    let tag = (len.trailing_zeros() as u8) << 6;
    let be = value.to_be_bytes();
    target.copy_from_slice(&be[8 - len..]);
    target[0] |= tag;
    Some(len)
}

/// Appends `value`; a value beyond [`MAX_VARINT`] is refused with `None` and nothing written.
pub(crate) fn push_varint(value: u64, out: &mut Vec<u8>) -> Option<()> {
    let mut bytes = [0; MAX_VARINT_LEN];
    let len = write_varint(value, &mut bytes)?;
    out.extend_from_slice(&bytes[..len]);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDARIES: [(u64, usize); 8] = [
        (0, 1),
        (63, 1),
        (64, 2),
        (16_383, 2),
        (16_384, 4),
        ((1 << 30) - 1, 4),
        (1 << 30, 8),
        (MAX_VARINT, 8),
    ];

    #[test]
    fn round_trips_at_every_length_boundary() {
        for (value, len) in BOUNDARIES {
            let mut out = Vec::new();
            assert_eq!(push_varint(value, &mut out), Some(()));
            assert_eq!(out.len(), len, "{value}");
            assert_eq!(varint_len(value), len);
            assert_eq!(decode_varint(&out), Ok((value, len)));
            // Trailing bytes belong to whatever follows.
            out.push(0xff);
            assert_eq!(decode_varint(&out), Ok((value, len)));
        }
    }

    #[test]
    fn every_short_prefix_needs_more() {
        for (value, len) in BOUNDARIES {
            let mut out = Vec::new();
            push_varint(value, &mut out);
            for cut in 0..len {
                assert_eq!(
                    decode_varint(&out[..cut]),
                    Err(NeedMore),
                    "{value} cut {cut}"
                );
            }
        }
    }

    #[test]
    fn rfc_9000_appendix_a_examples() {
        let examples: [(&[u8], u64); 4] = [
            (
                &[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
                151_288_809_941_952_652,
            ),
            (&[0x9d, 0x7f, 0x3e, 0x7d], 494_878_333),
            (&[0x7b, 0xbd], 15_293),
            (&[0x25], 37),
        ];
        for (bytes, value) in examples {
            assert_eq!(decode_varint(bytes), Ok((value, bytes.len())));
            let mut out = Vec::new();
            push_varint(value, &mut out);
            assert_eq!(out, bytes);
        }
        // A non-minimal encoding is still the same value.
        assert_eq!(decode_varint(&[0x40, 0x25]), Ok((37, 2)));
    }

    #[test]
    fn refuses_values_beyond_62_bits_and_short_slices() {
        let mut out = Vec::new();
        assert_eq!(push_varint(MAX_VARINT + 1, &mut out), None);
        assert!(out.is_empty());
        assert_eq!(write_varint(16_384, &mut [0; 3]), None);
        assert_eq!(write_varint(16_384, &mut [0; 4]), Some(4));
    }
}
