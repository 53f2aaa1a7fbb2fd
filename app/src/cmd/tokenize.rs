//! `baro-top tokenize`: a model file's tokenizer on a text, as llama.cpp's `llama-tokenize`
//! prints it (one `id -> 'piece'` line per token, or `--ids` as one list), so the tokenizer
//! can be checked by hand against llama.cpp on the same file.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context};
use baro_engine::gguf::GgufFile;
use baro_engine::tokenizer::Tokenizer;
use clap::Args;

/// Arguments of `tokenize`.
#[derive(Args, Debug)]
pub struct TokenizeArgs {
    /// GGUF file whose vocabulary (`tokenizer.ggml.*`) to use; tensors are not needed (a
    /// vocabulary-only file works). Default: the embedded stories260K tokenizer (run.c's).
    #[arg(long, short = 'm')]
    pub model: Option<PathBuf>,
    /// Print the ids only, as `[1, 2, 3]`.
    #[arg(long)]
    pub ids: bool,
    /// Parse control tokens written in the text (`<|eot_id|>`, `<|im_start|>`, …) as those
    /// tokens; without it they are tokenized as plain text.
    #[arg(long)]
    pub special: bool,
    /// Add no BOS (nor EOS) even where the vocabulary adds one.
    #[arg(long)]
    pub no_bos: bool,
    /// The text to tokenize, byte for byte as given: no backslash escapes (llama-tokenize's
    /// `--no-escape`); bytes that are not UTF-8 are tokenized as llama.cpp decodes them with a
    /// GGUF vocabulary (each invalid byte U+FFFD), and as run.c encodes them with a llama2.c
    /// tokenizer (byte fallback, `<0xFF>`). A text that starts with `-` goes after `--`.
    pub text: std::ffi::OsString,
}

/// The tokenizer of `path`: a GGUF file's vocabulary, with a clear error for a file that has
/// none.
pub fn tokenizer_of(path: &std::path::Path) -> anyhow::Result<Tokenizer> {
    baro_telemetry::input::open(path, "model", u64::MAX)?;
    let file = GgufFile::open(path).with_context(|| format!("reading {}", path.display()))?;
    if file.get("tokenizer.ggml.tokens").is_none() {
        bail!(
            "{} has no tokenizer: its metadata has no tokenizer.ggml.tokens (a file from `model gen` or one converted without a vocabulary)",
            path.display()
        );
    }
    baro_engine::model::tokenizer_from_gguf(&file)
        .with_context(|| format!("the tokenizer of {}", path.display()))
}

pub fn run(a: TokenizeArgs) -> anyhow::Result<ExitCode> {
    let tok = match &a.model {
        Some(p) => tokenizer_of(p)?,
        None => baro_engine::model::Model::embedded()?.tokenizer,
    };
    // As llama-tokenize: special tokens are added only where the vocabulary adds BOS (then
    // EOS too where it adds EOS); a vocabulary that adds EOS but no BOS gets neither.
    let add_special = !a.no_bos && tok.llama_vocab().is_none_or(|l| l.add_bos);
    let text = std::os::unix::ffi::OsStrExt::as_bytes(a.text.as_os_str());
    let ids = tok.tokenize(text, add_special, a.special);
    // Pieces are bytes from the model file: raw into a pipe (as llama-tokenize prints them),
    // control bytes shown as \xNN on a terminal.
    let tty = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let mut out = crate::out::TerminalSafe::new(crate::out::Stdout::lock(), tty);
    let io = |e| anyhow::anyhow!("writing to stdout: {e}");
    if a.ids {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        writeln!(out, "[{}]", list.join(", ")).map_err(io)?;
    } else {
        for &id in &ids {
            // The piece as llama-tokenize prints it: its bytes, control tokens included.
            let piece = tok.pieces().get(id as usize).map_or(&[][..], |p| &p[..]);
            write!(out, "{id:6} -> '").map_err(io)?;
            out.write_all(piece).map_err(io)?;
            writeln!(out, "'").map_err(io)?;
        }
    }
    out.flush().map_err(io)?;
    Ok(ExitCode::SUCCESS)
}
