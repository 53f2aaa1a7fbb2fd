//! One module per subcommand.

pub mod bench;
pub mod devices;
pub mod gate;
pub mod generate;
pub mod live;
pub mod model;
pub mod recording;
pub mod run;

use anyhow::Context;
use baro_engine::device::{Device, GpuDecoder};
use baro_engine::model::Model;

use crate::ModelArgs;

/// Load the model the user asked for (the embedded stories260K by default).
pub fn load_model(a: &ModelArgs) -> anyhow::Result<Model> {
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
        Some(p) => Model::open(p, a.tokenizer.as_deref())
            .with_context(|| format!("loading model {}", p.display())),
    }
}

/// Open the Vulkan device the user asked for and say which it is (always: a CPU fallback
/// must never be mistaken for the GPU). The device-dependent options are checked here, for
/// every GPU command.
pub fn open_gpu(g: &crate::GpuArgs) -> anyhow::Result<Device> {
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

/// `baro-top` with no subcommand: live on the first Vulkan device.
pub fn default_run() -> anyhow::Result<std::process::ExitCode> {
    match Device::list() {
        Ok(d) if !d.is_empty() => live_default(),
        other => {
            let why = match other {
                Err(e) => e.to_string(),
                _ => "no Vulkan device found".into(),
            };
            note!("baro-top: {why}.\nNo device to run on, and no recording is shipped yet to replay. Install the lavapipe CPU device with `apt-get install mesa-vulkan-drivers libvulkan1` and run again, or see `baro-top --help`.");
            Ok(std::process::ExitCode::from(2))
        }
    }
}

/// The device case of [`default_run`]: `baro-top live` with its defaults (the dashboard on a
/// terminal, one line per pass otherwise).
fn live_default() -> anyhow::Result<std::process::ExitCode> {
    use clap::Parser;
    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        live: crate::LiveArgs,
    }
    note!("baro-top: live decode on the first Vulkan device (`baro-top live`; q quits). `baro-top --help` lists every command.");
    live::run(P::parse_from(["baro-top"]).live)
}
