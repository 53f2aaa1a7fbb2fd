//! [`Aggregator`]: folds the telemetry stream into the counters, gauges and histograms of
//! [`super::catalog`]. Ingesting a frame allocates nothing (fixed arrays indexed by label
//! value; the attribution warnings counted with `telemetry::analysis`'s allocation-free
//! rules); only a run's start (its stage table, info labels and a last-arrival count per
//! workgroup) and rendering allocate.

use baro_telemetry::analysis;
use baro_telemetry::fail::bits;
use baro_telemetry::{
    Contention, Dispatch, Frame, PowerMode, RunDetails, SensorReading, StageKind, Telemetry,
};

use super::catalog::{BUCKETS_NS, CONTENTIONS, DISPATCHES, MODES};

/// Stage kinds, the `stage_kind` label's values ([`StageKind::ALL`]).
pub const KINDS: usize = StageKind::ALL.len();
/// Fail-word bits with a name, plus one series for bits without one.
pub const FAIL_SERIES: usize = bits::NAMES.len() + 1;
/// Width of one slot of the tokens-per-second window, ns.
const RATE_SLOT_NS: u64 = 250_000_000;
/// Slots in the window (10 s).
const RATE_SLOTS: usize = 40;

/// A histogram over [`BUCKETS_NS`], in integer ns (exact sums, stable rendering).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Histogram {
    /// Observations per bucket, not cumulative; the last entry counts those above every bound.
    pub counts: [u64; BUCKETS_NS.len() + 1],
    /// Sum of the observations, ns.
    pub sum_ns: u64,
    /// Observations.
    pub count: u64,
}

impl Histogram {
    /// Count one observation of `ns`.
    pub fn observe(&mut self, ns: u64) {
        let i = BUCKETS_NS.partition_point(|&b| b < ns);
        self.counts[i] += 1;
        self.sum_ns = self.sum_ns.saturating_add(ns);
        self.count += 1;
    }

    /// `(upper bound ns or None for +Inf, cumulative count)` for every bucket.
    pub fn cumulative(&self) -> impl Iterator<Item = (Option<u64>, u64)> + '_ {
        let mut acc = 0;
        self.counts.iter().enumerate().map(move |(i, c)| {
            acc += c;
            (BUCKETS_NS.get(i).copied(), acc)
        })
    }
}

/// Passes per fixed time slot over the last [`RATE_SLOTS`] slots (a ring: no allocation).
#[derive(Clone, Copy, Debug)]
struct RateWindow {
    slot: [u64; RATE_SLOTS],
    count: [u32; RATE_SLOTS],
    first_ns: Option<u64>,
}

impl Default for RateWindow {
    fn default() -> Self {
        RateWindow {
            slot: [0; RATE_SLOTS],
            count: [0; RATE_SLOTS],
            first_ns: None,
        }
    }
}

impl RateWindow {
    fn record(&mut self, now_ns: u64) {
        self.first_ns.get_or_insert(now_ns);
        let id = now_ns / RATE_SLOT_NS;
        let i = (id % RATE_SLOTS as u64) as usize;
        if self.slot[i] != id || self.count[i] == 0 {
            self.slot[i] = id;
            self.count[i] = 0;
        }
        self.count[i] = self.count[i].saturating_add(1);
    }

    fn per_second(&self, now_ns: u64) -> f64 {
        let Some(first) = self.first_ns else {
            return 0.0;
        };
        let cur = now_ns / RATE_SLOT_NS;
        let n: u64 = (0..RATE_SLOTS)
            .filter(|&i| {
                self.count[i] > 0 && self.slot[i] <= cur && cur - self.slot[i] < RATE_SLOTS as u64
            })
            .map(|i| u64::from(self.count[i]))
            .sum();
        let window = RATE_SLOT_NS * RATE_SLOTS as u64;
        let span = now_ns.saturating_sub(first).clamp(RATE_SLOT_NS, window);
        n as f64 * 1e9 / span as f64
    }
}

/// The labels of `baro_info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunInfo {
    /// Device name.
    pub device: String,
    /// `discrete`, `integrated`, `virtual`, `cpu` or `other`.
    pub device_kind: &'static str,
    /// Driver name and version.
    pub driver: String,
    /// Model description.
    pub model: String,
    /// Quantisation found in the model description, else `unknown`.
    pub quant: &'static str,
    /// `mega` or `multi`.
    pub dispatch: &'static str,
    /// Workgroups.
    pub grid: u32,
    /// KV cache storage: `f32` (the reference path) or `f16`.
    pub kv: &'static str,
    /// What quantised matrices multiply against: `f32` (the reference path) or `q8`.
    pub act: &'static str,
}

/// The last value of each sensor, `None` until one is sampled (an absent series, not a 0).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sensors {
    /// Shader clock, Hz.
    pub sm_hz: Option<u64>,
    /// Memory clock, Hz.
    pub mem_hz: Option<u64>,
    /// Throttle reasons bit mask.
    pub throttle: Option<u64>,
    /// Other GPU clients.
    pub gpu_clients: Option<u32>,
    /// CPU busy fraction of other processes.
    pub cpu_busy: Option<f32>,
    /// Classified power mode (index into [`MODES`]).
    pub mode: Option<usize>,
}

/// Everything the endpoint exposes, folded from the stream. Clone it to render outside a lock.
#[derive(Clone, Debug)]
pub struct Aggregator {
    /// The current run's info labels (after its start).
    pub run: Option<RunInfo>,
    /// A run is streaming (start seen, end not yet, stream open).
    pub live: bool,
    stage_kinds: Vec<StageKind>,
    dispatch: usize,
    /// `[dispatch][mode][contention]`.
    pub passes: [[[u64; CONTENTIONS.len()]; MODES.len()]; DISPATCHES.len()],
    /// Per fail-word bit ([`bits::NAMES`] order, then unknown bits).
    pub failed: [u64; FAIL_SERIES],
    /// Torn passes.
    pub torn: u64,
    dropped_before: u64,
    dropped_run: u64,
    /// Pass GPU time, by mode.
    pub pass_gpu: [Histogram; MODES.len()],
    /// Pass wall time, by mode.
    pub pass_wall: [Histogram; MODES.len()],
    /// `[mode][kind]` busy sums.
    pub busy: [[Histogram; KINDS]; MODES.len()],
    /// `[mode][kind]` charged sums.
    pub charged: [[Histogram; KINDS]; MODES.len()],
    /// Barrier arrival spread, by mode.
    pub arrival: [Histogram; MODES.len()],
    /// Barrier release, by mode.
    pub release: [Histogram; MODES.len()],
    /// Barrier exit spread, by mode.
    pub exit: [Histogram; MODES.len()],
    /// `[mode][kind]` attribution warnings: level tails charged to a stage of the kind.
    pub tails: [[u64; KINDS]; MODES.len()],
    /// Passes naming a straggler.
    pub stragglers: u64,
    /// The run (levels and stages: which stage closes a level).
    details: Option<std::sync::Arc<RunDetails>>,
    /// Scratch: last arrivals per workgroup in the current pass (sized at the start).
    last: Vec<u32>,
    rate: RateWindow,
    /// Last sensor values.
    pub sensors: Sensors,
}

impl Default for Aggregator {
    fn default() -> Self {
        Aggregator {
            run: None,
            live: false,
            stage_kinds: Vec::new(),
            dispatch: DISPATCHES.len() - 1,
            passes: Default::default(),
            failed: [0; FAIL_SERIES],
            torn: 0,
            dropped_before: 0,
            dropped_run: 0,
            pass_gpu: Default::default(),
            pass_wall: Default::default(),
            busy: Default::default(),
            charged: Default::default(),
            arrival: Default::default(),
            release: Default::default(),
            exit: Default::default(),
            tails: Default::default(),
            stragglers: 0,
            details: None,
            last: Vec::new(),
            rate: RateWindow::default(),
            sensors: Sensors::default(),
        }
    }
}

/// Index of a power mode in [`MODES`].
pub fn mode_index(m: PowerMode) -> usize {
    match m {
        PowerMode::Unknown => 0,
        PowerMode::Fast => 1,
        PowerMode::Slow => 2,
    }
}

/// Index of a pass's contention label in [`CONTENTIONS`]: the most specific cause wins
/// (time-sliced, then other GPU clients, then a busy CPU); `other` for a pass that is not
/// quiet for a reason none of these names.
pub fn contention_index(c: &Contention) -> usize {
    if c.gpu_time_sliced {
        1
    } else if c.gpu_clients > 0 {
        2
    } else if c.cpu_busy.is_some_and(|b| b >= 0.5) {
        3
    } else if c.is_quiet() {
        0
    } else {
        4
    }
}

/// The quantisation named in a model description (`llama-1b q4_0`, or a downloaded file's
/// name as llama.cpp's tools write it: `Llama-3.2-1B-Instruct-Q4_K_M.gguf`), else `unknown`:
/// every file type the engine decodes.
pub fn quant_of(model: &str) -> &'static str {
    const QUANTS: [&str; 16] = [
        "f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q4_k_s", "q4_k_m", "q5_k_s",
        "q5_k_m", "q6_k", "iq4_xs", "iq4_nl", "q4_k",
    ];
    let lower = model.to_ascii_lowercase();
    lower
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .find_map(|w| QUANTS.iter().find(|q| **q == w).copied())
        .unwrap_or("unknown")
}

impl Aggregator {
    /// An empty aggregator (no run yet).
    pub fn new() -> Self {
        Self::default()
    }

    /// Fold in one message received at `now_ns` (any monotonic clock: it only times the
    /// tokens-per-second window).
    pub fn ingest(&mut self, msg: &Telemetry, now_ns: u64) {
        match msg {
            Telemetry::Start(run) => self.start(run),
            Telemetry::Frame(f) => self.frame(f, now_ns),
            Telemetry::Sensor(s) => self.sensor(&s.reading),
            Telemetry::End { dropped, .. } => {
                self.dropped_run = self.dropped_run.max(*dropped);
                self.live = false;
            }
            // Clock syncs (and messages added to the stream later) carry nothing exposed.
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    /// The stream closed (the producer went away without an end message).
    pub fn closed(&mut self) {
        self.live = false;
    }

    fn start(&mut self, run: &RunDetails) {
        self.dropped_before += self.dropped_run;
        self.dropped_run = 0;
        self.live = true;
        self.dispatch = match run.dispatch {
            Dispatch::Mega => 0,
            Dispatch::Multi => 1,
        };
        self.stage_kinds.clear();
        self.stage_kinds.resize(run.stages.len(), StageKind::Q);
        for s in &run.stages {
            if let Some(k) = self.stage_kinds.get_mut(s.id as usize) {
                *k = s.kind;
            }
        }
        self.details = Some(std::sync::Arc::new(run.clone()));
        self.last.clear();
        self.last.resize(run.grid as usize, 0);
        use baro_telemetry::DeviceKind as D;
        self.run = Some(RunInfo {
            device: run.device.clone(),
            device_kind: match run.device_kind {
                D::Discrete => "discrete",
                D::Integrated => "integrated",
                D::Virtual => "virtual",
                D::Cpu => "cpu",
                D::Other => "other",
            },
            driver: run.driver.clone(),
            model: run.model.clone(),
            quant: quant_of(&run.model),
            dispatch: DISPATCHES[self.dispatch],
            grid: run.grid,
            kv: run.kv.name(),
            act: run.act.name(),
        });
    }

    fn frame(&mut self, f: &Frame, now_ns: u64) {
        let mode = mode_index(f.mode);
        self.passes[self.dispatch][mode][contention_index(&f.contention)] += 1;
        self.rate.record(now_ns);
        self.dropped_run = self.dropped_run.max(f.dropped);
        let word = f.fail.word.bits;
        if word != 0 {
            for (i, (bit, _)) in bits::NAMES.iter().enumerate() {
                if word & bit != 0 {
                    self.failed[i] += 1;
                }
            }
            let known = bits::NAMES.iter().fold(0, |m, (b, _)| m | b);
            if word & !known != 0 {
                self.failed[FAIL_SERIES - 1] += 1;
            }
        }
        if f.torn {
            self.torn += 1;
        }
        if let Some(g) = f.gpu_ns {
            self.pass_gpu[mode].observe(g);
        }
        self.pass_wall[mode].observe(f.wall_ns);
        let mut busy = [0u64; KINDS];
        let mut charged = [0u64; KINDS];
        let mut seen = [false; KINDS];
        for s in &f.stages {
            let Some(k) = self.stage_kinds.get(s.stage as usize) else {
                continue;
            };
            let k = k.code() as usize;
            busy[k] += s.busy_ns;
            charged[k] += s.charged_ns;
            seen[k] = true;
        }
        for k in 0..KINDS {
            if seen[k] {
                self.busy[mode][k].observe(busy[k]);
                self.charged[mode][k].observe(charged[k]);
            }
        }
        for b in &f.barriers {
            self.arrival[mode].observe(b.arrival_spread_ns);
            self.release[mode].observe(b.release_ns);
            self.exit[mode].observe(b.exit_spread_ns);
        }
        if let Some(run) = &self.details {
            for t in analysis::frame_tail_stages(run, f) {
                if let Some(k) = self.stage_kinds.get(t.stage as usize) {
                    self.tails[mode][k.code() as usize] += 1;
                }
            }
            self.last.fill(0);
            let seen = analysis::count_last_arrivals(&f.spans, &mut self.last);
            if analysis::pass_straggler(&self.last, seen, run.grid).is_some() {
                self.stragglers += 1;
            }
        }
    }

    fn sensor(&mut self, r: &SensorReading) {
        let s = &mut self.sensors;
        match r {
            SensorReading::CpuBusy { fraction, .. } => s.cpu_busy = Some(*fraction),
            SensorReading::GpuClients { count, .. } => s.gpu_clients = Some(*count),
            SensorReading::GpuClocks {
                sm_mhz, mem_mhz, ..
            } => {
                s.sm_hz = Some(u64::from(*sm_mhz) * 1_000_000);
                s.mem_hz = mem_mhz.map(|m| u64::from(m) * 1_000_000);
            }
            SensorReading::Throttle { reasons, .. } => s.throttle = Some(*reasons),
            SensorReading::Mode { mode, .. } => s.mode = Some(mode_index(*mode)),
            // Readings added to the stream later are not exposed until they are listed here.
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }

    /// Frames dropped on the way to this consumer, over every run so far.
    pub fn dropped(&self) -> u64 {
        self.dropped_before + self.dropped_run
    }

    /// Tokens per second over the window ending at `now_ns`.
    pub fn tokens_per_second(&self, now_ns: u64) -> f64 {
        self.rate.per_second(now_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_puts_a_value_on_a_bound_in_that_bucket_and_above_the_last_in_inf() {
        let mut h = Histogram::default();
        h.observe(250); // le=0.00000025 (bounds are inclusive)
        h.observe(251); // le=0.0000005
        h.observe(20_000_000_000); // +Inf only
        let c: Vec<_> = h.cumulative().collect();
        assert_eq!(c[0], (Some(250), 1));
        assert_eq!(c[1], (Some(500), 2));
        assert_eq!(c[BUCKETS_NS.len() - 1], (Some(10_000_000_000), 2));
        assert_eq!(c[BUCKETS_NS.len()], (None, 3));
        assert_eq!((h.count, h.sum_ns), (3, 20_000_000_501));
    }

    #[test]
    fn tokens_per_second_counts_the_last_ten_seconds_and_decays_after_the_stream_stops() {
        let mut a = Aggregator::new();
        let f = Telemetry::Frame(Box::default());
        // 100 passes/s for 20 s.
        for i in 0..2000u64 {
            a.ingest(&f, 1_000_000_000 + i * 10_000_000);
        }
        let end = 1_000_000_000 + 2000 * 10_000_000;
        let r = a.tokens_per_second(end);
        assert!((95.0..=105.0).contains(&r), "{r}");
        // Half a second in: the rate is over the time since the first pass, not 10 s.
        let mut b = Aggregator::new();
        for i in 0..50u64 {
            b.ingest(&f, i * 10_000_000);
        }
        let r = b.tokens_per_second(500_000_000);
        assert!((90.0..=110.0).contains(&r), "{r}");
        // 11 s after the last pass nothing is left in the window.
        assert_eq!(a.tokens_per_second(end + 11_000_000_000), 0.0);
    }

    #[test]
    fn contention_label_names_the_most_specific_cause() {
        let mut c = Contention::default();
        assert_eq!(CONTENTIONS[contention_index(&c)], "quiet");
        c.cpu_busy = Some(0.9);
        assert_eq!(CONTENTIONS[contention_index(&c)], "cpu_busy");
        c.gpu_clients = 2;
        assert_eq!(CONTENTIONS[contention_index(&c)], "gpu_shared");
        c.gpu_time_sliced = true;
        assert_eq!(CONTENTIONS[contention_index(&c)], "time_sliced");
    }

    #[test]
    fn a_tail_counts_for_its_closing_stages_kind_and_mode_and_a_late_workgroup_as_a_straggler() {
        let run = baro_telemetry::synth::synthetic_run(8, 40, 36);
        let closing = *run.levels[5].stages.last().unwrap_or(&0);
        let kind = run.stages[closing as usize].kind.code() as usize;
        let mut a = Aggregator::new();
        a.ingest(&Telemetry::Start(run.clone()), 0);
        let mut f = baro_telemetry::synth::synthetic_frame(&run, 0, 1);
        f.mode = PowerMode::Fast;
        for t in &mut f.stages {
            t.charged_ns = t.busy_ns + if t.stage == closing { 30_000 } else { 0 };
        }
        // Whatever the synthetic arrivals make of a straggler is counted before `before`.
        a.ingest(&Telemetry::Frame(Box::new(f.clone())), 0);
        let fast = mode_index(PowerMode::Fast);
        assert_eq!(a.tails[fast][kind], 1);
        assert_eq!(a.tails.iter().flatten().sum::<u64>(), 1);
        // Workgroup 5 last at every one of 35 barriers; no tail.
        let mut s = baro_telemetry::Spans::new(8, 40, 36);
        for l in 0..35 {
            for w in 0..8 {
                s.set_barrier(l, w, if w == 5 { 900 } else { 100 }, 1_000);
            }
        }
        f.spans = s;
        for t in &mut f.stages {
            t.charged_ns = t.busy_ns;
        }
        let before = a.stragglers;
        a.ingest(&Telemetry::Frame(Box::new(f)), 0);
        assert_eq!((a.stragglers - before, a.tails[fast][kind]), (1, 1));
    }

    #[test]
    fn quant_is_read_from_the_model_description_or_unknown() {
        assert_eq!(quant_of("llama-1b Q4_0"), "q4_0");
        assert_eq!(quant_of("synthetic (q8_0, 16 layers)"), "q8_0");
        assert_eq!(quant_of("stories260K"), "unknown");
        assert_eq!(quant_of("xq4_0y"), "unknown");
        assert_eq!(quant_of("/m/Llama-3.2-1B-Instruct-Q4_K_M.gguf"), "q4_k_m");
        assert_eq!(quant_of("/tmp/llama-8b-iq4_xs.gguf"), "iq4_xs");
        assert_eq!(quant_of("qwen2.5-0.5b-instruct-q5_k_s.gguf"), "q5_k_s");
        // A name part that only starts like one is not it.
        assert_eq!(quant_of("model-q4_k_mx.gguf"), "unknown");
    }
}
