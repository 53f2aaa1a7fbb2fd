//! Exports of a recording: traces for Perfetto, chrome://tracing and speedscope (Perfetto's
//! native protobuf and Trace Event JSON, drawing the same tracks), and CSV (per pass, per pass
//! per stage). Pure functions of a [`Reader`] and a `Write`, so the CLI only opens files.
//! An export never changes what it exports (a value is written as recorded or left out), and
//! says what it left out ([`ExportStats::sampling`]).
//!
//! # The trace (both formats)
//!
//! One process per run, "baro-top: MODEL on DEVICE", with these tracks in this order:
//!
//! ```text
//! passes                  per pass one slice "pass P" from the pass's start to its end (its
//!                         GPU time, or wall time without timestamps, stretched to its last
//!                         stamp), carrying pass, pos, token, next, wall_ns, gpu_ns,
//!                         fail_word, mode, contention, spans (all | grid | none) and
//!                         its attribution warnings (attribution_warnings: the count;
//!                         attribution: the first four's text, where any;
//!                         telemetry::analysis)
//! power mode              one slice per run of passes in one mode (fast, slow, unknown)
//! grid (all workgroups)   per pass with spans, each stage from its first start to its last
//!   … 2, 3                end over all workgroups (protobuf: with busy mean/max); stages
//!                         that overlap in time go to the next lane
//! wg 0 … wg G−1           a workgroup's stages (args stage, level) and barrier waits
//!                         ("wait LEVEL", arg level; from its arrival to its exit)
//! decode tok/s            counter, per pass: 1e9 / wall_ns
//! sm clock MHz, mem clock MHz   counters, the clock sensor's samples
//! ```
//!
//! (The protobuf orders the counters right after power mode; JSON viewers show a process's
//! counters above its threads.)
//!
//! Times are ns from the first pass. A pass is placed at its `host_start_ns` (relative to
//! the first pass's), or right after the previous pass where there is none, and never before
//! the previous pass's end; its stamps are offsets from its start. Every slice is a begin/end
//! pair: a viewer never adds a duration to a start (in doubles, a child's computed end could
//! land one ulp past its parent's and break the nesting), and a slice's end is written with
//! exactly the same digits as the start of the one after it. A workgroup's slices are
//! siblings: one whose stamp would overlap its predecessor's is started at the predecessor's
//! end. Sampling ([`TraceOptions`]) keeps every pass on the passes, mode and grid tracks and
//! thins the workgroup tracks only: one pass in N, and where one pass alone holds more spans
//! than the budget, one workgroup in K within the kept passes.
//!
//! JSON (Trace Event Format): pid 1; tids passes 1, power mode 2, grid lanes 3…, wg w
//! 1000 + w; every tid named, `process_sort_index`/`thread_sort_index` in the order above;
//! ts in µs with exactly three decimals (exact ns); `B`/`E` events whose `E` repeats its
//! `B`'s name and args (speedscope matches them by both); a stage's args are the same in
//! every pass (`stage`, `level`), so viewers that key frames by name and args aggregate a
//! stage across passes; counters as `C` events named so that "name key" reads once
//! ("decode" + "tok/s"). Grid slices carry only `stage` and `level` (their busy mean/max
//! differ per pass: they are in the CSVs and the protobuf).
//!
//! Protobuf (Perfetto TracePacket stream, `.pftrace`): one packet sequence; a first packet
//! with a clock snapshot that defines a sequence-scoped incremental clock (id 64, ns) on
//! BOOTTIME, so every later timestamp is a delta from the previous packet's; a
//! TrackDescriptor per track (the process track orders its children explicitly); slices as
//! TYPE_SLICE_BEGIN/END TrackEvents, counters as TYPE_COUNTER with double values; event and
//! debug-annotation names interned on first use. See [`proto`] for the layout in full.
//!
//! # CSV
//!
//! Per stage: one row per pass per stage, with a header row:
//! `pass,stage,name,kind,level,busy_ns,charged_ns,max_busy_ns,fail_word,mode`.
//! Per pass: one row per pass, with a header row:
//! `pass,pos,token,next,wall_ns,gpu_ns,host_start_ns,fail_word,mode,contention,spanned`
//! (`gpu_ns` and `host_start_ns` empty where not recorded; `spanned` 1 where the recording
//! has the pass's workgroup spans). Both join on `pass`.

use std::io::{BufWriter, Read, Seek, Write};

use super::{Reader, RecordingError, Result};
use crate::{PowerMode, Telemetry};

mod csv;
mod json;
// Generated (tools/perfetto-protos-gen): neither formatted nor linted here.
#[allow(missing_docs, clippy::all)]
#[rustfmt::skip]
mod perfetto_protos;
pub mod proto;
mod timeline;

pub use csv::{csv, csv_passes};
pub use timeline::Sampling;

/// The generated Perfetto protobuf types (a subset of Perfetto's trace proto; see
/// `telemetry/proto/perfetto_trace.proto`), for readers of the export.
pub mod protos {
    pub use super::perfetto_protos::*;
}

/// What an export wrote.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Frames (passes) exported.
    pub passes: u64,
    /// Trace events (slice begins and ends, counter samples) or rows (CSV) written, header
    /// and track descriptions excluded.
    pub events: u64,
    /// The first damage the reading met (the file cut, or a damaged stretch): the export
    /// holds every sound message around it (and is itself well-formed).
    pub damage: Option<RecordingError>,
    /// Every stretch the reading skipped past damage ([`Reader::skips`]).
    pub skips: Vec<super::Skip>,
    /// Traces: what the sampling kept and left out.
    pub sampling: Sampling,
}

impl ExportStats {
    /// What a trace export left out, as a sentence; `None` when it kept every span.
    pub fn left_out(&self) -> Option<String> {
        let s = &self.sampling;
        if s.spans_kept == s.spans_total {
            return None;
        }
        let thinned = if s.wg_every > 1 {
            format!(
                ", in those of one workgroup in {} (0, {}, {}, …)",
                s.wg_every,
                s.wg_every,
                2 * s.wg_every
            )
        } else {
            String::new()
        };
        Some(format!(
            "left out {} of {} workgroup spans: workgroup tracks for {} of {} passes with spans \
             (one in {}){thinned}, the others show their grid aggregate",
            s.spans_total - s.spans_kept,
            s.spans_total,
            s.wg_passes,
            s.spanned_passes,
            s.spans_every
        ))
    }
}

/// Which passes keep their workgroup tracks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpansEvery {
    /// One in N of the passes that have spans (the first, the N+1th, …).
    Every(u64),
    /// The smallest N that keeps at most `budget` workgroup spans (resolved against a
    /// [`Survey`] by [`TraceOptions::resolve`]).
    Auto {
        /// Workgroup spans (stage spans and barrier waits) to keep at most.
        budget: u64,
    },
}

/// Which workgroups' tracks a kept pass shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WgSelect {
    /// Every workgroup.
    All,
    /// These workgroups.
    List(Vec<u32>),
    /// Per pass, the workgroup with the most stage work.
    Slowest,
    /// Workgroups 0, N, 2N, …: what [`TraceOptions::resolve`] keeps of every workgroup where
    /// one pass alone holds more spans than the budget.
    Every(u32),
}

impl std::str::FromStr for WgSelect {
    type Err = String;
    /// `all`, `slowest`, or a list of workgroups and ranges: `0,3,8-11`.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "all" => return Ok(WgSelect::All),
            "slowest" => return Ok(WgSelect::Slowest),
            _ => {}
        }
        let mut out = vec![];
        for part in s.split(',') {
            let part = part.trim();
            let num = |x: &str| {
                x.trim().parse::<u32>().map_err(|_| {
                    format!("workgroups: {x:?} is not a workgroup number (expected e.g. 0,3,8-11, all or slowest)")
                })
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(format!("workgroups: range {part} runs backwards"));
                    }
                    if b - a >= 1 << 20 {
                        return Err(format!("workgroups: range {part} is too long"));
                    }
                    out.extend(a..=b);
                }
                None => out.push(num(part)?),
            }
        }
        out.sort_unstable();
        out.dedup();
        Ok(WgSelect::List(out))
    }
}

/// Trace export settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceOptions {
    /// Which passes keep their workgroup tracks.
    pub spans_every: SpansEvery,
    /// Which workgroups they show.
    pub workgroups: WgSelect,
    /// Only these passes (and the sensor samples between them); `None`: every pass.
    pub passes: Option<std::ops::RangeInclusive<u64>>,
}

/// The default span budget: ≈ 50 MB of JSON, ≈ 11 MB of protobuf (measured on the shipped
/// recordings: ≈ 190 bytes of JSON, ≈ 44 of protobuf per span, grid and pass slices
/// included), well inside what chrome://tracing (≈ 256 MB), speedscope (one JS string,
/// ≈ 512 MiB) and Perfetto's UI load.
pub const DEFAULT_SPAN_BUDGET: u64 = 250_000;

impl Default for TraceOptions {
    fn default() -> Self {
        TraceOptions {
            spans_every: SpansEvery::Auto {
                budget: DEFAULT_SPAN_BUDGET,
            },
            workgroups: WgSelect::All,
            passes: None,
        }
    }
}

impl TraceOptions {
    /// Every span of every workgroup.
    pub fn everything() -> Self {
        TraceOptions {
            spans_every: SpansEvery::Every(1),
            workgroups: WgSelect::All,
            passes: None,
        }
    }

    /// `Auto` resolved to `Every(N)` for the recording `survey` describes; where even one
    /// kept pass holds more spans than the budget, every workgroup ([`WgSelect::All`]) is
    /// thinned to one in K ([`WgSelect::Every`]), the smallest K that fits.
    pub fn resolve(&self, survey: &Survey) -> TraceOptions {
        let mut o = self.clone();
        if let SpansEvery::Auto { budget } = self.spans_every {
            let g = u128::from(survey.grid.max(1));
            let share = match &self.workgroups {
                WgSelect::All => g,
                WgSelect::List(l) => l.iter().filter(|&&w| u128::from(w) < g).count() as u128,
                WgSelect::Slowest => 1,
                WgSelect::Every(k) => g.div_ceil(u128::from((*k).max(1))),
            };
            // Spans the selected workgroups hold; keeping passes 0, N, 2N, … of P keeps
            // ceil(P / N) of them: the smallest N whose share fits the budget.
            let wanted = u128::from(survey.spans) * share / g;
            let p = u128::from(survey.spanned_passes.max(1));
            let fits = |n: u128| p.div_ceil(n) * wanted <= u128::from(budget) * p;
            let mut n = wanted.div_ceil(u128::from(budget.max(1))).max(1);
            while n < p && !fits(n) {
                n += 1;
            }
            // One pass alone over the budget (or, past the last pass, the first): of every
            // workgroup keep one in K, the smallest K whose spans fit.
            if !fits(n) && self.workgroups == WgSelect::All {
                let kept_passes = p.div_ceil(n);
                let m = u128::from(budget) * p * g / (kept_passes * wanted).max(1);
                let k = if m == 0 { g } else { g.div_ceil(m) }.clamp(1, g);
                if k > 1 {
                    o.workgroups = WgSelect::Every(k as u32);
                }
                // Past the last pass, one in N keeps the first pass alone: say one in P.
                n = n.min(p);
            }
            o.spans_every = SpansEvery::Every(n.min(u128::from(u64::MAX)) as u64);
        }
        o
    }
}

/// A recording's size as far as the trace is concerned (one read through it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Survey {
    /// Passes.
    pub passes: u64,
    /// Passes with spans.
    pub spanned_passes: u64,
    /// Workgroup spans: present stage spans and barrier waits.
    pub spans: u64,
    /// The run's grid.
    pub grid: u32,
    /// The smallest and the largest pass number of every frame, in `passes` or not (`None`:
    /// no frame at all): what a range that selects nothing can be told about.
    pub span_of_all: Option<(u64, u64)>,
}

/// Read `reader` through and count what a trace of it would hold (past any damage), over
/// the passes in `passes` (every pass where `None`).
pub fn survey<R: Read + Seek>(
    reader: &mut Reader<R>,
    passes: Option<&std::ops::RangeInclusive<u64>>,
) -> Survey {
    let mut s = Survey {
        grid: reader.header().run.grid,
        ..Default::default()
    };
    for msg in reader.by_ref() {
        if let Ok(Telemetry::Frame(f)) = &msg {
            s.span_of_all = Some(match s.span_of_all {
                None => (f.pass, f.pass),
                Some((a, b)) => (a.min(f.pass), b.max(f.pass)),
            });
        }
        match msg {
            Ok(Telemetry::Frame(f)) if passes.is_none_or(|r| r.contains(&f.pass)) => {
                s.passes += 1;
                if !f.spans.is_empty() {
                    s.spanned_passes += 1;
                    s.spans += f.spans.iter().count() as u64;
                    let sp = &f.spans;
                    for l in 0..sp.levels() {
                        if let Some((a, e)) = sp.level_stamps(l) {
                            s.spans += a
                                .iter()
                                .zip(e)
                                .filter(|(&a, &e)| {
                                    a != crate::spans::MISSING && e != crate::spans::MISSING
                                })
                                .count() as u64;
                        }
                    }
                }
            }
            Ok(Telemetry::Start(r)) => s.grid = r.grid,
            // Past damage: the next sound record is read as iteration goes on.
            Ok(_) | Err(_) => {}
        }
    }
    s
}

/// `ns` as µs with exactly three decimals.
pub(crate) struct Us(pub u64);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

pub(crate) fn mode_name(m: PowerMode) -> &'static str {
    match m {
        PowerMode::Unknown => "unknown",
        PowerMode::Fast => "fast",
        PowerMode::Slow => "slow",
    }
}

/// What a trace writer does with the timeline's output.
pub(crate) trait TraceSink {
    /// The run's header (once, first).
    fn start(&mut self, tl: &timeline::Timeline) -> std::io::Result<()>;
    /// A batch: tracks used for the first time (declare them), the pass it belongs to (if
    /// any), its events in order.
    fn batch(
        &mut self,
        tl: &timeline::Timeline,
        new_tracks: &[timeline::Track],
        pass: Option<&timeline::PassInfo>,
        evs: &[timeline::Ev],
    ) -> std::io::Result<()>;
    /// After the last batch.
    fn finish(&mut self, stats: &ExportStats) -> std::io::Result<()>;
}

/// Drive `sink` over `reader`'s remaining messages.
pub(crate) fn drive<R: Read + Seek>(
    reader: &mut Reader<R>,
    opts: &TraceOptions,
    sink: &mut impl TraceSink,
) -> Result<ExportStats> {
    let mut tl = timeline::Timeline::new(reader.header().run.clone(), opts);
    let mut stats = ExportStats::default();
    sink.start(&tl)?;
    let mut evs = vec![];
    // With a pass range: sensor samples only between its first and last pass.
    let mut in_range = opts.passes.is_none();
    for msg in reader.by_ref() {
        evs.clear();
        let mut pass = None;
        match msg {
            Ok(Telemetry::Start(run)) => tl.set_run(run),
            Ok(Telemetry::Frame(f)) => {
                if let Some(r) = &opts.passes {
                    in_range = r.contains(&f.pass) && f.pass < *r.end();
                    if !r.contains(&f.pass) {
                        continue;
                    }
                }
                pass = Some(tl.frame(&f, &mut evs));
                stats.passes += 1;
            }
            Ok(Telemetry::Sensor(s)) if in_range => tl.sensor(s.host_ns, &s.reading, &mut evs),
            Ok(_) => {}
            Err(e) => {
                stats.damage.get_or_insert(e);
                continue;
            }
        }
        if evs.is_empty() && pass.is_none() {
            continue;
        }
        let new = tl.new_tracks(&evs);
        sink.batch(&tl, &new, pass.as_ref(), &evs)?;
        stats.events += evs.len() as u64;
    }
    evs.clear();
    tl.finish(&mut evs);
    if !evs.is_empty() {
        let new = tl.new_tracks(&evs);
        sink.batch(&tl, &new, None, &evs)?;
        stats.events += evs.len() as u64;
    }
    stats.sampling = tl.sampling.clone();
    stats.skips = reader.skips().to_vec();
    sink.finish(&stats)?;
    Ok(stats)
}

/// Trace Event JSON of `reader`'s remaining messages (module doc). `opts.spans_every` should
/// be resolved ([`TraceOptions::resolve`]); `Auto` keeps every pass. A damaged or cut
/// recording exports every sound record around the damage, reported in
/// [`ExportStats::damage`] and [`ExportStats::skips`]; the JSON is
/// complete either way. Errors are the output's.
pub fn json_trace<R: Read + Seek>(
    reader: &mut Reader<R>,
    out: impl Write,
    opts: &TraceOptions,
) -> Result<ExportStats> {
    let mut sink = json::Json::new(BufWriter::with_capacity(1 << 20, out));
    let stats = drive(reader, opts, &mut sink)?;
    sink.flush()?;
    Ok(stats)
}

/// Perfetto protobuf trace of `reader`'s remaining messages (module doc and [`proto`]);
/// otherwise as [`json_trace`].
pub fn proto_trace<R: Read + Seek>(
    reader: &mut Reader<R>,
    out: impl Write,
    opts: &TraceOptions,
) -> Result<ExportStats> {
    let mut sink = proto::Proto::new(BufWriter::with_capacity(1 << 20, out));
    let stats = drive(reader, opts, &mut sink)?;
    sink.flush()?;
    Ok(stats)
}
