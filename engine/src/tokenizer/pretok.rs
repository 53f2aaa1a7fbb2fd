//! The pre-tokenizers of byte-level BPE vocabularies: how text is cut into words before the
//! merges run, exactly as llama.cpp cuts it (its hand-written matchers in `unicode.cpp`, which
//! are what llama.cpp runs for these regexes, quirks included).
//!
//! - `gpt-2`: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
//! - `llama-bpe` (Llama 3): `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//!   ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
//! - `qwen2`: the Llama 3 expression with `\p{N}` (one digit per word) for `\p{N}{1,3}`.
//! - `smollm`: every `\p{N}` code point cut out on its own first, then `gpt-2` on each piece.
//!
//! Every function works on code points and splits a list of piece lengths (in code points)
//! into finer ones, as llama.cpp's `unicode_regex_split` chains its expressions.

use super::unicode::{flags, Flags};

/// A pre-tokenizer llama.cpp names in `tokenizer.ggml.pre`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pre {
    /// `gpt-2` (also what llama.cpp runs for `phi-2`, `mpt`, `olmo`, ... — only the names
    /// below are accepted here).
    Gpt2,
    /// `llama-bpe`, `llama3`, `llama-v3`: Llama 3.
    Llama3,
    /// `qwen2`, `deepseek-r1-qwen`: Qwen2 / Qwen2.5 / Qwen3.
    Qwen2,
    /// `smollm`: digits one by one, then `gpt-2`.
    Smollm,
}

impl Pre {
    /// The pre-tokenizer called `name` in `tokenizer.ggml.pre`, if it is one implemented here.
    pub fn from_name(name: &str) -> Option<Pre> {
        Some(match name {
            "gpt-2" => Pre::Gpt2,
            "llama-bpe" | "llama3" | "llama-v3" => Pre::Llama3,
            "qwen2" | "deepseek-r1-qwen" => Pre::Qwen2,
            "smollm" => Pre::Smollm,
            _ => return None,
        })
    }

    /// The names accepted, for messages.
    pub const NAMES: &'static str =
        "gpt-2, llama-bpe (llama3, llama-v3), qwen2 (deepseek-r1-qwen), smollm";

    /// Cut `cpts` into words: the length of each word in code points, in order, summing to
    /// `cpts.len()`.
    pub fn split(self, cpts: &[u32]) -> Vec<usize> {
        if cpts.is_empty() {
            return Vec::new();
        }
        let whole = [cpts.len()];
        match self {
            Pre::Gpt2 => gpt2(cpts, &whole),
            Pre::Llama3 => llama3(cpts, &whole, 3),
            Pre::Qwen2 => llama3(cpts, &whole, 1),
            Pre::Smollm => gpt2(cpts, &isolate_numbers(cpts, &whole)),
        }
    }
}

/// Looks at code points inside one piece `[ini, end)` of the text: outside it there is
/// nothing (no code point, empty flags), as in llama.cpp's `_get_cpt` / `_get_flags`.
struct Piece<'a> {
    cpts: &'a [u32],
    ini: usize,
    end: usize,
    /// End of the last word cut.
    prev: usize,
    out: &'a mut Vec<usize>,
}

impl Piece<'_> {
    fn cpt(&self, i: usize) -> Option<u32> {
        (self.ini <= i && i < self.end).then(|| self.cpts[i])
    }
    fn flags(&self, i: usize) -> Flags {
        self.cpt(i).map(flags).unwrap_or_default()
    }
    /// Cut a word ending at `end` (nothing when it would be empty).
    fn cut(&mut self, end: usize) {
        if end > self.prev {
            self.out.push(end - self.prev);
        }
        self.prev = end;
    }
    /// `'s|'t|'re|'ve|'m|'ll|'d` at `pos` (ASCII case-folded with `fold`): its end.
    fn contraction(&self, pos: usize, fold: bool) -> Option<usize> {
        if self.cpt(pos) != Some('\'' as u32) || pos + 1 >= self.end {
            return None;
        }
        let low = |i: usize| {
            self.cpt(i)
                .and_then(char::from_u32)
                .map(|c| if fold { c.to_ascii_lowercase() } else { c })
        };
        let a = low(pos + 1)?;
        if matches!(a, 's' | 't' | 'm' | 'd') {
            return Some(pos + 2);
        }
        if pos + 2 < self.end {
            let b = low(pos + 2)?;
            if matches!((a, b), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                return Some(pos + 3);
            }
        }
        None
    }
    /// How many whitespace code points start at `pos`, and the end of the last `\r`/`\n`
    /// among them (0 if none).
    fn whitespace_run(&self, pos: usize) -> (usize, usize) {
        let (mut n, mut last_nl) = (0, 0);
        while self.flags(pos + n).whitespace {
            if matches!(self.cpt(pos + n), Some(0x0D | 0x0A)) {
                last_nl = pos + n + 1;
            }
            n += 1;
        }
        (n, last_nl)
    }
}

fn not_lnw(f: Flags) -> bool {
    !(f.whitespace || f.letter || f.number)
}

/// The GPT-2 expression over each piece of `pieces`.
fn gpt2(cpts: &[u32], pieces: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for &len in pieces {
        let mut p = Piece {
            cpts,
            ini: start,
            end: start + len,
            prev: start,
            out: &mut out,
        };
        start += len;
        let mut pos = p.ini;
        while pos < p.end {
            let c = p.cpt(pos);
            let f = p.flags(pos);
            if let Some(e) = p.contraction(pos, false) {
                p.cut(e);
                pos = e;
                continue;
            }
            let space = c == Some(' ' as u32);
            let f2 = if space { p.flags(pos + 1) } else { f };
            // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: the same shape with three classes.
            let class: Option<fn(Flags) -> bool> = if f2.letter {
                Some(|f| f.letter)
            } else if f2.number {
                Some(|f| f.number)
            } else if not_lnw(f2) && f2.any {
                Some(|f| not_lnw(f) && f.any)
            } else {
                None
            };
            if let Some(class) = class {
                pos += space as usize;
                while class(p.flags(pos)) {
                    pos += 1;
                }
                p.cut(pos);
                continue;
            }
            let (n_ws, _) = p.whitespace_run(pos);
            if n_ws > 1 && p.cpt(pos + n_ws).is_some() {
                // `\s+(?!\S)`: all but the last whitespace, which goes with the next word.
                pos += n_ws - 1;
            } else if n_ws > 0 {
                pos += n_ws;
            } else {
                pos += 1;
            }
            p.cut(pos);
        }
    }
    out
}

/// The Llama 3 expression (`digits` = 3) or Qwen2's (`digits` = 1) over each piece.
fn llama3(cpts: &[u32], pieces: &[usize], digits: usize) -> Vec<usize> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for &len in pieces {
        let mut p = Piece {
            cpts,
            ini: start,
            end: start + len,
            prev: start,
            out: &mut out,
        };
        start += len;
        let mut pos = p.ini;
        while pos < p.end {
            let c = p.cpt(pos);
            let f = p.flags(pos);
            if let Some(e) = p.contraction(pos, true) {
                p.cut(e);
                pos = e;
                continue;
            }
            // `[^\r\n\p{L}\p{N}]?\p{L}+`
            let newline = matches!(c, Some(0x0D | 0x0A));
            if !(newline || f.number) && (f.letter || p.flags(pos + 1).letter) {
                pos += 1;
                while p.flags(pos).letter {
                    pos += 1;
                }
                p.cut(pos);
                continue;
            }
            // `\p{N}{1,digits}`
            if f.number {
                let mut ini = pos;
                while p.flags(pos).number {
                    pos += 1;
                    if pos - ini >= digits {
                        p.cut(pos);
                        ini = pos;
                    }
                }
                p.cut(pos);
                continue;
            }
            // ` ?[^\s\p{L}\p{N}]+[\r\n]*` (llama.cpp tests the flags of `pos` itself for
            // "is a code point", so a lone trailing space is cut here as a word of its own)
            let space = c == Some(' ' as u32);
            let mut f2 = if space { p.flags(pos + 1) } else { f };
            if not_lnw(f2) && f.any {
                pos += space as usize;
                while not_lnw(f2) && f2.any {
                    pos += 1;
                    f2 = p.flags(pos);
                }
                while matches!(p.cpt(pos), Some(0x0D | 0x0A)) {
                    pos += 1;
                }
                p.cut(pos);
                continue;
            }
            let (n_ws, last_nl) = p.whitespace_run(pos);
            if last_nl > 0 {
                // `\s*[\r\n]+`
                pos = last_nl;
            } else if n_ws > 1 && p.cpt(pos + n_ws).is_some() {
                pos += n_ws - 1;
            } else if n_ws > 0 {
                pos += n_ws;
            } else {
                pos += 1;
            }
            p.cut(pos);
        }
    }
    out
}

/// `\p{N}` as llama.cpp's regex fallback runs it: every number code point a piece of its own,
/// the runs between them pieces too.
fn isolate_numbers(cpts: &[u32], pieces: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(pieces.len());
    let mut start = 0;
    for &len in pieces {
        let mut run = 0;
        for &c in &cpts[start..start + len] {
            let f = flags(c);
            // The collapsed text llama.cpp matches on turns whitespace into \v first.
            if f.number && !f.whitespace {
                if run > 0 {
                    out.push(run);
                }
                out.push(1);
                run = 0;
            } else {
                run += 1;
            }
        }
        if run > 0 {
            out.push(run);
        }
        start += len;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenizer::unicode::decode_utf8;

    fn words(pre: Pre, s: &str) -> Vec<String> {
        let cpts = decode_utf8(s.as_bytes());
        let mut at = 0;
        pre.split(&cpts)
            .into_iter()
            .map(|n| {
                let w: String = cpts[at..at + n]
                    .iter()
                    .filter_map(|&c| char::from_u32(c))
                    .collect();
                at += n;
                w
            })
            .collect()
    }

    #[test]
    fn gpt2_cuts_words_with_their_leading_space_and_keeps_the_last_space_of_a_run() {
        assert_eq!(
            words(Pre::Gpt2, "Hello world's  end!!"),
            ["Hello", " world", "'s", " ", " end", "!!"]
        );
        assert_eq!(words(Pre::Gpt2, "a 123 b"), ["a", " 123", " b"]);
        assert_eq!(words(Pre::Gpt2, "x   "), ["x", "   "]);
        assert_eq!(words(Pre::Gpt2, "I'M"), ["I", "'", "M"]);
    }

    #[test]
    fn llama3_folds_contractions_chunks_digits_by_three_and_keeps_newlines_together() {
        assert_eq!(
            words(Pre::Llama3, "I'M 1234567"),
            ["I", "'M", " ", "123", "456", "7"]
        );
        assert_eq!(words(Pre::Llama3, "a \n\n b"), ["a", " \n\n", " b"]);
        assert_eq!(words(Pre::Llama3, "(hi)\n"), ["(hi", ")\n"]);
        assert_eq!(words(Pre::Llama3, "1+ 2"), ["1", "+", " ", "2"]);
        assert_eq!(words(Pre::Qwen2, "x 1234"), ["x", " ", "1", "2", "3", "4"]);
    }

    #[test]
    fn smollm_isolates_digits_before_gpt2() {
        assert_eq!(words(Pre::Smollm, "a 12b"), ["a", " ", "1", "2", "b"]);
        assert_eq!(words(Pre::Gpt2, "a 12b"), ["a", " 12", "b"]);
    }

    #[test]
    fn pre_tokenizers_are_known_by_their_llama_cpp_names_only() {
        assert_eq!(Pre::from_name("llama-bpe"), Some(Pre::Llama3));
        assert_eq!(Pre::from_name("qwen2"), Some(Pre::Qwen2));
        assert_eq!(Pre::from_name("gpt-2"), Some(Pre::Gpt2));
        assert_eq!(Pre::from_name("smollm"), Some(Pre::Smollm));
        assert_eq!(Pre::from_name("deepseek-llm"), None);
        assert_eq!(Pre::from_name("default"), None);
    }
}
