//! `baro-top run`: live decode with telemetry. `--headless` prints one line per pass (the fail
//! word on every line); `--json` one JSON object per line (schema in README.md).

use std::process::ExitCode;

use anyhow::Context;
use baro_engine::session::SessionBuilder;
use baro_engine::telemetry::{Frame, Telemetry};
use clap::Args;
use serde::Serialize;

use crate::{GpuArgs, ModelArgs};

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Print lines instead of the dashboard.
    #[arg(long)]
    pub headless: bool,
    /// One JSON object per pass (implies --headless).
    #[arg(long)]
    pub json: bool,
    /// Include every workgroup's span in the JSON.
    #[arg(long)]
    pub spans: bool,
    /// Stop after N passes, at least 1 (default: 64 headless; the context restarts when full).
    #[arg(long, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub passes: Option<u64>,
    /// Prompt text.
    #[arg(long, short = 'i', default_value = "")]
    pub prompt: String,
    /// Temperature, a finite number >= 0 (0 = greedy).
    #[arg(long, short = 't', default_value_t = 0.0, value_parser = crate::validate::temperature, allow_negative_numbers = true)]
    pub temp: f32,
    /// Top-p, 0..=1.
    #[arg(long, short = 'p', default_value_t = 0.9, value_parser = crate::validate::top_p, allow_negative_numbers = true)]
    pub topp: f32,
    /// Sampler seed; 0 = the current time (as in generate).
    #[arg(long, short = 's', default_value_t = 1, value_parser = crate::validate::seed, allow_negative_numbers = true)]
    pub seed: u64,
    /// Turn the in-kernel event ring off (stage timings disappear; the fail word stays).
    #[arg(long)]
    pub no_instrument: bool,
    /// Positions in the KV cache, 1 up to the model's context (default: 256, or the model's
    /// context if shorter).
    #[arg(long, value_parser = crate::validate::positions, allow_negative_numbers = true)]
    pub ctx: Option<usize>,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// The JSON line schema (documented in README.md).
#[derive(Serialize)]
struct JsonFrame<'a> {
    pass: u64,
    pos: u32,
    token: u32,
    next: u32,
    wall_ns: u64,
    gpu_ns: Option<u64>,
    fail_word: String,
    fail: &'a str,
    torn: bool,
    dropped: u64,
    host_start_ns: Option<u64>,
    stages: Vec<JsonStage<'a>>,
    barriers: &'a [baro_engine::telemetry::BarrierTiming],
    #[serde(skip_serializing_if = "Option::is_none")]
    spans: Option<&'a [baro_engine::telemetry::Span]>,
}

#[derive(Serialize)]
struct JsonStage<'a> {
    name: &'a str,
    level: u32,
    busy_ns: u64,
    charged_ns: u64,
    max_busy_ns: u64,
}

fn json_line(f: &Frame, spans: bool) -> anyhow::Result<String> {
    let j = JsonFrame {
        pass: f.pass,
        pos: f.pos,
        token: f.token,
        next: f.next,
        wall_ns: f.wall_ns,
        gpu_ns: f.gpu_ns,
        fail_word: format!("0x{:08x}", f.fail_word),
        fail: &f.fail_line,
        torn: f.torn,
        dropped: f.dropped,
        host_start_ns: f.host_start_ns,
        stages: f
            .stages
            .iter()
            .map(|s| JsonStage {
                name: &s.name,
                level: s.level,
                busy_ns: s.busy_ns,
                charged_ns: s.charged_ns,
                max_busy_ns: s.max_busy_ns,
            })
            .collect(),
        barriers: &f.barriers,
        spans: spans.then_some(&f.spans[..]),
    };
    Ok(serde_json::to_string(&j)?)
}

fn text_line(f: &Frame) -> String {
    let us = |ns: u64| ns as f64 / 1e3;
    let busy: u64 = f.stages.iter().map(|s| s.busy_ns).sum();
    let bar: u64 = f
        .barriers
        .iter()
        .map(|b| b.arrival_spread_ns + b.release_ns)
        .sum();
    let top = f
        .stages
        .iter()
        .max_by_key(|s| s.busy_ns)
        .map_or(String::new(), |s| {
            format!(" top {} {:.1}us", s.name, us(s.busy_ns))
        });
    format!(
        "pass {:5} pos {:4} tok {:6} -> {:6} wall {:8.1}us gpu {:8.1}us busy {:8.1}us barrier {:7.1}us{}{} | {}",
        f.pass,
        f.pos,
        f.token,
        f.next,
        us(f.wall_ns),
        us(f.gpu_ns.unwrap_or(0)),
        us(busy),
        us(bar),
        top,
        if f.torn { " TORN" } else { "" },
        f.fail_line
    )
}

pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    let model = super::load_model(&a.model)?;
    let positions = match a.ctx {
        Some(n) => {
            crate::validate::positions_fit("--ctx", n, model.config.seq_len)?;
            n
        }
        None => model.config.seq_len.min(256),
    };
    let seed = crate::validate::resolve_seed(a.seed);
    if a.seed == 0 && a.temp > 0.0 {
        note!("run: seed 0 = the current time: seed {seed} (pass -s {seed} to repeat this run)");
    }
    let ctx = super::open_gpu(&a.gpu)?;
    let mut opts = a.gpu.decoder_options(positions);
    opts.instrument = !a.no_instrument;
    let passes = a.passes.or(Some(64));
    let session = SessionBuilder::new(ctx, model, opts)
        .passes(passes)
        .prompt(a.prompt.as_bytes())
        .sampling(a.temp, a.topp, seed)
        .spawn()
        .context("starting the decode session")?;
    let mut failed = false;
    for t in session.rx.iter() {
        match t {
            Telemetry::Start(d) => {
                note!(
                    "run: {} | mode {} grid {} x {} | {} levels, {} stages | instrumented {}",
                    d.model,
                    d.mode,
                    d.grid,
                    d.wg_size,
                    d.levels.len(),
                    d.stages.len(),
                    d.instrumented
                );
            }
            Telemetry::Frame(f) => {
                failed |= f.fail_word != 0;
                let line = if a.json {
                    json_line(&f, a.spans)?
                } else {
                    text_line(&f)
                };
                outln!("{line}").context("writing to stdout")?;
            }
            Telemetry::Clock(c) => {
                let ns = |v: Option<String>| v.map_or("n/a".to_string(), |v| format!("{v} ns"));
                note!(
                    "run: clock sync at pass {}: shader->timestamp {} (±{}), timestamp->host {} (dev {}), drift {}",
                    c.at_pass,
                    ns(c.shader_offset_ns.map(|v| v.to_string())),
                    ns(c.shader_uncertainty_ns.map(|v| v.to_string())),
                    ns(c.host_offset_ns.map(|v| v.to_string())),
                    ns(c.host_deviation_ns.map(|v| v.to_string())),
                    c.drift_ppm
                        .map_or("n/a (first sync)".to_string(), |d| format!("{d:.3} ppm"))
                );
            }
            Telemetry::End {
                passes,
                dropped,
                reason,
            } => {
                note!("run: {passes} passes, {dropped} frames dropped, {reason}");
                break;
            }
        }
    }
    session.join().context("decode session")?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
