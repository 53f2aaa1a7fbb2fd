//! `baro-top run`: headless live decode with telemetry: one line per pass in the shared
//! headless format (`baro_ui::headless`: the fail word on every line, the verdict once the
//! reference has sent it) and a closing summary; `--json` one JSON object per line (schema in
//! docs/stream.md), the summary then on stderr.

use std::process::ExitCode;

use anyhow::Context;
use baro_engine::session::{Check, SessionBuilder, SinkKind};
use baro_engine::telemetry::analysis::JsonLines;
use baro_engine::telemetry::{CheckPlan, Telemetry};
use clap::Args;

use crate::args::{DispatchStyle, GpuArgs, ModelArgs};

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// One JSON object per line, the telemetry stream itself: start, frames, verdicts, end
    /// (schema in docs/stream.md).
    #[arg(long)]
    pub json: bool,
    /// Include every workgroup's span in the JSON.
    #[arg(long)]
    pub spans: bool,
    /// Stop after N passes, at least 1 (default: 64; the context restarts when full).
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
    /// Write the driver's pipeline cache (the device's compiled binaries of this run's decode
    /// pipelines) to FILE once they are built; `bench/sass.py` disassembles NVIDIA's.
    #[arg(long, value_name = "FILE")]
    pub pipeline_cache_out: Option<std::path::PathBuf>,
    /// Positions in the KV cache, 1 up to the model's context (default: 256, or the model's
    /// context if shorter).
    #[arg(long, value_parser = crate::validate::positions, allow_negative_numbers = true)]
    pub ctx: Option<usize>,
    #[command(flatten)]
    pub dispatch: DispatchStyle,
    /// Which passes the shadow CPU reference judges: auto (every pass of small models, the
    /// first 8 positions of every sequence above 256 MB of f32 weights), all, off, or N
    /// (the first N positions of every sequence).
    #[arg(long, default_value = "auto", value_parser = crate::validate::check)]
    pub check: Check,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

fn check_name(p: Option<CheckPlan>) -> String {
    match p {
        None => "off".into(),
        Some(CheckPlan::All) => "every pass".into(),
        Some(CheckPlan::Prefix { positions }) => {
            format!("the first {positions} positions of every sequence (a sample: the model is too big for the f32 reference to follow every pass)")
        }
    }
}

pub fn run(a: RunArgs) -> anyhow::Result<ExitCode> {
    // Its exit status is a verdict: a reader that goes silences the lines, not the verdict.
    crate::out::verdict_outlives_the_reader();
    let model = super::load_model(&a.model)?;
    if let Some(out) = &a.pipeline_cache_out {
        // Before the device: the model (or another input) is refused at once.
        crate::files::check_output(out)?;
    }
    let positions = crate::args::positions(a.ctx, model.config.seq_len)?;
    let seed = crate::validate::resolve_seed(a.seed);
    if a.seed == 0 && a.temp > 0.0 {
        note!("run: seed 0 = the current time: seed {seed} (pass -s {seed} to repeat this run)");
    }
    let dev = super::open_gpu(&a.gpu)?;
    let dispatch = a.dispatch.get();
    let mut opts = a
        .gpu
        .decoder_options(dispatch, positions, &model, dev.info());
    opts.instrument = !a.no_instrument;
    // The engine writes the cache to a private scratch file; the shared writer then puts it
    // at the user's path (refusing an input such as the model, never renaming over a device).
    let mut cache = match &a.pipeline_cache_out {
        Some(out) => {
            let s = crate::files::Scratch::new("pipeline-cache");
            opts.pipeline_cache_out = Some(s.path().to_path_buf());
            Some((out.clone(), s))
        }
        None => None,
    };
    let passes = a.passes.or(Some(64));
    let mut lines = crate::ui::headless::Printer::new(Some(super::live::token_decoder(&model)));
    let mut b = SessionBuilder::new(&dev, model, opts)
        .passes(passes)
        .prompt(a.prompt.as_bytes())
        .sampling(a.temp, a.topp, seed)
        .check(a.check);
    let rx = b.subscribe(SinkKind::Lossy { capacity: 1024 });
    let mut json = JsonLines::new();
    let session = b.spawn().context("starting the decode session")?;
    for t in rx.iter() {
        // The pipelines (and so the cache) are built before the run's first message.
        if let Some((out, s)) = cache.take_if(|(_, s)| s.written()) {
            s.publish(&out)?;
        }
        if a.json {
            lines.count(&t);
            // A frame's attribution warnings come from its spans, before they are left out.
            let line = json.line(t, a.spans)?;
            outln!("{line}")?;
            continue;
        }
        match &t {
            Telemetry::Start(d) => {
                note!(
                    "run: {} | dispatch {} grid {} x {} kv {} act {} | {} levels, {} stages | instrumented {} | reference checks {}",
                    d.model,
                    d.dispatch,
                    d.grid,
                    d.wg_size,
                    d.kv_line(),
                    d.act_line(),
                    d.levels.len(),
                    d.stages.len(),
                    d.instrumented,
                    check_name(d.check)
                );
                if let Some(why) = &d.device_clock_off {
                    note!("run: {why}");
                }
                for p in &d.pipelines {
                    note!("run: pipeline {}: {}", p.pipeline, p.summary());
                }
                note!("run: per pass: gpu = its GPU time (timestamps); wall = host submit to fence, where passes are chained an equal share of their submission's (so it can be below gpu); a pass line waits for its reference verdict");
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
            _ => {}
        }
        for l in lines.push(t) {
            outln!("{l}")?;
        }
    }
    // The closing summary: stdout after the lines, stderr beside JSON (stdout stays JSON).
    if a.json {
        note!("run: {}", lines.summary().line());
    } else {
        for l in lines.finish() {
            outln!("{l}")?;
        }
    }
    // The exit status is the engine's outcome, not what this loop happened to see.
    let outcome = session.wait().context("decode session")?;
    if let Some((out, s)) = cache.take_if(|(_, s)| s.written()) {
        s.publish(&out)?;
    }
    if outcome.failed_checks > 0 {
        note!(
            "run: {} of {} checked passes failed against the CPU reference",
            outcome.failed_checks,
            outcome.checked
        );
    }
    Ok(if outcome.clean() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
