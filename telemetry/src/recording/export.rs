//! Exports of a recording: Chrome trace JSON for Perfetto / `chrome://tracing`, and CSV.
//! Pure functions of a [`Reader`] and a `Write`, so the CLI only opens files.
//!
//! # Perfetto (Chrome trace JSON)
//!
//! ```text
//! pid 1            "baro-top: MODEL on DEVICE": counters tok/s, mode (0 unknown, 1 fast,
//!                  2 slow), sm_mhz / mem_mhz (clock sensor samples)
//! pid 2 + k        passes k·N … k·N + N − 1 (N = passes_per_group, default 64)
//!   tid 1 + w      workgroup w: per pass one "pass P" complete event around its stamps,
//!                  inside it one complete event per stage it ran (cat "stage", args
//!                  {stage, level, busy_ns}) and one per grid barrier it waited at
//!                  (cat "barrier", name "wait LEVEL", from its arrival to its exit)
//! ```
//!
//! Times are µs (`ts`, `dur`, three decimals: exact ns). A pass is placed at its
//! `host_start_ns` (relative to the first pass's), or right after the previous pass where
//! there is none, and never before the previous pass's last stamp, so each track's events
//! are in time order and a pass's events nest inside its "pass" event. A pass without spans
//! (torn, uninstrumented) is one "pass P" event of its wall time on tid 0.
//!
//! # CSV
//!
//! One row per pass per stage, with a header row:
//! `pass,stage,name,kind,level,busy_ns,charged_ns,max_busy_ns,fail_word,mode`.

use std::collections::{HashMap, HashSet};
use std::io::{BufWriter, Read, Seek, Write};

use super::{Reader, RecordingError, Result};
use crate::{Frame, PowerMode, RunDetails, SensorReading, Telemetry};

/// What an export wrote.
#[derive(Debug, Default)]
pub struct ExportStats {
    /// Frames (passes) exported.
    pub passes: u64,
    /// Trace events (Perfetto) or rows (CSV) written, header excluded.
    pub events: u64,
    /// Where the recording was damaged or cut: the export holds every message before it
    /// (and is itself well-formed).
    pub damage: Option<RecordingError>,
}

/// Perfetto export settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PerfettoOptions {
    /// Passes per process (pid).
    pub passes_per_group: u64,
}

impl Default for PerfettoOptions {
    fn default() -> Self {
        PerfettoOptions {
            passes_per_group: 64,
        }
    }
}

/// `ns` as µs with exactly three decimals.
struct Us(u64);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

fn mode_code(m: PowerMode) -> u32 {
    match m {
        PowerMode::Unknown => 0,
        PowerMode::Fast => 1,
        PowerMode::Slow => 2,
    }
}

/// Chrome trace JSON of `reader`'s remaining messages, with default options.
pub fn perfetto<R: Read + Seek>(reader: &mut Reader<R>, out: impl Write) -> Result<ExportStats> {
    perfetto_with(reader, out, PerfettoOptions::default())
}

/// What a track event is.
#[derive(Clone, Copy)]
enum Ev {
    Pass,
    Stage(u32),
    Barrier(u32),
}

struct Perfetto<W: Write> {
    out: W,
    opts: PerfettoOptions,
    run: RunDetails,
    /// JSON-quoted stage and barrier names.
    stage_names: Vec<String>,
    wait_names: Vec<String>,
    first: bool,
    host0: Option<u64>,
    /// Where the previous pass ended on the trace's clock, ns.
    prev_end: u64,
    prev_base_wall: Option<(u64, u64)>,
    named_pids: HashSet<u64>,
    named_tids: HashSet<(u64, u32)>,
    counter_ts: HashMap<&'static str, u64>,
    events: u64,
    scratch: Vec<(u64, u64, Ev)>,
}

impl<W: Write> Perfetto<W> {
    fn set_run(&mut self, run: RunDetails) {
        self.stage_names = run.stages.iter().map(|s| json_str(&s.name)).collect();
        self.wait_names = run
            .levels
            .iter()
            .map(|l| json_str(&format!("wait {}", l.name)))
            .collect();
        self.run = run;
    }

    fn sep(&mut self) -> std::io::Result<()> {
        if self.first {
            self.first = false;
            self.out.write_all(b"\n")
        } else {
            self.out.write_all(b",\n")
        }
    }

    fn meta(&mut self, pid: u64, tid: Option<u32>, name: &str) -> std::io::Result<()> {
        self.sep()?;
        let n = json_str(name);
        match tid {
            None => write!(
                self.out,
                r#"{{"ph":"M","name":"process_name","pid":{pid},"tid":0,"args":{{"name":{n}}}}}"#
            ),
            Some(t) => write!(
                self.out,
                r#"{{"ph":"M","name":"thread_name","pid":{pid},"tid":{t},"args":{{"name":{n}}}}}"#
            ),
        }
    }

    fn counter(&mut self, name: &'static str, ts: u64, value: f64) -> std::io::Result<()> {
        let last = self.counter_ts.entry(name).or_insert(0);
        let ts = ts.max(*last);
        *last = ts;
        self.sep()?;
        self.events += 1;
        write!(
            self.out,
            r#"{{"ph":"C","name":"{name}","pid":1,"tid":0,"ts":{},"args":{{"{name}":{value}}}}}"#,
            Us(ts)
        )
    }

    fn host_ts(&self, host_ns: u64) -> u64 {
        self.host0
            .map_or(self.prev_end, |h| host_ns.saturating_sub(h))
    }

    fn frame(&mut self, f: &Frame) -> std::io::Result<()> {
        // Where the pass goes on the trace's clock.
        let wanted = match (f.host_start_ns, self.host0) {
            (Some(h), Some(h0)) => h.saturating_sub(h0),
            (Some(h), None) => {
                self.host0 = Some(h);
                0
            }
            _ => self.prev_base_wall.map_or(0, |(b, w)| b + w),
        };
        let base = wanted.max(self.prev_end);
        self.prev_base_wall = Some((base, f.wall_ns));
        let group = f.pass / self.opts.passes_per_group.max(1);
        let pid = 2 + group;
        if self.named_pids.insert(pid) {
            let lo = group * self.opts.passes_per_group.max(1);
            let hi = lo + self.opts.passes_per_group.max(1) - 1;
            self.meta(pid, None, &format!("passes {lo}-{hi}"))?;
        }
        if f.wall_ns > 0 {
            self.counter("tok/s", base, 1e9 / f.wall_ns as f64)?;
        }
        self.counter("mode", base, f64::from(mode_code(f.mode)))?;
        let pass_args = format!(
            r#"{{"pass":{},"token":{},"next":{},"fail_word":"0x{:08x}","wall_ns":{}}}"#,
            f.pass, f.token, f.next, f.fail.word.bits, f.wall_ns
        );
        let spans = &f.spans;
        if spans.is_empty() {
            self.sep()?;
            self.events += 1;
            write!(
                self.out,
                r#"{{"ph":"X","name":"pass {}","cat":"pass","pid":{pid},"tid":0,"ts":{},"dur":{},"args":{pass_args}}}"#,
                f.pass,
                Us(base),
                Us(f.wall_ns)
            )?;
            self.prev_end = base + f.wall_ns;
            return Ok(());
        }
        let mut end_all = base;
        let mut evs = std::mem::take(&mut self.scratch);
        for w in 0..spans.grid() {
            evs.clear();
            for s in 0..spans.stages() {
                if let Some((a, b)) = spans.span(s, w) {
                    evs.push((u64::from(a), u64::from(b.saturating_sub(a)), Ev::Stage(s)));
                }
            }
            for l in 0..spans.levels() {
                if let (Some(a), Some(e)) = (spans.arrive(l, w), spans.exit(l, w)) {
                    evs.push((u64::from(a), u64::from(e.saturating_sub(a)), Ev::Barrier(l)));
                }
            }
            let (Some(lo), Some(hi)) = (
                evs.iter().map(|e| e.0).min(),
                evs.iter().map(|e| e.0 + e.1).max(),
            ) else {
                continue;
            };
            evs.push((lo, hi - lo, Ev::Pass));
            // Parents before children: by start, then longest first.
            evs.sort_by_key(|&(a, d, _)| (a, std::cmp::Reverse(d)));
            let tid = w + 1;
            if self.named_tids.insert((pid, tid)) {
                self.meta(pid, Some(tid), &format!("wg {w}"))?;
            }
            for &(a, d, ev) in &evs {
                self.sep()?;
                self.events += 1;
                let (ts, dur) = (Us(base + a), Us(d));
                match ev {
                    Ev::Pass => write!(
                        self.out,
                        r#"{{"ph":"X","name":"pass {}","cat":"pass","pid":{pid},"tid":{tid},"ts":{ts},"dur":{dur},"args":{pass_args}}}"#,
                        f.pass
                    )?,
                    Ev::Stage(s) => {
                        let name = self.stage_names.get(s as usize).map_or("\"?\"", |n| n);
                        let level = self.run.stages.get(s as usize).map_or(0, |x| x.level);
                        write!(
                            self.out,
                            r#"{{"ph":"X","name":{name},"cat":"stage","pid":{pid},"tid":{tid},"ts":{ts},"dur":{dur},"args":{{"stage":{s},"level":{level},"busy_ns":{d}}}}}"#
                        )?
                    }
                    Ev::Barrier(l) => {
                        let name = self.wait_names.get(l as usize).map_or("\"wait\"", |n| n);
                        write!(
                            self.out,
                            r#"{{"ph":"X","name":{name},"cat":"barrier","pid":{pid},"tid":{tid},"ts":{ts},"dur":{dur},"args":{{"level":{l},"wait_ns":{d}}}}}"#
                        )?
                    }
                }
            }
            end_all = end_all.max(base + hi);
        }
        self.scratch = evs;
        self.prev_end = end_all;
        Ok(())
    }
}

/// Chrome trace JSON of `reader`'s remaining messages (see the module doc for the layout).
/// A damaged or cut recording exports up to the damage, reported in
/// [`ExportStats::damage`]; the JSON is complete either way. Errors are the output's.
pub fn perfetto_with<R: Read + Seek>(
    reader: &mut Reader<R>,
    out: impl Write,
    opts: PerfettoOptions,
) -> Result<ExportStats> {
    let mut p = Perfetto {
        out: BufWriter::with_capacity(1 << 20, out),
        opts,
        run: reader.header().run.clone(),
        stage_names: vec![],
        wait_names: vec![],
        first: true,
        host0: None,
        prev_end: 0,
        prev_base_wall: None,
        named_pids: HashSet::new(),
        named_tids: HashSet::new(),
        counter_ts: HashMap::new(),
        events: 0,
        scratch: vec![],
    };
    p.set_run(reader.header().run.clone());
    let mut stats = ExportStats::default();
    p.out
        .write_all(br#"{"displayTimeUnit":"ns","traceEvents":["#)?;
    let title = format!("baro-top: {} on {}", p.run.model, p.run.device);
    p.meta(1, None, &title)?;
    for msg in reader.by_ref() {
        match msg {
            Ok(Telemetry::Start(run)) => p.set_run(run),
            Ok(Telemetry::Frame(f)) => {
                p.frame(&f)?;
                stats.passes += 1;
            }
            Ok(Telemetry::Sensor(s)) => {
                let ts = p.host_ts(s.host_ns);
                match s.reading {
                    SensorReading::GpuClocks {
                        sm_mhz, mem_mhz, ..
                    } => {
                        p.counter("sm_mhz", ts, f64::from(sm_mhz))?;
                        if let Some(m) = mem_mhz {
                            p.counter("mem_mhz", ts, f64::from(m))?;
                        }
                    }
                    SensorReading::Mode { mode } => {
                        p.counter("mode", ts, f64::from(mode_code(mode)))?;
                    }
                    _ => {}
                }
            }
            Ok(Telemetry::Clock(_) | Telemetry::End { .. } | Telemetry::Correctness { .. }) => {}
            Err(e) => {
                stats.damage = Some(e);
                break;
            }
        }
    }
    p.out.write_all(b"\n]}\n")?;
    p.out.flush()?;
    stats.events = p.events;
    Ok(stats)
}

fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// CSV of `reader`'s remaining frames: one row per pass per stage (module doc). A damaged
/// or cut recording exports up to the damage, reported in [`ExportStats::damage`].
pub fn csv<R: Read + Seek>(reader: &mut Reader<R>, out: impl Write) -> Result<ExportStats> {
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut run = reader.header().run.clone();
    let mut stats = ExportStats::default();
    writeln!(
        out,
        "pass,stage,name,kind,level,busy_ns,charged_ns,max_busy_ns,fail_word,mode"
    )?;
    for msg in reader.by_ref() {
        match msg {
            Ok(Telemetry::Start(r)) => run = r,
            Ok(Telemetry::Frame(f)) => {
                stats.passes += 1;
                let mode = match f.mode {
                    PowerMode::Unknown => "unknown",
                    PowerMode::Fast => "fast",
                    PowerMode::Slow => "slow",
                };
                for s in &f.stages {
                    let kind = run
                        .stages
                        .get(s.stage as usize)
                        .map_or("", |d| d.kind.name());
                    writeln!(
                        out,
                        "{},{},{},{kind},{},{},{},{},0x{:08x},{mode}",
                        f.pass,
                        s.stage,
                        csv_field(&s.name),
                        s.level,
                        s.busy_ns,
                        s.charged_ns,
                        s.max_busy_ns,
                        f.fail.word.bits
                    )?;
                    stats.events += 1;
                }
            }
            Ok(_) => {}
            Err(e) => {
                stats.damage = Some(e);
                break;
            }
        }
    }
    out.flush()?;
    Ok(stats)
}
