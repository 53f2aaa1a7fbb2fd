//! One module per subcommand.

pub mod bench;
pub mod bench_ui;
pub mod default_run;
pub mod devices;
pub mod gate;
pub mod generate;
pub mod live;
pub mod live_record;
pub mod model;
pub mod record;
pub mod recording;
pub mod run;
pub mod serve;
pub mod tokenize;

use anyhow::Context;
use baro_engine::device::{Device, GpuDecoder};
use baro_engine::model::Model;

use crate::args::ModelArgs;

/// Load the model the user asked for (the embedded stories260K by default).
pub fn load_model(a: &ModelArgs) -> anyhow::Result<Model> {
    // Regular files only, opened without blocking (a FIFO or a device is refused by name);
    // remembered as inputs, so no output of this command can replace them.
    for (p, what) in [(&a.model, "model"), (&a.tokenizer, "tokenizer")] {
        if let Some(p) = p {
            baro_telemetry::input::open(p, what, u64::MAX)?;
        }
    }
    match &a.model {
        None => {
            let mut m = Model::embedded().context("loading the embedded stories260K model")?;
            if let Some(t) = &a.tokenizer {
                m.tokenizer =
                    baro_engine::tokenizer::Tokenizer::read_llama2c_file(t, m.config.vocab_size)
                        .with_context(|| format!("tokenizer {}", t.display()))?;
            }
            Ok(m)
        }
        Some(p) => open_model_file(p, a.tokenizer.as_deref(), "loading model"),
    }
}

/// [`Model::open`] with the error every command gives: a file that is plainly no model says
/// so (what it starts with), one that may be a damaged model gets the loader's own error;
/// `doing` starts the message ("loading model", "reading").
pub fn open_model_file(
    p: &std::path::Path,
    tokenizer: Option<&std::path::Path>,
    doing: &str,
) -> anyhow::Result<Model> {
    Model::open(p, tokenizer).map_err(|e| match not_a_model(p) {
        Some(why) => anyhow::anyhow!("{doing} {}: {why}", p.display()),
        None => anyhow::Error::new(e).context(format!("{doing} {}", p.display())),
    })
}

/// Why `p` (which failed to load) is no model file at all, where it plainly is not: neither
/// GGUF (magic `GGUF`) nor a llama2.c checkpoint (seven small positive i32s: dim, hidden,
/// layers, heads, kv heads, ±vocab, context). `None` where it may be one, damaged: GGUF, or
/// a header of which at least five fields are plausible (one or two zeroed, negative or huge
/// fields are a damaged checkpoint, and the loader's own error names the field).
fn not_a_model(p: &std::path::Path) -> Option<String> {
    use std::io::Read;
    let mut head = [0u8; 28];
    let f = baro_telemetry::input::open(p, "model", u64::MAX).ok()?.0;
    let n = f.take(28).read(&mut head).ok()?;
    let head = &head[..n];
    if head.starts_with(b"GGUF") {
        return None;
    }
    let ints: Vec<i64> = head
        .chunks_exact(4)
        .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
        .collect();
    let plausible = ints.len() == 7
        && ints
            .iter()
            .enumerate()
            .filter(|&(i, &v)| (1..=1 << 24).contains(&if i == 5 { v.abs() } else { v }))
            .count()
            >= 5;
    if plausible {
        return None;
    }
    let shown: String = head
        .iter()
        .take(16)
        .flat_map(|b| b.escape_ascii())
        .map(char::from)
        .collect();
    let starts = if head.is_empty() {
        "this file is empty".to_string()
    } else {
        format!("this starts with \"{shown}\"")
    };
    Some(format!(
        "not a model file: a model is GGUF (it starts with `GGUF`) or a llama2.c checkpoint (a \
         header of seven small integers), and {starts}"
    ))
}

/// Open the Vulkan device the user asked for and say which it is (always: a CPU fallback
/// must never be mistaken for the GPU). The device-dependent options are checked here, for
/// every GPU command.
pub fn open_gpu(g: &crate::args::GpuArgs) -> anyhow::Result<Device> {
    let dev = Device::open(g.device.as_deref()).context("opening the Vulkan device")?;
    note!("baro-top: {}", dev.describe());
    if let Some(wg) = g.wg_size {
        crate::validate::wg_size_fits(wg, dev.info())?;
    }
    Ok(dev)
}

/// Wraps the GPU decoder for `generate`: prints the fail-word line of every pass to stderr.
pub struct PassLogger {
    dec: GpuDecoder,
}

impl PassLogger {
    pub fn new(dec: GpuDecoder) -> Self {
        note!("baro-top: {}", dec.layout_line());
        PassLogger { dec }
    }
}

impl baro_engine::generate::Decode for PassLogger {
    fn max_seq(&self) -> usize {
        baro_engine::generate::Decode::max_seq(&self.dec)
    }

    fn forward(&mut self, token: u32, pos: usize) -> baro_engine::Result<&mut [f32]> {
        let p = self.dec.step(token, pos)?;
        note!(
            "pass {pos} token {token} -> {} logits {:016x} {}",
            p.argmax,
            p.logits_hash,
            p.fail.line
        );
        if !p.fail.word.ok() {
            return Err(baro_engine::Error::PassFailed {
                pass: pos as u64,
                fail: Box::new(p.fail),
            });
        }
        Ok(self.dec.logits_mut())
    }
}
