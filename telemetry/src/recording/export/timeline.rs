//! The trace both Perfetto exports draw (JSON and protobuf): which tracks there are, and per
//! pass a batch of slice begins/ends and counter samples on them, in an order every viewer
//! accepts. The two writers only spell it out, so Perfetto, chrome://tracing and speedscope
//! show the same thing whichever file they read.
//!
//! Guarantees (the writers and their tests rely on them):
//! - each batch is in non-decreasing time order, and so is the whole stream: a pass starts no
//!   earlier than the previous one ended, and a sensor sample that arrives after a pass is
//!   placed no earlier than that pass's last event;
//! - on every track, begins and ends pair up and nest: a workgroup's stages and barrier waits
//!   are siblings, each starting no earlier than the previous one ended (a stamp that would
//!   overlap its predecessor is moved to its end); a begin at the time another slice ends on
//!   the same track comes after that end;
//! - nothing is left open: the power-mode slice open at the end is closed by [`Timeline::finish`].

use super::{SpansEvery, TraceOptions, WgSelect};
use crate::{Frame, PowerMode, RunDetails, SensorReading};

/// A track of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Track {
    /// One slice per pass.
    Passes,
    /// The power-state mode, one slice per run of passes in one mode.
    Mode,
    /// Grid aggregate lane `n`: per pass, each stage from its first start to its last end
    /// over all workgroups; stages that overlap in time go to further lanes.
    Grid(u32),
    /// One workgroup's stages and barrier waits.
    Wg(u32),
    /// A counter.
    Counter(Counter),
}

/// A counter track.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Counter {
    /// 1e9 / the pass's wall time.
    TokS,
    /// Shader clock samples, MHz.
    SmMhz,
    /// Memory clock samples, MHz.
    MemMhz,
}

impl Counter {
    /// (name, unit): a viewer that joins them shows each word once ("decode tok/s").
    pub(crate) fn name_unit(self) -> (&'static str, &'static str) {
        match self {
            Counter::TokS => ("decode", "tok/s"),
            Counter::SmMhz => ("sm clock", "MHz"),
            Counter::MemMhz => ("mem clock", "MHz"),
        }
    }
}

impl Track {
    /// The track's name as viewers show it.
    pub(crate) fn name(self) -> String {
        match self {
            Track::Passes => "passes".into(),
            Track::Mode => "power mode".into(),
            Track::Grid(0) => "grid (all workgroups)".into(),
            Track::Grid(n) => format!("grid (all workgroups) {}", n + 1),
            Track::Wg(w) => format!("wg {w}"),
            Track::Counter(c) => {
                let (n, u) = c.name_unit();
                format!("{n} {u}")
            }
        }
    }
}

/// What a slice is (its name and arguments follow from it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Slice {
    /// The pass (its details are the batch's [`PassInfo`]).
    Pass,
    /// A workgroup's work on a stage.
    Stage(u32),
    /// A stage over the whole grid, with its busy mean and max over workgroups, ns.
    GridStage {
        stage: u32,
        busy_mean_ns: u64,
        busy_max_ns: u64,
    },
    /// A workgroup's wait at the grid barrier after a level.
    Wait(u32),
    /// A run of passes in one power mode.
    Mode(PowerMode),
}

/// One event of a batch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    Begin(Slice),
    End(Slice),
    Value(f64),
}

/// An event: trace time (ns from the first pass), track, what.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Ev {
    pub ts: u64,
    pub track: Track,
    pub kind: Kind,
}

/// A pass's details, carried by its slice on the passes track.
#[derive(Clone, Debug, Default)]
pub(crate) struct PassInfo {
    pub pass: u64,
    pub pos: u32,
    pub token: u32,
    pub next: u32,
    pub wall_ns: u64,
    pub gpu_ns: Option<u64>,
    pub fail_word: u32,
    pub mode: PowerMode,
    pub contention: String,
    /// "all" (its workgroup spans are in the trace), "grid" (sampled out: its grid
    /// aggregate only), "none" (the recording has no spans for it).
    pub spans: &'static str,
    /// How many attribution warnings the pass has ([`crate::analysis::frame_warnings`]:
    /// from its own timings and barrier stamps, its spans sampled out or not).
    pub attribution_warnings: u64,
    /// The first [`ATTRIBUTION_TEXT`] of them as the dashboard words them (the straggler,
    /// then the largest tails), `; `-joined, "… N more" after; `None` where there are none.
    pub attribution: Option<String>,
}

/// Warnings a pass slice spells out (the count is always whole): a 8B pass can have
/// hundreds, and their text would grow the trace by a tenth.
pub(crate) const ATTRIBUTION_TEXT: usize = 4;

fn attribution_text(w: &[crate::analysis::AttributionWarning]) -> Option<String> {
    let mut t: Vec<String> = w
        .iter()
        .take(ATTRIBUTION_TEXT)
        .map(|w| w.to_string())
        .collect();
    if w.len() > ATTRIBUTION_TEXT {
        t.push(format!("… {} more", w.len() - ATTRIBUTION_TEXT));
    }
    (!t.is_empty()).then(|| t.join("; "))
}

/// What the sampling left out, for the export's report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sampling {
    /// Passes with spans in the recording.
    pub spanned_passes: u64,
    /// Of those, passes whose workgroup spans are in the trace.
    pub wg_passes: u64,
    /// Workgroup spans (stage spans and barrier waits) in the recording.
    pub spans_total: u64,
    /// Of those, spans in the trace.
    pub spans_kept: u64,
    /// The resolved one-in-N (spanned passes) that kept workgroup spans.
    pub spans_every: u64,
    /// In those passes, one workgroup in N (0, N, 2N, …) kept its track, where the
    /// selection was thinned ([`WgSelect::Every`]); 0 or 1: not thinned.
    pub wg_every: u64,
}

/// Builds the batches (see the module doc).
pub(crate) struct Timeline {
    run: RunDetails,
    spans_every: u64,
    wgs: WgSelect,
    host0: Option<u64>,
    prev_end: u64,
    prev_base_wall: Option<(u64, u64)>,
    /// Latest time emitted.
    watermark: u64,
    /// The open power-mode slice.
    mode: Option<PowerMode>,
    /// Tracks used so far (a writer declares each before its first event).
    used: std::collections::BTreeSet<Track>,
    pub(crate) sampling: Sampling,
    scratch: Vec<(u64, u64, Slice)>,
}

impl Timeline {
    pub(crate) fn new(run: RunDetails, opts: &TraceOptions) -> Self {
        let spans_every = match opts.spans_every {
            SpansEvery::Every(n) => n.max(1),
            // The caller resolves Auto against a survey; unresolved means keep everything.
            SpansEvery::Auto { .. } => 1,
        };
        Timeline {
            run,
            spans_every,
            wgs: opts.workgroups.clone(),
            host0: None,
            prev_end: 0,
            prev_base_wall: None,
            watermark: 0,
            mode: None,
            used: Default::default(),
            sampling: Sampling {
                spans_every,
                wg_every: match opts.workgroups {
                    WgSelect::Every(k) => u64::from(k.max(1)),
                    _ => 1,
                },
                ..Default::default()
            },
            scratch: vec![],
        }
    }

    pub(crate) fn run(&self) -> &RunDetails {
        &self.run
    }

    pub(crate) fn set_run(&mut self, run: RunDetails) {
        self.run = run;
    }

    /// Tracks not used before among `evs` (in first-use order), now marked used.
    pub(crate) fn new_tracks(&mut self, evs: &[Ev]) -> Vec<Track> {
        let mut out = vec![];
        for e in evs {
            if self.used.insert(e.track) {
                out.push(e.track);
            }
        }
        out
    }

    fn push(&mut self, out: &mut Vec<Ev>, ts: u64, track: Track, kind: Kind) {
        self.watermark = self.watermark.max(ts);
        out.push(Ev { ts, track, kind });
    }

    /// A sensor sample's events (a counter value), or none.
    pub(crate) fn sensor(&mut self, host_ns: u64, reading: &SensorReading, out: &mut Vec<Ev>) {
        let ts = self
            .host0
            .map_or(self.prev_end, |h| host_ns.saturating_sub(h))
            .max(self.watermark);
        if let SensorReading::GpuClocks {
            sm_mhz, mem_mhz, ..
        } = reading
        {
            let v = Kind::Value(f64::from(*sm_mhz));
            self.push(out, ts, Track::Counter(Counter::SmMhz), v);
            if let Some(m) = mem_mhz {
                let v = Kind::Value(f64::from(*m));
                self.push(out, ts, Track::Counter(Counter::MemMhz), v);
            }
        }
    }

    /// Closes the open power-mode slice.
    pub(crate) fn finish(&mut self, out: &mut Vec<Ev>) {
        if let Some(m) = self.mode.take() {
            let ts = self.prev_end.max(self.watermark);
            self.push(out, ts, Track::Mode, Kind::End(Slice::Mode(m)));
        }
    }

    /// A pass's events, in time order, and its details.
    pub(crate) fn frame(&mut self, f: &Frame, out: &mut Vec<Ev>) -> PassInfo {
        let wanted = match (f.host_start_ns, self.host0) {
            (Some(h), Some(h0)) => h.saturating_sub(h0),
            (Some(h), None) => {
                self.host0 = Some(h);
                0
            }
            _ => self.prev_base_wall.map_or(0, |(b, w)| b.saturating_add(w)),
        };
        let base = wanted.max(self.prev_end).max(self.watermark);
        self.prev_base_wall = Some((base, f.wall_ns));
        let spans = &f.spans;
        let spanned = !spans.is_empty();
        let keep_wgs = spanned
            && self
                .sampling
                .spanned_passes
                .is_multiple_of(self.spans_every);
        let hi = spans.last_stamp().map_or(0, u64::from);
        let end = base.saturating_add(hi.max(f.gpu_ns.unwrap_or(f.wall_ns)));
        let warnings = crate::analysis::frame_warnings(&self.run, f);
        let info = PassInfo {
            pass: f.pass,
            pos: f.pos,
            token: f.token,
            next: f.next,
            wall_ns: f.wall_ns,
            gpu_ns: f.gpu_ns,
            fail_word: f.fail.word.bits,
            mode: f.mode,
            contention: f.contention.summary(),
            spans: match (spanned, keep_wgs) {
                (false, _) => "none",
                (true, true) => "all",
                (true, false) => "grid",
            },
            attribution_warnings: warnings.len() as u64,
            attribution: attribution_text(&warnings),
        };
        // Mode: a new slice where the mode changes (the old one ends where this pass starts).
        if self.mode != Some(f.mode) {
            if let Some(m) = self.mode.take() {
                self.push(out, base, Track::Mode, Kind::End(Slice::Mode(m)));
            }
            self.mode = Some(f.mode);
            self.push(out, base, Track::Mode, Kind::Begin(Slice::Mode(f.mode)));
        }
        let start = out.len();
        self.push(out, base, Track::Passes, Kind::Begin(Slice::Pass));
        if f.wall_ns > 0 {
            let v = Kind::Value(1e9 / f.wall_ns as f64);
            self.push(out, base, Track::Counter(Counter::TokS), v);
        }
        if spanned {
            self.grid(f, base, out);
            self.workgroups(f, base, keep_wgs, out);
            self.sampling.spanned_passes += 1;
        }
        self.push(out, end, Track::Passes, Kind::End(Slice::Pass));
        // Stable: each track's own order (begin before end at equal times, an end before
        // the next begin) is kept.
        out[start..].sort_by_key(|e| e.ts);
        self.prev_end = end;
        info
    }

    fn grid(&mut self, f: &Frame, base: u64, out: &mut Vec<Ev>) {
        let spans = &f.spans;
        let mut items: Vec<(u64, u64, Slice)> = vec![];
        for s in 0..spans.stages() {
            let Some((starts, ends)) = spans.stage_stamps(s) else {
                continue;
            };
            let (mut lo, mut hi) = (u64::MAX, 0u64);
            for (&a, &b) in starts.iter().zip(ends) {
                if a != crate::spans::MISSING && b != crate::spans::MISSING {
                    lo = lo.min(u64::from(a));
                    hi = hi.max(u64::from(b.max(a)));
                }
            }
            if lo == u64::MAX {
                continue;
            }
            let t = f.stages.iter().find(|t| t.stage == s);
            items.push((
                lo,
                hi,
                Slice::GridStage {
                    stage: s,
                    busy_mean_ns: t.map_or(0, |t| t.busy_ns),
                    busy_max_ns: t.map_or(0, |t| t.max_busy_ns),
                },
            ));
        }
        items.sort_by_key(|&(a, b, _)| (a, std::cmp::Reverse(b)));
        // Greedy lanes (free from, slices): a stage goes to the first lane free by its start.
        type Lane = (u64, Vec<(u64, u64, Slice)>);
        let mut lanes: Vec<Lane> = vec![];
        for it in items {
            match lanes.iter_mut().find(|l| l.0 <= it.0) {
                Some(l) => {
                    l.0 = it.1;
                    l.1.push(it);
                }
                None => lanes.push((it.1, vec![it])),
            }
        }
        for (n, (_, items)) in lanes.into_iter().enumerate() {
            for (a, b, s) in items {
                let t = Track::Grid(n as u32);
                self.push(out, base.saturating_add(a), t, Kind::Begin(s));
                self.push(out, base.saturating_add(b), t, Kind::End(s));
            }
        }
    }

    fn workgroups(&mut self, f: &Frame, base: u64, keep: bool, out: &mut Vec<Ev>) {
        let spans = &f.spans;
        let mut evs = std::mem::take(&mut self.scratch);
        let chosen: Option<u32> = match (&self.wgs, keep) {
            (WgSelect::Slowest, true) => slowest(f),
            _ => None,
        };
        for w in 0..spans.grid() {
            evs.clear();
            for s in 0..spans.stages() {
                if let Some((a, b)) = spans.span(s, w) {
                    evs.push((u64::from(a), u64::from(b.max(a)), Slice::Stage(s)));
                }
            }
            for l in 0..spans.levels() {
                if let (Some(a), Some(e)) = (spans.arrive(l, w), spans.exit(l, w)) {
                    evs.push((u64::from(a), u64::from(e.max(a)), Slice::Wait(l)));
                }
            }
            let n = evs.len() as u64;
            self.sampling.spans_total += n;
            let wanted = keep
                && match &self.wgs {
                    WgSelect::All => true,
                    WgSelect::List(l) => l.contains(&w),
                    WgSelect::Slowest => chosen == Some(w),
                    WgSelect::Every(k) => w.is_multiple_of((*k).max(1)),
                };
            if !wanted || evs.is_empty() {
                continue;
            }
            self.sampling.spans_kept += n;
            evs.sort_by_key(|&(a, b, _)| (a, std::cmp::Reverse(b)));
            let t = Track::Wg(w);
            let mut free = 0u64;
            for &(a, b, s) in &evs {
                // Siblings: never before the previous one's end.
                let a = a.max(free);
                let b = b.max(a);
                free = b;
                self.push(out, base.saturating_add(a), t, Kind::Begin(s));
                self.push(out, base.saturating_add(b), t, Kind::End(s));
            }
        }
        if keep {
            self.sampling.wg_passes += 1;
        }
        self.scratch = evs;
    }
}

/// The workgroup with the most stage work (sum of its spans) in the pass.
fn slowest(f: &Frame) -> Option<u32> {
    let spans = &f.spans;
    (0..spans.grid())
        .map(|w| {
            let busy: u64 = (0..spans.stages())
                .filter_map(|s| spans.span(s, w))
                .map(|(a, b)| u64::from(b.saturating_sub(a)))
                .sum();
            (busy, std::cmp::Reverse(w))
        })
        .max()
        .map(|(_, std::cmp::Reverse(w))| w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{AttributionWarning, Straggler};

    #[test]
    fn a_pass_slice_spells_out_four_warnings_and_counts_the_rest() {
        let w: Vec<AttributionWarning> = (0..6)
            .map(|i| {
                AttributionWarning::Straggler(Straggler {
                    workgroup: i,
                    last_at: 9,
                    barriers: 32,
                    passes: 1,
                })
            })
            .collect();
        let t = attribution_text(&w).unwrap();
        assert_eq!(t.matches("arrived last").count(), ATTRIBUTION_TEXT);
        assert!(t.starts_with("workgroup 0 arrived last at 9 of 32"), "{t}");
        assert!(t.ends_with("; … 2 more"), "{t}");
        assert_eq!(
            attribution_text(&w[..1]).map(|t| t.contains('…')),
            Some(false)
        );
        assert_eq!(attribution_text(&[]), None);
    }
}
