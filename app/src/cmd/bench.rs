//! `baro-top bench`: decode throughput, paired and alternating between arms (dispatch style ×
//! event ring on/off), so every arm sees the same machine conditions (the measurement loop is
//! the engine's `bench`). Reports median, minimum and spread per arm, the ratio of medians,
//! and checks that every arm produced the same tokens (parity).

use std::process::ExitCode;

use anyhow::{bail, Context};
use baro_engine::bench::{run_bench, stats, Arm, BenchConfig};
use clap::{Args, ValueEnum};

use crate::{DispatchSet, GpuArgs, ModelArgs};

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

/// `bench` subcommands (without one: decode throughput, the flags below).
#[derive(clap::Subcommand, Debug)]
pub enum BenchSub {
    /// The dashboard's cost: render and ingest on synthetic telemetry, or (--live) tok/s
    /// with and without the dashboard on a live session.
    Ui(super::bench_ui::UiBenchArgs),
}

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub sub: Option<BenchSub>,
    #[command(flatten)]
    pub model: ModelArgs,
    /// Tokens generated per run (greedy, from BOS), at least 1 and less than the model's context.
    #[arg(long, default_value_t = 128, value_parser = crate::validate::positions, allow_negative_numbers = true)]
    pub tokens: usize,
    /// Runs per arm (alternating arms), at least 1.
    #[arg(long, default_value_t = 5, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub runs: u64,
    /// Dispatch styles to measure (both: paired arms and their ratio).
    #[arg(long, value_enum, default_value_t = DispatchSet::Both)]
    pub dispatch: DispatchSet,
    /// The in-kernel event ring in the measured arms.
    #[arg(long, value_enum, default_value_t = Instrument::Off)]
    pub instrument: Instrument,
    /// Allow a CPU device (lavapipe): its numbers say nothing about a GPU.
    #[arg(long)]
    pub allow_cpu: bool,
    /// Print the results as one JSON object on stdout instead of the table (as `--json`
    /// means everywhere: machine-readable lines on stdout).
    #[arg(long)]
    pub json: bool,
    /// Also write the results' JSON object to this file.
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    if let Some(BenchSub::Ui(u)) = a.sub {
        return super::bench_ui::run(u);
    }
    let model = super::load_model(&a.model)?;
    // Position 0 is BOS; each token after it takes one more position.
    if a.tokens >= model.config.seq_len {
        bail!(
            "--tokens {} does not fit the model's context of {} positions (at most {} tokens after BOS)",
            a.tokens,
            model.config.seq_len,
            model.config.seq_len - 1
        );
    }
    let dev = super::open_gpu(&a.gpu)?;
    if dev.info().kind.is_cpu() && !a.allow_cpu {
        bail!("{} is a CPU device: a GPU benchmark refuses it (pass --allow-cpu to measure it anyway)", dev.info().name);
    }
    let instr: &[bool] = match a.instrument {
        Instrument::Off => &[false],
        Instrument::On => &[true],
        Instrument::Both => &[true, false],
    };
    let arms: Vec<Arm> = a
        .dispatch
        .dispatches()
        .into_iter()
        .flat_map(|d| {
            instr.iter().map(move |&i| Arm {
                dispatch: d,
                instrument: i,
            })
        })
        .collect();
    let arm_names: Vec<String> = arms.iter().map(Arm::name).collect();
    let cfg = BenchConfig {
        tokens: a.tokens,
        runs: a.runs,
        decoder: a.gpu.decoder_options(arms[0].dispatch, a.tokens + 1),
        arms,
    };
    let report = run_bench(&dev, &model, &cfg, |grid| {
        note!(
            "bench: {} | {} tokens x {} runs per arm, arms {}, grid {grid}",
            model.source,
            a.tokens,
            a.runs,
            arm_names.join(", "),
        );
    })
    .context("benchmarking")?;
    for arm in &report.arms {
        for r in &arm.differing_runs {
            note!(
                "run {r} {}: tokens differ from run 0 (nondeterminism)",
                arm.arm.name()
            );
        }
    }
    let nondeterministic = report.nondeterministic_runs();
    let parity = report.parity();
    if !a.json {
        print_table(&report, nondeterministic)?;
    }
    if a.json || a.out.is_some() {
        let arms_json: Vec<serde_json::Value> = report
            .arms
            .iter()
            .map(|arm| {
                let (med, lo, hi) = stats(&arm.tok_s);
                serde_json::json!({
                    "arm": arm.arm.name(),
                    "median_tok_s": med,
                    "min_tok_s": lo,
                    "max_tok_s": hi,
                    "runs": arm.tok_s,
                })
            })
            .collect();
        let j = serde_json::json!({
            "model": model.source,
            "device": dev.info().name,
            "driver": dev.info().driver,
            "tokens": a.tokens,
            "grid": report.grid,
            "arms": arms_json,
            "parity": parity,
            "nondeterministic_runs": nondeterministic,
        });
        if let Some(p) = &a.out {
            crate::files::write_bytes_atomic(p, format!("{j}\n").as_bytes())?;
        }
        if a.json {
            outln!("{j}")?;
        }
    }
    Ok(if parity && nondeterministic == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_table(
    report: &baro_engine::bench::BenchReport,
    nondeterministic: usize,
) -> anyhow::Result<()> {
    outln!(
        "{:<12} {:>10} {:>10} {:>10} {:>12} {:>8}",
        "arm",
        "median",
        "min",
        "max",
        "gpu us/tok",
        "runs"
    )?;
    let mut meds = vec![];
    for arm in &report.arms {
        let (med, lo, hi) = stats(&arm.tok_s);
        let (g, _, _) = stats(&arm.gpu_us);
        meds.push(med);
        outln!(
            "{:<12} {:>10.1} {:>10.1} {:>10.1} {:>12.1} {:>8}",
            arm.arm.name(),
            med,
            lo,
            hi,
            g,
            arm.tok_s.len()
        )?;
    }
    let parity = report.parity();
    if report.arms.len() == 2 {
        outln!(
            "ratio {}/{} of median tok/s: {:.3}",
            report.arms[0].arm.name(),
            report.arms[1].arm.name(),
            meds[0] / meds[1]
        )?;
    }
    outln!(
        "parity (same tokens in every arm): {}",
        if parity { "yes" } else { "NO" }
    )?;
    outln!(
        "fail word fired: never (a failing pass aborts the bench); runs whose tokens differed from run 0: {nondeterministic}"
    )?;
    Ok(())
}
