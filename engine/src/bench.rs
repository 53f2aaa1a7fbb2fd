//! Decode throughput, paired and alternating between arms (dispatch style, event ring on or
//! off), so every arm sees the same machine conditions (DESIGN: "paired, alternating A/B
//! runs, medians (and minimum), and a bitwise parity check of both arms' outputs").
//!
//! Every run of every arm decodes greedily from BOS; a failing pass voids the bench (an
//! error naming the arm and position), never a number.

use std::time::Instant;

use crate::device::Device;
use crate::model::Model;
use crate::vulkan::{DecoderOptions, Dispatch, VulkanDecoder};
use crate::{Error, Result};

/// One arm: a dispatch style, with or without the in-kernel event ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Arm {
    /// Dispatch style.
    pub dispatch: Dispatch,
    /// Event ring on.
    pub instrument: bool,
}

impl Arm {
    /// `mega`, `multi`, `mega+instr`, `multi+instr`.
    pub fn name(&self) -> String {
        format!(
            "{}{}",
            self.dispatch,
            if self.instrument { "+instr" } else { "" }
        )
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Tokens generated per run (after BOS).
    pub tokens: usize,
    /// Runs per arm.
    pub runs: u64,
    /// The arms, in the order of the first run (later runs alternate the order).
    pub arms: Vec<Arm>,
    /// Decoder options (dispatch, instrumentation, read-back are set per arm).
    pub decoder: DecoderOptions,
}

/// One arm's measurements.
#[derive(Clone, Debug)]
pub struct ArmResult {
    /// The arm.
    pub arm: Arm,
    /// Tokens per second of each run.
    pub tok_s: Vec<f64>,
    /// Mean GPU time per token of each run, µs (0 without timestamps).
    pub gpu_us: Vec<f64>,
    /// The tokens of run 0.
    pub tokens: Vec<u32>,
    /// Runs whose tokens differed from run 0 (nondeterminism).
    pub differing_runs: Vec<u64>,
}

/// The bench's result.
#[derive(Clone, Debug)]
pub struct BenchReport {
    /// Per arm, in [`BenchConfig::arms`] order.
    pub arms: Vec<ArmResult>,
    /// The grid the decoders ran with.
    pub grid: u32,
}

impl BenchReport {
    /// Every arm produced the same tokens.
    pub fn parity(&self) -> bool {
        self.arms.windows(2).all(|w| w[0].tokens == w[1].tokens)
    }

    /// Runs (over every arm) whose tokens differed from their arm's run 0.
    pub fn nondeterministic_runs(&self) -> usize {
        self.arms.iter().map(|a| a.differing_runs.len()).sum()
    }
}

/// Median, minimum and maximum (NaN for no values).
pub fn stats(v: &[f64]) -> (f64, f64, f64) {
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

/// Run the bench. `on_ready(grid)` is called once the decoders are built and warmed up.
pub fn run_bench(
    device: &Device,
    model: &Model,
    cfg: &BenchConfig,
    on_ready: impl FnOnce(u32),
) -> Result<BenchReport> {
    if cfg.arms.is_empty() || cfg.runs == 0 || cfg.tokens == 0 {
        return Err(Error::Invalid(
            "bench: at least one arm, one run and one token".into(),
        ));
    }
    // Position 0 is BOS; each token after it takes one more position.
    let steps = cfg.tokens + 1;
    let mut decs = vec![];
    for arm in &cfg.arms {
        let opts = DecoderOptions {
            dispatch: arm.dispatch,
            read_logits: false,
            instrument: arm.instrument,
            max_seq: steps,
            ..cfg.decoder.clone()
        };
        decs.push(VulkanDecoder::new(device.context().clone(), model, opts)?);
    }
    // Warm-up: one short run per arm (pipeline caches, clocks); its passes must be clean too.
    for (arm, d) in cfg.arms.iter().zip(decs.iter_mut()) {
        let mut t = model.tokenizer.bos_id();
        for pos in 0..steps.min(8) {
            let p = d.step(t, pos)?;
            if !p.fail.ok() {
                return Err(Error::Invalid(format!(
                    "warm-up arm {} pos {pos}: {} — refusing to benchmark a failing kernel",
                    arm.name(),
                    p.fail.line(|l| d.level_name(l))
                )));
            }
            t = p.argmax;
        }
    }
    on_ready(decs[0].grid);
    let mut out: Vec<ArmResult> = cfg
        .arms
        .iter()
        .map(|a| ArmResult {
            arm: a.clone(),
            tok_s: vec![],
            gpu_us: vec![],
            tokens: vec![],
            differing_runs: vec![],
        })
        .collect();
    for r in 0..cfg.runs {
        // Alternate the order each run: ABAB, BABA, ...
        let order: Vec<usize> = if r % 2 == 0 {
            (0..decs.len()).collect()
        } else {
            (0..decs.len()).rev().collect()
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
                    return Err(Error::Invalid(format!(
                        "run {r} arm {} pos {pos}: {} — refusing to report throughput of a failing kernel",
                        out[i].arm.name(),
                        p.fail.line(|l| d.level_name(l))
                    )));
                }
                gsum += p.gpu_ns.unwrap_or(0);
                t = p.argmax;
                toks.push(t);
            }
            let el = t0.elapsed().as_secs_f64();
            let a = &mut out[i];
            a.tok_s.push((steps - 1) as f64 / el);
            a.gpu_us.push(gsum as f64 / 1e3 / (steps - 1) as f64);
            if r == 0 {
                a.tokens = toks;
            } else if a.tokens != toks {
                a.differing_runs.push(r);
            }
        }
    }
    Ok(BenchReport {
        arms: out,
        grid: decs[0].grid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_are_median_min_max_and_nan_without_values() {
        assert_eq!(stats(&[3.0, 1.0, 2.0]), (2.0, 1.0, 3.0));
        assert_eq!(stats(&[4.0, 1.0, 2.0, 3.0]), (2.5, 1.0, 4.0));
        assert!(stats(&[]).0.is_nan());
    }

    #[test]
    fn arm_names_say_dispatch_and_instrumentation() {
        let a = Arm {
            dispatch: Dispatch::Multi,
            instrument: true,
        };
        assert_eq!(a.name(), "multi+instr");
        assert_eq!(
            Arm {
                dispatch: Dispatch::Mega,
                instrument: false
            }
            .name(),
            "mega"
        );
    }
}
