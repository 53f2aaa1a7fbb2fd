//! Tokens to text as they are generated.
//!
//! A token of a real vocabulary can end in the middle of a UTF-8 sequence (a `<0xE2>` byte
//! token, or a byte-level BPE token holding the first bytes of an emoji): [`StreamDecoder`]
//! holds such an incomplete tail back until the next token completes it, and never emits
//! invalid UTF-8 (a byte that can start or continue no valid sequence becomes U+FFFD).
//! [`TokenText`] puts it behind a tokenizer (the decoder itself lives in the telemetry crate, so
//! the dashboard can stream a recording's token bytes the same way); for run.c vocabularies it prints exactly what
//! run.c prints (its `safe_printf` filter, bytes as they come), so the goldens stay byte-exact.

pub use baro_telemetry::utf8::StreamDecoder;

use super::{printable, Tokenizer};

/// A tokenizer's text for a stream of token ids.
#[derive(Clone, Debug)]
pub struct TokenText<'a> {
    tok: &'a Tokenizer,
    prev: u32,
    special: bool,
    utf8: StreamDecoder,
}

impl<'a> TokenText<'a> {
    /// Text of the tokens that follow `prev` (BOS for a generation's first token); control
    /// tokens are rendered only with `special`.
    pub fn new(tok: &'a Tokenizer, prev: u32, special: bool) -> Self {
        TokenText {
            tok,
            prev,
            special,
            utf8: StreamDecoder::new(),
        }
    }

    /// The bytes to print for the next token `id`: run.c vocabularies what run.c prints;
    /// GGUF ones valid UTF-8, an incomplete character held back until it completes.
    pub fn push(&mut self, id: u32) -> Vec<u8> {
        let prev = std::mem::replace(&mut self.prev, id);
        if !self.tok.is_llama_cpp() {
            return printable(self.tok.decode(prev, id))
                .map(<[u8]>::to_vec)
                .unwrap_or_default();
        }
        let mut s = String::new();
        self.utf8
            .push(self.tok.decode_special(prev, id, self.special), &mut s);
        s.into_bytes()
    }

    /// What is still held back at the end of the stream (U+FFFD for an incomplete character).
    pub fn finish(&mut self) -> Vec<u8> {
        let mut s = String::new();
        self.utf8.finish(&mut s);
        s.into_bytes()
    }
}
