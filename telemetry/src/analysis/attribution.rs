//! Attribution warnings: where a stage's charged time is not that stage's cost.
//!
//! A span-per-stage profiler charges a stage from its start to the next boundary on the same
//! workgroup, so the last stage of a level also carries the level's barrier wait: the time
//! its workgroups spent waiting for the last one to arrive. Where that wait (charged − busy)
//! is at least [`GAP_MIN_NS`] and at least [`GAP_MIN_FRAC`] of the stage's busy time, the
//! stage gets a [`TailWarning`]: the wait is the level's tail, and (where the barrier stamps
//! were kept) the workgroup that arrived last is named. Where the slowest workgroup's busy is
//! at least twice the mean, the stage's work sits on a few workgroups and the "tail" is their
//! work, not waiting: the warning carries that number too.
//!
//! A [`Straggler`] is one workgroup that arrives last at more than a quarter of the barriers
//! and more than three times its fair share (grid > 1).
//!
//! The same rules serve one pass ([`frame_warnings`], from its own timings) and a window of
//! passes (the dashboard: [`tails`] and [`straggler`] over medians and counts).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Frame, RunDetails, Spans, StageId, StageTiming, Telemetry};

/// Charged − busy must be at least this many ns to be named …
pub const GAP_MIN_NS: u64 = 5_000;
/// … and at least this fraction of busy.
pub const GAP_MIN_FRAC: f64 = 0.2;

/// A pass's straggler is named only over at least this many of its barriers. Over fewer,
/// chance names one: among 16 workgroups, one arrives last at 3 of a pass's 11 barriers in
/// about a third of clean passes (a window of passes counts far more barriers). From 32 on,
/// a quarter is at least 9 last arrivals.
pub const STRAGGLER_MIN_BARRIERS: u32 = 32;

/// What one stage cost over the pass or window being analysed (one pass's values, or the
/// medians of a window).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StageCost {
    /// Mean over workgroups of the stage's own work, ns.
    pub busy_ns: u64,
    /// What a span-per-stage profiler charges it, ns.
    pub charged_ns: u64,
    /// The slowest workgroup's own work, ns, where known.
    pub slowest_ns: Option<u64>,
}

/// A level's last stage charged with the level's barrier wait.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TailWarning {
    /// The stage charged.
    pub stage: StageId,
    /// Its name.
    pub name: Arc<str>,
    /// Its level: the tail is this level's barrier wait.
    pub level: u32,
    /// What it is charged, ns.
    pub charged_ns: u64,
    /// Its own work (mean over workgroups), ns.
    pub busy_ns: u64,
    /// Charged − busy: the level's tail, ns.
    pub tail_ns: u64,
    /// The slowest workgroup's busy, ns, only where it is at least twice `busy_ns` (the tail
    /// is then a few workgroups' work, not waiting).
    pub slowest_ns: Option<u64>,
    /// The workgroup that arrived last at the level's barrier (the most often last, over a
    /// window); `None` where no barrier stamp was kept (multi mode, a pass without spans).
    pub last_arriver: Option<u32>,
}

/// One workgroup that arrives last at the grid barriers far more often than its share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Straggler {
    /// The workgroup.
    pub workgroup: u32,
    /// Barriers at which it arrived last.
    pub last_at: u32,
    /// Barriers counted.
    pub barriers: u32,
    /// Passes they were counted over.
    pub passes: u64,
}

/// An attribution warning, tagged by `"kind"` in JSON: `"straggler"` or `"tail"`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AttributionWarning {
    /// One workgroup is the grid's usual last arriver.
    Straggler(Straggler),
    /// A stage's charged time holds its level's tail.
    Tail(TailWarning),
}

/// Whole microseconds, `378 µs`: the warnings' unit (the dashboard prints this text).
fn us(ns: u64) -> String {
    format!("{} µs", ns.saturating_add(500) / 1000)
}

impl fmt::Display for TailWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} charged {}, busy {}",
            self.name,
            us(self.charged_ns),
            us(self.busy_ns)
        )?;
        if let Some(s) = self.slowest_ns {
            write!(f, " (slowest workgroup {})", us(s))?;
        }
        write!(f, ": {} is level {}'s tail", us(self.tail_ns), self.level)?;
        if let Some(w) = self.last_arriver {
            write!(f, ", waiting for workgroup {w}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Straggler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "workgroup {} arrived last at {} of {} barriers ({:.0}%) over the last {} passes",
            self.workgroup,
            self.last_at,
            self.barriers,
            100.0 * f64::from(self.last_at) / f64::from(self.barriers.max(1)),
            self.passes
        )
    }
}

impl fmt::Display for AttributionWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttributionWarning::Straggler(s) => s.fmt(f),
            AttributionWarning::Tail(t) => t.fmt(f),
        }
    }
}

impl AttributionWarning {
    /// The tail warning, if this is one.
    pub fn tail(&self) -> Option<&TailWarning> {
        match self {
            AttributionWarning::Tail(t) => Some(t),
            AttributionWarning::Straggler(_) => None,
        }
    }
}

/// Whether a level's closing stage with this busy and charged time carries a tail worth a
/// warning: charged − busy at least [`GAP_MIN_NS`] and [`GAP_MIN_FRAC`] of busy.
pub fn is_tail(busy_ns: u64, charged_ns: u64) -> bool {
    let tail = charged_ns.saturating_sub(busy_ns);
    tail >= GAP_MIN_NS && tail as f64 >= GAP_MIN_FRAC * busy_ns as f64
}

/// The stage timings of `f` that [`frame_warnings`] names as tails (each closes its level),
/// in the frame's order, without allocating: for counters.
pub fn frame_tail_stages<'a>(
    run: &'a RunDetails,
    f: &'a Frame,
) -> impl Iterator<Item = &'a StageTiming> + 'a {
    f.stages.iter().filter(move |t| {
        let closes = (run.levels.iter())
            .find(|lv| lv.index == t.level)
            .and_then(|lv| lv.stages.last())
            == Some(&t.stage);
        closes && is_tail(t.busy_ns, t.charged_ns)
    })
}

/// Adds to `counts[w]` the barriers of `spans` at which workgroup `w` arrived last, and
/// returns how many barriers were counted (a workgroup outside `counts` is not). Allocates
/// nothing.
pub fn count_last_arrivals(spans: &Spans, counts: &mut [u32]) -> u32 {
    let mut seen = 0;
    for l in 0..spans.levels() {
        if let Some(c) = last_arriver(spans, l).and_then(|w| counts.get_mut(w as usize)) {
            *c += 1;
            seen += 1;
        }
    }
    seen
}

/// One pass's straggler ([`frame_warnings`]' rule) from its last-arrival `counts` over
/// `barriers` (see [`count_last_arrivals`]).
pub fn pass_straggler(counts: &[u32], barriers: u32, grid: u32) -> Option<Straggler> {
    straggler(counts, barriers, grid, 1).filter(|_| barriers >= STRAGGLER_MIN_BARRIERS)
}

/// The tail warnings of `run`'s levels, the largest tail first (levels in order among equal
/// tails). `cost(stage)` is what the stage cost (`None`: it did not run); `last_arriver(level)`
/// the workgroup that arrived last at the level's barrier.
pub fn tails(
    run: &RunDetails,
    cost: impl Fn(StageId) -> Option<StageCost>,
    last_arriver: impl Fn(u32) -> Option<u32>,
) -> Vec<TailWarning> {
    let mut out = vec![];
    for lv in &run.levels {
        let Some(&sid) = lv.stages.last() else {
            continue;
        };
        let Some(c) = cost(sid) else {
            continue;
        };
        if !is_tail(c.busy_ns, c.charged_ns) {
            continue;
        }
        let tail = c.charged_ns - c.busy_ns;
        let name = run
            .stages
            .get(sid as usize)
            .map_or_else(|| Arc::from(format!("stage {sid}")), |s| s.name.clone());
        out.push(TailWarning {
            stage: sid,
            name,
            level: lv.index,
            charged_ns: c.charged_ns,
            busy_ns: c.busy_ns,
            tail_ns: tail,
            slowest_ns: c.slowest_ns.filter(|&s| s >= c.busy_ns.saturating_mul(2)),
            last_arriver: last_arriver(lv.index),
        });
    }
    // Stable: equal tails keep the levels' order.
    out.sort_by_key(|t| std::cmp::Reverse(t.tail_ns));
    out
}

/// The straggler among `grid` workgroups, where there is one: `last_counts[w]` = barriers at
/// which `w` arrived last, out of `barriers` counted over `passes` passes. The most often last
/// (the lowest workgroup among equals) is named when it was last at more than a quarter of the
/// barriers and at more than three times its fair share.
pub fn straggler(last_counts: &[u32], barriers: u32, grid: u32, passes: u64) -> Option<Straggler> {
    let (w, &n) = last_counts
        .iter()
        .enumerate()
        .max_by_key(|&(w, c)| (*c, std::cmp::Reverse(w)))?;
    let fair = f64::from(barriers) / f64::from(grid.max(1));
    let named = grid > 1 && f64::from(n) > 0.25 * f64::from(barriers) && f64::from(n) > 3.0 * fair;
    named.then_some(Straggler {
        workgroup: w as u32,
        last_at: n,
        barriers,
        passes,
    })
}

/// Per level, the workgroup whose barrier arrival is the latest (the lowest among equal
/// stamps); `None` where no workgroup's arrival was stamped. Read from the arrival stamps the
/// spans already hold.
pub fn last_arrivers(spans: &Spans) -> Vec<Option<u32>> {
    (0..spans.levels())
        .map(|l| last_arriver(spans, l))
        .collect()
}

/// [`last_arrivers`] of one level.
pub fn last_arriver(spans: &Spans, level: u32) -> Option<u32> {
    let mut best: Option<(u32, u32)> = None;
    for w in 0..spans.grid() {
        if let Some(a) = spans.arrive(level, w) {
            if best.is_none_or(|(t, _)| a > t) {
                best = Some((a, w));
            }
        }
    }
    best.map(|(_, w)| w)
}

/// One pass's attribution warnings, from its own stage timings and barrier stamps, with the
/// dashboard's thresholds: the straggler first (counted over this pass's barriers, where it
/// has at least [`STRAGGLER_MIN_BARRIERS`]), then the tails, largest first. None for a frame
/// without stage timings.
pub fn frame_warnings(run: &RunDetails, f: &Frame) -> Vec<AttributionWarning> {
    let mut cost = vec![None; run.stages.len()];
    for t in &f.stages {
        if let Some(c) = cost.get_mut(t.stage as usize) {
            *c = Some(StageCost {
                busy_ns: t.busy_ns,
                charged_ns: t.charged_ns,
                slowest_ns: Some(t.max_busy_ns),
            });
        }
    }
    let last = last_arrivers(&f.spans);
    let mut counts = vec![0u32; f.spans.grid() as usize];
    let seen = count_last_arrivals(&f.spans, &mut counts);
    let mut out: Vec<AttributionWarning> = pass_straggler(&counts, seen, f.spans.grid())
        .map(AttributionWarning::Straggler)
        .into_iter()
        .collect();
    out.extend(
        tails(
            run,
            |s| cost.get(s as usize).copied().flatten(),
            |l| last.get(l as usize).copied().flatten(),
        )
        .into_iter()
        .map(AttributionWarning::Tail),
    );
    out
}

/// The stream as JSON lines with the analysis beside the data: every `frame` line gains
/// `"attribution"`, the pass's [`frame_warnings`] (an empty list where there are none, or
/// before a `start`), and `"bandwidth"`, its [`super::bandwidth::pass_bandwidth`] (null
/// without a GPU time or weight bytes); every other message is its plain [`Telemetry::to_json_line`]. One
/// writer for `run --json` and `replay --headless --json`, so a replay prints what the run
/// printed.
#[derive(Clone, Debug, Default)]
pub struct JsonLines {
    run: Option<RunDetails>,
    /// The run's weight bytes and peak, derived once at its start.
    bandwidth: Option<super::bandwidth::RunBandwidth>,
}

impl JsonLines {
    /// Before any message.
    pub fn new() -> JsonLines {
        JsonLines::default()
    }

    /// `t` as one JSON line (no newline). A frame's warnings are computed from its spans
    /// first; `spans: false` then leaves the spans out of the line.
    pub fn line(&mut self, t: Telemetry, spans: bool) -> serde_json::Result<String> {
        if let Telemetry::Start(d) = &t {
            self.run = Some(d.clone());
            self.bandwidth = Some(super::bandwidth::RunBandwidth::of(d));
        }
        match t {
            Telemetry::Frame(mut f) => {
                let w = match &self.run {
                    Some(run) => frame_warnings(run, &f),
                    None => vec![],
                };
                let bw = self.bandwidth.and_then(|b| b.pass(&f));
                if !spans {
                    f.spans = Spans::default();
                }
                let mut line = Telemetry::Frame(f).to_json_line()?;
                // A frame's line is one JSON object: its closing brace is the last byte.
                if line.ends_with('}') {
                    line.pop();
                    line.push_str(",\"attribution\":");
                    line.push_str(&serde_json::to_string(&w)?);
                    line.push_str(",\"bandwidth\":");
                    line.push_str(&serde_json::to_string(&bw)?);
                    line.push('}');
                }
                Ok(line)
            }
            t => t.to_json_line(),
        }
    }
}

#[cfg(test)]
#[path = "attribution_tests.rs"]
mod tests;
