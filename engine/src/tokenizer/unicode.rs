//! The Unicode pieces llama.cpp's tokenizers rest on, with llama.cpp's exact behaviour where it
//! differs from Rust's: its UTF-8 decoder (no overlong or surrogate checks; an invalid byte
//! becomes U+FFFD and decoding resumes at the next byte), its code point classes (general
//! category letter / number, the White_Space property) and GPT-2's byte ↔ unicode mapping.

use unicode_properties::{GeneralCategoryGroup as G, UnicodeGeneralCategory};

/// U+FFFD, what an undecodable byte becomes.
pub const REPLACEMENT: u32 = 0xFFFD;

/// The length of the UTF-8 sequence a lead byte announces, from its high nibble only (as
/// llama.cpp's `unicode_len_utf8`: continuation bytes count 1).
pub fn utf8_len(lead: u8) -> usize {
    match lead >> 4 {
        0xC | 0xD => 2,
        0xE => 3,
        0xF => 4,
        _ => 1,
    }
}

/// Decode `s` into code points as llama.cpp's `unicode_cpts_from_utf8` does: a lead byte with
/// its continuation bytes gives the value its bits spell (overlong forms and surrogates
/// included); anything else gives U+FFFD for one byte.
pub fn decode_utf8(s: &[u8]) -> Vec<u32> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    let cont = |j: usize| s.get(j).is_some_and(|&b| b & 0xC0 == 0x80);
    while i < s.len() {
        let b = s[i] as u32;
        let (n, v) = if b & 0x80 == 0 {
            (1, Some(b))
        } else if b & 0x40 == 0 {
            (1, None)
        } else if b & 0x20 == 0 {
            (
                2,
                cont(i + 1).then(|| ((b & 0x1F) << 6) | (s[i + 1] as u32 & 0x3F)),
            )
        } else if b & 0x10 == 0 {
            (
                3,
                (cont(i + 1) && cont(i + 2)).then(|| {
                    ((b & 0x0F) << 12) | ((s[i + 1] as u32 & 0x3F) << 6) | (s[i + 2] as u32 & 0x3F)
                }),
            )
        } else if b & 0x08 == 0 {
            (
                4,
                (cont(i + 1) && cont(i + 2) && cont(i + 3)).then(|| {
                    ((b & 0x07) << 18)
                        | ((s[i + 1] as u32 & 0x3F) << 12)
                        | ((s[i + 2] as u32 & 0x3F) << 6)
                        | (s[i + 3] as u32 & 0x3F)
                }),
            )
        } else {
            (1, None)
        };
        match v {
            Some(v) => {
                out.push(v);
                i += n;
            }
            None => {
                out.push(REPLACEMENT);
                i += 1;
            }
        }
    }
    out
}

/// Append the UTF-8 bytes of code point `c` (surrogates encoded like any other value, as
/// llama.cpp does; a value past U+10FFFF, which only a 4-byte lead F5..F7 can spell, is written
/// as U+FFFD where llama.cpp would throw).
pub fn push_utf8(out: &mut Vec<u8>, c: u32) {
    match c {
        0..=0x7F => out.push(c as u8),
        0x80..=0x7FF => out.extend_from_slice(&[0xC0 | (c >> 6) as u8, 0x80 | (c & 0x3F) as u8]),
        0x800..=0xFFFF => out.extend_from_slice(&[
            0xE0 | (c >> 12) as u8,
            0x80 | ((c >> 6) & 0x3F) as u8,
            0x80 | (c & 0x3F) as u8,
        ]),
        0x10000..=0x10FFFF => out.extend_from_slice(&[
            0xF0 | (c >> 18) as u8,
            0x80 | ((c >> 12) & 0x3F) as u8,
            0x80 | ((c >> 6) & 0x3F) as u8,
            0x80 | (c & 0x3F) as u8,
        ]),
        _ => push_utf8(out, REPLACEMENT),
    }
}

/// What the pre-tokenizers ask of a code point (llama.cpp's `unicode_cpt_flags`, the parts
/// they read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// General category L* (`\p{L}`).
    pub letter: bool,
    /// General category N* (`\p{N}`).
    pub number: bool,
    /// The White_Space property (`\s`).
    pub whitespace: bool,
    /// Any code point at all: false only for "past the end of the text" (llama.cpp's empty
    /// flags there; every real code point, unassigned ones included, has a category).
    pub any: bool,
}

/// The Unicode White_Space property (the 25 code points of PropList.txt), which is what
/// llama.cpp's `\s` means.
fn is_white_space(c: u32) -> bool {
    matches!(
        c,
        0x09..=0x0D
            | 0x20
            | 0x85
            | 0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
    )
}

/// The Unicode version of [`flags`]' general categories: llama.cpp's tables are 15.1's, and a
/// code point a later version assigns (U+1C89, U+10D40, ...) is neither letter nor number there
/// — a pre-tokenizer splits it as punctuation, so the ids differ.
pub const UNICODE_VERSION: (u64, u64, u64) = unicode_properties::UNICODE_VERSION;

/// The classes of code point `c` (general category L* letter, N* number).
pub fn flags(c: u32) -> Flags {
    let group = char::from_u32(c).map(|ch| ch.general_category_group());
    Flags {
        letter: group == Some(G::Letter),
        number: group == Some(G::Number),
        whitespace: is_white_space(c),
        any: true,
    }
}

/// GPT-2's byte → code point table: printable Latin-1 bytes map to themselves, the other 68
/// bytes to U+0100 onwards in byte order.
pub fn byte_to_cpt_table() -> [u32; 256] {
    let mut t = [0u32; 256];
    let mut n = 0;
    for b in 0..256u32 {
        let keep =
            (0x21..=0x7E).contains(&b) || (0xA1..=0xAC).contains(&b) || (0xAE..=0xFF).contains(&b);
        t[b as usize] = if keep {
            b
        } else {
            n += 1;
            255 + n
        };
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpt2_byte_table_is_a_bijection_with_the_known_anchors() {
        let t = byte_to_cpt_table();
        assert_eq!(t[b' ' as usize], 0x120); // 'Ġ'
        assert_eq!(t[b'\n' as usize], 0x10A); // 'Ċ'
        assert_eq!(t[0], 0x100);
        assert_eq!(t[b'A' as usize], 'A' as u32);
        assert_eq!(t[0xAD], 0x143);
        let mut seen: Vec<u32> = t.to_vec();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), 256);
    }

    #[test]
    fn decoder_replaces_invalid_bytes_one_at_a_time() {
        assert_eq!(
            decode_utf8("aé€😀".as_bytes()),
            ['a' as u32, 0xE9, 0x20AC, 0x1F600]
        );
        assert_eq!(decode_utf8(b"\x80a"), [REPLACEMENT, 'a' as u32]);
        assert_eq!(decode_utf8(b"\xE2\x82"), [REPLACEMENT, REPLACEMENT]);
        assert_eq!(decode_utf8(b"\xF8"), [REPLACEMENT]);
        // llama.cpp does not reject surrogates or overlong forms: it decodes their bits.
        assert_eq!(decode_utf8(b"\xED\xA0\x80"), [0xD800]);
        assert_eq!(decode_utf8(b"\xC0\x80"), [0]);
        let mut v = Vec::new();
        for c in decode_utf8("aé€😀".as_bytes()) {
            push_utf8(&mut v, c);
        }
        assert_eq!(v, "aé€😀".as_bytes());
    }

    #[test]
    fn classes_follow_the_general_category_and_white_space() {
        assert!(flags('a' as u32).letter && flags('Ä' as u32).letter && flags('中' as u32).letter);
        assert!(flags('7' as u32).number && flags('½' as u32).number && flags('Ⅻ' as u32).number);
        assert!(!flags('\'' as u32).letter && !flags('!' as u32).number);
        for c in [0x20, 0x09, 0x0A, 0x0D, 0x85, 0xA0, 0x3000, 0x2009] {
            assert!(flags(c).whitespace, "{c:#x}");
        }
        assert!(!flags(0x200B).whitespace); // zero width space is Cf, not White_Space
        assert!(flags(0xD800).any && !flags(0xD800).letter);
    }

    #[test]
    fn classes_are_unicode_15_1_s_as_llama_cpp_s_tables() {
        assert_eq!(UNICODE_VERSION, (15, 1, 0));
        // Assigned in 15.1 (CJK Extension I): a letter, as in llama.cpp.
        assert!(flags(0x2EBF0).letter);
        // Assigned in 16.0 (a Cyrillic letter, Garay digits, Kirat Rai digits): neither
        // letter nor number in llama.cpp's tables.
        for c in [0x1C89, 0x10D40, 0x10D4A, 0x16D70, 0x1CCF0] {
            assert!(!flags(c).letter && !flags(c).number, "{c:#x}");
        }
    }
}
