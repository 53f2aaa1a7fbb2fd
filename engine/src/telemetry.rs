//! The telemetry data model: what the engine streams to every consumer (dashboard, headless
//! JSON, recorder). Static details are sent once ([`Telemetry::Start`]) and referred to by id;
//! then one [`Frame`] per pass. Times are integer nanoseconds.
//!
//! # The event ring (device side)
//!
//! The kernel writes one frame per pass into the `telemetry.ring` buffer (`u32` words,
//! little-endian), at slot `k` starting at word `k * frame_words`:
//!
//! ```text
//! word 0            sequence: pass_id + 1, written LAST with release semantics by the
//!                   workgroup that finishes last (a frame whose sequence does not match the
//!                   pass is torn or overrun and is counted, never read)
//! word 1            pass_id
//! word 2            workgroups finished (atomic counter)
//! word 3            reserved
//! words 4 ..        stages x G records of 4 words: start lo, start hi, end lo, end hi
//!                   (device clock, VK_KHR_shader_clock realtime; lavapipe moves only the low
//!                   32 bits, so times are unwrapped relative to the pass's first stamp)
//! then              levels x G records of 4 words: barrier arrive lo/hi, barrier exit lo/hi
//!                   (megakernel only; zero in multi mode, where per-dispatch GPU timestamps
//!                   give the level boundaries)
//! ```
//!
//! The host zeroes the slot before each pass and copies it out after the pass's fence in the
//! same command buffer, so a pass never reads another pass's stamps.
//!
//! # Busy vs charged
//!
//! A stage's *busy* time is the mean over workgroups of its own work (start → end). Its
//! *charged* time is what a span-per-stage profiler would report: from the stage's start to the
//! next boundary on the same workgroup — the next stage's start, or for the last stage of a
//! level the barrier exit — averaged over workgroups. The difference is the level's tail
//! (waiting for the slowest workgroup), charged to whichever stage closes the level.

#![deny(missing_docs)]

use serde::{Deserialize, Serialize};

/// Index of a stage in [`Telemetry::Start::stages`].
pub type StageId = u32;

/// Static description of a stage, sent once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageDetails {
    /// Id (index).
    pub id: StageId,
    /// Name, e.g. `q.l3`.
    pub name: String,
    /// Level index.
    pub level: u32,
    /// Shader stage kind, e.g. `q`, `attn`.
    pub kind: String,
    /// Weight rows (0 for attention and argmax).
    pub rows: u32,
    /// Work units (rows, row pairs, heads).
    pub units: u32,
}

/// Static description of a level, sent once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LevelDetails {
    /// Index.
    pub index: u32,
    /// Name, e.g. `qkv.l3`.
    pub name: String,
    /// Stages in the level.
    pub stages: Vec<StageId>,
}

/// Static description of a run, sent once before any frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunDetails {
    /// Device name.
    pub device: String,
    /// Driver name and version.
    pub driver: String,
    /// Device kind (`Discrete`, `Cpu`, …).
    pub device_kind: String,
    /// Model description.
    pub model: String,
    /// `mega` or `multi`.
    pub mode: String,
    /// Workgroups.
    pub grid: u32,
    /// Lanes per workgroup.
    pub wg_size: u32,
    /// Stages.
    pub stages: Vec<StageDetails>,
    /// Levels.
    pub levels: Vec<LevelDetails>,
    /// Whether the kernel records stamps.
    pub instrumented: bool,
}

/// One workgroup's work on one stage, ns from the pass start (device clock).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Span {
    /// Stage.
    pub stage: StageId,
    /// Workgroup.
    pub wg: u32,
    /// Start, ns since the pass's first stamp.
    pub start_ns: u64,
    /// End, ns since the pass's first stamp.
    pub end_ns: u64,
}

/// A stage's cost in one pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StageTiming {
    /// Stage.
    pub stage: StageId,
    /// Name (denormalised for line-oriented consumers).
    pub name: String,
    /// Level.
    pub level: u32,
    /// Mean over workgroups of the stage's own work.
    pub busy_ns: u64,
    /// What a span-per-stage profiler charges it (see the module doc).
    pub charged_ns: u64,
    /// Slowest workgroup's work.
    pub max_busy_ns: u64,
}

/// One grid barrier in one pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BarrierTiming {
    /// The level the barrier closes.
    pub level: u32,
    /// Last arrival − first arrival.
    pub arrival_spread_ns: u64,
    /// First exit − last arrival (how long the release took to reach the first waiter).
    pub release_ns: u64,
    /// Last exit − first exit.
    pub exit_spread_ns: u64,
}

/// One pass.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// Pass number (0-based, per run).
    pub pass: u64,
    /// Position.
    pub pos: u32,
    /// Input token.
    pub token: u32,
    /// Output token (argmax or sampled).
    pub next: u32,
    /// Host wall time of the pass (submit → fence), ns.
    pub wall_ns: u64,
    /// GPU time from timestamps, ns.
    pub gpu_ns: Option<u64>,
    /// The fail word bits.
    pub fail_word: u32,
    /// The decoded fail-word line (`fail-word 0x00000000 PASS` or the failure).
    pub fail_line: String,
    /// Stage costs (empty when the frame was torn or instrumentation is off).
    pub stages: Vec<StageTiming>,
    /// Barrier timings (megakernel).
    pub barriers: Vec<BarrierTiming>,
    /// Per-dispatch GPU times (multi mode), ns.
    pub dispatch_ns: Vec<u64>,
    /// Every workgroup's span on every stage.
    pub spans: Vec<Span>,
    /// The ring frame for this pass was torn or overrun (not read).
    pub torn: bool,
    /// Frames dropped so far because a consumer was slow.
    pub dropped: u64,
    /// Host CLOCK_MONOTONIC ns at which the pass started on the GPU (calibrated, drift
    /// corrected), where the device has calibrated timestamps.
    pub host_start_ns: Option<u64>,
}

/// A clock calibration: the shader's device clock against the timestamp-query domain, and
/// that domain against the host's CLOCK_MONOTONIC (calibrated timestamps, where present).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockSync {
    /// Pass count when taken.
    pub at_pass: u64,
    /// `timestamp_ns − shader_clock_ns`.
    pub shader_offset_ns: Option<i64>,
    /// Half-width of the window the shader sample was taken in.
    pub shader_uncertainty_ns: Option<u64>,
    /// `host_ns − timestamp_ns`.
    pub host_offset_ns: Option<i64>,
    /// The driver's maximum deviation of the host correlation.
    pub host_deviation_ns: Option<u64>,
    /// Drift of the timestamp domain against the host since the previous sync, parts per
    /// million (None on the first).
    pub drift_ppm: Option<f64>,
}

/// Maps the timestamp domain to host time from the two latest [`ClockSync`]s: offset at the
/// latest, slope from the drift between them (the correction for drift over a run).
#[derive(Clone, Debug, Default)]
pub struct HostClock {
    last: Option<(u64, u64)>,
    prev: Option<(u64, u64)>,
}

impl HostClock {
    /// Add a correlation `(timestamp_ns, host_ns)`; returns the drift in ppm against the
    /// previous one.
    pub fn add(&mut self, ts_ns: u64, host_ns: u64) -> Option<f64> {
        self.prev = self.last;
        self.last = Some((ts_ns, host_ns));
        let (p, l) = (self.prev?, self.last?);
        let dts = l.0 as f64 - p.0 as f64;
        (dts > 0.0).then(|| ((l.1 as f64 - p.1 as f64) - dts) / dts * 1e6)
    }

    /// Host ns of a timestamp, drift-corrected.
    pub fn host_ns(&self, ts_ns: u64) -> Option<u64> {
        let (t1, h1) = self.last?;
        let slope = match self.prev {
            Some((t0, h0)) if t1 > t0 => (h1 as f64 - h0 as f64) / (t1 as f64 - t0 as f64),
            _ => 1.0,
        };
        Some((h1 as f64 + (ts_ns as f64 - t1 as f64) * slope) as u64)
    }
}

/// The stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Telemetry {
    /// Sent once, first.
    Start(RunDetails),
    /// A clock calibration (at the start, then periodically).
    Clock(ClockSync),
    /// One per pass.
    Frame(Box<Frame>),
    /// Sent last.
    End {
        /// Passes run.
        passes: u64,
        /// Frames dropped on the way to this consumer.
        dropped: u64,
        /// Why the run ended (`done`, `failed: …`, `stopped`).
        reason: String,
    },
}

/// Unwrap 32-bit clock values relative to a base (lavapipe moves only the low word; a pass
/// lasts far less than 2^32 ns ≈ 4.3 s).
pub fn rel_ns(t: u64, base: u64) -> u64 {
    (t as u32).wrapping_sub(base as u32) as u64
}

/// Decode one ring frame into spans and timings.
///
/// `words` is the frame; `stages` the stage details; `levels` the level details; `g` the grid;
/// `expect_seq` the sequence word that marks this pass's frame complete. Returns `None` for a
/// torn or overrun frame.
pub fn decode_frame(
    words: &[u32],
    stages: &[StageDetails],
    levels: &[LevelDetails],
    g: u32,
    expect_seq: u32,
    mega: bool,
) -> Option<(Vec<Span>, Vec<StageTiming>, Vec<BarrierTiming>)> {
    let ns = stages.len();
    let nl = levels.len();
    let g = g as usize;
    let need = 4 + (ns + nl) * g * 4;
    if words.len() < need || words[0] != expect_seq || words[2] as usize != g {
        return None;
    }
    let rec = |base: usize, i: usize, which: usize| -> u64 {
        let w = base + i * 4 + which * 2;
        (words[w] as u64) | ((words[w + 1] as u64) << 32)
    };
    let sbase = 4;
    let lbase = 4 + ns * g * 4;
    // Base: the earliest stage start of the pass.
    let mut base = u64::MAX;
    let mut first = true;
    for s in 0..ns {
        for w in 0..g {
            let t = rec(sbase, s * g + w, 0);
            if t != 0 && (first || (t as u32).wrapping_sub(base as u32) > u32::MAX / 2) {
                base = t;
                first = false;
            }
        }
    }
    if first {
        return None;
    }
    let mut spans = Vec::with_capacity(ns * g);
    for s in 0..ns {
        for w in 0..g {
            let a = rec(sbase, s * g + w, 0);
            let b = rec(sbase, s * g + w, 1);
            if a == 0 || b == 0 {
                continue; // this workgroup did not run the stage (single-workgroup levels)
            }
            spans.push(Span {
                stage: s as StageId,
                wg: w as u32,
                start_ns: rel_ns(a, base),
                end_ns: rel_ns(b, base),
            });
        }
    }
    // Index by (stage, workgroup): frames hold stages x G spans (tens of thousands on a GPU).
    let mut index: Vec<Option<Span>> = vec![None; ns * g];
    for sp in &spans {
        index[sp.stage as usize * g + sp.wg as usize] = Some(*sp);
    }
    let span_of = |s: usize, w: usize| index[s * g + w];
    let mut timings = Vec::with_capacity(ns);
    let mut barriers = vec![];
    for (li, lv) in levels.iter().enumerate() {
        let exit_of = |w: usize| -> Option<u64> {
            if !mega {
                return None;
            }
            let e = rec(lbase, li * g + w, 1);
            (e != 0).then(|| rel_ns(e, base))
        };
        for (k, &sid) in lv.stages.iter().enumerate() {
            let s = sid as usize;
            let (mut busy, mut charged, mut n, mut maxb) = (0u64, 0u64, 0u64, 0u64);
            for w in 0..g {
                let Some(sp) = span_of(s, w) else { continue };
                let b = sp.end_ns.saturating_sub(sp.start_ns);
                let next = if k + 1 < lv.stages.len() {
                    span_of(lv.stages[k + 1] as usize, w).map(|x| x.start_ns)
                } else {
                    exit_of(w)
                };
                busy += b;
                maxb = maxb.max(b);
                charged += next.map_or(b, |t| t.saturating_sub(sp.start_ns));
                n += 1;
            }
            if let (Some(busy_ns), Some(charged_ns)) = (busy.checked_div(n), charged.checked_div(n))
            {
                timings.push(StageTiming {
                    stage: sid,
                    name: stages[s].name.clone(),
                    level: li as u32,
                    busy_ns,
                    charged_ns,
                    max_busy_ns: maxb,
                });
            }
        }
        if mega && li + 1 < nl {
            let mut arr = vec![];
            let mut ext = vec![];
            for w in 0..g {
                let a = rec(lbase, li * g + w, 0);
                let e = rec(lbase, li * g + w, 1);
                if a != 0 {
                    arr.push(rel_ns(a, base));
                }
                if e != 0 {
                    ext.push(rel_ns(e, base));
                }
            }
            if !arr.is_empty() && !ext.is_empty() {
                let (a0, a1) = (
                    arr.iter().min().copied().unwrap_or(0),
                    arr.iter().max().copied().unwrap_or(0),
                );
                let (e0, e1) = (
                    ext.iter().min().copied().unwrap_or(0),
                    ext.iter().max().copied().unwrap_or(0),
                );
                barriers.push(BarrierTiming {
                    level: li as u32,
                    arrival_spread_ns: a1 - a0,
                    release_ns: e0.saturating_sub(a1),
                    exit_spread_ns: e1 - e0,
                });
            }
        }
    }
    Some((spans, timings, barriers))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn details() -> (Vec<StageDetails>, Vec<LevelDetails>) {
        let st = |id: u32, name: &str, level: u32| StageDetails {
            id,
            name: name.into(),
            level,
            kind: name.into(),
            rows: 8,
            units: 8,
        };
        (
            vec![st(0, "a", 0), st(1, "b", 0), st(2, "c", 1)],
            vec![
                LevelDetails {
                    index: 0,
                    name: "L0".into(),
                    stages: vec![0, 1],
                },
                LevelDetails {
                    index: 1,
                    name: "L1".into(),
                    stages: vec![2],
                },
            ],
        )
    }

    /// Build a 2-workgroup frame: stage spans and barrier stamps in absolute device ns.
    fn frame(seq: u32, spans: &[[u64; 2]; 6], bar: &[[u64; 2]; 4]) -> Vec<u32> {
        let mut w = vec![seq, seq - 1, 2, 0];
        for s in spans {
            w.extend([
                s[0] as u32,
                (s[0] >> 32) as u32,
                s[1] as u32,
                (s[1] >> 32) as u32,
            ]);
        }
        for b in bar {
            w.extend([
                b[0] as u32,
                (b[0] >> 32) as u32,
                b[1] as u32,
                (b[1] >> 32) as u32,
            ]);
        }
        w
    }

    #[test]
    fn tail_is_charged_to_the_stage_that_closes_the_level() {
        let (st, lv) = details();
        // Stage a: wg0 1000..1100, wg1 1000..1500 (slow); stage b: wg0 1100..1200, wg1 1500..1600.
        // Barrier after L0: arrivals 1200 / 1600, exits 1700 / 1710. Stage c: 1700..1800, 1710..1800.
        let spans = [
            [1000, 1100],
            [1000, 1500],
            [1100, 1200],
            [1500, 1600],
            [1700, 1800],
            [1710, 1800],
        ];
        let bar = [[1200, 1700], [1600, 1710], [0, 0], [0, 0]];
        let (sp, t, b) = decode_frame(&frame(8, &spans, &bar), &st, &lv, 2, 8, true).unwrap();
        assert_eq!(sp.len(), 6);
        let by = |n: &str| t.iter().find(|x| x.name == n).unwrap().clone();
        assert_eq!(by("a").busy_ns, 300); // (100 + 500) / 2
        assert_eq!(by("a").charged_ns, 300); // next boundary is b's start on the same wg
        assert_eq!(by("b").busy_ns, 100);
        // b closes the level: wg0 waits 1100 -> exit 1700 = 600, wg1 1500 -> 1710 = 210.
        assert_eq!(by("b").charged_ns, 405);
        assert_eq!(
            b,
            vec![BarrierTiming {
                level: 0,
                arrival_spread_ns: 400,
                release_ns: 100,
                exit_spread_ns: 10
            }]
        );
    }

    #[test]
    fn torn_frames_are_refused() {
        let (st, lv) = details();
        let spans = [[1, 2]; 6];
        let bar = [[3, 4]; 4];
        assert!(
            decode_frame(&frame(8, &spans, &bar), &st, &lv, 2, 9, true).is_none(),
            "wrong sequence"
        );
        let mut f = frame(8, &spans, &bar);
        f[2] = 1; // only one workgroup finished
        assert!(decode_frame(&f, &st, &lv, 2, 8, true).is_none());
        assert!(
            decode_frame(&f[..10], &st, &lv, 2, 8, true).is_none(),
            "short frame"
        );
    }

    #[test]
    fn host_clock_corrects_for_drift() {
        let mut c = HostClock::default();
        assert_eq!(c.add(1_000_000, 5_000_000), None);
        assert_eq!(c.host_ns(1_000_100), Some(5_000_100));
        // The device clock runs 100 ppm slow against the host.
        let d = c.add(11_000_000, 15_001_000).unwrap();
        assert!((d - 100.0).abs() < 1e-6, "{d}");
        assert_eq!(c.host_ns(21_000_000), Some(25_002_000));
    }

    #[test]
    fn low_word_wrap_is_unwrapped() {
        assert_eq!(rel_ns(5, u32::MAX as u64 - 4), 10);
        assert_eq!(rel_ns((7u64 << 32) | 100, (7u64 << 32) | 40), 60);
    }
}
