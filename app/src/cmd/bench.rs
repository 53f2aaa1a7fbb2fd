//! `baro-top bench`: decode throughput, paired and alternating between arms (modes), so both
//! arms see the same machine conditions. Reports median, minimum and spread per arm, the
//! ratio of medians, and checks that both arms produced the same tokens (parity).

use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context};
use baro_engine::vulkan::{DecoderOptions, DeviceKind, Mode, VulkanDecoder};
use clap::Args;

use crate::{GpuArgs, ModelArgs};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Tokens generated per run (greedy, from BOS), at least 1 and less than the model's context.
    #[arg(long, default_value_t = 128, value_parser = crate::validate::positions, allow_negative_numbers = true)]
    pub tokens: usize,
    /// Runs per arm (alternating arms), at least 1.
    #[arg(long, default_value_t = 5, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub runs: u64,
    /// Arms: comma-separated modes.
    #[arg(long, default_value = "mega,multi")]
    pub arms: String,
    /// Allow a CPU device (lavapipe): its numbers say nothing about a GPU.
    #[arg(long)]
    pub allow_cpu: bool,
    /// Write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// Median, minimum and maximum (NaN for no values; --runs >= 1 means there always are some).
fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let (Some(&lo), Some(&hi)) = (s.first(), s.last()) else {
        return (f64::NAN, f64::NAN, f64::NAN);
    };
    let mid = s.len() / 2;
    let med = if s.len() % 2 == 1 {
        s[mid]
    } else {
        (s[mid - 1] + s[mid]) / 2.0
    };
    (med, lo, hi)
}

pub fn run(a: BenchArgs) -> anyhow::Result<ExitCode> {
    if a.gpu.mode.is_some() {
        bail!("--mode does not apply to bench: it measures the modes given by --arms (e.g. --arms mega,multi)");
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
    let ctx = super::open_gpu(&a.gpu)?;
    if ctx.info.kind == DeviceKind::Cpu && !a.allow_cpu {
        bail!("{} is a CPU device: a GPU benchmark refuses it (pass --allow-cpu to measure it anyway)", ctx.info.name);
    }
    // An arm is a mode, optionally with the in-kernel event ring on: `mega`, `mega+instr`.
    let arms: Vec<(Mode, bool, String)> = a
        .arms
        .split(',')
        .map(|s| {
            let s = s.trim();
            let (m, instr) = match s.strip_suffix("+instr") {
                Some(m) => (m, true),
                None => (s, false),
            };
            let mode = match m {
                "mega" => Mode::Mega,
                "multi" => Mode::Multi,
                o => anyhow::bail!("unknown arm '{o}' (mega|multi, optionally +instr)"),
            };
            Ok((mode, instr, s.to_string()))
        })
        .collect::<anyhow::Result<_>>()?;
    let steps = a.tokens + 1;
    let mut decs = vec![];
    for (m, instr, name) in &arms {
        let opts = DecoderOptions {
            mode: *m,
            read_logits: false,
            instrument: *instr,
            ..a.gpu.decoder_options(steps)
        };
        decs.push(
            VulkanDecoder::new(ctx.clone(), &model, opts)
                .with_context(|| format!("building the {name} decoder"))?,
        );
    }
    let arm_names: Vec<&str> = arms.iter().map(|(_, _, n)| n.as_str()).collect();
    note!(
        "bench: {} | {} tokens x {} runs per arm, arms {}, grid {}",
        model.source,
        steps - 1,
        a.runs,
        arm_names.join(", "),
        decs[0].grid
    );
    // Warm-up: one short run per arm (pipeline caches, clocks); its passes must be clean too.
    for (i, d) in decs.iter_mut().enumerate() {
        let mut t = model.tokenizer.bos_id();
        for pos in 0..steps.min(8) {
            let p = d.step(t, pos)?;
            if !p.fail.ok() {
                anyhow::bail!(
                    "warm-up arm {} pos {pos}: {} — refusing to benchmark a failing kernel",
                    arms[i].2,
                    p.fail.line(|l| d.level_name(l))
                );
            }
            t = p.argmax;
        }
    }
    let mut tps: Vec<Vec<f64>> = vec![vec![]; arms.len()];
    let mut gpu_us: Vec<Vec<f64>> = vec![vec![]; arms.len()];
    let mut tokens: Vec<Vec<u32>> = vec![vec![]; arms.len()];
    let mut nondeterministic = 0usize;
    for r in 0..a.runs {
        // Alternate the order each run: ABAB, BABA, ...
        let order: Vec<usize> = if r % 2 == 0 {
            (0..arms.len()).collect()
        } else {
            (0..arms.len()).rev().collect()
        };
        for &i in &order {
            let d = &mut decs[i];
            let mut t = model.tokenizer.bos_id();
            let mut toks = vec![];
            let mut gsum = 0u64;
            let t0 = Instant::now();
            for pos in 0..steps - 1 {
                let p = d.step(t, pos)?;
                if !p.fail.ok() {
                    // A failed pass has no token to feed back: the arm's numbers are void.
                    anyhow::bail!(
                        "run {r} arm {} pos {pos}: {} — refusing to report throughput of a failing kernel",
                        arms[i].2,
                        p.fail.line(|l| d.level_name(l))
                    );
                }
                gsum += p.gpu_ns.unwrap_or(0);
                t = p.argmax;
                toks.push(t);
            }
            let el = t0.elapsed().as_secs_f64();
            tps[i].push((steps - 1) as f64 / el);
            gpu_us[i].push(gsum as f64 / 1e3 / (steps - 1) as f64);
            if r == 0 {
                tokens[i] = toks;
            } else if tokens[i] != toks {
                note!(
                    "run {r} {}: tokens differ from run 0 (nondeterminism)",
                    arms[i].2
                );
                nondeterministic += 1;
            }
        }
    }
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
    for (i, (_, _, name)) in arms.iter().enumerate() {
        let (med, lo, hi) = stats(&tps[i]);
        let (g, _, _) = stats(&gpu_us[i]);
        meds.push(med);
        outln!(
            "{:<12} {:>10.1} {:>10.1} {:>10.1} {:>12.1} {:>8}",
            name,
            med,
            lo,
            hi,
            g,
            tps[i].len()
        )?;
    }
    let parity = tokens.windows(2).all(|w| w[0] == w[1]);
    if arms.len() == 2 {
        outln!(
            "ratio {}/{} of median tok/s: {:.3}",
            arms[0].2,
            arms[1].2,
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
    if let Some(p) = &a.json {
        let arms_json: Vec<serde_json::Value> = arms
            .iter()
            .enumerate()
            .map(|(i, (_, _, name))| {
                let (med, lo, hi) = stats(&tps[i]);
                serde_json::json!({
                    "arm": name,
                    "median_tok_s": med,
                    "min_tok_s": lo,
                    "max_tok_s": hi,
                    "runs": tps[i],
                })
            })
            .collect();
        let j = serde_json::json!({
            "model": model.source,
            "device": ctx.info.name,
            "driver": ctx.info.driver,
            "tokens": steps - 1,
            "grid": decs[0].grid,
            "arms": arms_json,
            "parity": parity,
            "nondeterministic_runs": nondeterministic,
        });
        crate::files::write_bytes_atomic(p, format!("{j}\n").as_bytes())?;
    }
    Ok(if parity && nondeterministic == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
