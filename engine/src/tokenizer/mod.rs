//! Tokenizers: SentencePiece-style BPE exactly as llama2.c's `run.c` does it, and the GGUF
//! vocabularies real models carry, tokenized exactly as llama.cpp does ([`llama`]: byte-level
//! BPE with its pre-tokenizers ([`pretok`]), SentencePiece, special tokens).
//!
//! Which one runs is decided by where the vocabulary came from: a llama2.c `tok*.bin`
//! ([`Tokenizer::from_llama2c`]) or plain pieces ([`Tokenizer::new`], the synthetic models) get
//! run.c's algorithm, so the stories260K goldens stay byte-exact; a GGUF's `tokenizer.ggml.*`
//! (`model::vocab`, [`Tokenizer::from_llama_vocab`]) gets llama.cpp's.
//!
//! run.c treats every piece and the prompt as C strings; so does the run.c path wherever that
//! changes a result: a piece with an embedded NUL byte takes part in lookups, merges and output
//! only up to that NUL, and [`Tokenizer::encode`] stops at the first NUL of the text.
//!
//! Where run.c has undefined behaviour this module picks a defined, documented answer instead:
//! - the dummy prefix when the vocabulary has no `" "` piece: the byte-fallback token of
//!   0x20 if there is one, else no prefix token;
//! - byte fallback for a byte without a `<0xXX>` piece: token 0 (`<unk>` by convention);
//! - [`Tokenizer::decode`] of an id outside the vocabulary: an empty piece.

pub mod chat;
pub mod llama;
pub mod pretok;
pub mod stream;
pub mod unicode;

pub use stream::{StreamDecoder, TokenText};

use crate::{Error, Result};

/// Every byte value, so that [`Tokenizer::decode`] can return a one-byte slice for `<0xXX>`
/// pieces (run.c's `byte_pieces`).
static BYTES: [u8; 256] = {
    let mut a = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        a[i] = i as u8;
        i += 1;
    }
    a
};

/// The merge loop's starting best score in run.c: merges scoring at or below it never happen.
const NO_SCORE: f32 = -1e10;

/// The C-string view of `s`: everything before the first NUL byte.
fn c_str(s: &[u8]) -> &[u8] {
    match s.iter().position(|&b| b == 0) {
        Some(i) => &s[..i],
        None => s,
    }
}

/// The byte a GGUF vocabulary's byte token stands for: exactly `<0xHH>` (two hex digits,
/// either case), the form llama.cpp's converters write and its loader reads; a byte token of
/// another form is refused when the vocabulary loads.
pub(crate) fn byte_piece_value(piece: &[u8]) -> Option<u8> {
    match piece {
        [b'<', b'0', b'x', hi, lo, b'>'] => {
            let digit = |c: u8| (c as char).to_digit(16);
            Some((digit(*hi)? * 16 + digit(*lo)?) as u8)
        }
        _ => None,
    }
}

/// The byte run.c's decode reads from a piece, `sscanf(piece, "<0x%02hhX>", &b) == 1`, with
/// glibc's rules for the conversion: the piece (a C string) starts `<0x`; blanks are
/// skipped; then at most two characters: an optional sign, an optional `0x` after a leading
/// 0, hex digits (at least one digit, the `0` counts); the value negated for `-` and cut to a
/// byte. What follows the conversion is not checked (`>` included): `<0x4>` is 0x04, `<0x41>x`
/// 0x41, `<0x-1>` 0xFF, `<0x 43>` 0x43; `<0x>` and `<0xg1>` are no byte.
pub(crate) fn runc_byte_piece(piece: &[u8]) -> Option<u8> {
    let s = c_str(piece).strip_prefix(b"<0x")?;
    let blank = |c: &u8| matches!(c, b' ' | b'\t'..=b'\r');
    let s = &s[s.iter().position(|c| !blank(c)).unwrap_or(s.len())..];
    let (mut width, mut i, mut digits, mut v) = (2usize, 0usize, 0u32, 0u32);
    let neg = s.first() == Some(&b'-');
    if matches!(s.first(), Some(b'+' | b'-')) {
        (i, width) = (1, 1);
    }
    if s.get(i) == Some(&b'0') {
        (i, width, digits) = (i + 1, width - 1, 1);
        if width > 0 && matches!(s.get(i), Some(b'x' | b'X')) {
            (i, width) = (i + 1, width - 1);
        }
    }
    while width > 0 {
        let Some(d) = s.get(i).and_then(|&c| (c as char).to_digit(16)) else {
            break;
        };
        (v, digits, i, width) = (v * 16 + d, digits + 1, i + 1, width - 1);
    }
    (digits > 0).then_some(if neg { v.wrapping_neg() } else { v } as u8)
}

/// run.c's `safe_printf` filter: `None` when nothing would be printed.
///
/// The piece is cut at its first NUL byte (run.c prints C strings). Nothing is printed when
/// that leaves it empty, or leaves a single byte that is neither `isprint` nor `isspace` in the
/// C locale (so lone bytes 0x80..=0xFF from byte fallback print nothing, as in run.c).
pub fn printable(piece: &[u8]) -> Option<&[u8]> {
    let s = c_str(piece);
    match s {
        [] => None,
        [b] if !((0x20..=0x7e).contains(b) || matches!(b, b' ' | b'\t'..=b'\r')) => None,
        _ => Some(s),
    }
}

/// A BPE vocabulary with run.c's encode and decode.
#[derive(Clone, Debug)]
pub struct Tokenizer {
    /// Pieces as raw bytes (spaces are `' '`).
    vocab: Vec<Vec<u8>>,
    /// Merge scores, one per piece.
    scores: Vec<f32>,
    /// The tokenizer file's `max_token_length` (or the longest piece): reported, never trusted.
    max_token_length: usize,
    /// The longest piece in bytes: what the merge buffers are sized by (a header that claims
    /// 2^31 must not allocate gigabytes).
    longest_piece: usize,
    bos_id: u32,
    eos_id: u32,
    /// The id of the piece `<0xXX>` for each byte, where the vocabulary has it.
    byte_fallback: [Option<u32>; 256],
    /// Ids ordered by their C-string piece (bytewise, as `strcmp`), stable for equal pieces, as
    /// run.c's `qsort` of `sorted_vocab` leaves them.
    sorted: Vec<u32>,
    /// A GGUF vocabulary run as llama.cpp runs it; `None` for run.c's algorithm.
    llama: Option<Box<llama::LlamaVocab>>,
}

impl Tokenizer {
    /// Parse a llama2.c tokenizer file (run.c `build_tokenizer`): an i32 `max_token_length`,
    /// then `vocab_size` records of {f32 score, i32 len, len bytes}, all little-endian. BOS is
    /// id 1 and EOS id 2, as run.c hard-codes. Bytes after the last record are an error.
    pub fn from_llama2c(bytes: &[u8], vocab_size: usize) -> Result<Self> {
        let err = |m: String| Error::Tokenizer(format!("llama2.c tokenizer file: {m}"));
        let total = bytes.len();
        let read_4 = |at: usize, what: &str| -> Result<[u8; 4]> {
            at.checked_add(4)
                .and_then(|end| bytes.get(at..end))
                .and_then(|s| s.try_into().ok())
                .ok_or_else(|| {
                    err(format!(
                        "{what} at byte {at:#x} runs past end of file ({total} bytes)"
                    ))
                })
        };
        if vocab_size == 0 {
            return Err(err("vocab_size is 0".into()));
        }
        let max_len = i32::from_le_bytes(read_4(0, "max_token_length")?);
        let max_token_length = usize::try_from(max_len).map_err(|_| {
            err(format!(
                "max_token_length {max_len} at byte 0x0 is negative"
            ))
        })?;
        // Every record takes at least 8 bytes: refuse a vocab size the file cannot hold before
        // allocating for it.
        let room = (total - 4) / 8;
        if vocab_size > room {
            return Err(err(format!(
                "{vocab_size} records (the model's vocabulary size) need at least {} bytes, the file has {total}: it is cut, or belongs to another model",
                vocab_size.saturating_mul(8).saturating_add(4)
            )));
        }
        let mut pieces = Vec::with_capacity(vocab_size);
        let mut scores = Vec::with_capacity(vocab_size);
        let mut at = 4usize;
        for i in 0..vocab_size {
            let rec = at;
            if at == total {
                return Err(err(format!(
                    "the file ends after {i} whole records (byte {at:#x}), but the model's vocabulary size is {vocab_size}: it is cut, or belongs to another model"
                )));
            }
            let score = f32::from_le_bytes(read_4(at, &format!("record {i} score"))?);
            let len = i32::from_le_bytes(read_4(at + 4, &format!("record {i} length"))?);
            at += 8;
            let len = usize::try_from(len).map_err(|_| {
                err(format!(
                    "record {i} at byte {rec:#x}: negative length {len}"
                ))
            })?;
            let piece = at.checked_add(len).and_then(|end| bytes.get(at..end)).ok_or_else(|| {
                err(format!(
                    "record {i} at byte {rec:#x}: length {len} runs past end of file ({total} bytes)"
                ))
            })?;
            pieces.push(piece.to_vec());
            scores.push(score);
            at += len;
        }
        if at != total {
            return Err(err(format!(
                "{} byte{} after the last of {vocab_size} records (the model's vocabulary size) at byte {at:#x}: it belongs to another model, or holds more than a tokenizer",
                total - at,
                if total - at == 1 { "" } else { "s" }
            )));
        }
        Self::build(pieces, scores, max_token_length, 1, 2)
    }

    /// Read a llama2.c `tok*.bin` of `vocab_size` records from `path`. Reads record by record
    /// only as far as the records go (plus one byte to detect trailing data), so a device or
    /// pipe that never ends (`/dev/zero`) is refused after a few KB, not read into memory.
    pub fn read_llama2c_file(path: &std::path::Path, vocab_size: usize) -> Result<Self> {
        let io = |e| Error::io(path, e);
        let mut f = std::io::BufReader::new(crate::input::open_input(path, "tokenizer")?);
        let mut buf = Vec::new();
        let read = |f: &mut std::io::BufReader<std::fs::File>, buf: &mut Vec<u8>, n: u64| {
            let want = buf.len() as u64 + n;
            crate::input::read_up_to(f, buf, want).map_err(io)?;
            Ok::<bool, Error>(buf.len() as u64 == want)
        };
        let mut complete = read(&mut f, &mut buf, 4)?;
        for i in 0..vocab_size {
            if !complete || !read(&mut f, &mut buf, 8)? {
                complete = false;
                break;
            }
            let n = buf.len();
            let len = i32::from_le_bytes([buf[n - 4], buf[n - 3], buf[n - 2], buf[n - 1]]);
            match u64::try_from(len) {
                Ok(len) => complete = read(&mut f, &mut buf, len)?,
                // Named here: the records read so far are not the file's size.
                Err(_) => {
                    return Err(Error::Tokenizer(format!(
                        "llama2.c tokenizer file: record {i} at byte {:#x}: negative length {len}",
                        n - 8
                    )))
                }
            }
        }
        if complete && read(&mut f, &mut buf, 1)? {
            let at = buf.len() - 1;
            // Check the records themselves first; then the trailing data is the only problem.
            Self::from_llama2c(&buf[..at], vocab_size)?;
            let total = std::fs::metadata(path).ok().filter(|m| m.is_file()).map_or(
                "at least 1 byte".to_string(),
                |m| {
                    let n = m.len().saturating_sub(at as u64);
                    format!("{n} byte{}", if n == 1 { "" } else { "s" })
                },
            );
            return Err(Error::Tokenizer(format!(
                "llama2.c tokenizer file: {total} after the last of {vocab_size} records (the model's vocabulary size) at byte {at:#x}: it belongs to another model, or holds more than a tokenizer"
            )));
        }
        Self::from_llama2c(&buf, vocab_size)
    }

    /// A tokenizer from pieces and scores. `max_token_length` is the longest piece.
    pub fn new(pieces: Vec<Vec<u8>>, scores: Vec<f32>, bos_id: u32, eos_id: u32) -> Result<Self> {
        let max_token_length = pieces.iter().map(Vec::len).max().unwrap_or(0);
        Self::build(pieces, scores, max_token_length, bos_id, eos_id)
    }

    /// A tokenizer from GGUF `tokenizer.ggml.tokens` / `tokenizer.ggml.scores`, where spaces
    /// are written as U+2581 `'▁'`.
    pub fn from_gguf_arrays(tokens: &[String], scores: &[f32], bos: u32, eos: u32) -> Result<Self> {
        let pieces = tokens
            .iter()
            .map(|t| t.replace('\u{2581}', " ").into_bytes())
            .collect();
        Self::new(pieces, scores.to_vec(), bos, eos)
    }

    /// A tokenizer that runs `v` as llama.cpp does. Its pieces are what llama.cpp's
    /// `token_to_piece(special = true)` gives; a vocabulary without a BOS or EOS id is refused
    /// (every model baro-top decodes starts from one).
    pub fn from_llama_vocab(v: llama::LlamaVocab) -> Result<Self> {
        let n = v.texts.len();
        let need = |id: Option<u32>, what: &str, key: &str| {
            id.ok_or_else(|| {
                Error::Tokenizer(format!(
                    "the vocabulary of {n} tokens has no {what} token: {key} is missing and llama.cpp's default is outside it"
                ))
            })
        };
        let bos = need(v.bos, "BOS", "tokenizer.ggml.bos_token_id")?;
        let eos = need(v.eos, "EOS", "tokenizer.ggml.eos_token_id")?;
        let pieces = (0..n as u32).map(|i| v.piece(i)).collect();
        let mut t = Self::new(pieces, v.scores.clone(), bos, eos)?;
        t.llama = Some(Box::new(v));
        Ok(t)
    }

    /// The llama.cpp-run vocabulary, for a tokenizer that came from a GGUF file.
    pub fn llama_vocab(&self) -> Option<&llama::LlamaVocab> {
        self.llama.as_deref()
    }

    fn build(
        vocab: Vec<Vec<u8>>,
        scores: Vec<f32>,
        max_token_length: usize,
        bos_id: u32,
        eos_id: u32,
    ) -> Result<Self> {
        let err = |m: String| Err(Error::Tokenizer(m));
        if vocab.is_empty() {
            return err("empty vocabulary".into());
        }
        if vocab.len() != scores.len() {
            return err(format!(
                "{} pieces but {} scores",
                vocab.len(),
                scores.len()
            ));
        }
        if u32::try_from(vocab.len()).is_err() {
            return err(format!(
                "{} pieces do not fit 32-bit token ids",
                vocab.len()
            ));
        }
        for (what, id) in [("BOS", bos_id), ("EOS", eos_id)] {
            if id as usize >= vocab.len() {
                return err(format!(
                    "{what} id {id} is outside the vocabulary of {}",
                    vocab.len()
                ));
            }
        }
        let mut sorted: Vec<u32> = (0..vocab.len() as u32).collect();
        // Stable, like glibc's merge-sort qsort.
        sorted.sort_by(|&a, &b| c_str(&vocab[a as usize]).cmp(c_str(&vocab[b as usize])));
        let longest_piece = vocab.iter().map(Vec::len).max().unwrap_or(0);
        let mut t = Tokenizer {
            vocab,
            scores,
            max_token_length,
            longest_piece,
            bos_id,
            eos_id,
            byte_fallback: [None; 256],
            sorted,
            llama: None,
        };
        for b in 0..=255u8 {
            t.byte_fallback[b as usize] = t.lookup(format!("<0x{b:02X}>").as_bytes());
        }
        Ok(t)
    }

    /// Pieces as raw bytes.
    pub fn pieces(&self) -> &[Vec<u8>] {
        &self.vocab
    }

    /// Merge scores.
    pub fn scores(&self) -> &[f32] {
        &self.scores
    }

    /// Beginning-of-sequence id.
    pub fn bos_id(&self) -> u32 {
        self.bos_id
    }

    /// End-of-sequence id.
    pub fn eos_id(&self) -> u32 {
        self.eos_id
    }

    /// Number of pieces.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len()
    }

    /// The llama2.c file's `max_token_length`, or the longest piece.
    pub fn max_token_length(&self) -> usize {
        self.max_token_length
    }

    /// The pieces as GGUF `tokenizer.ggml.tokens` strings (`' '` written as `'▁'`). Fails when
    /// a piece is not valid UTF-8, since GGUF stores tokens as strings.
    pub fn gguf_tokens(&self) -> Result<Vec<String>> {
        self.vocab
            .iter()
            .enumerate()
            .map(|(id, p)| match std::str::from_utf8(p) {
                Ok(s) => Ok(s.replace(' ', "\u{2581}")),
                Err(e) => Err(Error::Tokenizer(format!(
                    "token {id} ({p:?}) is not valid UTF-8 ({e}), so it cannot be stored as a GGUF token string"
                ))),
            })
            .collect()
    }

    /// The id of the piece equal to `key` as a C string, found as glibc's `bsearch` finds it in
    /// run.c's sorted vocabulary (which matters only when pieces repeat).
    fn lookup(&self, key: &[u8]) -> Option<u32> {
        let (mut lo, mut hi) = (0usize, self.sorted.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            let id = self.sorted[mid];
            match key.cmp(self.piece_c(id)) {
                std::cmp::Ordering::Less => hi = mid,
                std::cmp::Ordering::Greater => lo = mid + 1,
                std::cmp::Ordering::Equal => return Some(id),
            }
        }
        None
    }

    /// The C-string view of piece `id` (empty for an unknown id).
    fn piece_c(&self, id: u32) -> &[u8] {
        self.vocab.get(id as usize).map_or(&[][..], |p| c_str(p))
    }

    /// The score of piece `id`.
    fn score(&self, id: u32) -> f32 {
        self.scores.get(id as usize).copied().unwrap_or(f32::NAN)
    }

    /// run.c's merge loop (merge the adjacent pair whose concatenation scores highest, the
    /// first such pair on ties, until none merges) in O(n log n): the candidate pairs sit in a
    /// heap keyed by (score, earliest position), and an entry whose tokens have since changed
    /// is skipped when it comes up. The same tokens as the quadratic loop in
    /// [`Self::merge_all_reference`], so a megabyte of prompt takes a second, not an hour,
    /// before it is checked against the context.
    fn merge_all(&self, tokens: Vec<u32>) -> Vec<u32> {
        use std::cmp::{Ordering, Reverse};
        use std::collections::BinaryHeap;
        #[derive(PartialEq)]
        struct Cand(f32, Reverse<usize>, u32, u32, u32);
        impl Eq for Cand {}
        impl PartialOrd for Cand {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Cand {
            // Scores compare as run.c's `>` compares them: -0.0 ties 0.0 (then the earlier
            // pair wins), where `total_cmp` would rank 0.0 first. No NaN reaches the heap:
            // only scores above NO_SCORE are pushed.
            fn cmp(&self, o: &Self) -> Ordering {
                self.0
                    .partial_cmp(&o.0)
                    .unwrap_or(Ordering::Equal)
                    .then(self.1.cmp(&o.1))
            }
        }
        let n = tokens.len();
        let mut tok = tokens;
        let mut next: Vec<usize> = (1..=n).collect();
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut alive = vec![true; n];
        let mut buf = Vec::with_capacity(2 * self.longest_piece + 2);
        let mut heap = BinaryHeap::new();
        let push = |heap: &mut BinaryHeap<Cand>, buf: &mut Vec<u8>, i: usize, a: u32, b: u32| {
            if let Some(id) = self.merge_of(a, b, buf) {
                let sc = self.score(id);
                if sc > NO_SCORE {
                    heap.push(Cand(sc, Reverse(i), id, a, b));
                }
            }
        };
        for i in 0..n.saturating_sub(1) {
            push(&mut heap, &mut buf, i, tok[i], tok[i + 1]);
        }
        while let Some(Cand(_, Reverse(i), id, a, b)) = heap.pop() {
            let j = next[i];
            if !alive[i] || j >= n || tok[i] != a || tok[j] != b {
                continue;
            }
            tok[i] = id;
            alive[j] = false;
            next[i] = next[j];
            if next[i] < n {
                prev[next[i]] = i;
            }
            let p = prev[i];
            if p < n {
                push(&mut heap, &mut buf, p, tok[p], id);
            }
            if next[i] < n {
                push(&mut heap, &mut buf, i, id, tok[next[i]]);
            }
        }
        (0..n).filter(|&i| alive[i]).map(|i| tok[i]).collect()
    }

    /// run.c's merge loop as written: quadratic; the reference for [`Self::merge_all`].
    #[cfg(test)]
    fn merge_all_reference(&self, mut tokens: Vec<u32>) -> Vec<u32> {
        let mut buf = Vec::with_capacity(2 * self.longest_piece + 2);
        let mut pairs: Vec<Option<u32>> = tokens
            .windows(2)
            .map(|w| self.merge_of(w[0], w[1], &mut buf))
            .collect();
        loop {
            let mut best_score = NO_SCORE;
            let mut best: Option<(usize, u32)> = None;
            for (i, id) in pairs.iter().enumerate() {
                if let Some(id) = *id {
                    let s = self.score(id);
                    if s > best_score {
                        best_score = s;
                        best = Some((i, id));
                    }
                }
            }
            let Some((idx, id)) = best else { break };
            tokens[idx] = id;
            tokens.remove(idx + 1);
            pairs.remove(idx);
            if idx > 0 {
                pairs[idx - 1] = self.merge_of(tokens[idx - 1], tokens[idx], &mut buf);
            }
            if idx + 1 < tokens.len() {
                pairs[idx] = self.merge_of(tokens[idx], tokens[idx + 1], &mut buf);
            }
        }
        tokens
    }

    /// The token a pair of adjacent tokens merges into, if their concatenation is a piece.
    fn merge_of(&self, a: u32, b: u32, buf: &mut Vec<u8>) -> Option<u32> {
        buf.clear();
        buf.extend_from_slice(self.piece_c(a));
        buf.extend_from_slice(self.piece_c(b));
        self.lookup(buf)
    }

    /// Encode `text` as run.c's `encode()` does: optional BOS; a dummy-prefix `" "` token when
    /// the text is not empty; one token per UTF-8 code point (split byte-wise, at most 4 bytes,
    /// as run.c does), each byte of an unknown one as its byte-fallback token; then merging the
    /// adjacent pair whose concatenation scores highest (the first such pair on ties) until no
    /// pair merges; optional EOS. The text ends at its first NUL byte, as a C string does.
    ///
    /// For a GGUF vocabulary: llama.cpp's tokenizer on the whole text, with BOS only when
    /// `bos` and the vocabulary adds one (`add_bos_token`), EOS likewise, and no special token
    /// parsed from the text ([`Tokenizer::tokenize`] for more).
    pub fn encode(&self, text: &[u8], bos: bool, eos: bool) -> Vec<u32> {
        if let Some(l) = &self.llama {
            return l.tokenize(text, bos && l.add_bos, eos && l.add_eos, false);
        }
        let text = c_str(text);
        let mut tokens: Vec<u32> = Vec::with_capacity(text.len() + 3);
        if bos {
            tokens.push(self.bos_id);
        }
        if !text.is_empty() {
            if let Some(id) = self.lookup(b" ").or(self.byte_fallback[b' ' as usize]) {
                tokens.push(id);
            }
        }
        let mut cp: Vec<u8> = Vec::with_capacity(4);
        for (i, &c) in text.iter().enumerate() {
            if c & 0xC0 != 0x80 {
                cp.clear();
            }
            cp.push(c);
            let next_continues = text.get(i + 1).is_some_and(|&n| n & 0xC0 == 0x80);
            if next_continues && cp.len() < 4 {
                continue;
            }
            match self.lookup(&cp) {
                Some(id) => tokens.push(id),
                None => tokens.extend(
                    cp.iter()
                        .map(|&b| self.byte_fallback[b as usize].unwrap_or(0)),
                ),
            }
            cp.clear();
        }

        let mut tokens = self.merge_all(tokens);
        if eos {
            tokens.push(self.eos_id);
        }
        tokens
    }

    /// The bytes of `token` as run.c's `decode()` gives them: the piece up to its first NUL,
    /// without its leading `' '` when `prev_token` is BOS; a piece that run.c's `sscanf(piece,
    /// "<0x%02hhX>", ..)` reads (after that strip; [`runc_byte_piece`]) is that single raw
    /// byte. Empty for an id outside the vocabulary. Pass the result through [`printable`] to
    /// print what run.c prints.
    ///
    /// For a GGUF vocabulary: [`Tokenizer::decode_special`] without control tokens.
    pub fn decode(&self, prev_token: u32, token: u32) -> &[u8] {
        if self.llama.is_some() {
            return self.decode_special(prev_token, token, false);
        }
        let mut piece = self.piece_c(token);
        if prev_token == self.bos_id {
            if let [b' ', rest @ ..] = piece {
                piece = rest;
            }
        }
        match runc_byte_piece(piece) {
            Some(b) => &BYTES[b as usize..b as usize + 1],
            None => piece,
        }
    }
}

impl Tokenizer {
    /// llama.cpp's `tokenize(text, add_special, parse_special)`: with `add_special`, BOS and
    /// EOS as the vocabulary's `add_bos_token` / `add_eos_token` say; with `parse_special`,
    /// control tokens written in the text are those tokens (user-defined ones always are).
    /// A run.c vocabulary has no special tokens: `add_special` adds BOS, `parse_special` does
    /// nothing.
    pub fn tokenize(&self, text: &[u8], add_special: bool, parse_special: bool) -> Vec<u32> {
        match &self.llama {
            Some(l) => l.tokenize(
                text,
                add_special && l.add_bos,
                add_special && l.add_eos,
                parse_special,
            ),
            None => self.encode(text, add_special, false),
        }
    }

    /// Whether sampling `id` ends a generation: run.c's rule (BOS) for run.c vocabularies,
    /// llama.cpp's end-of-generation set (EOS, EOT, EOM and the control tokens it recognises by
    /// their text) for GGUF ones.
    pub fn is_eog(&self, id: u32) -> bool {
        match &self.llama {
            Some(l) => l.eog.binary_search(&id).is_ok(),
            None => id == self.bos_id,
        }
    }

    /// The end-of-generation ids (see [`Tokenizer::is_eog`]).
    pub fn eog_ids(&self) -> Vec<u32> {
        match &self.llama {
            Some(l) => l.eog.clone(),
            None => vec![self.bos_id],
        }
    }

    /// The id of the token whose text is exactly `text` (GGUF: as stored; run.c: the piece).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        match &self.llama {
            Some(l) => l.to_id.get(text.as_bytes()).copied(),
            None => self.lookup(text.as_bytes()),
        }
    }

    /// Whether `id` is a control or unknown token, which renders only when asked for.
    pub fn is_special(&self, id: u32) -> bool {
        self.llama.as_ref().is_some_and(|l| l.is_special(id))
    }

    /// The bytes of `token` after `prev_token`, control tokens included when `special`.
    ///
    /// run.c vocabularies: [`Tokenizer::decode`] exactly (run.c has no special tokens). GGUF
    /// vocabularies: llama.cpp's piece (byte-level BPE code points back to bytes, SPM `▁` to
    /// spaces, `<0xXX>` to its byte), nothing for a control or unknown token unless `special`;
    /// an SPM vocabulary that adds a space prefix loses that space on the token after BOS,
    /// as the text it encodes had none.
    pub fn decode_special(&self, prev_token: u32, token: u32, special: bool) -> &[u8] {
        let Some(l) = &self.llama else {
            return self.decode(prev_token, token);
        };
        if !special && l.is_special(token) {
            return &[];
        }
        let piece = self.vocab.get(token as usize).map_or(&[][..], |p| &p[..]);
        match (&l.algo, piece) {
            (
                llama::Algo::Spm {
                    add_space_prefix: true,
                },
                [b' ', rest @ ..],
            ) if prev_token == self.bos_id => rest,
            _ => piece,
        }
    }

    /// The file's `tokenizer.chat_template` (GGUF vocabularies only).
    pub fn chat_template(&self) -> Option<&str> {
        let l = self.llama.as_ref()?;
        l.meta
            .iter()
            .find(|(k, _)| k == "tokenizer.chat_template")
            .and_then(|(_, v)| v.as_str())
    }

    /// Whether this vocabulary came from a GGUF file and runs as llama.cpp runs it.
    pub fn is_llama_cpp(&self) -> bool {
        self.llama.is_some()
    }
}

#[cfg(test)]
mod tests;
