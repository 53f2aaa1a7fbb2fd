//! Judging a pass's token against a reference: the rule the gate and the live shadow reference
//! share. Pure (no GPU, no model): the GPU's top token and the reference logits in, a
//! [`Correctness`] out.
//!
//! # The rule
//!
//! - Any NaN or infinity in the reference logits (or in the GPU logits, where given) is
//!   [`Verdict::NonFinite`], a failure; a NaN is never read as a number.
//! - The GPU's token equals the reference's top-1 (argmax, lowest index on ties):
//!   [`Verdict::Match`].
//! - It differs, the GPU picked the reference's runner-up, and the reference's margin
//!   (top-1 − top-2 logit) is below the near-tie threshold: [`Verdict::NearTie`]. The GPU sums
//!   in a different (fixed) order than the sequential f32 reference, which can flip an exact
//!   or near tie; it is reported, never hidden.
//! - Anything else differing (a third choice at a near-tie too): [`Verdict::Mismatch`].
//! - Token comparison ends at the first divergence (near-tie or mismatch): the two sequences
//!   no longer share a history, so later passes are [`Verdict::Uncompared`] (still
//!   [`Verdict::NonFinite`] when their logits are not finite). [`Judge`] keeps that
//!   bookkeeping and reports the first divergence on every later pass.

use serde::{Deserialize, Serialize};

/// Default near-tie threshold on the reference's top-1/top-2 margin.
///
/// Reassociation moves a logit by a few f32 ulps per accumulation; across a forward pass on
/// the models here that stays below 1e-4 absolute. 1e-3 keeps a 10× guard band while staying
/// far below the margins of normal decoding (median ≈ 1).
pub const NEAR_TIE: f32 = 1e-3;

/// How a pass's token compares with the reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Same token as the reference's top-1.
    Match,
    /// The reference's runner-up at a margin below the near-tie threshold (accepted,
    /// reported; comparison ends here).
    NearTie,
    /// A different token (a failure).
    Mismatch,
    /// NaN or infinity in the logits (a failure).
    NonFinite,
    /// Not compared: tokens diverged at an earlier pass ([`Correctness::first_divergence`]).
    Uncompared,
}

impl Verdict {
    /// Whether this verdict fails a run.
    pub fn is_failure(self) -> bool {
        matches!(self, Verdict::Mismatch | Verdict::NonFinite)
    }
}

/// Top-1 and top-2 of a logit vector and their margin.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Margin {
    /// Argmax (lowest index on ties).
    pub top1: u32,
    /// Runner-up (lowest index among the rest on ties; = top1 with a single logit).
    pub top2: u32,
    /// `logit[top1] − logit[top2]` (0 on an exact tie).
    pub margin: f32,
}

/// [`Margin`] of `logits`; `None` when empty or when any value is NaN or infinite.
pub fn margin(logits: &[f32]) -> Option<Margin> {
    if logits.is_empty() || !logits.iter().all(|v| v.is_finite()) {
        return None;
    }
    let mut t1 = 0usize;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[t1] {
            t1 = i;
        }
    }
    let mut t2: Option<usize> = None;
    for (i, &v) in logits.iter().enumerate() {
        if i != t1 && t2.is_none_or(|t| v > logits[t]) {
            t2 = Some(i);
        }
    }
    let t2 = t2.unwrap_or(t1);
    Some(Margin {
        top1: t1 as u32,
        top2: t2 as u32,
        margin: logits[t1] - logits[t2],
    })
}

/// The verdict of one comparison, without history: `gpu_token` against `reference` logits
/// with near-tie threshold `near_tie`. Returns the reference's margin where it is finite.
pub fn verdict(gpu_token: u32, reference: &[f32], near_tie: f32) -> (Verdict, Option<Margin>) {
    let Some(m) = margin(reference) else {
        return (Verdict::NonFinite, None);
    };
    let v = if gpu_token == m.top1 {
        Verdict::Match
    } else if gpu_token == m.top2 && m.margin < near_tie {
        Verdict::NearTie
    } else {
        Verdict::Mismatch
    };
    (v, Some(m))
}

/// A pass's correctness against the reference.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Correctness {
    /// The GPU's token that was judged (argmax of its logits).
    pub gpu_token: u32,
    /// The reference's token (top-1); `None` when its logits were not finite.
    pub reference: Option<u32>,
    /// The reference's runner-up.
    pub runner_up: Option<u32>,
    /// The reference's top-1 − top-2 logit margin.
    pub margin: Option<f32>,
    /// The verdict.
    pub verdict: Verdict,
    /// The pass at which tokens first diverged, this one or an earlier one (`None`: no
    /// divergence yet).
    pub first_divergence: Option<u64>,
}

/// Whether a frame's token has been (or will be) judged by a live reference.
///
/// A shadow reference runs beside the GPU on its own thread and may lag: a frame goes out as
/// [`CheckState::Pending`] and its verdict follows as its own message
/// ([`crate::Telemetry::Correctness`]) once the reference has caught up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckState {
    /// No reference runs (the default; also every frame of a stream without one).
    #[default]
    Off,
    /// Sent to the reference; the verdict follows as a `correctness` message.
    Pending,
    /// Judged: the verdict is in the frame's `correctness`.
    Checked,
    /// Not in the sample the reference checks ([`CheckPlan`]).
    Skipped,
}

/// Which passes a live reference checks (sent in [`crate::RunDetails::check`]).
///
/// The reference must run every position of a sequence it checks (the KV cache needs them),
/// so a sample is a prefix of every sequence, not every n-th pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "plan")]
pub enum CheckPlan {
    /// Every pass.
    All,
    /// The first `positions` positions of every sequence (from each restart at position 0):
    /// for models too big for an f32 reference to follow in time.
    Prefix {
        /// Positions checked per sequence.
        positions: u32,
    },
}

impl CheckPlan {
    /// Whether position `pos` is in the sample.
    pub fn covers(self, pos: u32) -> bool {
        match self {
            CheckPlan::All => true,
            CheckPlan::Prefix { positions } => pos < positions,
        }
    }
}

/// The rule with its history: judges pass after pass and ends the token comparison at the
/// first divergence.
#[derive(Clone, Debug, PartialEq)]
pub struct Judge {
    near_tie: f32,
    first_divergence: Option<u64>,
}

impl Default for Judge {
    fn default() -> Self {
        Judge::new(NEAR_TIE)
    }
}

impl Judge {
    /// A judge with near-tie threshold `near_tie` ([`NEAR_TIE`] by default).
    pub fn new(near_tie: f32) -> Self {
        Judge {
            near_tie,
            first_divergence: None,
        }
    }

    /// The near-tie threshold for the passes judged from here on: a run whose reference
    /// moves by more than float rounding (the q8 activation path) widens it pass by pass.
    pub fn set_near_tie(&mut self, near_tie: f32) {
        self.near_tie = near_tie;
    }

    /// The near-tie threshold in force.
    pub fn near_tie(&self) -> f32 {
        self.near_tie
    }

    /// The pass at which tokens first diverged.
    pub fn first_divergence(&self) -> Option<u64> {
        self.first_divergence
    }

    /// Judge pass `pass`: the GPU chose `gpu_token`; `gpu_logits` are its logits where read
    /// back (checked for NaN/infinity), `reference` the reference logits for the same input.
    pub fn judge(
        &mut self,
        pass: u64,
        gpu_token: u32,
        gpu_logits: Option<&[f32]>,
        reference: &[f32],
    ) -> Correctness {
        let (mut v, m) = verdict(gpu_token, reference, self.near_tie);
        let gpu_finite = gpu_logits.is_none_or(|l| l.iter().all(|x| x.is_finite()));
        if !gpu_finite {
            v = Verdict::NonFinite;
        } else if v != Verdict::NonFinite {
            if self.first_divergence.is_some() {
                v = Verdict::Uncompared;
            } else if v != Verdict::Match {
                self.first_divergence = Some(pass);
            }
        }
        Correctness {
            gpu_token,
            reference: m.map(|m| m.top1),
            runner_up: m.map(|m| m.top2),
            margin: m.map(|m| m.margin),
            verdict: v,
            first_divergence: self.first_divergence,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Reference: top-1 is 1, runner-up 2 at a margin of 0.0005 (a near-tie), third is 0.
    const NEAR: [f32; 4] = [1.0, 5.0, 4.9995, -2.0];
    // Reference: top-1 is 1, runner-up 2 at a margin of 1.
    const CLEAR: [f32; 4] = [1.0, 5.0, 4.0, -2.0];

    #[test]
    fn same_token_as_the_reference_matches() {
        let (v, m) = verdict(1, &CLEAR, NEAR_TIE);
        assert_eq!(v, Verdict::Match);
        assert_eq!(m.map(|m| (m.top1, m.top2, m.margin)), Some((1, 2, 1.0)));
    }

    #[test]
    fn runner_up_below_the_near_tie_threshold_is_a_near_tie() {
        assert_eq!(verdict(2, &NEAR, NEAR_TIE).0, Verdict::NearTie);
    }

    #[test]
    fn third_choice_at_a_near_tie_is_a_mismatch() {
        assert_eq!(verdict(0, &NEAR, NEAR_TIE).0, Verdict::Mismatch);
    }

    #[test]
    fn runner_up_at_a_clear_margin_is_a_mismatch() {
        assert_eq!(verdict(2, &CLEAR, NEAR_TIE).0, Verdict::Mismatch);
    }

    #[test]
    fn margin_equal_to_the_threshold_is_not_a_near_tie() {
        assert_eq!(verdict(1, &[2.0, 1.5], 0.5).0, Verdict::Mismatch);
    }

    #[test]
    fn token_outside_the_vocabulary_is_a_mismatch() {
        assert_eq!(verdict(u32::MAX, &NEAR, NEAR_TIE).0, Verdict::Mismatch);
    }

    #[test]
    fn nan_or_infinity_in_the_reference_is_non_finite_never_zero() {
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let mut r = CLEAR;
            r[3] = bad;
            assert_eq!(
                verdict(1, &r, NEAR_TIE),
                (Verdict::NonFinite, None),
                "{bad}"
            );
        }
        // A NaN in front would otherwise leave the argmax at index 0.
        assert_eq!(verdict(0, &[f32::NAN, 1.0], NEAR_TIE).0, Verdict::NonFinite);
        assert_eq!(verdict(0, &[], NEAR_TIE).0, Verdict::NonFinite);
        assert!(Verdict::NonFinite.is_failure() && Verdict::Mismatch.is_failure());
        assert!(!Verdict::NearTie.is_failure() && !Verdict::Uncompared.is_failure());
    }

    #[test]
    fn nan_in_the_gpu_logits_is_non_finite_even_when_the_token_matches() {
        let mut j = Judge::default();
        let c = j.judge(0, 1, Some(&[0.0, f32::NAN, 0.0, 0.0]), &CLEAR);
        assert_eq!(c.verdict, Verdict::NonFinite);
        assert_eq!(c.reference, Some(1));
        assert_eq!(j.first_divergence(), None);
    }

    #[test]
    fn margin_takes_the_lowest_index_on_ties() {
        let m = margin(&[1.0, 5.0, 5.0, 2.0]).unwrap();
        assert_eq!((m.top1, m.top2, m.margin), (1, 2, 0.0));
        let m = margin(&[7.0, 1.0, 6.5]).unwrap();
        assert_eq!((m.top1, m.top2, m.margin), (0, 2, 0.5));
        let m = margin(&[3.0]).unwrap();
        assert_eq!((m.top1, m.top2, m.margin), (0, 0, 0.0));
    }

    #[test]
    fn comparison_ends_at_the_first_divergence_and_later_passes_report_it() {
        let mut j = Judge::default();
        assert_eq!(j.judge(0, 1, None, &CLEAR).verdict, Verdict::Match);
        let c = j.judge(1, 2, None, &NEAR);
        assert_eq!((c.verdict, c.first_divergence), (Verdict::NearTie, Some(1)));
        // A later pass that would mismatch is no longer compared...
        let c = j.judge(2, 0, None, &CLEAR);
        assert_eq!(
            (c.verdict, c.first_divergence),
            (Verdict::Uncompared, Some(1))
        );
        // ...but non-finite logits still fail.
        let c = j.judge(3, 1, None, &[f32::NAN; 4]);
        assert_eq!(
            (c.verdict, c.first_divergence),
            (Verdict::NonFinite, Some(1))
        );
        assert_eq!(j.first_divergence(), Some(1));
    }

    #[test]
    fn a_mismatch_is_the_first_divergence_too() {
        let mut j = Judge::new(0.1);
        let c = j.judge(5, 3, None, &CLEAR);
        assert_eq!(
            (c.verdict, c.first_divergence),
            (Verdict::Mismatch, Some(5))
        );
        assert_eq!(j.judge(6, 1, None, &CLEAR).verdict, Verdict::Uncompared);
    }

    #[test]
    fn check_plan_covers_every_pass_or_a_prefix_and_round_trips() {
        assert!(CheckPlan::All.covers(u32::MAX));
        let p = CheckPlan::Prefix { positions: 4 };
        assert!(p.covers(3) && !p.covers(4));
        for p in [CheckPlan::All, p] {
            let j = serde_json::to_string(&p).unwrap();
            assert_eq!(serde_json::from_str::<CheckPlan>(&j).unwrap(), p);
        }
        for c in [
            CheckState::Off,
            CheckState::Pending,
            CheckState::Checked,
            CheckState::Skipped,
        ] {
            let j = serde_json::to_string(&c).unwrap();
            assert_eq!(serde_json::from_str::<CheckState>(&j).unwrap(), c);
        }
        assert_eq!(CheckState::default(), CheckState::Off);
    }

    #[test]
    fn correctness_and_verdicts_round_trip() {
        let mut j = Judge::default();
        let c = j.judge(1, 2, None, &NEAR);
        let s = serde_json::to_string(&c).unwrap();
        assert!(s.contains(r#""verdict":"near_tie""#), "{s}");
        assert_eq!(serde_json::from_str::<Correctness>(&s).unwrap(), c);
        for v in [
            Verdict::Match,
            Verdict::NearTie,
            Verdict::Mismatch,
            Verdict::NonFinite,
            Verdict::Uncompared,
        ] {
            let s = serde_json::to_string(&v).unwrap();
            assert_eq!(serde_json::from_str::<Verdict>(&s).unwrap(), v);
        }
        let m = margin(&CLEAR).unwrap();
        let s = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<Margin>(&s).unwrap(), m);
    }
}
