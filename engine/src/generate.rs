//! The generation loop of llama2.c's run.c, shared by every backend, so `baro-top generate`
//! prints byte for byte what `run` prints for the same model, prompt, steps and sampler.
//!
//! run.c's contract: `steps` counts positions, prompt included (0 or more than the context
//! means the context length); the prompt is encoded with BOS; positions inside the prompt force
//! the next prompt token, after it the sampler picks; sampling BOS ends the text; each piece is
//! decoded against the previous token and printed through `safe_printf`; then one newline.
//!
//! A GGUF vocabulary (run as llama.cpp runs it) keeps that loop with llama.cpp's rules where
//! they differ: BOS is added as the vocabulary says (`add_bos_token`), any end-of-generation
//! token (EOS, EOT, `<|im_end|>`, …: [`Tokenizer::is_eog`]) ends the text, and the text is
//! streamed as valid UTF-8 ([`TokenText`]: a character split across tokens is printed when it
//! completes; control tokens print nothing unless asked).

use std::io::Write;
use std::time::{Duration, Instant};

use crate::sampler::Sampler;
use crate::tokenizer::{TokenText, Tokenizer};
use crate::{Error, Result};

/// A decoder that turns (token, position) into logits, one position at a time, in order.
pub trait Decode {
    /// Positions this decoder can hold.
    fn max_seq(&self) -> usize;
    /// Run `token` at `pos` and return the logits (the sampler may modify them in place).
    fn forward(&mut self, token: u32, pos: usize) -> Result<&mut [f32]>;
}

/// What a generation produced besides the text.
#[derive(Clone, Debug, Default)]
pub struct Generation {
    /// Prompt tokens, BOS first.
    pub prompt: Vec<u32>,
    /// Every token after BOS: forced prompt tokens, then sampled ones.
    pub tokens: Vec<u32>,
    /// Positions run.
    pub positions: usize,
    /// Time from the first emitted token to the end (run.c's tok/s clock).
    pub elapsed: Duration,
}

impl Generation {
    /// run.c's "achieved tok/s": (positions - 1) over the time since the first token.
    pub fn tok_per_s(&self) -> Option<f64> {
        (self.positions > 1 && !self.elapsed.is_zero())
            .then(|| (self.positions - 1) as f64 / self.elapsed.as_secs_f64())
    }
}

/// Effective number of positions for run.c's `-n steps` against a context of `seq_len`.
pub fn effective_steps(steps: usize, seq_len: usize) -> usize {
    if steps == 0 || steps > seq_len {
        seq_len
    } else {
        steps
    }
}

/// How a generation reads its prompt and prints its tokens.
#[derive(Clone, Copy, Debug, Default)]
pub struct GenerateOptions {
    /// Control tokens written in the prompt are those tokens (`--special`, `--chat`).
    pub parse_special: bool,
    /// Control tokens are printed (as their text) instead of nothing.
    pub render_special: bool,
}

/// Run run.c's `generate()`: write the text and the final newline to `out`.
pub fn generate(
    dec: &mut dyn Decode,
    tok: &Tokenizer,
    sampler: &mut Sampler,
    prompt: &[u8],
    steps: usize,
    out: &mut dyn Write,
) -> Result<Generation> {
    generate_with(
        dec,
        tok,
        sampler,
        prompt,
        steps,
        out,
        GenerateOptions::default(),
    )
}

/// `e` with the position it happened at in front of its message.
fn at_position(e: Error, pos: usize) -> Error {
    match e {
        Error::Model(m) => Error::Model(format!("position {pos}: {m}")),
        Error::Invalid(m) => Error::Invalid(format!("position {pos}: {m}")),
        e => e,
    }
}

/// [`generate`] with `opts` (which change nothing for a run.c vocabulary: it has no special
/// tokens).
pub fn generate_with(
    dec: &mut dyn Decode,
    tok: &Tokenizer,
    sampler: &mut Sampler,
    prompt: &[u8],
    steps: usize,
    out: &mut dyn Write,
    opts: GenerateOptions,
) -> Result<Generation> {
    let io = |e| Error::io("<stdout>", e);
    let prompt_tokens = tok.tokenize(prompt, true, opts.parse_special);
    if prompt_tokens.is_empty() {
        return Err(Error::Tokenizer(
            "the prompt encoded to no tokens (this vocabulary adds no BOS: give a prompt)".into(),
        ));
    }
    let steps = steps.min(dec.max_seq());
    let mut g = Generation {
        prompt: prompt_tokens.clone(),
        ..Default::default()
    };
    let mut start: Option<Instant> = None;
    let mut token = prompt_tokens[0];
    let mut text = TokenText::new(tok, token, opts.render_special);
    if tok.is_llama_cpp() && token != tok.bos_id() {
        // A vocabulary that adds no BOS starts with a prompt token: it is text too.
        text = TokenText::new(tok, u32::MAX, opts.render_special);
        let piece = text.push(token);
        out.write_all(&piece).map_err(io)?;
    }
    let mut pos = 0;
    while pos < steps {
        let logits = dec.forward(token, pos)?;
        // Every pass's logits, the prompt's too (the GPU checks its own in the fail word; the
        // CPU decoder has no other check): a NaN must not print as tokens.
        crate::sampler::check_finite(logits).map_err(|e| at_position(e, pos))?;
        let forced = pos + 1 < prompt_tokens.len();
        let next = if forced {
            prompt_tokens[pos + 1]
        } else {
            sampler.sample(logits).map_err(|e| at_position(e, pos))?
        };
        pos += 1;
        // run.c ends on BOS wherever it comes from; a GGUF vocabulary ends on a sampled
        // end-of-generation token (a prompt may hold them: a chat turn's <|eot_id|>).
        if tok.is_eog(next) && (!forced || !tok.is_llama_cpp()) {
            break;
        }
        g.tokens.push(next);
        let piece = text.push(next);
        if !piece.is_empty() {
            out.write_all(&piece).map_err(io)?;
            out.flush().map_err(io)?;
        }
        token = next;
        start.get_or_insert_with(Instant::now);
    }
    out.write_all(&text.finish()).map_err(io)?;
    out.write_all(b"\n").map_err(io)?;
    out.flush().map_err(io)?;
    g.positions = pos;
    g.elapsed = start.map(|s| s.elapsed()).unwrap_or_default();
    Ok(g)
}
