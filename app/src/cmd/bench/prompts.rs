//! The bench's prompts: 20 built in (short English story openings, in the register of the
//! TinyStories models and plain enough for any llama), or `--prompts FILE`, one a line.
//! Every prompt is tokenised by the model's own tokenizer (BOS first) and must leave room for
//! the generated tokens in the model's context.

use std::path::Path;

use anyhow::bail;
use baro_engine::tokenizer::Tokenizer;

/// The built-in prompts.
pub const BUILTIN: [&str; 20] = [
    "Once upon a time, there was a little girl named Lily.",
    "One day, a small dog found a red ball in the park.",
    "Tom and his mom went to the store to buy some bread.",
    "There was a big tree in the garden, and a bird lived in it.",
    "The sun was shining and the sky was blue.",
    "Sara liked to draw pictures of cats.",
    "A little boy named Ben had a new toy car.",
    "Once upon a time, in a small town, there lived a kind old man.",
    "The cat wanted to catch the fish in the pond.",
    "Mia was sad because she lost her favorite hat.",
    "It was a rainy day, so Max stayed inside and played with blocks.",
    "The bunny hopped across the field to see his friend.",
    "Lucy and Tim built a sand castle at the beach.",
    "A tiny ant was carrying a big leaf home.",
    "Grandma baked cookies for the children.",
    "The little train went up the hill slowly.",
    "Once there was a shy frog who lived by the river.",
    "Anna found a shiny rock and showed it to her dad.",
    "The wind blew the kite high into the sky.",
    "At night, the moon smiled at the sleepy town.",
];

/// A prompt: where it came from (for errors and reports) and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prompt {
    /// `built-in prompt 3` or `FILE line 3`.
    pub origin: String,
    /// The text.
    pub text: String,
}

/// The built-in prompts.
pub fn builtin() -> Vec<Prompt> {
    BUILTIN
        .iter()
        .enumerate()
        .map(|(i, t)| Prompt {
            origin: format!("built-in prompt {}", i + 1),
            text: (*t).to_string(),
        })
        .collect()
}

/// The largest `--prompts` file read (`-`: standard input, to the same cap).
pub const MAX_PROMPTS_FILE: u64 = 16 << 20;

/// Read `--prompts FILE`: one prompt a line; an empty file, a blank line or text that is not
/// UTF-8 is an error naming the file (and line).
pub fn read_file(path: &Path) -> anyhow::Result<Vec<Prompt>> {
    let text = baro_telemetry::input::read_text(path, "--prompts", MAX_PROMPTS_FILE, true)?;
    parse(&text, &path.display().to_string())
}

/// Parse prompt lines (`name` is the file, for messages).
pub fn parse(text: &str, name: &str) -> anyhow::Result<Vec<Prompt>> {
    let mut out = vec![];
    for (i, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            bail!(
                "--prompts {name} line {}: empty line (one prompt a line, none empty)",
                i + 1
            );
        }
        out.push(Prompt {
            origin: format!("{name} line {}", i + 1),
            text: line.to_string(),
        });
    }
    if out.is_empty() {
        bail!("--prompts {name}: empty file (one prompt a line)");
    }
    Ok(out)
}

/// Tokenise every prompt (BOS first) and check that it and `gen` generated tokens fit the
/// context of `seq_len` positions.
pub fn tokenize(
    prompts: &[Prompt],
    tok: &Tokenizer,
    gen: usize,
    depth: usize,
    seq_len: usize,
) -> anyhow::Result<Vec<Vec<u32>>> {
    let at = if depth > 0 {
        format!("--depth {depth} + ")
    } else {
        String::new()
    };
    // No piece is longer than the longest: a prompt of B bytes takes at least B / that many
    // tokens, so one that cannot fit is refused before it is tokenized.
    let longest = tok.pieces().iter().map(Vec::len).max().unwrap_or(1).max(1);
    prompts
        .iter()
        .map(|p| {
            let at_least = 1 + p.text.len().div_ceil(longest);
            if depth + at_least + gen > seq_len {
                bail!(
                    "{}: {at}at least {at_least} prompt tokens (BOS included; {} bytes, no piece longer than {longest}) + --tokens {gen} = {} positions, more than the model's context of {seq_len}",
                    p.origin,
                    p.text.len(),
                    depth + at_least + gen
                );
            }
            let t = tok.encode(p.text.as_bytes(), true, false);
            if depth + t.len() + gen > seq_len {
                bail!(
                    "{}: {at}{} prompt tokens (BOS included) + --tokens {gen} = {} positions, more than the model's context of {seq_len}",
                    p.origin,
                    t.len(),
                    depth + t.len() + gen
                );
            }
            Ok(t)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn twenty_distinct_builtin_prompts() {
        let b = builtin();
        assert_eq!(b.len(), 20);
        let mut t: Vec<_> = b.iter().map(|p| &p.text).collect();
        t.sort();
        t.dedup();
        assert_eq!(t.len(), 20);
    }

    #[test]
    fn prompt_lines_keep_their_line_numbers() {
        let p = parse("a b\r\nc d\n", "f.txt").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[1].origin, "f.txt line 2");
        assert_eq!(p[0].text, "a b");
    }

    #[test]
    fn empty_files_and_blank_lines_are_errors_naming_the_line() {
        let e = parse("", "f.txt").unwrap_err().to_string();
        assert!(e.contains("f.txt") && e.contains("empty file"), "{e}");
        let e = parse("a\n\nb\n", "f.txt").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("empty line"), "{e}");
    }
}
