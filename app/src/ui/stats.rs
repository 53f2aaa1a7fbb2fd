//! Statistics kept at ingest and derived for display: cumulative hdrhistograms per stage,
//! per stage kind and per barrier level (all passes), and a ring of per-pass values from which
//! a sliding window or a chosen range of passes is summarised on demand. Never draws.

use std::collections::VecDeque;

use baro_telemetry::{Frame, StageKind};
use hdrhistogram::Histogram;

/// How many passes of per-pass values are kept for windows and ranges.
pub const RING: usize = 2048;
/// The sliding window, passes.
pub const WINDOW: usize = 256;

/// A histogram of ns values (1 ns .. 100 s, 2 significant digits: small enough to keep
/// hundreds of them and to clone on freeze).
pub fn hist() -> Histogram<u32> {
    Histogram::new_with_bounds(1, 100_000_000_000, 2)
        .unwrap_or_else(|e| panic!("hdrhistogram bounds are constants: {e}"))
}

fn rec(h: &mut Histogram<u32>, v: u64) {
    // Saturates at the top bound instead of failing: a 100 s stage is already a failure.
    h.saturating_record(v.max(1));
}

/// p50/p90/p99/p99.9/max of a histogram, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pcts {
    /// Median.
    pub p50: u64,
    /// 90th.
    pub p90: u64,
    /// 99th.
    pub p99: u64,
    /// 99.9th.
    pub p999: u64,
    /// Max.
    pub max: u64,
    /// Samples.
    pub n: u64,
}

impl Pcts {
    /// From a histogram.
    pub fn of(h: &Histogram<u32>) -> Pcts {
        if h.is_empty() {
            return Pcts::default();
        }
        Pcts {
            p50: h.value_at_quantile(0.5),
            p90: h.value_at_quantile(0.9),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
            n: h.len(),
        }
    }
}

/// One pass's values, kept in the ring.
#[derive(Clone, Debug)]
pub struct PassValues {
    /// Pass number.
    pub pass: u64,
    /// Pass duration (GPU time, else wall), ns.
    pub dur_ns: u64,
    /// Busy ns per stage id (u32::MAX = not run).
    pub busy: Box<[u32]>,
    /// Charged ns per stage id.
    pub charged: Box<[u32]>,
    /// Per level: arrival spread, release, exit spread (ns), last arriver.
    pub barriers: Box<[[u32; 4]]>,
}

/// Cumulative and per-pass statistics.
#[derive(Clone)]
pub struct Stats {
    /// Stage kinds by stage id.
    pub kinds: Vec<StageKind>,
    /// Busy, all passes, by stage id.
    pub busy: Vec<Histogram<u32>>,
    /// Charged, all passes, by stage id.
    pub charged: Vec<Histogram<u32>>,
    /// Busy summed over the stages of a kind, per pass, by kind code.
    pub kind_busy: Vec<Histogram<u32>>,
    /// Charged summed per kind.
    pub kind_charged: Vec<Histogram<u32>>,
    /// Per level: arrival spread, release, exit spread.
    pub barrier: Vec<[Histogram<u32>; 3]>,
    /// Pass durations, all passes.
    pub pass: Histogram<u32>,
    /// Per-pass values, newest last.
    pub ring: VecDeque<PassValues>,
}

impl Stats {
    /// For a run with these stage kinds and `levels` levels.
    pub fn new(kinds: Vec<StageKind>, levels: usize) -> Stats {
        let n = kinds.len();
        Stats {
            busy: (0..n).map(|_| hist()).collect(),
            charged: (0..n).map(|_| hist()).collect(),
            kind_busy: StageKind::ALL.iter().map(|_| hist()).collect(),
            kind_charged: StageKind::ALL.iter().map(|_| hist()).collect(),
            barrier: (0..levels).map(|_| [hist(), hist(), hist()]).collect(),
            pass: hist(),
            ring: VecDeque::with_capacity(RING),
            kinds,
        }
    }

    /// Take one pass in. `last_arrivers[level]` = the workgroup that arrived last.
    pub fn ingest(&mut self, f: &Frame, dur_ns: u64, last_arrivers: &[u32]) {
        let n = self.kinds.len();
        let mut busy = vec![u32::MAX; n].into_boxed_slice();
        let mut charged = vec![u32::MAX; n].into_boxed_slice();
        let mut kb = [0u64; StageKind::ALL.len()];
        let mut kc = [0u64; StageKind::ALL.len()];
        for t in &f.stages {
            let i = t.stage as usize;
            if i >= n {
                continue;
            }
            rec(&mut self.busy[i], t.busy_ns);
            rec(&mut self.charged[i], t.charged_ns);
            busy[i] = t.busy_ns.min(u32::MAX as u64 - 1) as u32;
            charged[i] = t.charged_ns.min(u32::MAX as u64 - 1) as u32;
            let k = self.kinds[i].code() as usize;
            kb[k] += t.busy_ns;
            kc[k] += t.charged_ns;
        }
        for k in 0..kb.len() {
            if kb[k] > 0 {
                rec(&mut self.kind_busy[k], kb[k]);
                rec(&mut self.kind_charged[k], kc[k]);
            }
        }
        let mut bars = vec![[u32::MAX; 4]; self.barrier.len()].into_boxed_slice();
        for b in &f.barriers {
            let l = b.level as usize;
            let Some(h) = self.barrier.get_mut(l) else {
                continue;
            };
            rec(&mut h[0], b.arrival_spread_ns);
            rec(&mut h[1], b.release_ns);
            rec(&mut h[2], b.exit_spread_ns);
            let c = |v: u64| v.min(u32::MAX as u64 - 1) as u32;
            bars[l] = [
                c(b.arrival_spread_ns),
                c(b.release_ns),
                c(b.exit_spread_ns),
                last_arrivers.get(l).copied().unwrap_or(u32::MAX),
            ];
        }
        rec(&mut self.pass, dur_ns);
        if self.ring.len() == RING {
            self.ring.pop_front();
        }
        self.ring.push_back(PassValues {
            pass: f.pass,
            dur_ns,
            busy,
            charged,
            barriers: bars,
        });
    }

    /// The ring entries of a scope: the last `WINDOW`, or passes `lo..=hi`.
    pub fn select(&self, range: Option<(u64, u64)>) -> impl Iterator<Item = &PassValues> {
        let skip = match range {
            None => self.ring.len().saturating_sub(WINDOW),
            Some(_) => 0,
        };
        self.ring
            .iter()
            .skip(skip)
            .filter(move |p| range.is_none_or(|(lo, hi)| p.pass >= lo && p.pass <= hi))
    }
}

/// Histograms rebuilt from a selection of ring entries.
pub struct Selected {
    /// Busy by stage.
    pub busy: Vec<Histogram<u32>>,
    /// Charged by stage.
    pub charged: Vec<Histogram<u32>>,
    /// Busy by kind.
    pub kind_busy: Vec<Histogram<u32>>,
    /// Charged by kind.
    pub kind_charged: Vec<Histogram<u32>>,
    /// Barrier histograms by level.
    pub barrier: Vec<[Histogram<u32>; 3]>,
    /// Pass durations.
    pub pass: Histogram<u32>,
    /// Per level: how often each workgroup arrived last (workgroup, count), top one.
    pub last: Vec<Option<(u32, u32)>>,
    /// Over all levels: how often each workgroup arrived last.
    pub last_all: Vec<u32>,
    /// Barriers counted in `last_all`.
    pub barriers_seen: u32,
    /// Passes selected.
    pub passes: u64,
}

impl Stats {
    /// Summaries of a scope (`None` range = the sliding window).
    pub fn selected(&self, range: Option<(u64, u64)>, grid: u32) -> Selected {
        let n = self.kinds.len();
        let nl = self.barrier.len();
        let mut s = Selected {
            busy: (0..n).map(|_| hist()).collect(),
            charged: (0..n).map(|_| hist()).collect(),
            kind_busy: StageKind::ALL.iter().map(|_| hist()).collect(),
            kind_charged: StageKind::ALL.iter().map(|_| hist()).collect(),
            barrier: (0..nl).map(|_| [hist(), hist(), hist()]).collect(),
            pass: hist(),
            last: vec![None; nl],
            last_all: vec![0; grid as usize],
            barriers_seen: 0,
            passes: 0,
        };
        let mut per_level: Vec<Vec<(u32, u32)>> = vec![vec![]; nl];
        for p in self.select(range) {
            s.passes += 1;
            rec(&mut s.pass, p.dur_ns);
            let mut kb = [0u64; StageKind::ALL.len()];
            let mut kc = [0u64; StageKind::ALL.len()];
            for i in 0..n.min(p.busy.len()) {
                if p.busy[i] == u32::MAX {
                    continue;
                }
                rec(&mut s.busy[i], p.busy[i] as u64);
                rec(&mut s.charged[i], p.charged[i] as u64);
                let k = self.kinds[i].code() as usize;
                kb[k] += p.busy[i] as u64;
                kc[k] += p.charged[i] as u64;
            }
            for k in 0..kb.len() {
                if kb[k] > 0 {
                    rec(&mut s.kind_busy[k], kb[k]);
                    rec(&mut s.kind_charged[k], kc[k]);
                }
            }
            for (l, b) in p.barriers.iter().enumerate().take(nl) {
                if b[0] == u32::MAX {
                    continue;
                }
                for j in 0..3 {
                    rec(&mut s.barrier[l][j], b[j] as u64);
                }
                let w = b[3];
                if let Some(c) = s.last_all.get_mut(w as usize) {
                    *c += 1;
                    s.barriers_seen += 1;
                    match per_level[l].iter_mut().find(|(x, _)| *x == w) {
                        Some((_, c)) => *c += 1,
                        None => per_level[l].push((w, 1)),
                    }
                }
            }
        }
        for (l, v) in per_level.iter().enumerate() {
            s.last[l] = v
                .iter()
                .copied()
                .max_by_key(|&(w, c)| (c, std::cmp::Reverse(w)));
        }
        s
    }
}
