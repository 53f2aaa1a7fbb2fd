//! Per-pass labels: the power-state [`PowerMode`] and the [`Contention`] label, computed from
//! the pass's own frame and the latest sensor samples. Pure logic: no I/O, no clock (every
//! time comes in with the data), so every rule here is tested with plain values and the
//! scenario fixtures in `tests/scenarios/`.
//!
//! # Power mode ([`PowerModeClassifier`])
//!
//! The mode is read from the pass's *latency indicator*: the summed busy time of its stages
//! that do not grow with the position (attention is left out: it grows ≈ 2.7× from position 0
//! to 1280 and would look like a mode change), else its GPU time, else its wall time. Each
//! indicator source has its own *fast baseline*: the lowest indicator among the last
//! `window` passes labelled fast (or seen while warming up). A pass votes
//!
//! - slow when its indicator is at least `slow_ratio` × the baseline,
//! - fast when it is at most `fast_ratio` × the baseline,
//! - nothing in between (it keeps the mode held).
//!
//! The in-kernel busy time is used first because it does not see time-slicing: a pass that
//! waited for another context is contended, not slow.
//!
//! Until `warmup` passes have fed the baseline it is not trusted and the latency votes
//! nothing; a pass the clock calls slow does not feed it (so a cold start does not become
//! the "fast" baseline where the clocks are sampled). A clock hint (NVML's SM clock against
//! its maximum) votes where latency does not: below `clock_slow_fraction` of the maximum
//! clock slow, from `clock_fast_fraction` up fast. So a cold start is labelled slow from its
//! first pass where the clocks are sampled, and unknown until the baseline is trusted where
//! they are not. Where both vote and disagree the latency wins (modes are not DPM clock
//! levels) and [`ModeDecision::clock_agrees`] says so, with two exceptions for the clock
//! samples' timing (round 64 on the H200):
//!
//! - a baseline that only passes with no clock sample fed (the sensor's first reading came
//!   after them) is dropped, with the held mode, when the clock calls a pass slow, and warms
//!   up again: the same labels as if the sample had come first;
//! - a slow sample is stale for a pass at least `slow_ratio` times faster than every pass
//!   that same sample called slow (the clocks rose since it): it votes nothing there, and the
//!   pass can feed the baseline.
//!
//! A GPU held below `clock_slow_fraction` of its maximum clock for the whole run (clocks
//! locked low, a hard power cap) is labelled slow throughout: its clocks are not at speed.
//!
//! Hysteresis: leaving the held mode takes `switch_after` consecutive passes voting for the
//! other one; the passes before the switch are labelled [`PowerMode::Unknown`] (not the held
//! mode: a comparison within one mode must not take them in). From unknown, the first vote is
//! taken at once.
//!
//! A slow mode that lasts through the whole warmup with no clock source is taken for the
//! fast one until a faster pass shows up: live labels cannot know better, and
//! [`classify_offline`] (for `bench` and `diff`, after the run) starts from the run's own
//! fastest passes instead.
//!
//! # Contention ([`ContentionLabeler`])
//!
//! A pass is contended when, at its start, the latest samples (no older than
//! `max_sample_age_ns`) show another GPU client or a CPU busier than `cpu_busy_threshold`
//! (other processes only), when the pass's GPU time exceeds the work it can account for by
//! at least `slice_min_ns` and `slice_fraction` of its GPU time (time-sliced), or when
//! another timing run holds the GPU lock. Each cause becomes one [`ContentionReason`].
//!
//! # Both, and warnings ([`PassLabeler`])
//!
//! [`PassLabeler`] folds sensor samples ([`PassLabeler::observe`]) and labels frames
//! ([`PassLabeler::label`]), returning the [`Warning`]s the warnings panel shows: a mode
//! switch, contention starting and ending, a clock that disagrees with the latency, a sensor
//! source that is off.

use std::collections::VecDeque;
use std::fmt;

use crate::frame::{Contention, ContentionReason, Frame, GpuClient, LockHolder, PowerMode};
use crate::run::{RunDetails, StageKind};
use crate::{SensorReading, SensorSample, StageId};

/// Tuning of [`PowerModeClassifier`] (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct ModeConfig {
    /// A pass at least this × the fast baseline votes slow.
    pub slow_ratio: f64,
    /// A pass at most this × the fast baseline votes fast.
    pub fast_ratio: f64,
    /// Consecutive votes needed to leave the held mode.
    pub switch_after: u32,
    /// Passes (per indicator source) before the baseline is trusted.
    pub warmup: u32,
    /// How many fast passes the baseline is the minimum of.
    pub window: usize,
    /// SM clock below this fraction of its maximum votes slow.
    pub clock_slow_fraction: f64,
    /// SM clock at or above this fraction of its maximum votes fast.
    pub clock_fast_fraction: f64,
}

impl Default for ModeConfig {
    fn default() -> Self {
        ModeConfig {
            slow_ratio: 1.5,
            fast_ratio: 1.25,
            switch_after: 3,
            warmup: 5,
            window: 64,
            clock_slow_fraction: 0.6,
            clock_fast_fraction: 0.9,
        }
    }
}

/// The GPU's clocks around a pass, from a sensor (NVML, AMD sysfs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockHint {
    /// Shader clock, MHz.
    pub sm_mhz: u32,
    /// Its maximum, MHz.
    pub max_sm_mhz: u32,
}

impl ClockHint {
    fn vote(self, cfg: &ModeConfig) -> Option<PowerMode> {
        if self.max_sm_mhz == 0 {
            return None;
        }
        let f = f64::from(self.sm_mhz) / f64::from(self.max_sm_mhz);
        if f < cfg.clock_slow_fraction {
            Some(PowerMode::Slow)
        } else if f >= cfg.clock_fast_fraction {
            Some(PowerMode::Fast)
        } else {
            None
        }
    }
}

/// Where a pass's latency indicator came from (each has its own baseline).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Indicator {
    /// Summed busy time of the position-independent stages.
    StageBusy,
    /// GPU time from timestamps.
    GpuTime,
    /// Host wall time.
    WallTime,
}

/// A pass's mode and how it was reached.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModeDecision {
    /// The label.
    pub mode: PowerMode,
    /// The indicator over the fast baseline, once the baseline is trusted.
    pub ratio: Option<f64>,
    /// The indicator used (`None`: the frame had none).
    pub indicator: Option<Indicator>,
    /// Whether the clock hint voted the same as the latency (`None`: not both voted).
    pub clock_agrees: Option<bool>,
}

#[derive(Clone, Debug, Default)]
struct Baseline {
    /// Passes fed so far (the baseline is trusted from `warmup` on).
    fed: u32,
    fast: VecDeque<u64>,
    /// A pass with a clock hint fed it (see [`PowerModeClassifier::classify_indicator`]).
    clocked: bool,
    /// Given by [`PowerModeClassifier::with_baseline`]: trusted whatever the clock says.
    given: bool,
}

impl Baseline {
    fn min(&self) -> Option<u64> {
        self.fast.iter().copied().min()
    }
    fn push(&mut self, x: u64, window: usize) {
        if self.fast.len() == window.max(1) {
            self.fast.pop_front();
        }
        self.fast.push_back(x);
    }
    fn reset(&mut self) {
        *self = Baseline::default();
    }
}

/// Labels each pass fast, slow or unknown, with hysteresis (see the module doc).
#[derive(Clone, Debug)]
pub struct PowerModeClassifier {
    cfg: ModeConfig,
    excluded: Vec<StageId>,
    baselines: [Baseline; 3],
    /// Per indicator, the clock sample that last called a pass slow and the lowest indicator
    /// of the passes it called slow.
    slow_min: [Option<(ClockHint, u64)>; 3],
    held: PowerMode,
    pending: Option<(PowerMode, u32)>,
}

impl PowerModeClassifier {
    /// A classifier that uses every stage's busy time.
    pub fn new(cfg: ModeConfig) -> Self {
        PowerModeClassifier {
            cfg,
            excluded: Vec::new(),
            baselines: Default::default(),
            slow_min: [None; 3],
            held: PowerMode::Unknown,
            pending: None,
        }
    }

    /// A classifier for a run: its attention stages (whose cost grows with the position) are
    /// left out of the indicator.
    pub fn for_run(cfg: ModeConfig, run: &RunDetails) -> Self {
        let mut c = Self::new(cfg);
        c.excluded = run
            .stages
            .iter()
            .filter(|s| s.kind == StageKind::Attn)
            .map(|s| s.id)
            .collect();
        c
    }

    /// Start from a known fast indicator (e.g. from an earlier run, or the offline pass):
    /// the baseline of `indicator` is trusted from the first pass.
    pub fn with_baseline(mut self, indicator: Indicator, fast_ns: u64) -> Self {
        let b = &mut self.baselines[indicator as usize];
        b.push(fast_ns, self.cfg.window);
        b.fed = self.cfg.warmup;
        b.given = true;
        self
    }

    /// The mode held now.
    pub fn held(&self) -> PowerMode {
        self.held
    }

    /// The pass's latency indicator and its source. The stages' busy times are summed
    /// saturating at `u64::MAX` (a damaged or crafted recording's times), never wrapped.
    pub fn indicator(&self, frame: &Frame) -> Option<(Indicator, u64)> {
        if !frame.torn && !frame.stages.is_empty() {
            let busy: u64 = frame
                .stages
                .iter()
                .filter(|s| !self.excluded.contains(&s.stage))
                .map(|s| s.busy_ns)
                .fold(0, u64::saturating_add);
            if busy > 0 {
                return Some((Indicator::StageBusy, busy));
            }
        }
        if let Some(g) = frame.gpu_ns.filter(|&g| g > 0) {
            return Some((Indicator::GpuTime, g));
        }
        (frame.wall_ns > 0).then_some((Indicator::WallTime, frame.wall_ns))
    }

    /// Classify the next pass, with the clock hint sampled around it where there is one.
    pub fn classify(&mut self, frame: &Frame, clock: Option<ClockHint>) -> ModeDecision {
        let ind = self.indicator(frame);
        self.classify_indicator(ind, clock)
    }

    /// [`Self::classify`] given the pass's [`Self::indicator`] (all it reads of the frame), so
    /// that a caller need not keep whole frames.
    pub fn classify_indicator(
        &mut self,
        ind: Option<(Indicator, u64)>,
        clock: Option<ClockHint>,
    ) -> ModeDecision {
        let cfg = &self.cfg;
        let mut ratio = None;
        let mut latency_vote = None;
        let mut clock_vote = clock.and_then(|c| c.vote(cfg));
        if let (Some((src, x)), Some(PowerMode::Slow), Some(h)) = (ind, clock_vote, clock) {
            let b = &mut self.baselines[src as usize];
            if self.slow_min[src as usize]
                .is_some_and(|(s, m)| s == h && (x as f64) * cfg.slow_ratio <= m as f64)
            {
                // A sample stands for the passes until the next one (a 1B run's whole ramp
                // from 345 MHz can fit between two): a pass at least `slow_ratio` times faster
                // than every pass this same sample called slow ran after the clocks rose.
                clock_vote = None;
            } else if b.fed > 0 && !b.clocked && !b.given {
                // A baseline learned only from passes no clock sample covered (the source's
                // first sample came after the warmup: on the H200 NVML's first reading lands
                // ≈ 8 passes in) is a cold start's latency as often as a fast one's (round 64:
                // 85 passes at 3.5 ms labelled fast at 405 of 1980 MHz): a clock that calls a
                // pass slow discards it and the held mode, and the warmup starts over as if
                // the sample had come first.
                b.reset();
                self.held = PowerMode::Unknown;
                self.pending = None;
            }
        }
        if let Some((src, x)) = ind {
            let b = &self.baselines[src as usize];
            if b.fed >= cfg.warmup {
                if let Some(base) = b.min().filter(|&m| m > 0) {
                    let r = x as f64 / base as f64;
                    ratio = Some(r);
                    if r >= cfg.slow_ratio {
                        latency_vote = Some(PowerMode::Slow);
                    } else if r <= cfg.fast_ratio {
                        latency_vote = Some(PowerMode::Fast);
                    }
                }
            }
        }
        let clock_agrees = latency_vote.zip(clock_vote).map(|(l, c)| l == c);
        let vote = latency_vote.or(clock_vote);

        let mode = match vote {
            None => {
                self.pending = None;
                self.held
            }
            Some(v) if v == self.held || self.held == PowerMode::Unknown => {
                self.pending = None;
                self.held = v;
                v
            }
            Some(v) => {
                let n = match self.pending {
                    Some((p, n)) if p == v => n + 1,
                    _ => 1,
                };
                if n >= cfg.switch_after {
                    self.pending = None;
                    self.held = v;
                    v
                } else {
                    self.pending = Some((v, n));
                    PowerMode::Unknown
                }
            }
        };

        if let (Some((src, x)), Some(PowerMode::Slow), Some(h)) = (ind, clock_vote, clock) {
            let m = &mut self.slow_min[src as usize];
            *m = Some(match *m {
                Some((s, v)) if s == h => (h, v.min(x)),
                _ => (h, x),
            });
        }
        if let Some((src, x)) = ind {
            let b = &mut self.baselines[src as usize];
            // The baseline learns from warmup passes the clock does not call slow, then from
            // passes whose own latency says fast (a pass fast only by its clock does not move
            // it).
            let learn = if b.fed < cfg.warmup {
                clock_vote != Some(PowerMode::Slow)
            } else {
                mode == PowerMode::Fast && latency_vote.is_some()
            };
            if learn {
                b.push(x, cfg.window);
                b.fed = b.fed.saturating_add(1);
                b.clocked |= clock.is_some();
            }
        }
        ModeDecision {
            mode,
            ratio,
            indicator: ind.map(|(s, _)| s),
            clock_agrees,
        }
    }
}

/// Classify a finished run's passes (for `bench` and `diff`): the baseline is the fastest
/// tenth of the run's own indicators, trusted from the first pass, so a slow start is seen as
/// slow even without a clock source. `clocks[i]` is pass `i`'s clock hint where known.
pub fn classify_offline(
    cfg: &ModeConfig,
    run: Option<&RunDetails>,
    frames: &[Frame],
    clocks: &[Option<ClockHint>],
) -> Vec<PowerMode> {
    let probe = match run {
        Some(r) => PowerModeClassifier::for_run(cfg.clone(), r),
        None => PowerModeClassifier::new(cfg.clone()),
    };
    let inds: Vec<_> = frames.iter().map(|f| probe.indicator(f)).collect();
    classify_offline_indicators(cfg, run, &inds, clocks)
}

/// [`classify_offline`] over the passes' indicators ([`PowerModeClassifier::indicator`] of a
/// classifier for the same run), for callers that keep a few numbers per pass, not frames.
pub fn classify_offline_indicators(
    cfg: &ModeConfig,
    run: Option<&RunDetails>,
    inds: &[Option<(Indicator, u64)>],
    clocks: &[Option<ClockHint>],
) -> Vec<PowerMode> {
    let fresh = || match run {
        Some(r) => PowerModeClassifier::for_run(cfg.clone(), r),
        None => PowerModeClassifier::new(cfg.clone()),
    };
    let mut c = fresh();
    for src in [
        Indicator::StageBusy,
        Indicator::GpuTime,
        Indicator::WallTime,
    ] {
        let mut xs: Vec<u64> = inds
            .iter()
            .flatten()
            .filter(|(s, _)| *s == src)
            .map(|(_, x)| *x)
            .collect();
        if xs.is_empty() {
            continue;
        }
        xs.sort_unstable();
        c = c.with_baseline(src, xs[(xs.len() - 1) / 10]);
    }
    inds.iter()
        .enumerate()
        .map(|(i, ind)| {
            c.classify_indicator(*ind, clocks.get(i).copied().flatten())
                .mode
        })
        .collect()
}

/// How many passes were in each mode (what `bench` and `diff` print per arm).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModeTally {
    /// Passes labelled fast.
    pub fast: u64,
    /// Passes labelled slow.
    pub slow: u64,
    /// Passes not classified.
    pub unknown: u64,
}

impl ModeTally {
    /// Count one pass.
    pub fn add(&mut self, mode: PowerMode) {
        match mode {
            PowerMode::Fast => self.fast += 1,
            PowerMode::Slow => self.slow += 1,
            PowerMode::Unknown => self.unknown += 1,
        }
    }

    /// The tally of some modes.
    pub fn of(modes: impl IntoIterator<Item = PowerMode>) -> Self {
        let mut t = ModeTally::default();
        modes.into_iter().for_each(|m| t.add(m));
        t
    }
}

impl fmt::Display for ModeTally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} fast, {} slow, {} unknown",
            self.fast, self.slow, self.unknown
        )
    }
}

/// Tuning of [`ContentionLabeler`] (see the module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct ContentionConfig {
    /// Other processes' CPU busy fraction from which a pass is contended.
    pub cpu_busy_threshold: f32,
    /// Unaccounted GPU time, as a fraction of the pass's GPU time, from which it is
    /// time-sliced...
    pub slice_fraction: f64,
    /// ...and at least this much of it, ns.
    pub slice_min_ns: u64,
    /// A sample older than this (against the pass's host start) is not used, ns.
    pub max_sample_age_ns: u64,
}

impl Default for ContentionConfig {
    fn default() -> Self {
        ContentionConfig {
            cpu_busy_threshold: 0.5,
            slice_fraction: 0.25,
            slice_min_ns: 200_000,
            max_sample_age_ns: 2_000_000_000,
        }
    }
}

/// The work a pass can account for from inside the kernel, ns: the extent of its stamps
/// (first stamp to the last stage end or barrier exit), else the sum of its dispatch times
/// (multi), else of its stages' charged times. `None` without any. Sums saturate at
/// `u64::MAX` (a damaged or crafted recording's times), never wrap to a small number.
pub fn accounted_ns(frame: &Frame) -> Option<u64> {
    if let Some(m) = frame.spans.last_stamp() {
        return Some(u64::from(m));
    }
    if !frame.dispatch_ns.is_empty() {
        return Some(
            frame
                .dispatch_ns
                .iter()
                .fold(0, |a, &b| a.saturating_add(b)),
        );
    }
    if !frame.stages.is_empty() && !frame.torn {
        return Some(
            (frame.stages.iter())
                .map(|st| st.charged_ns)
                .fold(0, u64::saturating_add),
        );
    }
    None
}

/// The latest of each sensor reading the labels use, with the host time it was taken at.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SensorState {
    /// CPU busy fraction of other processes.
    pub cpu_busy: Option<(u64, f32)>,
    /// Other GPU clients: count and those known.
    pub gpu_clients: Option<(u64, u32, Vec<GpuClient>)>,
    /// Clocks: (sm, max sm).
    pub clocks: Option<(u64, u32, Option<u32>)>,
    /// The GPU lock's holder, where it is not us.
    pub lock_holder: Option<LockHolder>,
    /// The highest shader clock seen (a maximum where the sensor reports none).
    pub max_sm_seen: u32,
}

impl SensorState {
    /// Fold one sample in.
    pub fn observe(&mut self, s: &SensorSample) {
        let t = s.host_ns;
        match &s.reading {
            SensorReading::CpuBusy { fraction } => self.cpu_busy = Some((t, *fraction)),
            SensorReading::GpuClients { count, clients } => {
                self.gpu_clients = Some((t, *count, clients.clone()))
            }
            SensorReading::GpuClocks {
                sm_mhz, max_sm_mhz, ..
            } => {
                self.max_sm_seen = self.max_sm_seen.max(*sm_mhz);
                self.clocks = Some((t, *sm_mhz, *max_sm_mhz));
            }
            SensorReading::HostLock { holder, ours } => {
                self.lock_holder = if *ours { None } else { holder.clone() }
            }
            SensorReading::Throttle { .. }
            | SensorReading::Mode { .. }
            | SensorReading::GpuPower { .. }
            | SensorReading::SourceOff { .. } => {}
        }
    }

    /// The clock hint for a pass starting at host time `now` (`None`: unknown), if its
    /// sample is no older than `max_age_ns`. Without a reported maximum the highest clock
    /// seen stands in for it.
    pub fn clock_hint(&self, now: Option<u64>, max_age_ns: u64) -> Option<ClockHint> {
        let (t, sm, max) = self.clocks?;
        fresh(t, now, max_age_ns).then_some(())?;
        let max = max.unwrap_or(self.max_sm_seen);
        (max > 0).then_some(ClockHint {
            sm_mhz: sm,
            max_sm_mhz: max,
        })
    }
}

fn fresh(t: u64, now: Option<u64>, max_age_ns: u64) -> bool {
    now.is_none_or(|n| n.saturating_sub(t) <= max_age_ns)
}

/// Labels each pass quiet or contended, with reasons (see the module doc).
#[derive(Clone, Debug, Default)]
pub struct ContentionLabeler {
    cfg: ContentionConfig,
}

impl ContentionLabeler {
    /// A labeler.
    pub fn new(cfg: ContentionConfig) -> Self {
        ContentionLabeler { cfg }
    }

    /// The label of a pass given the sensors' latest state.
    pub fn label(&self, frame: &Frame, sensors: &SensorState) -> Contention {
        let cfg = &self.cfg;
        let now = frame.host_start_ns;
        let mut c = Contention::default();
        if let Some((t, count, clients)) = &sensors.gpu_clients {
            if fresh(*t, now, cfg.max_sample_age_ns) && *count > 0 {
                c.gpu_clients = *count;
                c.reasons.push(ContentionReason::GpuClients {
                    count: *count,
                    clients: clients.clone(),
                });
            }
        }
        if let Some((t, f)) = sensors.cpu_busy {
            if fresh(t, now, cfg.max_sample_age_ns) {
                c.cpu_busy = Some(f);
                if f >= cfg.cpu_busy_threshold {
                    c.reasons.push(ContentionReason::CpuBusy { fraction: f });
                }
            }
        }
        if let (Some(gpu), Some(acc)) = (frame.gpu_ns, accounted_ns(frame)) {
            let un = gpu.saturating_sub(acc);
            c.unaccounted_ns = Some(un);
            if un >= cfg.slice_min_ns && un as f64 >= cfg.slice_fraction * gpu as f64 {
                c.gpu_time_sliced = true;
                c.reasons.push(ContentionReason::TimeSliced {
                    unaccounted_ns: un,
                    gpu_ns: gpu,
                });
            }
        }
        if let Some(h) = &sensors.lock_holder {
            c.reasons
                .push(ContentionReason::HostLock { holder: h.clone() });
        }
        c
    }
}

/// Something the warnings panel shows, with the pass it happened at (`None`: from a sensor,
/// between passes).
#[derive(Clone, Debug, PartialEq)]
pub struct Warning {
    /// The pass.
    pub pass: Option<u64>,
    /// What happened, as a sentence.
    pub text: String,
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pass {
            Some(p) => write!(f, "pass {p}: {}", self.text),
            None => f.write_str(&self.text),
        }
    }
}

/// Both labels and the warnings they raise: what the engine session calls per pass.
#[derive(Clone, Debug)]
pub struct PassLabeler {
    /// The power-mode classifier.
    pub mode: PowerModeClassifier,
    /// The contention labeler.
    pub contention: ContentionLabeler,
    /// The sensors' latest state.
    pub sensors: SensorState,
    /// Clock samples older than this are not used as a hint, ns.
    pub max_clock_age_ns: u64,
    last_mode: PowerMode,
    was_contended: bool,
    clock_disagreed: bool,
}

impl PassLabeler {
    /// A labeler with the given classifier and contention labeler.
    pub fn new(mode: PowerModeClassifier, contention: ContentionLabeler) -> Self {
        PassLabeler {
            mode,
            contention,
            sensors: SensorState::default(),
            max_clock_age_ns: 1_000_000_000,
            last_mode: PowerMode::Unknown,
            was_contended: false,
            clock_disagreed: false,
        }
    }

    /// Default tuning for a run.
    pub fn for_run(run: &RunDetails) -> Self {
        Self::new(
            PowerModeClassifier::for_run(ModeConfig::default(), run),
            ContentionLabeler::default(),
        )
    }

    /// Fold a sensor sample in; a source that is off is a warning (said once: the sensor
    /// sends it once).
    pub fn observe(&mut self, s: &SensorSample) -> Option<Warning> {
        self.sensors.observe(s);
        match &s.reading {
            SensorReading::SourceOff { source, reason } => Some(Warning {
                pass: None,
                text: format!("sensor {source} off: {reason}"),
            }),
            _ => None,
        }
    }

    /// Set the frame's `mode` and `contention`; return the warnings this pass raises.
    pub fn label(&mut self, frame: &mut Frame) -> Vec<Warning> {
        let hint = self
            .sensors
            .clock_hint(frame.host_start_ns, self.max_clock_age_ns);
        let d = self.mode.classify(frame, hint);
        let c = self.contention.label(frame, &self.sensors);
        let mut w = Vec::new();
        let pass = Some(frame.pass);
        // A switch is reported between held modes: an unknown pass in between is the
        // hysteresis at work, not a switch.
        if d.mode != PowerMode::Unknown && d.mode != self.last_mode {
            if self.last_mode != PowerMode::Unknown {
                w.push(Warning {
                    pass,
                    text: format!(
                        "power mode {} → {}",
                        mode_name(self.last_mode),
                        mode_name(d.mode)
                    ),
                });
            } else if d.mode == PowerMode::Slow {
                w.push(Warning {
                    pass,
                    text: "slow power mode (clocks not at speed)".into(),
                });
            }
            self.last_mode = d.mode;
        }
        if d.clock_agrees == Some(false) && !self.clock_disagreed {
            self.clock_disagreed = true;
            w.push(Warning {
                pass,
                text: format!(
                    "the SM clock disagrees with the pass latency (ratio {:.2} to the fast \
                     baseline): the mode follows the latency",
                    d.ratio.unwrap_or(f64::NAN)
                ),
            });
        }
        let contended = !c.is_quiet();
        if contended && !self.was_contended {
            w.push(Warning {
                pass,
                text: format!("contended: {}", c.summary()),
            });
        } else if !contended && self.was_contended {
            w.push(Warning {
                pass,
                text: "quiet again".into(),
            });
        }
        self.was_contended = contended;
        frame.mode = d.mode;
        frame.contention = c;
        w
    }
}

/// `fast`, `slow` or `unknown`.
pub fn mode_name(m: PowerMode) -> &'static str {
    match m {
        PowerMode::Fast => "fast",
        PowerMode::Slow => "slow",
        PowerMode::Unknown => "unknown",
    }
}

#[cfg(test)]
mod tests;
