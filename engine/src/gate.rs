//! The correctness gate: decode on the GPU in one or both modes next to the CPU reference,
//! and refuse the run unless every pass is clean.
//!
//! Per position, in lockstep (teacher-forced on the reference's tokens, so one divergence
//! does not cascade into noise):
//! - each mode's fail word must be zero (kernel checks, residency, poison, watchdog);
//! - each mode's argmax is judged against the reference by [`baro_telemetry::Judge`], the
//!   rule the live session's shadow reference uses too: a divergence is accepted only where
//!   the reference's top-1/top-2 margin is below [`GateConfig::near_tie`] and the GPU picked
//!   the reference's runner-up: it is then reported as a near-tie and the token comparison
//!   ends there (never hidden). Decoding continues on the reference's tokens, and every other check
//!   below keeps running to the last step;
//! - mega and multi logits must be bit-identical (same op definitions, same reduction order);
//! - the GPU logits' relative L2 distance to the reference must stay below
//!   [`GateConfig::max_rel_l2`].
//!
//! Then, where the megakernel runs chained passes as one dispatch (the pass loop,
//! `--pass-loop on`, as `run`, `bench`, `live`, `record` and `serve` then do), the same
//! positions again through a chained decoder, each pass after a host token reading the previous pass's argmax on the
//! GPU: every pass clean, and its argmax and logits the same bits as the one-pass-per-
//! submission megakernel's above ([`PassLoopCheck`]).

use baro_telemetry::judge::margin;
use baro_telemetry::{Judge, RunDetails, Verdict};

use crate::device::Device;
use crate::model::Model;
use crate::reference::CpuDecoder;
use crate::vulkan::{DecoderOptions, Dispatch, FailWord, Feed, VulkanDecoder};
use crate::Result;

/// Gate settings.
#[derive(Clone, Debug)]
pub struct GateConfig {
    /// Positions to decode (prompt included).
    pub steps: usize,
    /// Dispatch styles to run (one or both).
    pub dispatches: Vec<Dispatch>,
    /// Prompt tokens (BOS first); after the prompt the reference's argmax is fed back.
    pub prompt: Vec<u32>,
    /// Near-tie threshold on the reference's top-1/top-2 logit margin.
    ///
    /// The GPU sums in a different (fixed) order than the sequential f32 reference; across a
    /// forward pass that moves a logit by a few f32 ulps per accumulation, which on the models
    /// here is below 1e-4 absolute. 1e-3 keeps a 10x guard band while staying far below the
    /// margins of normal decoding (median ≈ 1, see `model gen`).
    pub near_tie: f32,
    /// Upper bound for ‖gpu − ref‖₂ / ‖ref‖₂ per pass: f32 reassociation error grows like
    /// √n·ε per dot product (n ≤ 14336, ε = 6e-8 → ≈ 7e-6) and compounds over layers; 1e-3
    /// flags real bugs (a wrong row, a stale read) which show up at ≥ 1e-2.
    pub max_rel_l2: f64,
    /// Decoder options (mode is overridden per mode). Its KV type is the reference's too.
    pub decoder: DecoderOptions,
}

impl GateConfig {
    /// A gate over `steps` positions in `modes`, with the documented default thresholds
    /// (near-tie 1e-3, rel-L2 1e-3) and default decoder options.
    pub fn new(steps: usize, dispatches: Vec<Dispatch>, prompt: Vec<u32>) -> Self {
        GateConfig {
            steps,
            dispatches,
            prompt,
            near_tie: baro_telemetry::judge::NEAR_TIE,
            max_rel_l2: 1e-3,
            decoder: DecoderOptions::default(),
        }
    }
}

/// One dispatch style's result at one position.
#[derive(Clone, Debug)]
pub struct DispatchPass {
    /// The dispatch style.
    pub dispatch: Dispatch,
    /// GPU argmax.
    pub argmax: u32,
    /// The fail word.
    pub fail: FailWord,
    /// Decoded fail-word line.
    pub fail_line: String,
    /// Relative L2 distance to the reference logits.
    pub rel_l2: f64,
    /// GPU time, ns.
    pub gpu_ns: Option<u64>,
}

/// One position of the gate.
#[derive(Clone, Debug)]
pub struct GatePass {
    /// Position.
    pub pos: usize,
    /// Input token.
    pub token: u32,
    /// Reference top-1.
    pub ref_top1: u32,
    /// Reference margin.
    pub ref_margin: f32,
    /// Per dispatch style.
    pub modes: Vec<DispatchPass>,
    /// Mega and multi logits identical (None unless both ran).
    pub bitwise_equal: Option<bool>,
    /// Tokens differ from the reference at a near-tie (comparison ends here).
    pub near_tie: bool,
    /// A mode's token differs from the reference's beyond a near-tie.
    pub token_mismatch: bool,
    /// Why this pass fails the gate, empty if it does not.
    pub failures: Vec<String>,
}

/// The megakernel's pass loop against its one-pass-per-submission passes (see the module).
#[derive(Clone, Debug, Default)]
pub struct PassLoopCheck {
    /// Passes replayed through the chained decoder.
    pub passes: usize,
    /// Passes per submission.
    pub chain: usize,
    /// Dispatches those submissions ran (fewer than `passes`: the loop ran).
    pub dispatches: usize,
    /// Passes whose argmax and logits were the same bits as the single-submission pass's.
    pub equal: usize,
    /// The first difference or failure, if any (the gate then refuses).
    pub failure: Option<String>,
}

/// The gate's verdict.
#[derive(Clone, Debug, Default)]
pub struct GateReport {
    /// Every pass.
    pub passes: Vec<GatePass>,
    /// Position of a near-tie stop.
    pub near_tie_at: Option<usize>,
    /// The pass loop's check: `None` where it did not run (no megakernel, the loop off, a
    /// failure before it, or a single step).
    pub pass_loop: Option<PassLoopCheck>,
}

impl GateReport {
    /// True when no pass failed and the pass loop, where checked, matched.
    pub fn ok(&self) -> bool {
        !self.passes.is_empty()
            && self.passes.iter().all(|p| p.failures.is_empty())
            && self.pass_loop.as_ref().is_none_or(|c| c.failure.is_none())
    }

    /// The largest rel-L2 over every pass and mode; NaN if any was NaN (a NaN is a failure,
    /// never folded away as a zero); `None` without passes.
    pub fn max_rel_l2(&self) -> Option<f64> {
        let mut all = self
            .passes
            .iter()
            .flat_map(|p| p.modes.iter().map(|m| m.rel_l2));
        let first = all.next()?;
        Some(all.fold(first, |a, b| {
            if a.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                a.max(b)
            }
        }))
    }

    /// The smallest reference margin; NaN if any was NaN; `None` without passes.
    pub fn min_margin(&self) -> Option<f32> {
        let mut all = self.passes.iter().map(|p| p.ref_margin);
        let first = all.next()?;
        Some(all.fold(first, |a, b| {
            if a.is_nan() || b.is_nan() {
                f32::NAN
            } else {
                a.min(b)
            }
        }))
    }

    /// The first pass whose tokens differed from the reference beyond a near-tie.
    pub fn first_token_mismatch(&self) -> Option<usize> {
        self.passes.iter().find(|p| p.token_mismatch).map(|p| p.pos)
    }
}

/// The first non-finite value of `v` (index), if any.
fn first_non_finite(v: &[f32]) -> Option<usize> {
    v.iter().position(|x| !x.is_finite())
}

/// ‖a − r‖₂ / ‖r‖₂, the gate's logits measure (‖a − r‖₂ where r is all zeros).
pub fn rel_l2(a: &[f32], r: &[f32]) -> f64 {
    let (mut num, mut den) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(r) {
        let d = x as f64 - y as f64;
        num += d * d;
        den += (y as f64) * (y as f64);
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// How far a q8 run may stand from its q8 reference at one pass: `(near_tie, max_rel_l2)`.
///
/// Quantisation is a step function: where the GPU's f32 arithmetic before a quantisation
/// (another summation order in a norm, another `exp`) differs from the reference's by an ulp
/// and the value sits near a rounding boundary, one quant moves by one step, and every later
/// quantisation sees the moved value — so once a run leaves its reference it differs by the
/// quantisation's own noise, not by f32 rounding (on lavapipe: bit-exact for 26 passes, then
/// rel-L2 ≈ 1.1–1.5e-2 against the q8 reference while the q8 and f32 references stood
/// 1.4–1.8e-2 apart). The bounds are therefore the definition's own distance at this pass,
/// doubled: `ref_q8` against `ref_f32` (the f32 path on the same tokens), as a largest logit
/// move for the near-tie and as a rel-L2, never below the f32 path's `near_tie` and
/// `max_rel_l2`. A real fault (a wrong row, a wrong scale, a stale read) stands far outside
/// (rel-L2 ≥ 1e-1). Where either reference is not finite there is no distance to go by: the
/// f32 bounds apply unwidened (a non-finite reference fails the pass on its own).
pub fn q8_bounds(ref_q8: &[f32], ref_f32: &[f32], near_tie: f32, max_rel_l2: f64) -> (f32, f64) {
    let mut moved = 0.0f32;
    for (a, b) in ref_q8.iter().zip(ref_f32) {
        let d = (a - b).abs();
        if !d.is_finite() {
            return (near_tie, max_rel_l2);
        }
        moved = moved.max(d);
    }
    let rel = rel_l2(ref_q8, ref_f32);
    (near_tie.max(2.0 * moved), max_rel_l2.max(2.0 * rel))
}

/// Run the gate. `on_pass` sees every pass as it completes (the CLI prints it) with the
/// first decoder's run details. Stops at the first failing pass (a failed kernel leaves state
/// the next pass cannot trust).
pub fn run_gate(
    device: &Device,
    model: &Model,
    cfg: &GateConfig,
    mut on_pass: impl FnMut(&GatePass, &RunDetails),
) -> Result<GateReport> {
    let steps = cfg.steps.min(model.config.seq_len).max(1);
    let mut decs = vec![];
    let mut judges = vec![];
    for &dispatch in &cfg.dispatches {
        let opts = DecoderOptions {
            dispatch,
            max_seq: steps,
            read_logits: true,
            ..cfg.decoder.clone()
        };
        decs.push(VulkanDecoder::new(device.context().clone(), model, opts)?);
        judges.push(Judge::new(cfg.near_tie));
    }
    let details = match decs.first() {
        Some(d) => d.run_details(&model.source),
        None => {
            return Err(crate::Error::Invalid(
                "gate: no dispatch style to run".into(),
            ))
        }
    };
    // The reference stores its KV cache as the decoder does and quantises what the decoder
    // quantises: an f16-KV run is judged against a reference whose keys and values are rounded
    // to f16 too, a q8 run against one whose quantised matvecs meet int8 inputs (crate::act).
    let mut cpu = CpuDecoder::with_types(
        &model.config,
        &model.weights,
        steps,
        cfg.decoder.kv,
        cfg.decoder.act,
    );
    // A q8 run's bounds come from the q8 definition's own distance to the f32 path at each
    // pass (q8_bounds): an f32-activation reference beside the q8 one.
    let mut cpu_f32 = (cfg.decoder.act == crate::act::ActType::Q8).then(|| {
        CpuDecoder::with_types(
            &model.config,
            &model.weights,
            steps,
            cfg.decoder.kv,
            crate::act::ActType::F32,
        )
    });
    let mut report = GateReport::default();
    // The megakernel's (argmax, logits digest) per pass, for the pass loop's check.
    let mega_at = cfg.dispatches.iter().position(|&d| d == Dispatch::Mega);
    let mut mega_seen: Vec<(u32, u64)> = vec![];
    let mut token = cfg
        .prompt
        .first()
        .copied()
        .unwrap_or(model.tokenizer.bos_id());
    for pos in 0..steps {
        let ref_logits = cpu.forward(token, pos).to_vec();
        let ref_bad = first_non_finite(&ref_logits);
        let (near_tie, max_rel_l2) = match &mut cpu_f32 {
            Some(c) => q8_bounds(
                &ref_logits,
                c.forward(token, pos),
                cfg.near_tie,
                cfg.max_rel_l2,
            ),
            None => (cfg.near_tie, cfg.max_rel_l2),
        };
        let m = margin(&ref_logits);
        // A non-finite reference has no margin; its top-1 is still what is fed back.
        let top1 = m.map_or_else(|| crate::reference::margin(&ref_logits).top1, |m| m.top1);
        let mut p = GatePass {
            pos,
            token,
            ref_top1: top1,
            ref_margin: m.map_or(f32::NAN, |m| m.margin),
            modes: vec![],
            bitwise_equal: None,
            near_tie: false,
            token_mismatch: false,
            failures: vec![],
        };
        if let Some(i) = ref_bad {
            p.failures.push(format!(
                "reference logit {i} is {} (the model's weights or activations are not finite)",
                ref_logits[i]
            ));
        }
        let reference = Reference {
            logits: &ref_logits,
            bad: ref_bad,
            top1,
            near_tie,
            max_rel_l2,
        };
        for (dec, judge) in decs.iter_mut().zip(judges.iter_mut()) {
            judge_dispatch(dec, judge, &mut p, &reference)?;
        }
        if decs.len() == 2 && p.modes.iter().all(|m| m.fail.ok()) {
            compare_dispatches(&decs[0], &decs[1], &mut p);
        }
        if let Some(i) = mega_at {
            mega_seen.push((p.modes[i].argmax, digest(decs[i].logits())));
        }
        on_pass(&p, &details);
        let stop = !p.failures.is_empty();
        if p.near_tie && report.near_tie_at.is_none() {
            report.near_tie_at = Some(pos);
        }
        report.passes.push(p);
        if stop {
            break;
        }
        token = if pos + 1 < cfg.prompt.len() {
            cfg.prompt[pos + 1]
        } else {
            top1
        };
    }
    if let Some(i) = mega_at {
        if report.ok() && report.passes.len() > 1 && decs[i].pass_loop() {
            let tokens: Vec<u32> = report.passes.iter().map(|p| p.token).collect();
            let opts = decs[i].opts.clone();
            // The gate's decoders go first: a device that holds two copies of the weights
            // need not hold three.
            drop(decs);
            report.pass_loop = Some(check_pass_loop(device, model, &opts, &tokens, &mega_seen)?);
        }
    }
    Ok(report)
}

/// Passes per submission of the pass loop's check: the CLI's default chain.
const LOOP_CHAIN: usize = 16;

/// The pass loop's check: `tokens` (each position's input) again through a megakernel with
/// `opts` chaining up to [`LOOP_CHAIN`] passes a submission, a position whose input is the
/// previous pass's argmax fed on the GPU ([`Feed::Argmax`]), the others from the host; each
/// pass must be clean with `seen`'s (argmax, logits digest).
fn check_pass_loop(
    device: &Device,
    model: &Model,
    opts: &DecoderOptions,
    tokens: &[u32],
    seen: &[(u32, u64)],
) -> Result<PassLoopCheck> {
    let n = tokens.len();
    let chain = n.min(LOOP_CHAIN);
    let mut dec = VulkanDecoder::new(
        device.context().clone(),
        model,
        DecoderOptions {
            chain: chain as u32,
            read_logits: true,
            ..opts.clone()
        },
    )?;
    let feeds: Vec<Feed> = (0..n)
        .map(|pos| {
            if pos > 0 && seen[pos - 1].0 == tokens[pos] {
                Feed::Argmax
            } else {
                Feed::Token(tokens[pos])
            }
        })
        .collect();
    let mut c = PassLoopCheck {
        chain,
        ..Default::default()
    };
    let mut pos = 0;
    while pos < n && c.failure.is_none() {
        let k = (n - pos).min(chain);
        let mut chunk = feeds[pos..pos + k].to_vec();
        // A submission after a failed one cannot continue from its argmax; none follows one.
        if pos == 0 {
            chunk[0] = Feed::Token(tokens[0]);
        }
        let passes = dec.step_chain(&chunk, pos)?;
        c.dispatches += dec.last_dispatches();
        for (j, p) in passes.iter().enumerate() {
            let at = pos + j;
            c.passes += 1;
            let got = (p.argmax, digest(dec.logits_at(j)));
            if !p.fail.ok() {
                c.failure = Some(format!("pass {at}: {}", p.fail.line(|l| dec.level_name(l))));
            } else if got.0 != seen[at].0 {
                c.failure = Some(format!(
                    "pass {at}: token {} != {} one pass per submission",
                    got.0, seen[at].0
                ));
            } else if got.1 != seen[at].1 {
                c.failure = Some(format!(
                    "pass {at}: logits differ from one pass per submission"
                ));
            } else {
                c.equal += 1;
                continue;
            }
            break;
        }
        pos += k;
    }
    Ok(c)
}

/// A 64-bit digest of logits' bits (FNV-1a over each word): equal logits, equal digests; a
/// differing bit changes it but for a 2^-64 chance.
fn digest(logits: &[f32]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for x in logits {
        for b in x.to_bits().to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The reference's side of one pass, as each dispatch is judged against it.
struct Reference<'a> {
    logits: &'a [f32],
    /// Its first non-finite logit, if any (then only the fail words are checked).
    bad: Option<usize>,
    top1: u32,
    near_tie: f32,
    max_rel_l2: f64,
}

/// Run `dec` on pass `p`'s token and position and judge it against the reference: the fail
/// word, finite logits, the token (until the first divergence, `judge`'s history) and the
/// logits' rel-L2. Adds the dispatch's [`DispatchPass`] and any failure to `p`.
fn judge_dispatch(
    dec: &mut VulkanDecoder,
    judge: &mut Judge,
    p: &mut GatePass,
    reference: &Reference,
) -> Result<()> {
    let Reference {
        logits: ref_logits,
        bad: ref_bad,
        top1,
        near_tie,
        max_rel_l2,
    } = *reference;
    let (token, pos) = (p.token, p.pos);
    let r = dec.step(token, pos)?;
    let line = r.fail.line(|l| dec.level_name(l));
    let rl2 = rel_l2(dec.logits(), ref_logits);
    let dispatch = dec.opts.dispatch;
    if !r.fail.ok() {
        p.failures.push(format!("{}: {line}", dispatch.name()));
    } else if let Some(i) = first_non_finite(dec.logits()) {
        // The kernel raises a bit for this; a clean word with a non-finite logit
        // means the check itself failed, and that must not pass either.
        p.failures.push(format!(
            "{}: logit {i} is {} under a clean fail word",
            dispatch.name(),
            dec.logits()[i]
        ));
    } else if ref_bad.is_none() {
        // Tokens are compared until the first divergence (the judge's history); after
        // it, the reference's own tokens keep both sides on one sequence and every
        // other check goes on.
        judge.set_near_tie(near_tie);
        let c = judge.judge(pos as u64, r.argmax, Some(dec.logits()), ref_logits);
        match c.verdict {
            Verdict::NearTie => p.near_tie = true,
            Verdict::Mismatch | Verdict::NonFinite => {
                p.token_mismatch = true;
                p.failures.push(format!(
                    "{}: token {} != reference {} (runner-up {}, margin {:.4}, near-tie below {})",
                    dispatch.name(),
                    r.argmax,
                    c.reference.unwrap_or(top1),
                    c.runner_up.unwrap_or(top1),
                    c.margin.unwrap_or(f32::NAN),
                    near_tie
                ));
            }
            Verdict::Match | Verdict::Uncompared => {}
        }
        // NaN must fail too, hence not `rl2 > max`.
        if rl2.is_nan() || rl2 > max_rel_l2 {
            p.failures.push(format!(
                "{}: logits rel-L2 {rl2:.3e} > {max_rel_l2:.1e}",
                dispatch.name(),
            ));
        }
    }
    p.modes.push(DispatchPass {
        dispatch,
        argmax: r.argmax,
        fail: r.fail,
        fail_line: line,
        rel_l2: rl2,
        gpu_ns: r.gpu_ns,
    });
    Ok(())
}

/// Both dispatches passed clean: their logits must be the same bits.
fn compare_dispatches(d0: &VulkanDecoder, d1: &VulkanDecoder, p: &mut GatePass) {
    let eq = d0
        .logits()
        .iter()
        .zip(d1.logits())
        .all(|(a, b)| a.to_bits() == b.to_bits());
    p.bitwise_equal = Some(eq);
    if !eq {
        let first = d0
            .logits()
            .iter()
            .zip(d1.logits())
            .position(|(a, b)| a.to_bits() != b.to_bits());
        p.failures.push(format!(
            "mega and multi logits differ (first at index {first:?})"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q8_bounds_widen_with_the_references_distance_and_never_on_a_non_finite_reference() {
        let f = [1.0f32, 2.0, 3.0, 4.0];
        let q = [1.0f32, 2.1, 3.0, 3.8];
        let (nt, rl) = q8_bounds(&q, &f, 1e-3, 1e-3);
        assert!((nt - 0.4).abs() < 1e-5, "twice the largest move: {nt}");
        let want = 2.0 * rel_l2(&q, &f);
        assert!((rl - want).abs() < 1e-12 && rl > 1e-3, "{rl}");
        // Identical references: the f32 bounds, never less.
        assert_eq!(q8_bounds(&f, &f, 1e-3, 1e-3), (1e-3, 1e-3));
        for bad in [f32::INFINITY, f32::NAN] {
            let mut g = f;
            g[2] = bad;
            assert_eq!(q8_bounds(&q, &g, 1e-3, 2e-3), (1e-3, 2e-3), "{bad}");
            assert_eq!(q8_bounds(&g, &f, 1e-3, 2e-3), (1e-3, 2e-3), "{bad}");
        }
    }
}
