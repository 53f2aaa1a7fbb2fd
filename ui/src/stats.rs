//! Statistics kept at ingest and derived for display: cumulative hdrhistograms per stage,
//! per stage kind and per barrier level (all passes), and a ring of per-pass values from which
//! a sliding window or a chosen range of passes is summarised on demand; and [`Summary`], what
//! a whole stream added up to (the closing summary line, headless and on quitting the
//! dashboard). Never draws.

use std::collections::VecDeque;

use baro_telemetry::fail::bits;
use baro_telemetry::{CheckState, EndReason, Frame, StageKind, Telemetry, Verdict};
use hdrhistogram::Histogram;

use crate::text::{ms, verdict_name};

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
    /// The slowest workgroup's busy ns per stage id (`busy` is the grid's mean).
    pub slowest: Box<[u32]>,
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
        let mut slowest = vec![u32::MAX; n].into_boxed_slice();
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
            slowest[i] = t.max_busy_ns.min(u32::MAX as u64 - 1) as u32;
            let k = self.kinds[i].code() as usize;
            // Saturating: a damaged or crafted recording's times near u64::MAX must not
            // wrap to a small (plausible, wrong) kind time.
            kb[k] = kb[k].saturating_add(t.busy_ns);
            kc[k] = kc[k].saturating_add(t.charged_ns);
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
            slowest,
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

/// Exact percentiles of a selection of ring entries (the window or a range: small enough
/// to sort, and exact where a histogram would bucket).
pub struct Selected {
    /// Busy by stage.
    pub busy: Vec<Pcts>,
    /// Charged by stage.
    pub charged: Vec<Pcts>,
    /// The slowest workgroup's busy by stage.
    pub slowest: Vec<Pcts>,
    /// Busy by kind.
    pub kind_busy: Vec<Pcts>,
    /// Charged by kind.
    pub kind_charged: Vec<Pcts>,
    /// Barrier percentiles by level: arrival spread, release, exit spread.
    pub barrier: Vec<[Pcts; 3]>,
    /// Pass durations.
    pub pass: Pcts,
    /// Per level: the workgroup that arrived last most often, with its count.
    pub last: Vec<Option<(u32, u32)>>,
    /// Over all levels: how often each workgroup arrived last.
    pub last_all: Vec<u32>,
    /// Barriers counted in `last_all`.
    pub barriers_seen: u32,
    /// Passes selected.
    pub passes: u64,
}

/// Percentiles of `v` (sorted in place).
pub fn pcts(v: &mut [u64]) -> Pcts {
    if v.is_empty() {
        return Pcts::default();
    }
    v.sort_unstable();
    let q = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Pcts {
        p50: q(0.5),
        p90: q(0.9),
        p99: q(0.99),
        p999: q(0.999),
        max: v[v.len() - 1],
        n: v.len() as u64,
    }
}

impl Stats {
    /// Summaries of a scope (`None` range = the sliding window).
    pub fn selected(&self, range: Option<(u64, u64)>, grid: u32) -> Selected {
        let n = self.kinds.len();
        let nl = self.barrier.len();
        let nk = StageKind::ALL.len();
        let sel: Vec<&PassValues> = self.select(range).collect();
        let m = sel.len();
        // Column-major scratch: one run of m values per series.
        let mut busy = vec![0u64; n * m];
        let mut charged = vec![0u64; n * m];
        let mut slowest = vec![0u64; n * m];
        let mut nb = vec![0usize; n];
        let mut kb = vec![0u64; nk * m];
        let mut kc = vec![0u64; nk * m];
        let mut bars = vec![0u64; nl * 3 * m];
        let mut nbar = vec![0usize; nl];
        let mut last_all = vec![0u32; grid as usize];
        let mut seen = 0;
        let mut per_level: Vec<Vec<(u32, u32)>> = vec![vec![]; nl];
        let mut pass = Vec::with_capacity(m);
        for (j, p) in sel.iter().enumerate() {
            pass.push(p.dur_ns);
            for i in 0..n.min(p.busy.len()) {
                if p.busy[i] == u32::MAX {
                    continue;
                }
                busy[i * m + nb[i]] = p.busy[i] as u64;
                charged[i * m + nb[i]] = p.charged[i] as u64;
                slowest[i * m + nb[i]] = p.slowest[i] as u64;
                nb[i] += 1;
                let k = self.kinds[i].code() as usize;
                kb[k * m + j] = kb[k * m + j].saturating_add(u64::from(p.busy[i]));
                kc[k * m + j] = kc[k * m + j].saturating_add(u64::from(p.charged[i]));
            }
            for (l, b) in p.barriers.iter().enumerate().take(nl) {
                if b[0] == u32::MAX {
                    continue;
                }
                for x in 0..3 {
                    bars[(l * 3 + x) * m + nbar[l]] = b[x] as u64;
                }
                nbar[l] += 1;
                let w = b[3];
                if let Some(c) = last_all.get_mut(w as usize) {
                    *c += 1;
                    seen += 1;
                    match per_level[l].iter_mut().find(|(x, _)| *x == w) {
                        Some((_, c)) => *c += 1,
                        None => per_level[l].push((w, 1)),
                    }
                }
            }
        }
        let nonzero = |v: &mut [u64]| {
            let mut w: Vec<u64> = v.iter().copied().filter(|&x| x > 0).collect();
            pcts(&mut w)
        };
        Selected {
            busy: (0..n)
                .map(|i| pcts(&mut busy[i * m..i * m + nb[i]]))
                .collect(),
            charged: (0..n)
                .map(|i| pcts(&mut charged[i * m..i * m + nb[i]]))
                .collect(),
            slowest: (0..n)
                .map(|i| pcts(&mut slowest[i * m..i * m + nb[i]]))
                .collect(),
            kind_busy: (0..nk)
                .map(|k| nonzero(&mut kb[k * m..(k + 1) * m]))
                .collect(),
            kind_charged: (0..nk)
                .map(|k| nonzero(&mut kc[k * m..(k + 1) * m]))
                .collect(),
            barrier: (0..nl)
                .map(|l| {
                    let mut one = |x: usize| {
                        let o = (l * 3 + x) * m;
                        pcts(&mut bars[o..o + nbar[l]])
                    };
                    [one(0), one(1), one(2)]
                })
                .collect(),
            pass: pcts(&mut pass),
            last: per_level
                .iter()
                .map(|v| {
                    v.iter()
                        .copied()
                        .max_by_key(|&(w, c)| (c, std::cmp::Reverse(w)))
                })
                .collect(),
            last_all,
            barriers_seen: seen,
            passes: m as u64,
        }
    }
}

/// What a whole stream added up to: passes, speed, verdicts, the fail word's bits.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Frames seen.
    pub passes: u64,
    /// Their host wall time, summed, ns.
    pub wall_ns: u64,
    /// Their GPU time, summed, ns (over `gpu_passes`).
    pub gpu_ns: u64,
    /// Frames with a GPU time.
    pub gpu_passes: u64,
    /// Verdicts by kind (match, near-tie, mismatch, non-finite, uncompared).
    pub verdicts: [u64; 5],
    /// Passes sent to the live reference whose verdict has not come.
    pub pending: u64,
    /// Passes the reference does not judge (checks off or skipped).
    pub unchecked: u64,
    /// Passes whose fail word is not clean.
    pub failed: u64,
    /// Failed passes by fail-word bit, in [`bits::NAMES`] order.
    pub bits: [u64; bits::NAMES.len()],
    /// Torn ring frames.
    pub torn: u64,
    /// Frames dropped by the stream's consumer (the largest count seen).
    pub dropped: u64,
    /// How the run ended, once it has.
    pub end: Option<EndReason>,
}

const VERDICTS: [Verdict; 5] = [
    Verdict::Match,
    Verdict::NearTie,
    Verdict::Mismatch,
    Verdict::NonFinite,
    Verdict::Uncompared,
];

impl Summary {
    /// Take one message in.
    pub fn ingest(&mut self, m: &Telemetry) {
        match m {
            Telemetry::Start(_) => {}
            Telemetry::Frame(f) => {
                self.passes += 1;
                // Saturating, as every sum of recorded times (a damaged recording's near
                // u64::MAX must not wrap to a small total and a huge tok/s).
                self.wall_ns = self.wall_ns.saturating_add(f.wall_ns);
                if let Some(g) = f.gpu_ns {
                    self.gpu_ns = self.gpu_ns.saturating_add(g);
                    self.gpu_passes += 1;
                }
                match (&f.correctness, f.check) {
                    (Some(c), _) => self.verdicts[c.verdict as usize] += 1,
                    (None, CheckState::Pending) => self.pending += 1,
                    (None, _) => self.unchecked += 1,
                }
                if !f.fail.word.ok() {
                    self.failed += 1;
                    for (i, (bit, _)) in bits::NAMES.iter().enumerate() {
                        if f.fail.word.has(*bit) {
                            self.bits[i] += 1;
                        }
                    }
                }
                self.torn += u64::from(f.torn);
                self.dropped = self.dropped.max(f.dropped);
            }
            Telemetry::Correctness { correctness, .. } => {
                self.pending = self.pending.saturating_sub(1);
                self.verdicts[correctness.verdict as usize] += 1;
            }
            Telemetry::End {
                dropped, reason, ..
            } => {
                self.dropped = self.dropped.max(*dropped);
                self.end = Some(reason.clone());
            }
            Telemetry::Sensor(_) | Telemetry::Clock(_) => {}
        }
    }

    /// Tokens per second: passes over their summed wall time.
    pub fn tok_s(&self) -> Option<f64> {
        (self.wall_ns > 0).then(|| self.passes as f64 * 1e9 / self.wall_ns as f64)
    }

    /// The verdict counts that are not zero: `18 match, 2 pending` (`no tokens` for none).
    pub fn tokens(&self) -> String {
        let mut v: Vec<String> = VERDICTS
            .iter()
            .filter(|k| self.verdicts[**k as usize] > 0)
            .map(|k| format!("{} {}", self.verdicts[*k as usize], verdict_name(*k)))
            .collect();
        if self.pending > 0 {
            v.push(format!("{} pending", self.pending));
        }
        if self.unchecked > 0 {
            v.push(format!("{} not checked", self.unchecked));
        }
        if v.is_empty() {
            "no tokens".into()
        } else {
            v.join(", ")
        }
    }

    /// The fail word's tally: `20 clean` or `3 failed of 20 (barrier-timeout ×3, …)`.
    pub fn fail_word(&self) -> String {
        if self.failed == 0 {
            return format!("{} clean", self.passes);
        }
        let by: Vec<String> = bits::NAMES
            .iter()
            .zip(self.bits)
            .filter(|(_, n)| *n > 0)
            .map(|((_, name), n)| format!("{name} ×{n}"))
            .collect();
        let by = if by.is_empty() {
            String::new()
        } else {
            format!(" ({})", by.join(", "))
        };
        format!("{} failed of {}{by}", self.failed, self.passes)
    }

    /// The closing line.
    pub fn line(&self) -> String {
        let speed = match self.tok_s() {
            Some(r) => format!("{r:.1} tok/s ({:.3} s of wall)", self.wall_ns as f64 / 1e9),
            None => "tok/s n/a (no wall time)".into(),
        };
        let gpu = match self.gpu_passes {
            0 => "gpu n/a".into(),
            n => format!("gpu {}/pass", ms(self.gpu_ns / n)),
        };
        let mut extra = String::new();
        if self.torn > 0 {
            extra += &format!(" | torn {}", self.torn);
        }
        if self.dropped > 0 {
            extra += &format!(" | dropped {}", self.dropped);
        }
        if let Some(e) = &self.end {
            extra += &format!(" | end: {e}");
        }
        format!(
            "summary: {} passes, {speed}, {gpu} | tokens: {} | fail word: {}{extra}",
            self.passes,
            self.tokens(),
            self.fail_word()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baro_telemetry::StageTiming;

    /// Recorded times near `u64::MAX` (a damaged or crafted recording): the per-kind sums and
    /// the whole stream's wall and GPU totals saturate at `u64::MAX` (never below any one
    /// part), so the damaged passes read as the slowest there are; they do not wrap round to a
    /// few ns (a release build: a kind "20 ns", tok/s in the hundreds of millions) or panic (an
    /// overflow-checked build).
    #[test]
    fn kind_sums_and_stream_totals_of_near_max_times_saturate_monotone_instead_of_wrapping() {
        let big = (1u64 << 63) + 10;
        let st = |id: u32| StageTiming {
            stage: id,
            name: "q".into(),
            level: 0,
            busy_ns: big,
            charged_ns: big,
            max_busy_ns: big,
        };
        let f = Frame {
            gpu_ns: Some(big),
            wall_ns: big,
            stages: vec![st(0), st(1)],
            ..Default::default()
        };
        let mut s = Stats::new(vec![StageKind::Q, StageKind::Q], 0);
        s.ingest(&f, 1_000_000, &[]);
        let q = StageKind::Q.code() as usize;
        // The histograms' top (100 s): the saturated sum, not the 20 ns it wraps to.
        for h in [&s.kind_busy[q], &s.kind_charged[q]] {
            assert!(
                h.max() >= s.busy[0].max(),
                "{} < {}",
                h.max(),
                s.busy[0].max()
            );
            assert!(h.max() >= 99_000_000_000, "{}", h.max());
        }
        let mut sum = Summary::default();
        let mut last = 0;
        for _ in 0..3 {
            sum.ingest(&Telemetry::Frame(Box::new(f.clone())));
            assert!(sum.wall_ns >= last, "{} < {last}", sum.wall_ns);
            last = sum.wall_ns;
        }
        assert_eq!((sum.wall_ns, sum.gpu_ns), (u64::MAX, u64::MAX));
        let t = sum.tok_s().unwrap();
        assert!(t < 1e-9, "{t} tok/s");
        assert_eq!(crate::text::us(u64::MAX), format!("{} µs", u64::MAX / 1000));
    }
}
