//! Vocabularies from GGUF files, tokenized as llama.cpp's `llama-vocab.cpp` does: the special
//! token partition, byte-level BPE (`tokenizer.ggml.model = gpt2`) and SentencePiece
//! (`llama`), token attributes, and pieces back to bytes.
//!
//! The GGUF side (reading and validating `tokenizer.ggml.*`) is `model::vocab`; this module
//! gets checked arrays.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};

use super::pretok::Pre;
use super::unicode;
use crate::gguf::Value;

/// Token attribute bits (llama.cpp's `llama_token_attr`, the ones its tokenizer reads).
pub mod attr {
    /// No type given or type 0.
    pub const UNDEFINED: u8 = 0;
    /// Type 2.
    pub const UNKNOWN: u8 = 1 << 0;
    /// Type 5.
    pub const UNUSED: u8 = 1 << 1;
    /// Type 1.
    pub const NORMAL: u8 = 1 << 2;
    /// Type 3.
    pub const CONTROL: u8 = 1 << 3;
    /// Type 4.
    pub const USER_DEFINED: u8 = 1 << 4;
    /// Type 6.
    pub const BYTE: u8 = 1 << 5;
}

/// The attribute of a `tokenizer.ggml.token_type` value (0..=6), `None` for any other.
pub fn attr_of_type(t: i64) -> Option<u8> {
    Some(match t {
        0 => attr::UNDEFINED,
        1 => attr::NORMAL,
        2 => attr::UNKNOWN,
        3 => attr::CONTROL,
        4 => attr::USER_DEFINED,
        5 => attr::UNUSED,
        6 => attr::BYTE,
        _ => return None,
    })
}

/// Which tokenizer runs.
#[derive(Clone, Debug)]
pub enum Algo {
    /// SentencePiece as llama.cpp's `llm_tokenizer_spm`.
    Spm {
        /// `tokenizer.ggml.add_space_prefix` (default true).
        add_space_prefix: bool,
    },
    /// Byte-level BPE as llama.cpp's `llm_tokenizer_bpe`.
    Bpe(Box<Bpe>),
}

/// What byte-level BPE needs beyond the vocabulary.
#[derive(Clone, Debug)]
pub struct Bpe {
    /// The pre-tokenizer.
    pub pre: Pre,
    /// Merge ranks keyed by `left ++ [0xFF] ++ right` (0xFF never occurs in UTF-8, so the key
    /// is unambiguous); the first of duplicate merges keeps its rank, as in llama.cpp.
    pub ranks: HashMap<Vec<u8>, u32>,
    /// A word that is a whole token is that token, without merging (llama.cpp's
    /// `ignore_merges`, set for the Llama 3 pre-tokenizer).
    pub ignore_merges: bool,
    /// GPT-2's byte → code point table, UTF-8 encoded.
    pub byte_enc: Vec<Vec<u8>>,
    /// Its inverse.
    pub byte_dec: HashMap<u32, u8>,
}

impl Bpe {
    /// Byte-level BPE data for `pre` from merges already split into (left, right).
    pub fn new(pre: Pre, merges: &[(String, String)]) -> Bpe {
        let mut ranks = HashMap::with_capacity(merges.len());
        for (i, (l, r)) in merges.iter().enumerate() {
            ranks
                .entry(rank_key(l.as_bytes(), r.as_bytes()))
                .or_insert(i as u32);
        }
        let table = unicode::byte_to_cpt_table();
        let byte_enc = table
            .iter()
            .map(|&c| {
                let mut v = Vec::with_capacity(2);
                unicode::push_utf8(&mut v, c);
                v
            })
            .collect();
        let byte_dec = table
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect();
        Bpe {
            pre,
            ranks,
            ignore_merges: pre == Pre::Llama3,
            byte_enc,
            byte_dec,
        }
    }

    fn rank(&self, key: &mut Vec<u8>, l: &[u8], r: &[u8]) -> Option<u32> {
        key.clear();
        key.extend_from_slice(l);
        key.push(0xFF);
        key.extend_from_slice(r);
        self.ranks.get(key.as_slice()).copied()
    }
}

fn rank_key(l: &[u8], r: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(l.len() + r.len() + 1);
    k.extend_from_slice(l);
    k.push(0xFF);
    k.extend_from_slice(r);
    k
}

/// A GGUF vocabulary with everything llama.cpp's tokenizer reads.
#[derive(Clone, Debug)]
pub struct LlamaVocab {
    /// Token texts as stored (an empty one replaced by `[EMPTY_<id>]`, as llama.cpp does).
    pub texts: Vec<String>,
    /// Scores (0 where the file has none).
    pub scores: Vec<f32>,
    /// Attribute bits per token, after llama.cpp's by-text adjustments.
    pub attrs: Vec<u8>,
    /// Text → id; a repeated text maps to its last id, as llama.cpp's map does.
    pub to_id: HashMap<Vec<u8>, u32>,
    /// Control, user-defined and unknown tokens, longest text first (ties by id), the order
    /// the special-token partition tries them in.
    pub special: Vec<u32>,
    /// The tokenizer.
    pub algo: Algo,
    /// BOS / EOS / unknown ids.
    pub bos: Option<u32>,
    /// End of sequence.
    pub eos: Option<u32>,
    /// Unknown token (SPM byte fallback's last resort).
    pub unk: Option<u32>,
    /// Add BOS / EOS when special tokens are added (`add_bos_token` / `add_eos_token`).
    pub add_bos: bool,
    /// See `add_bos`.
    pub add_eos: bool,
    /// Ids that end generation, ascending.
    pub eog: Vec<u32>,
    /// The file's `tokenizer.*` metadata, kept to write the vocabulary back unchanged.
    pub meta: Vec<(String, Value)>,
}

/// A piece of prompt text after the special-token partition.
enum Frag {
    Text(usize, usize),
    Token(u32),
}

impl LlamaVocab {
    fn id(&self, text: &[u8]) -> Option<u32> {
        self.to_id.get(text).copied()
    }

    /// llama.cpp's `tokenize(text, add_special, parse_special)`.
    pub fn tokenize(
        &self,
        text: &[u8],
        add_bos: bool,
        add_eos: bool,
        parse_special: bool,
    ) -> Vec<u32> {
        let frags = self.partition(text, parse_special);
        let mut out = Vec::with_capacity(text.len() / 2 + 2);
        if add_bos {
            out.extend(self.bos);
        }
        match &self.algo {
            Algo::Spm { add_space_prefix } => {
                let mut prev_special = true;
                for f in &frags {
                    match *f {
                        Frag::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                        Frag::Text(a, n) => {
                            let mut s = Vec::with_capacity(n + 3);
                            if *add_space_prefix && prev_special {
                                s.extend_from_slice("\u{2581}".as_bytes());
                            }
                            for &b in &text[a..a + n] {
                                if b == b' ' {
                                    s.extend_from_slice("\u{2581}".as_bytes());
                                } else {
                                    s.push(b);
                                }
                            }
                            self.spm(&s, &mut out);
                            prev_special = false;
                        }
                    }
                }
            }
            Algo::Bpe(bpe) => {
                for f in &frags {
                    match *f {
                        Frag::Token(id) => out.push(id),
                        Frag::Text(a, n) => self.bpe(bpe, &text[a..a + n], &mut out),
                    }
                }
            }
        }
        if add_eos {
            out.extend(self.eos);
        }
        out
    }

    /// Split `text` at every occurrence of a special token (longest first), as llama.cpp's
    /// `tokenizer_st_partition`: control and unknown tokens only with `parse_special`,
    /// user-defined ones always.
    fn partition(&self, text: &[u8], parse_special: bool) -> Vec<Frag> {
        let mut frags = Vec::new();
        if text.is_empty() {
            return frags;
        }
        frags.push(Frag::Text(0, text.len()));
        for &id in &self.special {
            let a = self.attrs[id as usize];
            if !parse_special && a & (attr::CONTROL | attr::UNKNOWN) != 0 {
                continue;
            }
            let pat = self.texts[id as usize].as_bytes();
            if !frags
                .iter()
                .any(|f| matches!(*f, Frag::Text(s, n) if find(&text[s..s + n], pat).is_some()))
            {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Frag::Text(mut s, mut n) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(at) = find(&text[s..s + n], pat) {
                    if at > 0 {
                        next.push(Frag::Text(s, at));
                    }
                    next.push(Frag::Token(id));
                    s += at + pat.len();
                    n -= at + pat.len();
                }
                if n > 0 {
                    next.push(Frag::Text(s, n));
                }
            }
            frags = next;
        }
        frags
    }

    /// llama.cpp's `llm_tokenizer_spm_session::tokenize` on escaped text.
    fn spm(&self, s: &[u8], out: &mut Vec<u32>) {
        struct Sym {
            start: usize,
            n: usize,
            prev: Option<usize>,
            next: Option<usize>,
        }
        #[derive(PartialEq)]
        struct Bigram {
            score: f32,
            left: usize,
            right: usize,
            size: usize,
        }
        impl Eq for Bigram {}
        impl PartialOrd for Bigram {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Bigram {
            // Highest score first, then the leftmost. Scores compare as llama.cpp's `<` and
            // `==` compare them: -0.0 ties 0.0 (then the leftmost pair merges), where
            // `total_cmp` alone would rank 0.0 first. A NaN (a malformed file's) keeps
            // total_cmp's place, so the order stays total.
            fn cmp(&self, o: &Self) -> Ordering {
                let key = |x: f32| if x == 0.0 { 0.0 } else { x };
                key(self.score)
                    .total_cmp(&key(o.score))
                    .then(o.left.cmp(&self.left))
            }
        }
        let mut syms: Vec<Sym> = Vec::with_capacity(s.len());
        let mut at = 0;
        while at < s.len() {
            let n = unicode::utf8_len(s[at]).min(s.len() - at);
            let i = syms.len();
            syms.push(Sym {
                start: at,
                n,
                prev: i.checked_sub(1),
                next: (at + n < s.len()).then_some(i + 1),
            });
            at += n;
        }
        let mut queue = BinaryHeap::new();
        let add =
            |syms: &[Sym], queue: &mut BinaryHeap<Bigram>, l: Option<usize>, r: Option<usize>| {
                let (Some(l), Some(r)) = (l, r) else { return };
                let size = syms[l].n + syms[r].n;
                let start = syms[l].start;
                if let Some(id) = self.id(&s[start..start + size]) {
                    queue.push(Bigram {
                        score: self.scores[id as usize],
                        left: l,
                        right: r,
                        size,
                    });
                }
            };
        for i in 1..syms.len() {
            add(&syms, &mut queue, Some(i - 1), Some(i));
        }
        while let Some(b) = queue.pop() {
            let (ln, rn) = (syms[b.left].n, syms[b.right].n);
            if ln == 0 || rn == 0 || ln + rn != b.size {
                continue; // one side has merged since
            }
            syms[b.left].n += rn;
            syms[b.right].n = 0;
            let rnext = syms[b.right].next;
            syms[b.left].next = rnext;
            if let Some(x) = rnext {
                syms[x].prev = Some(b.left);
            }
            add(&syms, &mut queue, syms[b.left].prev, Some(b.left));
            add(&syms, &mut queue, Some(b.left), syms[b.left].next);
        }
        let mut i = if syms.is_empty() { None } else { Some(0) };
        while let Some(k) = i {
            let sym = &syms[k];
            let piece = &s[sym.start..sym.start + sym.n];
            match self.id(piece) {
                Some(id) => out.push(id),
                // A symbol that is no token is a single code point (merges only make tokens):
                // its bytes as <0xXX> tokens, else as one-byte tokens, else <unk> (where
                // llama.cpp would throw).
                None => {
                    for &b in piece {
                        let id = self
                            .id(format!("<0x{b:02X}>").as_bytes())
                            .or_else(|| self.id(&[b]))
                            .or(self.unk);
                        out.extend(id);
                    }
                }
            }
            i = sym.next;
        }
    }

    /// llama.cpp's `llm_tokenizer_bpe_session::tokenize` on one text fragment.
    fn bpe(&self, bpe: &Bpe, text: &[u8], out: &mut Vec<u32>) {
        let cpts = unicode::decode_utf8(text);
        let mut key = Vec::new();
        let mut word = Vec::new();
        let mut at = 0;
        for len in bpe.pre.split(&cpts) {
            // The word's code points, re-encoded, each byte mapped through GPT-2's table.
            word.clear();
            let mut raw = Vec::with_capacity(len * 4);
            for &c in &cpts[at..at + len] {
                unicode::push_utf8(&mut raw, c);
            }
            at += len;
            for &b in &raw {
                word.extend_from_slice(&bpe.byte_enc[b as usize]);
            }
            if bpe.ignore_merges {
                if let Some(id) = self.id(&word) {
                    out.push(id);
                    continue;
                }
            }
            self.bpe_word(bpe, &word, &mut key, out);
        }
    }

    fn bpe_word(&self, bpe: &Bpe, w: &[u8], key: &mut Vec<u8>, out: &mut Vec<u32>) {
        // Symbols: start, length (0 once merged away), next.
        let mut start = Vec::new();
        let mut n = Vec::new();
        let mut at = 0;
        while at < w.len() {
            let l = unicode::utf8_len(w[at]).min(w.len() - at);
            start.push(at);
            n.push(l);
            at += l;
        }
        let count = start.len();
        let mut next: Vec<Option<usize>> = (0..count)
            .map(|i| (i + 1 < count).then_some(i + 1))
            .collect();
        let mut prev: Vec<Option<usize>> = (0..count).map(|i| i.checked_sub(1)).collect();
        // (rank, left) ascending: lowest rank first, then the leftmost.
        let mut queue: BinaryHeap<Reverse<(u32, usize, usize, usize)>> = BinaryHeap::new();
        let push = |queue: &mut BinaryHeap<_>,
                    key: &mut Vec<u8>,
                    n: &[usize],
                    l: Option<usize>,
                    r: Option<usize>| {
            let (Some(l), Some(r)) = (l, r) else { return };
            let left = &w[start[l]..start[l] + n[l]];
            let right = &w[start[r]..start[r] + n[r]];
            if let Some(rank) = bpe.rank(key, left, right) {
                queue.push(Reverse((rank, l, r, n[l] + n[r])));
            }
        };
        for i in 1..count {
            push(&mut queue, key, &n, Some(i - 1), Some(i));
        }
        while let Some(Reverse((_, l, r, size))) = queue.pop() {
            if n[l] == 0 || n[r] == 0 || n[l] + n[r] != size {
                continue; // outdated
            }
            n[l] += n[r];
            n[r] = 0;
            next[l] = next[r];
            if let Some(x) = next[r] {
                prev[x] = Some(l);
            }
            push(&mut queue, key, &n, prev[l], Some(l));
            push(&mut queue, key, &n, Some(l), next[l]);
        }
        for i in 0..count {
            if n[i] == 0 {
                continue;
            }
            let piece = &w[start[i]..start[i] + n[i]];
            match self.id(piece) {
                Some(id) => out.push(id),
                // llama.cpp looks each byte of the (encoded) symbol up as a one-byte token and
                // drops the ones that are not.
                None => out.extend(piece.iter().filter_map(|&b| self.id(&[b]))),
            }
        }
    }

    /// The bytes token `id` stands for, as llama.cpp's `token_to_piece(special = true)`:
    /// control, unknown and user-defined tokens their text; normal ones decoded (SPM `▁` →
    /// space, byte-level BPE code points → bytes); byte tokens their byte; unused and
    /// undefined ones nothing.
    pub fn piece(&self, id: u32) -> Vec<u8> {
        let Some(text) = self.texts.get(id as usize) else {
            return Vec::new();
        };
        let a = self.attrs[id as usize];
        if a & (attr::CONTROL | attr::UNKNOWN | attr::USER_DEFINED) != 0 {
            return text.as_bytes().to_vec();
        }
        if a & attr::NORMAL != 0 {
            return match &self.algo {
                Algo::Spm { .. } => text.replace('\u{2581}', " ").into_bytes(),
                Algo::Bpe(bpe) => {
                    let mut v = Vec::with_capacity(text.len());
                    for c in text.chars() {
                        match bpe.byte_dec.get(&(c as u32)) {
                            Some(&b) => v.push(b),
                            None => {
                                // llama.cpp's marker for a code point outside the table.
                                v.extend_from_slice(b"[UNK_BYTE_0x");
                                let mut e = [0u8; 4];
                                for b in c.encode_utf8(&mut e).bytes() {
                                    v.extend_from_slice(format!("{b:02x}").as_bytes());
                                }
                                v.extend_from_slice(text.as_bytes());
                                v.push(b']');
                            }
                        }
                    }
                    v
                }
            };
        }
        if a & attr::BYTE != 0 {
            return super::byte_piece_value(text.as_bytes())
                .map(|b| vec![b])
                .unwrap_or_default();
        }
        Vec::new()
    }

    /// Whether `id` renders only when special tokens are asked for (control or unknown).
    pub fn is_special(&self, id: u32) -> bool {
        self.attrs
            .get(id as usize)
            .is_some_and(|a| a & (attr::CONTROL | attr::UNKNOWN) != 0)
    }
}

/// The first position of `pat` in `hay`.
fn find(hay: &[u8], pat: &[u8]) -> Option<usize> {
    if pat.is_empty() || pat.len() > hay.len() {
        return None;
    }
    let first = pat[0];
    let last = hay.len() - pat.len();
    let mut i = 0;
    while i <= last {
        match hay[i..=last].iter().position(|&b| b == first) {
            Some(k) => i += k,
            None => return None,
        }
        if &hay[i..i + pat.len()] == pat {
            return Some(i);
        }
        i += 1;
    }
    None
}

mod build;
pub use build::{ModelSpec, Spec, SpecialIds};

#[cfg(test)]
mod tests {
    use super::build::{ModelSpec, Spec, SpecialIds};
    use super::LlamaVocab;

    /// An SPM vocabulary of "a", "b", "c" (ids 3–5) and the merges "ab" (6) and "bc" (7)
    /// scoring `ab` and `bc`.
    fn abc(ab: f32, bc: f32) -> LlamaVocab {
        let tokens = [
            ("<unk>", 0.0),
            ("<s>", 0.0),
            ("</s>", 0.0),
            ("a", -1.0),
            ("b", -1.0),
            ("c", -1.0),
            ("ab", ab),
            ("bc", bc),
        ];
        LlamaVocab::build(Spec {
            model: ModelSpec::Spm {
                add_space_prefix: Some(false),
            },
            tokens: tokens.iter().map(|(t, _)| t.to_string()).collect(),
            scores: Some(tokens.iter().map(|(_, s)| *s).collect()),
            attrs: None,
            ids: SpecialIds::default(),
            add_bos: None,
            add_eos: None,
            meta: vec![],
        })
    }

    #[test]
    fn an_spm_merge_scoring_minus_zero_ties_one_scoring_zero_and_the_leftmost_pair_wins() {
        // llama.cpp's bigram queue orders by `<` and `==` on the score, then the leftmost
        // pair: -0.0 and 0.0 tie, so "ab" merges before "bc" whichever of the two it scores.
        for (ab, bc) in [(-0.0, 0.0), (0.0, -0.0)] {
            let v = abc(ab, bc);
            assert_eq!(
                v.tokenize(b"abc", false, false, false),
                [6, 5],
                "ab {ab}, bc {bc}"
            );
        }
        // A higher score still wins over the leftmost pair.
        assert_eq!(
            abc(-0.5, -0.25).tokenize(b"abc", false, false, false),
            [3, 7]
        );
    }
}
