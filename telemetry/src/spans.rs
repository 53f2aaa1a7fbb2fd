//! A pass's spans, stored compactly, and what is computed from them: per-stage busy/charged
//! time and per-level barrier timings.
//!
//! # Layout
//!
//! Struct of arrays of `u32` ns offsets from the pass's first stamp
//! ([`crate::Frame::device_start_ns`]), so a 1B pass (~15k spans) is four flat arrays and no
//! strings:
//!
//! ```text
//! start[stage * G + wg], end[stage * G + wg]     the workgroup's work on the stage
//! arrive[level * G + wg], exit[level * G + wg]   the grid barrier after the level
//!                                                (megakernel only; empty in multi mode)
//! ```
//!
//! [`MISSING`] (`u32::MAX`) marks a stamp that was not written: a workgroup that did not run
//! the stage (single-workgroup levels) or a barrier it did not reach. A span is present only
//! when both its start and end are. Offsets are taken modulo 2^32 ns (≈ 4.3 s, far beyond any
//! pass that did not already fail its 1 s spin bound); an offset that would equal [`MISSING`]
//! is stored as `MISSING − 1`.
//!
//! # Busy vs charged
//!
//! A stage's *busy* time is the mean over workgroups of its own work (start → end); `max_busy`
//! is the slowest workgroup's. Its *charged* time is what a span-per-stage profiler would
//! report: from the stage's start to the next boundary on the same workgroup — the next
//! stage's start, or for the last stage of a level the barrier exit — averaged over the
//! workgroups that ran it (a workgroup with no next boundary is charged its busy time). The
//! difference is the level's tail (waiting for the slowest workgroup), charged to whichever
//! stage closes the level. In multi mode a span-per-stage profiler charges each stage its
//! dispatch's GPU timestamps, so `charged` is the dispatch time where one is given.
//!
//! # Barriers
//!
//! Per level boundary (every level but the last, megakernel): `arrival_spread` = last − first
//! arrival, `release` = first exit − last arrival (how long the release took to reach the
//! first waiter, 0 if negative), `exit_spread` = last − first exit.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{LevelDetails, StageDetails, StageId};

/// A stamp that was not written.
pub const MISSING: u32 = u32::MAX;

/// Every workgroup's span on every stage and its barrier stamps in one pass (see the module
/// doc for the layout).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawSpans")]
pub struct Spans {
    grid: u32,
    start: Vec<u32>,
    end: Vec<u32>,
    arrive: Vec<u32>,
    exit: Vec<u32>,
}

/// The serialised form, checked on the way in (by [`Spans::from_stamps`]).
#[derive(Deserialize)]
struct RawSpans {
    grid: u32,
    start: Vec<u32>,
    end: Vec<u32>,
    arrive: Vec<u32>,
    exit: Vec<u32>,
}

impl TryFrom<RawSpans> for Spans {
    type Error = String;
    fn try_from(r: RawSpans) -> Result<Self, String> {
        Spans::from_stamps(SpanStamps {
            grid: r.grid,
            start: r.start,
            end: r.end,
            arrive: r.arrive,
            exit: r.exit,
        })
    }
}

/// The four flat arrays of a [`Spans`] as stored (the module doc's layout, [`MISSING`]
/// included): borrowed (`&[u32]`) from [`Spans::stamps`] for a lossless encoding, owned
/// (`Vec<u32>`) into [`Spans::from_stamps`] for its decoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpanStamps<A> {
    /// Workgroups (G).
    pub grid: u32,
    /// Stage starts, `start[stage * G + wg]`.
    pub start: A,
    /// Stage ends, as `start`.
    pub end: A,
    /// Barrier arrivals, `arrive[level * G + wg]`.
    pub arrive: A,
    /// Barrier exits, as `arrive`.
    pub exit: A,
}

/// One workgroup's work on one stage (a view of [`Spans`]), ns from the pass's first stamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Stage.
    pub stage: StageId,
    /// Workgroup.
    pub wg: u32,
    /// Start, ns.
    pub start_ns: u32,
    /// End, ns.
    pub end_ns: u32,
}

/// A stage's cost in one pass (see [`crate::spans`] for busy vs charged).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageTiming {
    /// Stage.
    pub stage: StageId,
    /// Its name (shared with [`crate::StageDetails::name`]).
    pub name: Arc<str>,
    /// Its level.
    pub level: u32,
    /// Mean over workgroups of the stage's own work, ns.
    pub busy_ns: u64,
    /// What a span-per-stage profiler charges it, ns.
    pub charged_ns: u64,
    /// Slowest workgroup's own work, ns.
    pub max_busy_ns: u64,
}

/// One grid barrier in one pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BarrierTiming {
    /// The level the barrier closes.
    pub level: u32,
    /// Last arrival − first arrival, ns.
    pub arrival_spread_ns: u64,
    /// First exit − last arrival, ns.
    pub release_ns: u64,
    /// Last exit − first exit, ns.
    pub exit_spread_ns: u64,
}

impl Spans {
    /// All stamps missing, for `stages` stages and `levels` barrier rows (0 in multi mode) of
    /// `grid` workgroups.
    pub fn new(grid: u32, stages: u32, levels: u32) -> Self {
        let g = grid as usize;
        Spans {
            grid,
            start: vec![MISSING; stages as usize * g],
            end: vec![MISSING; stages as usize * g],
            arrive: vec![MISSING; levels as usize * g],
            exit: vec![MISSING; levels as usize * g],
        }
    }

    /// Spans from their four arrays: `start` and `end` (and `arrive` and `exit`) of equal
    /// length, each a whole number of rows of `grid` (with a grid of 0: empty). Stamps are
    /// taken as they are, half-present ones included.
    pub fn from_stamps(s: SpanStamps<Vec<u32>>) -> Result<Self, String> {
        let g = s.grid as usize;
        let whole = |n: usize| n.is_multiple_of(g); // with g = 0: only n = 0
        if s.start.len() != s.end.len() || s.arrive.len() != s.exit.len() {
            return Err(format!(
                "spans: start/end ({}/{}) or arrive/exit ({}/{}) lengths differ",
                s.start.len(),
                s.end.len(),
                s.arrive.len(),
                s.exit.len()
            ));
        }
        if !whole(s.start.len()) || !whole(s.arrive.len()) {
            return Err(format!(
                "spans: {} span and {} barrier entries are not whole rows of grid {g}",
                s.start.len(),
                s.arrive.len()
            ));
        }
        Ok(Spans {
            grid: s.grid,
            start: s.start,
            end: s.end,
            arrive: s.arrive,
            exit: s.exit,
        })
    }

    /// The four arrays as stored, every stamp ([`MISSING`] and half-present spans
    /// included): what a lossless encoding writes.
    pub fn stamps(&self) -> SpanStamps<&[u32]> {
        // Named field by field: a field added to `Spans` fails to compile here rather than
        // going missing from recordings.
        let Spans {
            grid,
            start,
            end,
            arrive,
            exit,
        } = self;
        SpanStamps {
            grid: *grid,
            start,
            end,
            arrive,
            exit,
        }
    }

    /// No stamps stored at all (a torn frame, instrumentation off, or no device clock).
    pub fn is_empty(&self) -> bool {
        self.start.is_empty() && self.arrive.is_empty()
    }

    /// Workgroups (G).
    pub fn grid(&self) -> u32 {
        self.grid
    }

    /// Stage rows.
    pub fn stages(&self) -> u32 {
        self.start
            .len()
            .checked_div(self.grid as usize)
            .unwrap_or(0) as u32
    }

    /// Barrier rows (0 in multi mode).
    pub fn levels(&self) -> u32 {
        self.arrive
            .len()
            .checked_div(self.grid as usize)
            .unwrap_or(0) as u32
    }

    fn at(&self, row: u32, wg: u32) -> Option<usize> {
        (wg < self.grid).then(|| row as usize * self.grid as usize + wg as usize)
    }

    /// Set a stage span (offsets from the pass start; [`MISSING`] stays missing). A stage or
    /// workgroup outside the layout is ignored.
    pub fn set_span(&mut self, stage: StageId, wg: u32, start_ns: u32, end_ns: u32) {
        if let Some(i) = self.at(stage, wg).filter(|&i| i < self.start.len()) {
            self.start[i] = start_ns;
            self.end[i] = end_ns;
        }
    }

    /// Set a barrier's arrive and exit stamps for one workgroup (ignored outside the layout).
    pub fn set_barrier(&mut self, level: u32, wg: u32, arrive_ns: u32, exit_ns: u32) {
        if let Some(i) = self.at(level, wg).filter(|&i| i < self.arrive.len()) {
            self.arrive[i] = arrive_ns;
            self.exit[i] = exit_ns;
        }
    }

    /// `(start, end)` of `stage` on `wg`, if both were stamped.
    pub fn span(&self, stage: StageId, wg: u32) -> Option<(u32, u32)> {
        let i = self.at(stage, wg)?;
        let (a, b) = (*self.start.get(i)?, *self.end.get(i)?);
        (a != MISSING && b != MISSING).then_some((a, b))
    }

    /// When `wg` arrived at the barrier after `level`.
    pub fn arrive(&self, level: u32, wg: u32) -> Option<u32> {
        let v = *self.arrive.get(self.at(level, wg)?)?;
        (v != MISSING).then_some(v)
    }

    /// When `wg` left the barrier after `level`.
    pub fn exit(&self, level: u32, wg: u32) -> Option<u32> {
        let v = *self.exit.get(self.at(level, wg)?)?;
        (v != MISSING).then_some(v)
    }

    /// `stage`'s start and end stamps, one per workgroup ([`MISSING`] where not stamped):
    /// the flat rows, for sweeps that must not pay a bounds check per span.
    pub fn stage_stamps(&self, stage: StageId) -> Option<(&[u32], &[u32])> {
        let g = self.grid as usize;
        let r = stage as usize * g..(stage as usize + 1) * g;
        Some((self.start.get(r.clone())?, self.end.get(r)?))
    }

    /// The arrive and exit stamps of the barrier after `level`, one per workgroup.
    pub fn level_stamps(&self, level: u32) -> Option<(&[u32], &[u32])> {
        let g = self.grid as usize;
        let r = level as usize * g..(level as usize + 1) * g;
        Some((self.arrive.get(r.clone())?, self.exit.get(r)?))
    }

    /// Every present span, stage-major.
    pub fn iter(&self) -> impl Iterator<Item = Span> + '_ {
        let g = self.grid;
        (0..self.stages()).flat_map(move |s| {
            (0..g).filter_map(move |w| {
                self.span(s, w).map(|(a, b)| Span {
                    stage: s,
                    wg: w,
                    start_ns: a,
                    end_ns: b,
                })
            })
        })
    }

    /// Per-stage busy/charged (module doc), for every stage of `levels` that at least one
    /// workgroup ran, in level order. `dispatch_ns` (multi mode: per-stage dispatch GPU
    /// times, indexed by stage) replaces the charged time where present; pass `&[]` in mega
    /// mode.
    pub fn stage_timings(
        &self,
        stages: &[StageDetails],
        levels: &[LevelDetails],
        dispatch_ns: &[u64],
    ) -> Vec<StageTiming> {
        let mut out = Vec::with_capacity(stages.len());
        for (li, lv) in levels.iter().enumerate() {
            self.level_stage_timings(stages, li, lv, dispatch_ns, &mut out);
        }
        out
    }

    /// [`Self::stage_timings`] of level `li` (`lv`) alone, appended to `out`: it reads the
    /// level's stage rows and its barrier row only.
    pub(crate) fn level_stage_timings(
        &self,
        stages: &[StageDetails],
        li: usize,
        lv: &LevelDetails,
        dispatch_ns: &[u64],
        out: &mut Vec<StageTiming>,
    ) {
        for (k, &sid) in lv.stages.iter().enumerate() {
            let Some((starts, ends)) = self.stage_stamps(sid) else {
                continue;
            };
            // The next boundary on each workgroup: the next stage's start where that
            // stage's span is present, or for the level's last stage its barrier exit.
            let next: Option<(&[u32], Option<&[u32]>)> = match lv.stages.get(k + 1) {
                Some(&nx) => self.stage_stamps(nx).map(|(s, e)| (s, Some(e))),
                None => self.level_stamps(li as u32).map(|(_, x)| (x, None)),
            };
            let mut acc = StageSums::default();
            let spans = starts.iter().zip(ends);
            match next {
                Some((t, Some(e))) => {
                    for ((&a, &b), (&t, &e)) in spans.zip(t.iter().zip(e)) {
                        acc.add(a, b, (t != MISSING && e != MISSING).then_some(t));
                    }
                }
                Some((t, None)) => {
                    for ((&a, &b), &t) in spans.zip(t) {
                        acc.add(a, b, (t != MISSING).then_some(t));
                    }
                }
                None => {
                    for (&a, &b) in spans {
                        acc.add(a, b, None);
                    }
                }
            }
            let StageSums {
                busy,
                charged,
                n,
                max_busy,
            } = acc;
            let (Some(busy_ns), Some(charged_ns)) = (busy.checked_div(n), charged.checked_div(n))
            else {
                continue;
            };
            let Some(st) = stages.get(sid as usize) else {
                continue;
            };
            out.push(StageTiming {
                stage: sid,
                name: st.name.clone(),
                level: li as u32,
                busy_ns,
                charged_ns: dispatch_ns.get(sid as usize).copied().unwrap_or(charged_ns),
                max_busy_ns: max_busy,
            });
        }
    }

    /// Barrier timings (module doc) for every level boundary that has at least one arrival
    /// and one exit; empty in multi mode.
    pub fn barrier_timings(&self) -> Vec<BarrierTiming> {
        // The last level has no barrier after it.
        (0..self.levels().saturating_sub(1))
            .filter_map(|l| self.barrier_timing(l))
            .collect()
    }

    /// The timing of the barrier after level `l` (which must not be the last level), if it
    /// has at least one arrival and one exit.
    pub(crate) fn barrier_timing(&self, l: u32) -> Option<BarrierTiming> {
        let (arr, ext) = self.level_stamps(l)?;
        let ((a0, a1), (e0, e1)) = (min_max(arr)?, min_max(ext)?);
        Some(BarrierTiming {
            level: l,
            arrival_spread_ns: (a1 - a0) as u64,
            release_ns: e0.saturating_sub(a1) as u64,
            exit_spread_ns: (e1 - e0) as u64,
        })
    }

    /// Stage row `stage` (start, end) and barrier row `level` (arrive, exit), to be written
    /// in place (the ring decoder fills the rows it has decoded); `None` outside the layout.
    pub(crate) fn stage_row_mut(&mut self, stage: u32) -> Option<(&mut [u32], &mut [u32])> {
        let g = self.grid as usize;
        let r = stage as usize * g..(stage as usize + 1) * g;
        Some((self.start.get_mut(r.clone())?, self.end.get_mut(r)?))
    }

    /// Barrier row `level` (arrive, exit), to be written in place (see
    /// [`Self::stage_row_mut`]).
    pub(crate) fn level_row_mut(&mut self, level: u32) -> Option<(&mut [u32], &mut [u32])> {
        let g = self.grid as usize;
        let r = level as usize * g..(level as usize + 1) * g;
        Some((self.arrive.get_mut(r.clone())?, self.exit.get_mut(r)?))
    }

    /// The latest stamp of the pass: the last end of a present span or the last barrier
    /// exit, ns; `None` without any.
    pub fn last_stamp(&self) -> Option<u32> {
        // Branch-free folds (they vectorise): a missing stamp counts as 0 and sets no flag.
        let (mut last, mut any) = (0u32, false);
        for (&a, &b) in self.start.iter().zip(&self.end) {
            let present = a != MISSING && b != MISSING;
            last = last.max(if present { b } else { 0 });
            any |= present;
        }
        for &x in &self.exit {
            let present = x != MISSING;
            last = last.max(if present { x } else { 0 });
            any |= present;
        }
        any.then_some(last)
    }
}

/// One stage's sums over its workgroups (see [`Spans::stage_timings`]).
#[derive(Default)]
struct StageSums {
    busy: u64,
    charged: u64,
    n: u64,
    max_busy: u64,
}

impl StageSums {
    /// A workgroup's span `a..b` (skipped unless both are stamped) and its next boundary.
    /// Branch-free: a skipped span adds zeros.
    #[inline]
    fn add(&mut self, a: u32, b: u32, next: Option<u32>) {
        let present = a != MISSING && b != MISSING;
        let own = b.saturating_sub(a) as u64;
        let charged = next.map_or(own, |t| t.saturating_sub(a) as u64);
        let keep = if present { u64::MAX } else { 0 };
        self.busy += own & keep;
        self.max_busy = self.max_busy.max(own & keep);
        self.charged += charged & keep;
        self.n += present as u64;
    }
}

/// The smallest and largest stamp of a row, [`MISSING`] left out; `None` when all are missing.
fn min_max(row: &[u32]) -> Option<(u32, u32)> {
    // MISSING is u32::MAX: it never lowers the minimum, and counts as 0 for the maximum
    // (harmless once one stamp is present). Both folds vectorise.
    let lo = row.iter().copied().fold(MISSING, u32::min);
    let hi = row
        .iter()
        .map(|&v| if v == MISSING { 0 } else { v })
        .fold(0, u32::max);
    (lo != MISSING).then_some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::tests::details;

    /// Stage a: wg0 0..100, wg1 0..500 (slow); b: wg0 100..200, wg1 500..600. Barrier after
    /// level 0: arrivals 200 / 600, exits 700 / 710. Stage c: 700..800, 710..800.
    fn tail_pass() -> Spans {
        let mut s = Spans::new(2, 3, 2);
        s.set_span(0, 0, 0, 100);
        s.set_span(0, 1, 0, 500);
        s.set_span(1, 0, 100, 200);
        s.set_span(1, 1, 500, 600);
        s.set_span(2, 0, 700, 800);
        s.set_span(2, 1, 710, 800);
        s.set_barrier(0, 0, 200, 700);
        s.set_barrier(0, 1, 600, 710);
        s
    }

    /// The timings as first written (per workgroup through the checked accessors): the
    /// slow, obvious reference of the row sweeps.
    fn stage_timings_reference(
        sp: &Spans,
        stages: &[StageDetails],
        levels: &[LevelDetails],
        dispatch_ns: &[u64],
    ) -> Vec<StageTiming> {
        let mut out = vec![];
        for (li, lv) in levels.iter().enumerate() {
            for (k, &sid) in lv.stages.iter().enumerate() {
                let (mut busy, mut charged, mut n, mut maxb) = (0u64, 0u64, 0u64, 0u64);
                for w in 0..sp.grid {
                    let Some((a, b)) = sp.span(sid, w) else {
                        continue;
                    };
                    let own = b.saturating_sub(a) as u64;
                    let next = match lv.stages.get(k + 1) {
                        Some(&nx) => sp.span(nx, w).map(|(s, _)| s),
                        None => sp.exit(li as u32, w),
                    };
                    busy += own;
                    maxb = maxb.max(own);
                    charged += next.map_or(own, |t| t.saturating_sub(a) as u64);
                    n += 1;
                }
                let (Some(busy_ns), Some(charged_ns)) =
                    (busy.checked_div(n), charged.checked_div(n))
                else {
                    continue;
                };
                let Some(st) = stages.get(sid as usize) else {
                    continue;
                };
                out.push(StageTiming {
                    stage: sid,
                    name: st.name.clone(),
                    level: li as u32,
                    busy_ns,
                    charged_ns: dispatch_ns.get(sid as usize).copied().unwrap_or(charged_ns),
                    max_busy_ns: maxb,
                });
            }
        }
        out
    }

    fn barrier_timings_reference(sp: &Spans) -> Vec<BarrierTiming> {
        let mut out = vec![];
        for l in 0..sp.levels().saturating_sub(1) {
            let mm = |it: &mut dyn Iterator<Item = u32>| {
                it.fold(None, |m: Option<(u32, u32)>, v| match m {
                    None => Some((v, v)),
                    Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
                })
            };
            let arr = mm(&mut (0..sp.grid).filter_map(|w| sp.arrive(l, w)));
            let ext = mm(&mut (0..sp.grid).filter_map(|w| sp.exit(l, w)));
            let (Some((a0, a1)), Some((e0, e1))) = (arr, ext) else {
                continue;
            };
            out.push(BarrierTiming {
                level: l,
                arrival_spread_ns: (a1 - a0) as u64,
                release_ns: e0.saturating_sub(a1) as u64,
                exit_spread_ns: (e1 - e0) as u64,
            });
        }
        out
    }

    fn last_stamp_reference(sp: &Spans) -> Option<u32> {
        let ends = sp.iter().map(|x| x.end_ns);
        let exits =
            (0..sp.levels()).flat_map(|l| (0..sp.grid()).filter_map(move |w| sp.exit(l, w)));
        ends.chain(exits).max()
    }

    /// Random spans of `d`'s shape: each stamp missing with probability 1/`holes`, some
    /// equal to 0 or `MISSING - 1`, ends sometimes before starts.
    fn random_spans(d: &crate::RunDetails, grid: u32, levels: u32, seed: u64, holes: u64) -> Spans {
        let mut st = seed;
        let mut next = || {
            st = st.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = st;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let stamp = |next: &mut dyn FnMut() -> u64| {
            let r = next();
            if r.is_multiple_of(holes) {
                MISSING
            } else if r % 97 == 1 {
                0
            } else if r % 89 == 2 {
                MISSING - 1
            } else {
                (next() % 5_000) as u32
            }
        };
        let mut s = Spans::new(grid, d.stages.len() as u32, levels);
        for st in 0..d.stages.len() as u32 {
            for w in 0..grid {
                let (a, b) = (stamp(&mut next), stamp(&mut next));
                s.set_span(st, w, a, b);
            }
        }
        for l in 0..levels {
            for w in 0..grid {
                let (a, x) = (stamp(&mut next), stamp(&mut next));
                s.set_barrier(l, w, a, x);
            }
        }
        s
    }

    #[test]
    fn row_sweeps_compute_what_the_per_workgroup_reference_computes() {
        let d = details();
        let big = crate::synth::synthetic_run(7, 30, 11);
        let mut n = 0;
        for seed in 0..40u64 {
            for (run, grid, levels) in [
                (&d, 2u32, 2u32),
                (&d, 3, 0),
                (&d, 2, 1), // fewer barrier rows than levels
                (&big, 7, 11),
                (&big, 7, 0),
            ] {
                for holes in [2u64, 5, 1_000_000] {
                    let sp = random_spans(run, grid, levels, seed * 7 + holes, holes);
                    for disp in [&[][..], &[10, 20, 30][..]] {
                        assert_eq!(
                            sp.stage_timings(&run.stages, &run.levels, disp),
                            stage_timings_reference(&sp, &run.stages, &run.levels, disp),
                            "seed {seed} grid {grid} levels {levels} holes {holes}"
                        );
                    }
                    assert_eq!(sp.barrier_timings(), barrier_timings_reference(&sp));
                    assert_eq!(sp.last_stamp(), last_stamp_reference(&sp));
                    n += 1;
                }
            }
        }
        assert_eq!(n, 40 * 5 * 3);
        // And on the empty spans of a torn frame.
        let e = Spans::default();
        assert_eq!(e.stage_timings(&d.stages, &d.levels, &[]), vec![]);
        assert_eq!((e.barrier_timings(), e.last_stamp()), (vec![], None));
    }

    #[test]
    fn tail_is_charged_to_the_stage_that_closes_the_level() {
        let d = details();
        let t = tail_pass().stage_timings(&d.stages, &d.levels, &[]);
        let by = |n: &str| t.iter().find(|x| &*x.name == n).unwrap().clone();
        assert_eq!(by("q.l0").busy_ns, 300); // (100 + 500) / 2
        assert_eq!(by("q.l0").charged_ns, 300); // next boundary: k's start on the same wg
        assert_eq!(by("q.l0").max_busy_ns, 500);
        assert_eq!(by("k.l0").busy_ns, 100);
        // k closes the level: wg0 100 -> exit 700 = 600, wg1 500 -> 710 = 210.
        assert_eq!(by("k.l0").charged_ns, 405);
        // The last level has no barrier exit stamped: charged = busy.
        assert_eq!(by("attn.l0").charged_ns, by("attn.l0").busy_ns);
        assert_eq!(t.iter().map(|x| x.level).collect::<Vec<_>>(), [0, 0, 1]);
    }

    #[test]
    fn barrier_spreads_and_release_come_from_arrivals_and_exits() {
        assert_eq!(
            tail_pass().barrier_timings(),
            vec![BarrierTiming {
                level: 0,
                arrival_spread_ns: 400,
                release_ns: 100,
                exit_spread_ns: 10
            }]
        );
    }

    #[test]
    fn multi_mode_charges_each_stage_its_dispatch_time() {
        let d = details();
        let mut s = Spans::new(2, 3, 0);
        s.set_span(0, 0, 0, 100);
        s.set_span(1, 0, 150, 200);
        s.set_span(2, 0, 300, 340);
        let t = s.stage_timings(&d.stages, &d.levels, &[1000, 2000, 3000]);
        assert_eq!(
            t.iter().map(|x| x.charged_ns).collect::<Vec<_>>(),
            [1000, 2000, 3000]
        );
        assert_eq!(
            t.iter().map(|x| x.busy_ns).collect::<Vec<_>>(),
            [100, 50, 40]
        );
        assert!(s.barrier_timings().is_empty());
    }

    #[test]
    fn a_workgroup_that_did_not_run_a_stage_is_left_out_of_its_mean() {
        let d = details();
        let mut s = Spans::new(2, 3, 2);
        s.set_span(2, 0, 10, 30); // single-workgroup stage: wg1 never ran it
        s.set_span(0, 1, 0, MISSING); // end never stamped: not a span
        let t = s.stage_timings(&d.stages, &d.levels, &[]);
        assert_eq!(t.len(), 1, "stages nobody ran have no timing: {t:?}");
        assert_eq!((t[0].stage, t[0].busy_ns, t[0].charged_ns), (2, 20, 20));
        assert_eq!(s.span(0, 1), None);
        assert_eq!(s.iter().count(), 1);
    }

    #[test]
    fn out_of_range_lookups_are_none_not_panics() {
        let s = tail_pass();
        assert_eq!(s.span(3, 0), None);
        assert_eq!(s.span(0, 2), None);
        assert_eq!(s.arrive(2, 0), None);
        assert_eq!(s.exit(0, 9), None);
        assert_eq!((s.stages(), s.levels(), s.grid()), (3, 2, 2));
    }

    #[test]
    fn iter_yields_every_present_span_stage_major() {
        let v: Vec<_> = tail_pass().iter().map(|s| (s.stage, s.wg)).collect();
        assert_eq!(v, [(0, 0), (0, 1), (1, 0), (1, 1), (2, 0), (2, 1)]);
    }

    #[test]
    fn spans_round_trip_as_flat_arrays() {
        let s = tail_pass();
        let j = serde_json::to_string(&s).unwrap();
        assert!(
            j.starts_with(r#"{"grid":2,"start":[0,0,100,500,700,710],"#),
            "{j}"
        );
        assert_eq!(serde_json::from_str::<Spans>(&j).unwrap(), s);
        let e = Spans::default();
        assert!(e.is_empty());
        assert_eq!(
            serde_json::from_str::<Spans>(&serde_json::to_string(&e).unwrap()).unwrap(),
            e
        );
    }

    #[test]
    fn spans_with_ragged_rows_are_refused() {
        let j = r#"{"grid":2,"start":[1,2,3],"end":[4,5,6],"arrive":[],"exit":[]}"#;
        assert!(serde_json::from_str::<Spans>(j).is_err());
        let j = r#"{"grid":2,"start":[1,2],"end":[4],"arrive":[],"exit":[]}"#;
        assert!(serde_json::from_str::<Spans>(j).is_err());
    }

    #[test]
    fn stage_and_level_stamps_are_the_flat_rows_and_none_past_the_end() {
        let mut s = Spans::new(3, 2, 1);
        s.set_span(1, 2, 10, 20);
        s.set_barrier(0, 1, 30, 40);
        let (a, b) = s.stage_stamps(1).unwrap();
        assert_eq!(
            (a, b),
            (&[MISSING, MISSING, 10][..], &[MISSING, MISSING, 20][..])
        );
        let (a, e) = s.level_stamps(0).unwrap();
        assert_eq!((a[1], e[1]), (30, 40));
        assert!(s.stage_stamps(2).is_none() && s.level_stamps(1).is_none());
    }

    #[test]
    fn span_and_barrier_timing_round_trip() {
        let s = Span {
            stage: 3,
            wg: 1,
            start_ns: 10,
            end_ns: 20,
        };
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<Span>(&j).unwrap(), s);
        let b = tail_pass().barrier_timings().remove(0);
        let j = serde_json::to_string(&b).unwrap();
        assert_eq!(serde_json::from_str::<BarrierTiming>(&j).unwrap(), b);
    }
}
