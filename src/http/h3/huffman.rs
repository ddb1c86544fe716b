//! The Huffman code of HPACK (RFC 7541 Appendix B), which QPACK reuses for string literals
//! (RFC 9204 §4.1.2): decoding only, with no table built at run time and no allocation.
//!
//! The code is canonical: within one code length the codes are consecutive and follow the
//! symbols' order, and each length's first code follows from the counts of the shorter ones.
//! So the code lengths of the 257 symbols (the 256 octets and EOS) are the whole table; the
//! rest is computed at compile time. A symbol of 8 bits or fewer (most of header text) is
//! looked up by the next 8 bits in a table of 256; a longer one is found by growing a
//! candidate code one length at a time until it falls inside that length's range. (The
//! `loona-hpack` decoder that the HTTP/2 side uses builds a hash map per call and returns a
//! `Vec`: not for every response.)

/// Each symbol's code length in bits (RFC 7541 Appendix B, "len in bits"); index 256 is EOS.
#[rustfmt::skip]
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28,
    28, 28, 28, 28, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6,
    5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10,
    13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6,
    15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6, 6, 5,
    6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28,
    20, 22, 20, 20, 22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23,
    24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24,
    22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23,
    26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25,
    19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27,
    20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23,
    26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26,
    30,
];

const SHORTEST: usize = 5;
const LONGEST: usize = 30;
const EOS: u16 = 256;

/// The canonical code, derived from [`CODE_LENGTHS`].
struct CanonicalCode {
    /// The first code of each length (index = length in bits).
    first: [u32; LONGEST + 1],
    /// How many codes each length has.
    count: [u32; LONGEST + 1],
    /// Where each length's symbols start in `symbols`.
    offset: [u16; LONGEST + 1],
    /// The symbols ordered by (code length, symbol): the order of their codes.
    symbols: [u16; 257],
}

const fn canonical_code() -> CanonicalCode {
    let mut count = [0u32; LONGEST + 1];
    let mut i = 0;
    while i < CODE_LENGTHS.len() {
        count[CODE_LENGTHS[i] as usize] += 1;
        i += 1;
    }
    let mut first = [0u32; LONGEST + 1];
    let mut offset = [0u16; LONGEST + 1];
    let (mut code, mut next, mut len) = (0u32, 0u16, 1);
    while len <= LONGEST {
        first[len] = code;
        offset[len] = next;
        code = (code + count[len]) << 1;
        next += count[len] as u16;
        len += 1;
    }
    let mut fill = offset;
    let mut symbols = [0u16; 257];
    let mut symbol = 0;
    while symbol < CODE_LENGTHS.len() {
        let len = CODE_LENGTHS[symbol] as usize;
        symbols[fill[len] as usize] = symbol as u16;
        fill[len] += 1;
        symbol += 1;
    }
    CanonicalCode {
        first,
        count,
        offset,
        symbols,
    }
}

static CODE: CanonicalCode = canonical_code();

/// The codes of 8 bits or fewer, which most header text is made of, looked up in one step:
/// for each value of the next 8 input bits, the symbol whose code they begin with and the
/// code's length; length 0 when the code is longer (then found length by length).
static SHORT: [(u8, u8); 256] = short_codes();

const fn short_codes() -> [(u8, u8); 256] {
    let code = canonical_code();
    let mut table = [(0u8, 0u8); 256];
    let mut len = SHORTEST;
    while len <= 8 {
        let mut rank = 0;
        while rank < code.count[len] {
            // Every symbol this short is an octet (EOS is 30 bits long).
            let symbol = code.symbols[code.offset[len] as usize + rank as usize] as u8;
            let first = ((code.first[len] + rank) << (8 - len)) as usize;
            let mut k = 0;
            while k < 1 << (8 - len) {
                table[first + k] = (symbol, len as u8);
                k += 1;
            }
            rank += 1;
        }
        len += 1;
    }
    table
}

/// A Huffman string that breaks RFC 7541 §5.2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HuffmanError {
    /// The string contains the EOS symbol.
    EndOfStringInside,
    /// The last bits are not a prefix of EOS (all ones) shorter than a byte.
    BadPadding,
}

/// Decodes `coded`, handing each octet to `emit` in order.
pub(crate) fn decode_huffman(coded: &[u8], mut emit: impl FnMut(u8)) -> Result<(), HuffmanError> {
    // `bits` holds the not yet decoded input, its last `held` bits valid; refilled to more
    // than the longest code whenever input remains, so a code never straddles a refill.
    let (mut bits, mut held) = (0u64, 0usize);
    let mut rest = coded;
    loop {
        while held <= 56 {
            let Some((&byte, tail)) = rest.split_first() else {
                break;
            };
            bits = (bits << 8) | u64::from(byte);
            held += 8;
            rest = tail;
        }
        match next_symbol(bits, held) {
            Some((symbol, len)) => {
                if symbol == EOS {
                    return Err(HuffmanError::EndOfStringInside);
                }
                emit(symbol as u8);
                held -= len;
                bits &= low_bits(held);
            }
            None => return padding_is_valid(bits, held),
        }
    }
}

/// The symbol whose code starts the `held` valid bits, and its length; `None` when the bits
/// left are shorter than any code they begin (only the end of the input).
fn next_symbol(bits: u64, held: usize) -> Option<(u16, usize)> {
    let mut shortest = SHORTEST;
    if held >= 8 {
        let (symbol, len) = SHORT[((bits >> (held - 8)) & 0xff) as usize];
        if len != 0 {
            return Some((u16::from(symbol), usize::from(len)));
        }
        shortest = 9;
    }
    for len in shortest..=LONGEST.min(held) {
        let candidate = ((bits >> (held - len)) & low_bits(len)) as u32;
        let rank = candidate.wrapping_sub(CODE.first[len]);
        if rank < CODE.count[len] {
            let index = usize::from(CODE.offset[len]) + rank as usize;
            return CODE.symbols.get(index).map(|&symbol| (symbol, len));
        }
    }
    None
}

fn padding_is_valid(bits: u64, held: usize) -> Result<(), HuffmanError> {
    if held < 8 && bits == low_bits(held) {
        Ok(())
    } else {
        Err(HuffmanError::BadPadding)
    }
}

fn low_bits(count: usize) -> u64 {
    (1u64 << count) - 1
}

/// The encoder the tests use to build what servers send (the codec itself never encodes
/// Huffman: a request is encoded once, its size hardly matters).
#[cfg(test)]
pub(crate) fn encode_huffman(text: &[u8]) -> Vec<u8> {
    let code_of = |symbol: u16| {
        let len = usize::from(CODE_LENGTHS[usize::from(symbol)]);
        let start = usize::from(CODE.offset[len]);
        let rank = CODE.symbols[start..]
            .iter()
            .position(|&s| s == symbol)
            .unwrap_or_default();
        (u64::from(CODE.first[len]) + rank as u64, len)
    };
    let (mut out, mut bits, mut held) = (Vec::new(), 0u64, 0usize);
    for &byte in text {
        let (code, len) = code_of(u16::from(byte));
        bits = (bits << len) | code;
        held += len;
        while held >= 8 {
            held -= 8;
            out.push((bits >> held) as u8);
        }
        bits &= low_bits(held);
    }
    if held > 0 {
        out.push(((bits << (8 - held)) | low_bits(8 - held)) as u8);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(coded: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        decode_huffman(coded, |b| out.push(b)).map(|()| out)
    }

    fn hex(text: &str) -> Vec<u8> {
        let digits: Vec<u8> = text.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    /// RFC 7541 C.4 and C.6: Huffman-coded request and response strings.
    const RFC_EXAMPLES: [(&str, &str); 9] = [
        ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
        ("a8eb 1064 9cbf", "no-cache"),
        ("25a8 49e9 5ba9 7d7f", "custom-key"),
        ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
        ("6402", "302"),
        ("aec3 771a 4b", "private"),
        (
            "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
            "Mon, 21 Oct 2013 20:13:21 GMT",
        ),
        (
            "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
            "https://www.example.com",
        ),
        (
            "94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f 9587 \
             3160 65c0 03ed 4ee5 b106 3d50 07",
            "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
        ),
    ];

    #[test]
    fn decodes_the_rfc_7541_examples() {
        for (coded, text) in RFC_EXAMPLES {
            assert_eq!(decoded(&hex(coded)), Ok(text.as_bytes().to_vec()), "{text}");
        }
    }

    #[test]
    fn test_encoder_matches_the_rfc_examples() {
        for (coded, text) in RFC_EXAMPLES {
            assert_eq!(encode_huffman(text.as_bytes()), hex(coded), "{text}");
        }
    }

    #[test]
    fn every_octet_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(decoded(&encode_huffman(&all)), Ok(all.clone()));
        for byte in all {
            assert_eq!(decoded(&encode_huffman(&[byte])), Ok(vec![byte]));
        }
        assert_eq!(decoded(&[]), Ok(vec![]));
    }

    #[test]
    fn agrees_with_loona_hpack_on_arbitrary_bytes() {
        // Random byte strings are mostly invalid codes: both decoders must agree on which,
        // and on the text of the valid ones.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..4000 {
            let len = round % 13;
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    // Bias towards ones so that long codes and valid padding come up.
                    (seed as u8) | ((seed >> 8) as u8 & 0xe0)
                })
                .collect();
            let theirs = loona_hpack::huffman::HuffmanDecoder::new().decode(&input);
            assert_eq!(decoded(&input).ok(), theirs.ok(), "{input:02x?}");
        }
    }

    #[test]
    fn refuses_eos_and_bad_padding() {
        // EOS is thirty ones; four bytes of ones hold it whole.
        assert_eq!(decoded(&[0xff; 4]), Err(HuffmanError::EndOfStringInside));
        // A whole byte of padding.
        assert_eq!(decoded(&[0xff]), Err(HuffmanError::BadPadding));
        // '0' is 00000: padding of three zeros is not a prefix of EOS.
        assert_eq!(decoded(&[0x00]), Err(HuffmanError::BadPadding));
        // '0' then 111 is right.
        assert_eq!(decoded(&[0x07]), Ok(b"0".to_vec()));
    }
}
