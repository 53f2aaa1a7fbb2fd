//! The dashboard's data model, fed only by the telemetry stream ([`Data::ingest`]). It keeps
//! what the panels need and nothing they draw: pass summaries for the navigator, the last few
//! whole frames for the flame chart (plus the slowest and a pinned one), statistics
//! ([`crate::stats`]), decoded tokens with their verdicts, and the warnings log. Live and
//! replay look the same here. `Clone` so a freeze can keep a snapshot while ingest goes on.

use std::collections::VecDeque;
use std::sync::Arc;

use baro_telemetry::fail::bits;
use baro_telemetry::labels::mode_name;
use baro_telemetry::{
    Contention, EndReason, Frame, LockHolder, PowerMode, RunDetails, SensorReading, StageKind,
    Telemetry, Verdict,
};

use crate::stats::{Stats, WINDOW};
use crate::text::sanitize;

/// Token id → its bytes (the model's tokenizer; synthetic mode supplies words). A token may
/// hold part of a UTF-8 character: [`crate::text::TokenStream`] joins them in stream order.
pub type Decoder = Arc<dyn Fn(u32) -> Vec<u8> + Send + Sync>;

/// What the stream does not carry but the display wants (the live session or the recording
/// header supplies it; every field may be absent).
#[derive(Clone, Default)]
pub struct Meta {
    /// Quantisation name.
    pub quant: Option<String>,
    /// The device's peak memory bandwidth, bytes/s: the producer's, else (from the run's
    /// start) the device's nominal one where the table knows it
    /// ([`baro_telemetry::analysis::nominal_peak_bytes_per_s`]).
    pub peak_bytes_per_s: Option<f64>,
    /// Weight bytes each stage reads, by stage id (empty = unknown).
    pub weight_bytes: Vec<u64>,
    /// Token decoder (`None`: the tokens panel shows token ids, compactly).
    pub decoder: Option<Decoder>,
    /// What the tokens panel says when it shows ids (default: "token ids (no vocabulary)").
    pub ids_label: Option<String>,
}

/// Passes kept as summaries (the navigator).
pub const SUMMARIES: usize = 4096;
/// Whole frames kept for the flame chart.
pub const RECENT: usize = 8;
/// Tokens kept.
pub const TOKENS: usize = 4096;
/// Log entries kept.
pub const LOG: usize = 500;
/// How many of the newest log lines a repeat folds into.
pub const FOLD: usize = 4;
/// Passes a new power mode must hold before its switch is logged (the label flickers on a
/// boundary).
pub const DEBOUNCE: u32 = 3;

/// One pass, small.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PassSummary {
    /// Pass number.
    pub pass: u64,
    /// Duration (GPU time, else wall), ns.
    pub dur_ns: u64,
    /// Host wall time, ns.
    pub wall_ns: u64,
    /// Fail word fired or the token failed.
    pub failed: bool,
    /// Power-state mode label.
    pub mode: PowerMode,
    /// Contention label: anything but quiet.
    pub contended: bool,
}

/// One decoded token.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenCell {
    /// Pass that produced it.
    pub pass: u64,
    /// Sanitised text.
    pub text: String,
    /// Verdict (`None` = not judged: see `pending`).
    pub verdict: Option<Verdict>,
    /// A live reference will judge this token (its verdict is still to come); `false` with
    /// no verdict: the reference does not judge it (checks off or skipped).
    pub pending: bool,
    /// The sequence restarted at this token.
    pub restart: bool,
}

/// The first divergence from the reference.
#[derive(Clone, Debug, PartialEq)]
pub struct Divergence {
    /// Pass.
    pub pass: u64,
    /// GPU token text.
    pub gpu: String,
    /// Reference token text.
    pub reference: String,
    /// Reference margin.
    pub margin: Option<f32>,
    /// Near-tie or mismatch.
    pub verdict: Verdict,
}

/// How bad a log entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// Informational.
    Info,
    /// Worth a look.
    Warn,
    /// Something is wrong.
    Error,
}

/// One log line.
#[derive(Clone, Debug, PartialEq)]
pub struct LogEntry {
    /// Pass, where it belongs to one.
    pub pass: Option<u64>,
    /// Severity.
    pub sev: Severity,
    /// Text.
    pub text: String,
    /// Times it was logged (repeats fold into one line: `⚠ contended … ×297`).
    pub count: u64,
}

/// What disturbed the run, for the header and the log: the newest pass's labels and the
/// sensor readings that explain them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Disturbance {
    /// The newest pass's power mode.
    pub mode: PowerMode,
    /// The newest pass's contention label.
    pub contention: Contention,
    /// Another process holding this GPU's host lock (a timing run), where one does.
    pub lock_holder: Option<LockHolder>,
    /// The latest shader clock and its maximum, MHz (NVML, AMD sysfs), where sampled.
    pub clocks: Option<(u32, Option<u32>)>,
}

/// Passes in each mode and contended, over the newest [`WINDOW`] passes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DisturbanceCounts {
    /// Passes counted.
    pub passes: usize,
    /// Fast passes.
    pub fast: usize,
    /// Slow passes.
    pub slow: usize,
    /// Unclassified passes.
    pub unknown: usize,
    /// Contended passes.
    pub contended: usize,
}

/// The kinds of a label's reasons (a change of cause is logged again).
fn reason_kinds(c: &Contention) -> Vec<std::mem::Discriminant<baro_telemetry::ContentionReason>> {
    c.reasons.iter().map(std::mem::discriminant).collect()
}

/// A retained frame's time geometry, computed once at ingest (not every redraw).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Geometry {
    /// End of the pass's last stamp, ns.
    pub extent: u64,
    /// Per level: the first exit from its barrier, ns (`u32::MAX`: none).
    pub level_exit: Vec<u32>,
}

impl Geometry {
    /// Of one frame.
    pub fn of(f: &Frame) -> Geometry {
        use baro_telemetry::spans::MISSING;
        let sp = &f.spans;
        let mut hi = 0u32;
        // Flat rows, not a lookup per span: this runs for every pass ingested.
        for s in 0..sp.stages() {
            if let Some((a, b)) = sp.stage_stamps(s) {
                for (&a, &b) in a.iter().zip(b) {
                    if a != MISSING && b != MISSING {
                        hi = hi.max(b);
                    }
                }
            }
        }
        let mut level_exit = vec![];
        for l in 0..sp.levels() {
            let mut first = u32::MAX;
            if let Some((_, e)) = sp.level_stamps(l) {
                for &e in e.iter().filter(|&&e| e != MISSING) {
                    hi = hi.max(e);
                    first = first.min(e);
                }
            }
            level_exit.push(first);
        }
        Geometry {
            extent: hi.max(1) as u64,
            level_exit,
        }
    }
}

/// Everything ingested.
#[derive(Clone, Default)]
pub struct Data {
    /// Run details (after `Start`).
    pub run: Option<Arc<RunDetails>>,
    /// Display extras.
    pub meta: Meta,
    /// Stage kinds by id.
    pub kinds: Vec<StageKind>,
    /// Pass summaries, newest last.
    pub passes: VecDeque<PassSummary>,
    /// Whole recent frames, newest last.
    pub recent: VecDeque<Arc<Frame>>,
    /// The slowest frame of the last `WINDOW` passes.
    pub slowest: Option<Arc<Frame>>,
    /// A pinned frame (kept while pinned).
    pub pinned: Option<Arc<Frame>>,
    /// Statistics (after `Start`).
    pub stats: Option<Stats>,
    /// Tokens, newest last.
    pub tokens: VecDeque<TokenCell>,
    /// The tokens panel's text in stream order (characters split across tokens joined).
    token_text: crate::text::TokenStream,
    /// First divergence.
    pub divergence: Option<Divergence>,
    /// Log, newest last.
    pub log: VecDeque<LogEntry>,
    /// Frames ingested.
    pub frames: u64,
    /// Spans ingested (for the ingest benchmark and the header).
    pub spans: u64,
    /// Failed passes (fail word).
    pub failed: u64,
    /// Passes whose token failed the reference.
    pub mismatched: u64,
    /// The last fail line.
    pub last_fail: Option<(u64, String)>,
    /// Frames this consumer dropped (from the newest frame or the end).
    pub dropped: u64,
    /// Dropped count when last logged.
    dropped_logged: u64,
    /// Passes since the last judged one (the reference's lag).
    pub ref_lag: u64,
    /// The run's dispatch, as its `Start` says (a producer that switches sends a new one).
    pub dispatch: Option<baro_telemetry::Dispatch>,
    /// The run ended.
    pub end: Option<EndReason>,
    /// Bumped on every change (redraw and derived-view cache key).
    pub generation: u64,
    /// Geometry of the retained frames, by pass.
    pub geometry: Vec<(u64, Arc<Geometry>)>,
    /// Power mode, contention and the lock holder.
    pub disturbance: Disturbance,
    /// Every pass since the start, added up (the closing summary line).
    pub summary: crate::stats::Summary,
    /// A mode other than the one taken and the passes in a row it has held (the debounce).
    mode_streak: (PowerMode, u32),
}

impl Data {
    /// An empty model with display extras.
    pub fn new(meta: Meta) -> Data {
        Data {
            meta,
            ..Default::default()
        }
    }

    /// A line from the producer (a replay's damage, a request it cannot honour) into the log.
    pub fn note(&mut self, sev: Severity, text: String) {
        self.generation += 1;
        self.log(None, sev, text);
    }

    fn log(&mut self, pass: Option<u64>, sev: Severity, text: String) {
        // A repeated warning or note, one of the last few lines, folds into it (counted,
        // moved to the end, its pass the newest): per-pass warnings that come and go stay one
        // line. Errors never fold: each failed pass keeps its own line.
        let recent = self.log.len().saturating_sub(FOLD);
        if let Some(i) = (recent..self.log.len())
            .rev()
            .find(|&i| sev != Severity::Error && self.log[i].sev == sev && self.log[i].text == text)
        {
            if let Some(mut e) = self.log.remove(i) {
                e.count += 1;
                e.pass = pass.or(e.pass);
                self.log.push_back(e);
            }
            return;
        }
        if self.log.len() == LOG {
            self.log.pop_front();
        }
        self.log.push_back(LogEntry {
            pass,
            sev,
            text,
            count: 1,
        });
    }

    /// Whether the run is on a CPU device (lavapipe): power modes and contention labels are
    /// not meaningful there.
    pub fn on_cpu(&self) -> bool {
        self.run
            .as_ref()
            .is_some_and(|r| r.device_kind == baro_telemetry::DeviceKind::Cpu)
    }

    fn text(&self, id: u32) -> String {
        let raw = match &self.meta.decoder {
            Some(d) => String::from_utf8_lossy(&d(id)).into_owned(),
            None => id.to_string(),
        };
        sanitize(&raw, "↵")
    }

    /// Take one message in.
    pub fn ingest(&mut self, msg: Telemetry) {
        self.generation += 1;
        // (A second start, below, begins the summary again with everything else.)
        self.summary.ingest(&msg);
        match msg {
            Telemetry::Start(d) => {
                let before = self.dispatch;
                if self.run.is_some() {
                    // A second start begins the stream again (a replay's seek or restart, a
                    // live rebuild): everything but the log and the display extras starts over.
                    let (log, generation) = (std::mem::take(&mut self.log), self.generation);
                    *self = Data::new(self.meta.clone());
                    self.log = log;
                    self.generation = generation;
                }
                // The engine says what each stage streams (older recordings do not: then
                // whatever the producer's metadata had stays).
                if d.stages.iter().any(|s| s.weight_bytes > 0) {
                    self.meta.weight_bytes = d.stages.iter().map(|s| s.weight_bytes).collect();
                }
                if self.meta.peak_bytes_per_s.is_none() {
                    self.meta.peak_bytes_per_s =
                        baro_telemetry::analysis::nominal_peak_bytes_per_s(&d.device);
                }
                self.kinds = d.stages.iter().map(|s| s.kind).collect();
                self.stats = Some(Stats::new(self.kinds.clone(), d.levels.len()));
                self.dispatch = Some(d.dispatch);
                let line = format!(
                    "run: {}, {} stages, {} levels, grid {} x {}{}",
                    crate::text::device_label(&d.device, &d.driver),
                    d.stages.len(),
                    d.levels.len(),
                    d.grid,
                    d.wg_size,
                    match d.path_labels() {
                        l if l.is_empty() => String::new(),
                        l => format!(", {} (off the f32 reference path)", l.join(", ")),
                    }
                );
                self.log(None, Severity::Info, line);
                if before.is_some_and(|b| b != d.dispatch) {
                    self.log(
                        None,
                        Severity::Info,
                        format!("dispatch is now {}", d.dispatch),
                    );
                }
                // What the driver's compiler made of the kernel: a spill puts local-memory
                // traffic inside every stage's number, so it is a warning, not a detail.
                for p in &d.pipelines {
                    let spilled = p.spills().is_some_and(|b| b > 0);
                    let (sev, tail) = if spilled {
                        (
                            Severity::Warn,
                            " (the compiler spilled: stage times include local-memory traffic)",
                        )
                    } else {
                        (Severity::Info, "")
                    };
                    self.log(
                        None,
                        sev,
                        format!("pipeline {}: {}{tail}", p.pipeline, p.summary()),
                    );
                }
                self.run = Some(Arc::new(d));
            }
            Telemetry::Frame(f) => self.frame(Arc::from(f)),
            Telemetry::End {
                passes,
                dropped,
                reason,
            } => {
                self.dropped = self.dropped.max(dropped);
                let sev = match reason {
                    EndReason::Completed | EndReason::Stopped | EndReason::ConsumerGone => {
                        Severity::Info
                    }
                    _ => Severity::Error,
                };
                self.log(None, sev, format!("end after {passes} passes: {reason}"));
                self.end = Some(reason);
            }
            Telemetry::Correctness { pass, correctness } => {
                self.ref_lag = self.ref_lag.saturating_sub(1);
                self.correctness(pass, correctness);
            }
            Telemetry::Sensor(smp) => self.sensor(smp.reading),
            Telemetry::Clock(_) => {}
        }
    }

    /// A sensor reading: the lock holder and clocks are kept (the header shows them), a
    /// holder appearing or leaving and a source that is off are logged.
    fn sensor(&mut self, r: SensorReading) {
        match r {
            SensorReading::HostLock { holder, ours } => {
                let other = if ours { None } else { holder };
                if other == self.disturbance.lock_holder {
                    return;
                }
                match &other {
                    Some(h) => self.log(
                        None,
                        Severity::Warn,
                        format!(
                            "another timing run holds this GPU's host lock: {h}; passes are \
                             contended while it runs (its work shares the GPU)"
                        ),
                    ),
                    None => self.log(None, Severity::Info, "the GPU's host lock is free".into()),
                }
                self.disturbance.lock_holder = other;
            }
            SensorReading::GpuClocks {
                sm_mhz, max_sm_mhz, ..
            } => self.disturbance.clocks = Some((sm_mhz, max_sm_mhz)),
            SensorReading::SourceOff { source, reason } => self.log(
                None,
                Severity::Info,
                format!("sensor {source} off: {reason}"),
            ),
            _ => {}
        }
    }

    /// Mode switches (debounced: the new mode must hold [`DEBOUNCE`] passes) and contention
    /// starting, changing cause and ending, into the log; nothing on a CPU device (no power
    /// states, no GPU to share: the header says n/a).
    fn disturbance(&mut self, f: &Frame) {
        if self.on_cpu() {
            return;
        }
        let clocks = match self.disturbance.clocks {
            Some((sm, Some(max))) => format!(" (SM clock {sm} of {max} MHz)"),
            Some((sm, None)) => format!(" (SM clock {sm} MHz)"),
            None => String::new(),
        };
        self.power_mode(f, &clocks);
        let (old, new) = (&self.disturbance.contention, &f.contention);
        let started = old.is_quiet() && !new.is_quiet();
        let changed = !old.is_quiet() && !new.is_quiet() && reason_kinds(old) != reason_kinds(new);
        if started || changed {
            let t = format!("contended: {}{clocks}", new.summary());
            self.log(Some(f.pass), Severity::Warn, t);
        } else if !old.is_quiet() && new.is_quiet() {
            self.log(Some(f.pass), Severity::Info, "quiet again".into());
        }
        self.disturbance.contention = f.contention.clone();
    }

    /// The power mode: a switch is taken (and logged) once the new mode has held
    /// [`DEBOUNCE`] passes in a row. The first classification is news only when it is slow.
    fn power_mode(&mut self, f: &Frame, clocks: &str) {
        let (was, now) = (self.disturbance.mode, f.mode);
        if now == PowerMode::Unknown || now == was {
            self.mode_streak = (was, 0);
            return;
        }
        self.mode_streak = match self.mode_streak {
            (m, n) if m == now => (m, n + 1),
            _ => (now, 1),
        };
        if self.mode_streak.1 < DEBOUNCE {
            return;
        }
        self.mode_streak = (now, 0);
        if !(was == PowerMode::Unknown && now == PowerMode::Fast) {
            let t = if was == PowerMode::Unknown {
                format!("slow power mode: clocks not at speed{clocks}")
            } else {
                format!("power mode {} → {}{clocks}", mode_name(was), mode_name(now))
            };
            let sev = if now == PowerMode::Slow {
                Severity::Warn
            } else {
                Severity::Info
            };
            self.log(Some(f.pass), sev, t);
        }
        self.disturbance.mode = now;
    }

    /// Passes in each mode and contended over the newest [`WINDOW`] passes.
    pub fn disturbance_counts(&self) -> DisturbanceCounts {
        let mut c = DisturbanceCounts::default();
        for p in self.passes.iter().rev().take(WINDOW) {
            c.passes += 1;
            match p.mode {
                PowerMode::Fast => c.fast += 1,
                PowerMode::Slow => c.slow += 1,
                PowerMode::Unknown => c.unknown += 1,
            }
            c.contended += usize::from(p.contended);
        }
        c
    }

    /// A verdict on pass `pass`, in its frame or later from the live reference.
    fn correctness(&mut self, pass: u64, c: baro_telemetry::Correctness) {
        if let Some(cell) = self.tokens.iter_mut().rev().find(|t| t.pass == pass) {
            cell.verdict = Some(c.verdict);
            cell.pending = false;
        }
        if c.verdict.is_failure() {
            self.mismatched += 1;
            let t = format!(
                "pass {}: token {} ({:?}) {} against reference {}",
                pass,
                c.gpu_token,
                self.text(c.gpu_token),
                crate::text::verdict_name(c.verdict),
                c.reference.map_or("— (non-finite)".into(), |r| format!(
                    "{r} ({:?})",
                    self.text(r)
                ))
            );
            self.log(Some(pass), Severity::Error, t);
        }
        if c.first_divergence == Some(pass)
            && self.divergence.as_ref().is_none_or(|d| d.pass != pass)
        {
            let d = Divergence {
                pass,
                gpu: self.text(c.gpu_token),
                reference: c
                    .reference
                    .map(|r| self.text(r))
                    .unwrap_or_else(|| "non-finite".into()),
                margin: c.margin,
                verdict: c.verdict,
            };
            if c.verdict == Verdict::NearTie {
                let t = format!(
                    "pass {}: near-tie {:?} vs {:?} margin {:.1e}: comparison ends here",
                    pass,
                    d.gpu,
                    d.reference,
                    d.margin.unwrap_or(0.0)
                );
                self.log(Some(pass), Severity::Warn, t);
            }
            self.divergence = Some(d);
        }
    }

    fn frame(&mut self, f: Arc<Frame>) {
        let grid = f.spans.grid();
        let spans = f.spans.stages() as u64 * grid as u64;
        self.frames += 1;
        self.spans += spans;
        let dur_ns = f.gpu_ns.unwrap_or(f.wall_ns);
        let failed = f.failed();
        // Last arriver per level (the tail the next stage's charged time absorbs).
        let last: Vec<u32> = baro_telemetry::analysis::last_arrivers(&f.spans)
            .into_iter()
            .map(|w| w.unwrap_or(u32::MAX))
            .collect();
        if let Some(s) = &mut self.stats {
            s.ingest(&f, dur_ns, &last);
        }

        if self.passes.len() == SUMMARIES {
            self.passes.pop_front();
        }
        self.passes.push_back(PassSummary {
            pass: f.pass,
            dur_ns,
            wall_ns: f.wall_ns,
            failed,
            mode: f.mode,
            contended: !f.contention.is_quiet(),
        });
        self.disturbance(&f);

        // Fail word, torn frames, dropped frames.
        if !f.fail.word.ok() {
            self.failed += 1;
            self.last_fail = Some((f.pass, f.fail.line.clone()));
            self.log(Some(f.pass), Severity::Error, f.fail.line.clone());
            let w = &f.fail.word;
            if w.has(bits::WATCHDOG) {
                self.log(
                    Some(f.pass),
                    Severity::Error,
                    "watchdog: the pass's fence did not signal; the decoder refuses work".into(),
                );
            }
            if w.has(bits::MISSING_WG) {
                let t = format!(
                    "residency: {}/{} workgroups stamped residency",
                    w.resident, w.grid
                );
                self.log(Some(f.pass), Severity::Error, t);
            }
            if w.has(bits::POISONED) {
                self.log(
                    Some(f.pass),
                    Severity::Error,
                    "poison: outputs still poisoned after the pass (tokens are wrong)".into(),
                );
            }
        }
        if f.torn {
            self.log(
                Some(f.pass),
                Severity::Warn,
                "torn ring frame: stages not read".into(),
            );
        }
        self.dropped = self.dropped.max(f.dropped);
        if self.dropped > self.dropped_logged {
            let t = format!(
                "dropped frames: {} so far (+{}): this view reads too slowly",
                self.dropped,
                self.dropped - self.dropped_logged
            );
            self.dropped_logged = self.dropped;
            self.log(Some(f.pass), Severity::Warn, t);
        }

        // Tokens and correctness: a frame carries its verdict, or says a live reference will
        // send it later (a `correctness` message) and how far behind that reference is.
        let verdict = f.correctness.map(|c| c.verdict);
        self.ref_lag = if verdict.is_some() {
            0
        } else if f.check == baro_telemetry::CheckState::Pending {
            f.check_lag
        } else {
            self.ref_lag + 1
        };
        if let Some(c) = f.correctness {
            self.correctness(f.pass, c);
        }
        if self.tokens.len() == TOKENS {
            self.tokens.pop_front();
        }
        let text = match &self.meta.decoder {
            Some(d) => sanitize(&self.token_text.push(&**d, f.pass, f.pos, f.next), "↵"),
            None => f.next.to_string(),
        };
        self.tokens.push_back(TokenCell {
            pass: f.pass,
            text,
            verdict,
            pending: verdict.is_none() && f.check == baro_telemetry::CheckState::Pending,
            restart: f.pos == 0,
        });

        // Frames kept for the flame chart.
        if !f.spans.is_empty() {
            let keep_slow = match &self.slowest {
                None => true,
                Some(s) => {
                    s.pass + (WINDOW as u64) < f.pass || s.gpu_ns.unwrap_or(s.wall_ns) <= dur_ns
                }
            };
            if keep_slow {
                self.slowest = Some(f.clone());
            }
            if self.recent.len() == RECENT {
                self.recent.pop_front();
            }
            self.geometry.push((f.pass, Arc::new(Geometry::of(&f))));
            self.recent.push_back(f);
            let keep = self.retained();
            self.geometry.retain(|(p, _)| keep.contains(p));
        }
    }

    /// The geometry of a retained frame (computed now if it was not kept).
    pub fn geometry_of(&self, f: &Frame) -> Arc<Geometry> {
        match self.geometry.iter().find(|(p, _)| *p == f.pass) {
            Some((_, g)) => g.clone(),
            None => Arc::new(Geometry::of(f)),
        }
    }

    /// A retained whole frame by pass number.
    pub fn frame_by_pass(&self, pass: u64) -> Option<&Arc<Frame>> {
        self.recent
            .iter()
            .chain(self.slowest.iter())
            .chain(self.pinned.iter())
            .find(|f| f.pass == pass)
    }

    /// Passes with whole frames retained, ascending.
    pub fn retained(&self) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .recent
            .iter()
            .chain(&self.slowest)
            .chain(&self.pinned)
            .map(|f| f.pass)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Tokens per second, the median over the newest passes (at most [`WINDOW`]), and how
    /// many passes that is. From wall times, so a replay shows the run's speed, not the
    /// replay's.
    pub fn tok_s(&self) -> (Option<f64>, usize) {
        let rate = |p: &PassSummary| (p.wall_ns > 0).then(|| 1e9 / p.wall_ns as f64);
        let mut w: Vec<f64> = self
            .passes
            .iter()
            .rev()
            .take(WINDOW)
            .filter_map(rate)
            .collect();
        w.sort_by(f64::total_cmp);
        (w.get(w.len() / 2).copied(), w.len())
    }
}
