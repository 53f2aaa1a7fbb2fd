//! UTF-8 text from a stream of byte pieces (tokens).
//!
//! A token of a real vocabulary can end in the middle of a UTF-8 sequence (a `<0xE2>` byte
//! token, or a byte-level BPE token holding the first bytes of an emoji or a CJK character):
//! [`StreamDecoder`] holds such an incomplete tail back until the next piece completes it, and
//! never emits invalid UTF-8 (a byte that can start or continue no valid sequence becomes
//! U+FFFD). The engine's generator and the dashboard's tokens panel both stream through it.

/// UTF-8 bytes in, valid UTF-8 out, an incomplete sequence held back across calls.
#[derive(Clone, Debug, Default)]
pub struct StreamDecoder {
    pending: Vec<u8>,
}

impl StreamDecoder {
    /// A decoder holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Append `bytes`; write to `out` every complete character so far (U+FFFD for each
    /// invalid sequence) and keep an incomplete one at the end for the next call.
    pub fn push(&mut self, bytes: &[u8], out: &mut String) {
        self.pending.extend_from_slice(bytes);
        let mut rest = &self.pending[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (ok, tail) = rest.split_at(e.valid_up_to());
                    // `ok` is valid UTF-8 by `valid_up_to`: the fallback never happens.
                    out.push_str(std::str::from_utf8(ok).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &tail[n..];
                        }
                        None => {
                            // An incomplete sequence at the end: wait for its next bytes.
                            rest = tail;
                            break;
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let drop = self.pending.len() - keep;
        self.pending.drain(..drop);
    }

    /// Bytes held back, waiting for the rest of their character.
    pub fn pending(&self) -> &[u8] {
        &self.pending
    }

    /// The end of the stream: what is held back can no longer complete, so it is written as
    /// U+FFFD.
    pub fn finish(&mut self, out: &mut String) {
        if !self.pending.is_empty() {
            out.push_str(&String::from_utf8_lossy(&self.pending));
            self.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(chunks: &[&[u8]]) -> Vec<String> {
        let mut d = StreamDecoder::new();
        let mut outs: Vec<String> = chunks
            .iter()
            .map(|c| {
                let mut s = String::new();
                d.push(c, &mut s);
                s
            })
            .collect();
        let mut s = String::new();
        d.finish(&mut s);
        outs.push(s);
        outs
    }

    #[test]
    fn a_character_split_across_tokens_is_held_back_until_complete() {
        // "€" is E2 82 AC; "😀" is F0 9F 98 80.
        assert_eq!(feed(&[b"a\xE2", b"\x82", b"\xACb"]), ["a", "", "€b", ""]);
        assert_eq!(feed(&[b"\xF0\x9F", b"\x98\x80"]), ["", "😀", ""]);
    }

    #[test]
    fn invalid_bytes_become_replacement_characters_and_never_stall_the_stream() {
        assert_eq!(feed(&[b"\xFFa"]), ["\u{FFFD}a", ""]);
        // A lead byte followed by a non-continuation: the lead is invalid, the rest goes on.
        assert_eq!(feed(&[b"\xE2", b"x"]), ["", "\u{FFFD}x", ""]);
        assert_eq!(feed(&[b"\x80\x80"]), ["\u{FFFD}\u{FFFD}", ""]);
        // An incomplete character at the very end is flushed as U+FFFD.
        assert_eq!(feed(&[b"ok\xE2\x82"]), ["ok", "\u{FFFD}"]);
    }
}
