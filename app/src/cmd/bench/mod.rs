//! `baro-top bench`: decode throughput over a set of prompts, prompt and generation timed
//! separately, paired and alternating between arms (dispatch style × event ring on/off) so
//! every arm sees the same machine conditions (the measurement loop is the engine's `bench`).
//! Statistics are taken within one power mode where the passes' modes are known; the
//! bitwise parity of the arms' logits is checked. `bench ab` compares two arms given as
//! option strings, or two binaries.
//!
//! The GPU's host lock is held for the whole bench (waiting for another timing run, or with
//! `--no-wait` running anyway and labelling every pass contended).

pub mod ab;
pub mod output;
pub mod prompts;
pub mod rec;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context};
use baro_engine::bench::{run_bench, Arm, BenchConfig, BenchReport};
use baro_engine::device::Device;
use baro_engine::model::Model;
use baro_engine::sensors::host_lock::{self, HostLock, LockError};
use baro_engine::telemetry::labels::ModeConfig;
use clap::{Args, Subcommand, ValueEnum};

use crate::args::{DispatchSet, GpuArgs, ModelArgs, TimingArgs};
use output::{ArmInfo, Format, Meta};

/// Each arm's pipelines as the driver's compiler reports them (registers, spills), one
/// line each on stderr; nothing where the driver reports none. And where an arm runs without
/// the device's clock (its unit is not the ns), why: its kernels are not the clocked ones.
pub(crate) fn note_pipelines(report: &BenchReport) {
    for a in &report.arms {
        if let Some(why) = &a.device_clock_off {
            note!("bench: arm {}: {why}", a.arm.name);
        }
        for p in &a.pipelines {
            note!(
                "bench: arm {} pipeline {}: {}",
                a.arm.name,
                p.pipeline,
                p.summary()
            );
        }
    }
}

/// `--instrument`: the in-kernel event ring off, on, or both as separate arms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Instrument {
    /// Ring off (the production configuration).
    Off,
    /// Ring on.
    On,
    /// Both, as paired arms (the ring's overhead).
    Both,
}

/// What every bench measures: the model, the prompts, the generated tokens, how results are
/// printed, and how the GPU lock is taken.
#[derive(Args, Debug, Clone)]
pub struct Workload {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Tokens generated per sample after the prompt (greedy), at least 1; prompt plus tokens
    /// must fit the model's context.
    #[arg(long, default_value_t = 128, value_parser = crate::validate::positions, allow_negative_numbers = true)]
    pub tokens: usize,
    /// Prompts file, one prompt a line (default: 20 built-in story openings).
    #[arg(long, value_name = "FILE")]
    pub prompts: Option<PathBuf>,
    /// Positions of context before every prompt, as llama-bench's -d: the passes run at
    /// positions D.. and attend over D cache rows, which are zeros rather than a decoded
    /// text (a pass costs the same whatever it reads), so decode at depth is measured without
    /// decoding D tokens first. The generated tokens are then no real text's continuation.
    #[arg(long, default_value_t = 0, value_name = "D", value_parser = crate::validate::depth, allow_negative_numbers = true)]
    pub depth: usize,
    #[command(flatten)]
    pub timing: TimingArgs,
    /// Output format: a text table, or llama-bench-like rows (json, jsonl, csv, md).
    #[arg(long, short = 'o', value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub sub: Option<BenchSub>,
    #[command(flatten)]
    pub work: Workload,
    /// Repetitions of the prompt set per arm (arms alternate every prompt), at least 1.
    #[arg(long, default_value_t = 5, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub runs: u64,
    /// Dispatch styles to measure (both: paired arms).
    #[arg(long, value_enum, default_value_t = DispatchSet::Both)]
    pub dispatch: DispatchSet,
    /// The in-kernel event ring in the measured arms.
    #[arg(long, value_enum, default_value_t = Instrument::Off)]
    pub instrument: Instrument,
    /// Same as `-o json`.
    #[arg(long, conflicts_with = "output")]
    pub json: bool,
    /// Also write the rows as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Run as `bench ab --a-binary`'s child: the parent holds the GPU lock.
    #[arg(long, hide = true)]
    pub ab_child: bool,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

#[derive(Subcommand, Debug)]
pub enum BenchSub {
    /// A/B two arms (option strings, or two binaries) in alternating pairs: medians, Δ%,
    /// logits parity, and a frozen prediction's verdict.
    Ab(ab::AbArgs),
    /// The dashboard's cost: render and ingest on synthetic telemetry, or (--live) tok/s
    /// with and without the dashboard on a live session.
    Ui(super::bench_ui::UiBenchArgs),
    /// The recorder's cost inside one session: recording switched off and on every --block
    /// passes; per-pass wall time per arm, Δ% and its spread over block pairs.
    Rec(rec::RecBenchArgs),
}

/// The model, its prompts' tokens and the open device, checked for the workload.
pub struct Prepared {
    pub model: Model,
    pub prompts: Vec<Vec<u32>>,
    pub device: Device,
}

/// Load the model, read and tokenise the prompts, open the device (refusing a CPU device
/// without `--allow-cpu`).
pub fn prepare(w: &Workload, gpu: &GpuArgs) -> anyhow::Result<Prepared> {
    let model = super::load_model(&w.model)?;
    // Position 0 (or D with --depth D) is BOS; each token after it takes one more position.
    if w.depth + w.tokens >= model.config.seq_len {
        let at = if w.depth > 0 {
            format!(" at --depth {}", w.depth)
        } else {
            String::new()
        };
        bail!(
            "--tokens {}{at} does not fit the model's context of {} positions (at most {} tokens after BOS)",
            w.tokens,
            model.config.seq_len,
            model.config.seq_len.saturating_sub(w.depth + 1)
        );
    }
    let list = match &w.prompts {
        Some(p) => prompts::read_file(p)?,
        None => prompts::builtin(),
    };
    let prompts = prompts::tokenize(
        &list,
        &model.tokenizer,
        w.tokens,
        w.depth,
        model.config.seq_len,
    )?;
    let device = super::open_gpu(gpu)?;
    if device.info().kind.is_cpu() && !w.timing.allow_cpu {
        bail!(
            "{} is a CPU device: a GPU benchmark refuses it (pass --allow-cpu to measure it anyway)",
            device.info().name
        );
    }
    Ok(Prepared {
        model,
        prompts,
        device,
    })
}

/// Take the GPU's host lock: wait for it (saying who holds it), or with `no_wait` warn once
/// and go on unlocked. Returns the lock (if taken) and whether the run is contended.
pub fn take_lock(dev: &Device, no_wait: bool) -> anyhow::Result<(Option<HostLock>, bool)> {
    let path = host_lock::lock_path(&host_lock::default_dir(), &dev.info().name);
    let who = |h: Option<&baro_engine::telemetry::LockHolder>| {
        h.map_or("an unknown process".to_string(), |h| h.to_string())
    };
    if no_wait {
        return match HostLock::try_lock(&path, host_lock::this_process()) {
            Ok(l) => Ok((Some(l), false)),
            Err(LockError::Held { holder, .. }) => {
                note!(
                    "bench: --no-wait: another timing run holds this GPU ({}): benchmarking anyway; every pass is labelled contended",
                    who(holder.as_ref())
                );
                Ok((None, true))
            }
            Err(e) => Err(e).context("taking the GPU's host lock"),
        };
    }
    let l = HostLock::lock_wait(
        &path,
        host_lock::this_process(),
        None,
        Duration::from_millis(200),
        |h| {
            note!(
                "bench: waiting for the GPU's host lock {}, held by {} (--no-wait benchmarks anyway)",
                path.display(),
                who(h)
            )
        },
    )
    .context("taking the GPU's host lock")?;
    Ok((Some(l), false))
}

/// The rows' common fields.
pub fn meta(
    w: &Workload,
    model: &Model,
    dev: &Device,
    prompts: usize,
    runs: u64,
    contended: bool,
) -> Meta {
    let params: u64 = model
        .weights
        .tensors()
        .iter()
        .map(|t| (t.rows * t.cols) as u64)
        .sum();
    Meta {
        model_filename: w
            .model
            .model
            .as_ref()
            .map_or(model.source.clone(), |p| p.display().to_string()),
        model_type: model
            .weights
            .layers
            .first()
            .map_or(model.weights.classifier().ty, |l| l.wq.ty)
            .to_string(),
        model_size: model.weight_bytes(),
        model_n_params: params,
        device: dev.info().name.clone(),
        driver: dev.info().driver.clone(),
        commit: env!("BARO_COMMIT").to_string(),
        prompts,
        runs,
        n_gen: w.tokens,
        n_depth: w.depth,
        contended,
    }
}

/// Print the rows in `format` (and as JSON to `out`).
pub fn emit(
    format: Format,
    meta: &Meta,
    rows: &[output::Row],
    report: &BenchReport,
    out: Option<&Path>,
) -> anyhow::Result<()> {
    if let Some(p) = out {
        crate::files::write_bytes_atomic(p, output::render(Format::Json, rows)?.as_bytes())?;
    }
    let s = match format {
        Format::Text => output::text(meta, rows, report),
        f => output::render(f, rows)?,
    };
    crate::out::stdout_fmt(format_args!("{s}"))?;
    Ok(())
}

/// "at depth D (zeroed cache rows), " where the bench runs at a depth; else nothing.
pub fn depth_note(depth: usize) -> String {
    if depth == 0 {
        String::new()
    } else {
        format!("at depth {depth} (zeroed cache rows), ")
    }
}

/// Say which samples' tokens differed from the parity sweep (nondeterminism).
pub fn note_nondeterminism(report: &BenchReport) {
    for arm in &report.arms {
        for (r, p) in &arm.differing {
            note!(
                "run {r} prompt {p} {}: tokens differ from the parity sweep (nondeterminism)",
                arm.arm.name
            );
        }
    }
}

pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    // Its exit status is a verdict: a reader that goes silences the lines, not the verdict.
    crate::out::verdict_outlives_the_reader();
    match a.sub {
        Some(BenchSub::Ab(x)) => return ab::run(x),
        Some(BenchSub::Ui(u)) => return super::bench_ui::run(u),
        Some(BenchSub::Rec(r)) => return rec::run(r),
        None => {}
    }
    let format = if a.json { Format::Json } else { a.work.output };
    let p = prepare(&a.work, &a.gpu)?;
    // `bench ab`'s parent holds the lock for its children.
    let (_lock, contended) = if a.ab_child {
        (None, false)
    } else {
        take_lock(&p.device, a.work.timing.no_wait)?
    };
    if a.instrument == Instrument::Off && a.gpu.ring_every.is_some() {
        bail!("--ring-every samples the event ring: add --instrument on|both");
    }
    let instr: &[bool] = match a.instrument {
        Instrument::Off => &[false],
        Instrument::On => &[true],
        Instrument::Both => &[true, false],
    };
    let base = a.gpu.decoder_options(
        baro_engine::device::Dispatch::Mega,
        0,
        &p.model,
        p.device.info(),
    );
    let arms: Vec<Arm> = a
        .dispatch
        .dispatches()
        .into_iter()
        .flat_map(|d| instr.iter().map(move |&i| (d, i)))
        .map(|(d, i)| Arm::of(d, i, &base))
        .collect();
    let names: Vec<&str> = arms.iter().map(|a| a.name.as_str()).collect();
    let cfg = BenchConfig {
        prompts: p.prompts.clone(),
        gen_tokens: a.work.tokens,
        runs: a.runs,
        arms: arms.clone(),
        mode: ModeConfig::default(),
        depth: a.work.depth,
    };
    let report = run_bench(&p.device, &p.model, &cfg, |grids| {
        note!(
            "bench: {} | {}{} prompts + {} tokens x {} runs per arm, arms {}, grids {grids:?}, {} pass{} per submission, activations {}, KV cache {}",
            p.model.source,
            depth_note(a.work.depth),
            p.prompts.len(),
            a.work.tokens,
            a.runs,
            names.join(", "),
            base.chain,
            if base.chain == 1 { "" } else { "es" },
            baro_engine::act::act_words(base.act, base.act_auto),
            baro_engine::kv::kv_words(base.kv, base.kv_auto),
        );
    })
    .context("benchmarking")?;
    note_nondeterminism(&report);
    let meta = meta(
        &a.work,
        &p.model,
        &p.device,
        p.prompts.len(),
        a.runs,
        contended,
    );
    note_pipelines(&report);
    let infos: Vec<ArmInfo> = ArmInfo::of_report(&arms, &report, &meta.commit);
    let rows = output::rows(&meta, &infos, &report);
    emit(format, &meta, &rows, &report, a.out.as_deref())?;
    let parity = report.parity();
    if format == Format::Text {
        outln!(
            "parity (bitwise logits of every pass, every arm): {}",
            if parity { "yes" } else { "NO" }
        )?;
    }
    Ok(if parity && report.nondeterministic_samples() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
