//! Decode throughput over a set of prompts, paired and alternating between arms (each arm a
//! set of decoder options: dispatch style, event ring, grid, workgroup size), so every arm
//! sees the same machine conditions (DESIGN: "paired, alternating A/B runs, medians (and
//! minimum), and a bitwise parity check of both arms' outputs").
//!
//! A *sample* is one prompt in one arm: its prompt tokens fed one pass each (prefill, timed
//! on its own), then `gen_tokens` passes each feeding the previous output (generation). The
//! arms' order alternates every sample (A B, B A, A B, ...).
//!
//! Before timing, an untimed sweep per arm (which is also the warm-up) runs every prompt with
//! the logits read back and folds every pass's logits bits into one checksum: equal checksums
//! across arms mean bitwise-identical logits. Timed passes do not read the logits back.
//!
//! Every pass is labelled fast, slow or unknown by [`classify_offline`] (the in-kernel stage
//! busy time where the ring is on, else GPU time, else wall time); a sample takes the mode of
//! most of its passes. A failing pass voids the bench (an error naming the arm and position),
//! never a number.

use std::time::Instant;

use baro_telemetry::labels::{classify_offline, ModeConfig, ModeTally};
use baro_telemetry::{Frame, PowerMode, StageKind, StageTiming};

use crate::device::Device;
use crate::model::Model;
use crate::vulkan::{DecoderOptions, Dispatch, Feed, VulkanDecoder};
use crate::{Error, Result};

/// One arm: a name and its decoder options.
#[derive(Clone, Debug)]
pub struct Arm {
    /// What reports call it (`mega`, `multi+instr`, `A`).
    pub name: String,
    /// Its decoder options (`max_seq` and `read_logits` are set by the bench).
    pub options: DecoderOptions,
}

impl Arm {
    /// The arm of a dispatch style with or without the event ring, named `mega`, `multi`,
    /// `mega+instr`, `multi+instr` (`mega+instr/8` when the ring is written every 8th pass;
    /// an arm without the ring has no ring to sample).
    pub fn of(dispatch: Dispatch, instrument: bool, base: &DecoderOptions) -> Arm {
        let every = if instrument {
            base.ring_every.max(1)
        } else {
            1
        };
        Arm {
            name: format!(
                "{dispatch}{}{}",
                if instrument { "+instr" } else { "" },
                if every > 1 {
                    format!("/{every}")
                } else {
                    String::new()
                }
            ),
            options: DecoderOptions {
                dispatch,
                instrument,
                ring_every: every,
                ..base.clone()
            },
        }
    }
}

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The prompts' tokens, BOS first (each at least one token).
    pub prompts: Vec<Vec<u32>>,
    /// Generation passes per sample, after the prompt.
    pub gen_tokens: usize,
    /// Repetitions of the whole prompt set per arm.
    pub runs: u64,
    /// The arms, in the order of the first sample.
    pub arms: Vec<Arm>,
    /// The power-mode classifier's tuning.
    pub mode: ModeConfig,
    /// Positions of context before every prompt (llama-bench's `-d`): each sample's passes
    /// run at positions `depth ..`, attending over the cache's first `depth` rows, which are
    /// zeros (cleared when the decoder is made, never written by a pass), not a decoded text.
    /// A pass's cost does not depend on the values it reads, so this measures decode at that
    /// depth without decoding a prompt of that length first; the tokens are not a real
    /// context's continuation. 0: no context before the prompt.
    pub depth: usize,
}

/// One prompt in one arm.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// Repetition.
    pub run: u64,
    /// Prompt index.
    pub prompt: usize,
    /// Prompt passes (BOS included).
    pub prompt_tokens: usize,
    /// Host time of the prompt passes, ns.
    pub prompt_ns: u64,
    /// Generation passes.
    pub gen_tokens: usize,
    /// Host time of the generation passes, ns.
    pub gen_ns: u64,
    /// The mode of nine in ten of its passes or more (`sample_mode`); unknown where the
    /// passes are mixed.
    pub mode: PowerMode,
}

impl Sample {
    /// Prompt tokens per second.
    pub fn prompt_tok_s(&self) -> f64 {
        self.prompt_tokens as f64 / (self.prompt_ns.max(1) as f64 / 1e9)
    }
    /// Generated tokens per second.
    pub fn gen_tok_s(&self) -> f64 {
        self.gen_tokens as f64 / (self.gen_ns.max(1) as f64 / 1e9)
    }
}

/// One arm's measurements.
#[derive(Clone, Debug)]
pub struct ArmResult {
    /// The arm.
    pub arm: Arm,
    /// Every sample, in the order run.
    pub samples: Vec<Sample>,
    /// Passes per mode.
    pub modes: ModeTally,
    /// FNV-1a over the bits of every pass's logits of the parity sweep.
    pub logits_checksum: u64,
    /// The tokens each prompt generated in the parity sweep.
    pub tokens: Vec<Vec<u32>>,
    /// Samples (run, prompt) whose tokens differed from the sweep's (nondeterminism).
    pub differing: Vec<(u64, usize)>,
    /// The driver compiler's statistics for the arm's pipelines (empty where not reported).
    pub pipelines: Vec<baro_telemetry::PipelineStats>,
    /// The read-ahead budget the arm's decoder resolved, MiB (0: none).
    pub prefetch_mib: u32,
    /// The idle workgroups' wait the arm's decoder resolved, ns (0: none).
    pub idle_wait_ns: u32,
    /// Why the arm's decoder runs without the device's clock (its unit is not the ns).
    pub device_clock_off: Option<String>,
}

/// The bench's result.
#[derive(Clone, Debug)]
pub struct BenchReport {
    /// Per arm, in [`BenchConfig::arms`] order.
    pub arms: Vec<ArmResult>,
    /// The grid of each arm's decoder.
    pub grids: Vec<u32>,
}

impl BenchReport {
    /// Every arm's logits were bitwise identical (and so were its tokens).
    pub fn parity(&self) -> bool {
        self.arms
            .windows(2)
            .all(|w| w[0].logits_checksum == w[1].logits_checksum && w[0].tokens == w[1].tokens)
    }

    /// Samples (over every arm) whose tokens differed from their arm's parity sweep.
    pub fn nondeterministic_samples(&self) -> usize {
        self.arms.iter().map(|a| a.differing.len()).sum()
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

/// Mean and sample standard deviation (0 for one value; NaN for none).
pub fn mean_stddev(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// FNV-1a step over a slice of logits' bits.
fn fold_logits(h: u64, logits: &[f32]) -> u64 {
    logits.iter().fold(h, |h, v| {
        (h ^ u64::from(v.to_bits())).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The share of a sample's passes that must be in one mode for the sample to be in it.
/// A bare majority let a sample with 54 slow passes of 143 (its rate 15 % under its pair's)
/// count as fast and move a `bench ab` verdict by +7 % (round 85's s88 1B arm); healthy
/// samples have every pass or all but a few in one mode.
pub const SAMPLE_MODE_SHARE: f64 = 0.9;

/// The mode at least `SAMPLE_MODE_SHARE` of `modes` have; unknown where they are mixed (a
/// disturbed sample: no mode's statistics take it) or empty.
pub fn sample_mode(modes: &[PowerMode]) -> PowerMode {
    let t = ModeTally::of(modes.iter().copied());
    let need = SAMPLE_MODE_SHARE * modes.len() as f64;
    if modes.is_empty() {
        PowerMode::Unknown
    } else if t.fast as f64 >= need {
        PowerMode::Fast
    } else if t.slow as f64 >= need {
        PowerMode::Slow
    } else {
        PowerMode::Unknown
    }
}

struct ArmState {
    dec: VulkanDecoder,
    /// Stage ids whose busy time counts toward the mode indicator (not attention: it grows
    /// with the position).
    counted: Vec<bool>,
    details: baro_telemetry::RunDetails,
    /// One reduced frame per timed pass (wall, GPU and counted busy time only).
    frames: Vec<Frame>,
    /// Index of each sample's first pass in `frames`, and its pass count.
    sample_passes: Vec<(usize, usize)>,
}

impl ArmState {
    /// The reduced frame of the pass just run, for the mode classifier.
    fn keep_frame(&mut self, slot: usize, pos: usize, token: u32, p: &crate::vulkan::Pass) {
        let mut f = Frame {
            wall_ns: p.wall.as_nanos() as u64,
            gpu_ns: p.gpu_ns,
            ..Default::default()
        };
        if self.dec.opts.instrument {
            let full = self
                .dec
                .frame_at(&self.details, slot, 0, pos, token, p.argmax, p);
            f.torn = full.torn;
            let busy: u64 = full
                .stages
                .iter()
                .filter(|s| self.counted.get(s.stage as usize).copied().unwrap_or(false))
                .map(|s| s.busy_ns)
                .sum();
            if busy > 0 {
                f.stages = vec![StageTiming {
                    stage: 0,
                    name: "busy".into(),
                    level: 0,
                    busy_ns: busy,
                    charged_ns: busy,
                    max_busy_ns: busy,
                }];
            }
        }
        self.frames.push(f);
    }
}

fn failed(what: &str, arm: &Arm, pos: usize, d: &VulkanDecoder, p: &crate::vulkan::Pass) -> Error {
    let hint = p
        .fail
        .residency_hint()
        .map_or(String::new(), |h| format!(" ({h})"));
    Error::Invalid(format!(
        "{what} arm {} pos {pos}: {} — refusing to report throughput of a failing kernel{hint}",
        arm.name,
        p.fail.line(|l| d.level_name(l))
    ))
}

/// Run the bench. `on_ready(grids)` is called once the decoders are built and the parity
/// sweep (the warm-up) is done.
pub fn run_bench(
    device: &Device,
    model: &Model,
    cfg: &BenchConfig,
    on_ready: impl FnOnce(&[u32]),
) -> Result<BenchReport> {
    let steps = positions(model, cfg)?;
    let mut st = vec![];
    for arm in &cfg.arms {
        st.push(ArmState::new(device, model, arm, steps)?);
    }
    let mut out: Vec<ArmResult> = cfg
        .arms
        .iter()
        .zip(&st)
        .map(|(a, s)| ArmResult {
            arm: a.clone(),
            samples: vec![],
            modes: ModeTally::default(),
            logits_checksum: 0xcbf2_9ce4_8422_2325,
            tokens: vec![],
            differing: vec![],
            pipelines: s.details.pipelines.clone(),
            prefetch_mib: s.details.prefetch_mib,
            idle_wait_ns: s.details.idle_wait_ns,
            device_clock_off: s.details.device_clock_off.clone(),
        })
        .collect();
    for ((arm, s), o) in cfg.arms.iter().zip(st.iter_mut()).zip(out.iter_mut()) {
        s.parity_sweep(cfg, arm, o)?;
    }
    on_ready(&st.iter().map(|s| s.dec.grid).collect::<Vec<_>>());
    let mut k = 0u64;
    for r in 0..cfg.runs {
        for (pi, prompt) in cfg.prompts.iter().enumerate() {
            // Alternate the order every sample: A B, B A, A B, ...
            let order: Vec<usize> = if k.is_multiple_of(2) {
                (0..st.len()).collect()
            } else {
                (0..st.len()).rev().collect()
            };
            k += 1;
            for &i in &order {
                let (prompt_ns, gen_ns, toks) =
                    st[i].sample(cfg, &cfg.arms[i], &format!("run {r} prompt {pi}"), prompt)?;
                let o = &mut out[i];
                if toks != o.tokens[pi] {
                    o.differing.push((r, pi));
                }
                o.samples.push(Sample {
                    run: r,
                    prompt: pi,
                    prompt_tokens: prompt.len(),
                    prompt_ns,
                    gen_tokens: cfg.gen_tokens,
                    gen_ns,
                    mode: PowerMode::Unknown,
                });
            }
        }
    }
    for (s, o) in st.iter().zip(out.iter_mut()) {
        let modes = classify_offline(&cfg.mode, None, &s.frames, &[]);
        o.modes = ModeTally::of(modes.iter().copied());
        for (sample, &(first, n)) in o.samples.iter_mut().zip(&s.sample_passes) {
            sample.mode = sample_mode(&modes[first..first + n]);
        }
    }
    Ok(BenchReport {
        arms: out,
        grids: st.iter().map(|s| s.dec.grid).collect(),
    })
}

/// The positions a sample takes (depth, the longest prompt, the generated tokens), once the
/// configuration is checked: something to run, and room in the model's context.
fn positions(model: &Model, cfg: &BenchConfig) -> Result<usize> {
    if cfg.arms.is_empty() || cfg.runs == 0 || cfg.gen_tokens == 0 || cfg.prompts.is_empty() {
        return Err(Error::Invalid(
            "bench: at least one arm, one run, one prompt and one generated token".into(),
        ));
    }
    let longest = cfg.prompts.iter().map(Vec::len).max().unwrap_or(0);
    if cfg.prompts.iter().any(Vec::is_empty) {
        return Err(Error::Invalid(
            "bench: an empty prompt (not even BOS)".into(),
        ));
    }
    let d = cfg.depth;
    let steps = d + longest + cfg.gen_tokens;
    if steps > model.config.seq_len {
        return Err(Error::Invalid(format!(
            "bench: depth {d} + the longest prompt's {longest} tokens + {} generated = {steps} positions, more than the model's context of {}",
            cfg.gen_tokens, model.config.seq_len
        )));
    }
    Ok(steps)
}

impl ArmState {
    /// `arm`'s decoder for `steps` positions, logits read back (for the parity sweep).
    fn new(device: &Device, model: &Model, arm: &Arm, steps: usize) -> Result<ArmState> {
        let opts = DecoderOptions {
            read_logits: true,
            max_seq: steps,
            ..arm.options.clone()
        };
        let dec = VulkanDecoder::new(device.context().clone(), model, opts)?;
        let details = dec.run_details(&model.source);
        let mut counted = vec![false; details.stages.len()];
        for s in &details.stages {
            counted[s.id as usize] = s.kind != StageKind::Attn;
        }
        Ok(ArmState {
            dec,
            counted,
            details,
            frames: vec![],
            sample_passes: vec![],
        })
    }

    /// The parity sweep (and warm-up): every prompt, logits read back and folded into `o`,
    /// with the tokens generated; then the logits stay on the GPU.
    fn parity_sweep(&mut self, cfg: &BenchConfig, arm: &Arm, o: &mut ArmResult) -> Result<()> {
        let d = cfg.depth;
        for prompt in &cfg.prompts {
            let mut toks = vec![];
            let mut next = 0;
            for (pos, &t) in prompt.iter().enumerate() {
                let p = self.dec.step(t, d + pos)?;
                if !p.fail.ok() {
                    return Err(failed("parity sweep", arm, d + pos, &self.dec, &p));
                }
                o.logits_checksum = fold_logits(o.logits_checksum, self.dec.logits());
                next = p.argmax;
            }
            for pos in d + prompt.len()..d + prompt.len() + cfg.gen_tokens {
                let p = self.dec.step(next, pos)?;
                if !p.fail.ok() {
                    return Err(failed("parity sweep", arm, pos, &self.dec, &p));
                }
                o.logits_checksum = fold_logits(o.logits_checksum, self.dec.logits());
                next = p.argmax;
                toks.push(next);
            }
            o.tokens.push(toks);
        }
        // Timed passes leave the logits on the GPU (the argmax comes back regardless).
        self.dec.opts.read_logits = false;
        Ok(())
    }

    /// One timed sample of `prompt` (`what` names it in a failure): the prompt's passes,
    /// then the generated ones; `(prompt_ns, gen_ns, generated tokens)`. Its passes' reduced
    /// frames are kept for the mode classifier.
    fn sample(
        &mut self,
        cfg: &BenchConfig,
        arm: &Arm,
        what: &str,
        prompt: &[u32],
    ) -> Result<(u64, u64, Vec<u32>)> {
        let d = cfg.depth;
        let first = self.frames.len();
        // Host time spent building classifier frames is not the decoder's.
        let mut aside = 0u64;
        let mut next = 0;
        // Passes per submission: the prompt's tokens from the host, the generated ones
        // chained on the GPU (each pass reads the previous pass's argmax there).
        let c = self.dec.opts.chain.max(1) as usize;
        let t0 = Instant::now();
        let mut pos = 0;
        while pos < prompt.len() {
            let k = (prompt.len() - pos).min(c);
            let feeds: Vec<Feed> = prompt[pos..pos + k]
                .iter()
                .map(|&t| Feed::Token(t))
                .collect();
            let passes = self.dec.step_chain(&feeds, d + pos)?;
            for (i, p) in passes.iter().enumerate() {
                if !p.fail.ok() {
                    return Err(failed(what, arm, d + pos + i, &self.dec, p));
                }
                next = p.argmax;
                let a0 = Instant::now();
                self.keep_frame(i, d + pos + i, prompt[pos + i], p);
                aside += a0.elapsed().as_nanos() as u64;
            }
            pos += k;
        }
        let prompt_ns = (t0.elapsed().as_nanos() as u64).saturating_sub(aside);
        let mut toks = Vec::with_capacity(cfg.gen_tokens);
        aside = 0;
        let t1 = Instant::now();
        let end = prompt.len() + cfg.gen_tokens;
        while pos < end {
            let k = (end - pos).min(c);
            let mut feeds = vec![Feed::Argmax; k];
            feeds[0] = Feed::Token(next);
            let passes = self.dec.step_chain(&feeds, d + pos)?;
            for (i, p) in passes.iter().enumerate() {
                if !p.fail.ok() {
                    return Err(failed(what, arm, d + pos + i, &self.dec, p));
                }
                let a0 = Instant::now();
                self.keep_frame(i, d + pos + i, next, p);
                aside += a0.elapsed().as_nanos() as u64;
                next = p.argmax;
                toks.push(next);
            }
            pos += k;
        }
        let gen_ns = (t1.elapsed().as_nanos() as u64).saturating_sub(aside);
        self.sample_passes.push((first, self.frames.len() - first));
        Ok((prompt_ns, gen_ns, toks))
    }
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
    fn mean_stddev_is_the_sample_deviation_and_zero_for_one_value() {
        let (m, s) = mean_stddev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(m, 5.0);
        assert!((s - 2.138_089_935).abs() < 1e-6, "{s}");
        assert_eq!(mean_stddev(&[3.0]), (3.0, 0.0));
        assert!(mean_stddev(&[]).0.is_nan());
    }

    #[test]
    fn a_sample_takes_the_mode_of_nine_in_ten_of_its_passes_else_unknown() {
        use PowerMode::*;
        let of = |fast: usize, slow: usize, unk: usize| {
            let mut v = vec![Fast; fast];
            v.extend(vec![Slow; slow]);
            v.extend(vec![Unknown; unk]);
            sample_mode(&v)
        };
        assert_eq!(of(143, 0, 0), Fast);
        assert_eq!(
            of(140, 2, 1),
            Fast,
            "a few stray passes leave a sample in its mode"
        );
        assert_eq!(of(9, 1, 0), Fast, "exactly nine in ten");
        assert_eq!(of(8, 1, 1), Unknown, "under nine in ten");
        // Round 85's disturbed sample: a majority fast, but 54 slow passes.
        assert_eq!(of(87, 54, 2), Unknown);
        assert_eq!(of(0, 130, 13), Slow);
        assert_eq!(of(1, 1, 0), Unknown);
        assert_eq!(of(0, 0, 0), Unknown);
    }

    #[test]
    fn arm_names_say_dispatch_and_instrumentation() {
        let base = DecoderOptions::default();
        assert_eq!(Arm::of(Dispatch::Multi, true, &base).name, "multi+instr");
        let a = Arm::of(Dispatch::Mega, false, &base);
        assert_eq!(a.name, "mega");
        assert!(!a.options.instrument);
    }

    #[test]
    fn the_logits_checksum_sees_a_single_bit() {
        let h0 = 0xcbf2_9ce4_8422_2325;
        let a = fold_logits(h0, &[1.0, 2.0]);
        let b = fold_logits(h0, &[1.0, f32::from_bits(2.0f32.to_bits() ^ 1)]);
        assert_ne!(a, b);
        assert_eq!(a, fold_logits(h0, &[1.0, 2.0]));
    }
}
