//! Every metric baro-top exposes, in the order it is exposed: name, type, unit, labels and
//! help, written once. The renderer takes each family's `# HELP`/`# TYPE` from here, and the
//! docs/metrics.md's table is generated from here (a test keeps it in sync), so the three
//! cannot drift apart.

/// A metric family's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic count (name ends in `_total`).
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// Cumulative buckets, `_sum` and `_count`.
    Histogram,
    /// A constant 1 whose labels carry the information (name ends in `_info`; a gauge in the
    /// Prometheus text format, `info` in OpenMetrics).
    Info,
}

impl Kind {
    /// The `# TYPE` word in the Prometheus text format 0.0.4.
    pub fn prometheus(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge | Kind::Info => "gauge",
            Kind::Histogram => "histogram",
        }
    }

    /// The `# TYPE` word in OpenMetrics 1.0.
    pub fn openmetrics(self) -> &'static str {
        match self {
            Kind::Info => "info",
            k => k.prometheus(),
        }
    }
}

/// One metric family as documented.
#[derive(Debug)]
pub struct MetricDoc {
    /// The name as samples carry it in the Prometheus text format (`baro_passes_total`).
    pub name: &'static str,
    /// Type.
    pub kind: Kind,
    /// Base unit, when the value has one (`seconds`, `hertz`, `ratio`); also its name suffix.
    pub unit: Option<&'static str>,
    /// Label names, comma-separated (empty: none).
    pub labels: &'static str,
    /// One line of help (no newlines, no double quotes).
    pub help: &'static str,
}

impl MetricDoc {
    /// The family name in OpenMetrics: without the `_total` of a counter or the `_info` of an
    /// info metric (the samples keep them).
    pub fn openmetrics_family(&self) -> &'static str {
        let suffix = match self.kind {
            Kind::Counter => "_total",
            Kind::Info => "_info",
            Kind::Gauge | Kind::Histogram => "",
        };
        self.name.strip_suffix(suffix).unwrap_or(self.name)
    }
}

/// Histogram bucket upper bounds, ns (exposed in seconds): 250 ns to 10 s in 1–2.5–5 steps,
/// shared by every histogram, so a stage of a few µs on an H200 and a pass of 250 ms on
/// lavapipe both land in resolving buckets. Above the last bound only `+Inf` counts.
pub const BUCKETS_NS: [u64; 23] = [
    250,
    500,
    1_000,
    2_500,
    5_000,
    10_000,
    25_000,
    50_000,
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    10_000_000_000,
];

/// Values of the `mode` label: the pass's power-state mode.
pub const MODES: [&str; 3] = ["unknown", "fast", "slow"];
/// Values of the `dispatch` label.
pub const DISPATCHES: [&str; 3] = ["mega", "multi", "unknown"];
/// Values of the `contention` label, most specific first (see `contention_index`).
pub const CONTENTIONS: [&str; 5] = ["quiet", "time_sliced", "gpu_shared", "cpu_busy", "other"];
/// The `sink` label of `baro_dropped_frames_total` for the metrics endpoint's own stream.
pub const SINK: &str = "metrics";
/// The `bit` label for fail-word bits without a name.
pub const UNKNOWN_BIT: &str = "unknown";

/// `baro_up`.
pub const UP: MetricDoc = MetricDoc {
    name: "baro_up",
    kind: Kind::Gauge,
    unit: None,
    labels: "",
    help:
        "1 while a run streams telemetry to this endpoint (between its start and its end), else 0.",
};
/// `baro_info`.
pub const INFO: MetricDoc = MetricDoc {
    name: "baro_info",
    kind: Kind::Info,
    unit: None,
    labels: "device, device_kind, driver, model, quant, dispatch, grid, kv, act, version",
    help: "The current run: device, driver, model (quant: the file type its path or description names, as llama.cpp names files: q4_0, q4_k_m, iq4_xs, …; else unknown), dispatch, grid, KV cache type (f32, or f16 off the reference path), matvec activation type (f32, or q8 off the reference path) and baro-top version; value 1.",
};
/// `baro_passes_total`.
pub const PASSES: MetricDoc = MetricDoc {
    name: "baro_passes_total",
    kind: Kind::Counter,
    unit: None,
    labels: "dispatch, mode, contention",
    help:
        "Decode passes (one token each) by dispatch style, power-state mode and contention label.",
};
/// `baro_failed_passes_total`.
pub const FAILED: MetricDoc = MetricDoc {
    name: "baro_failed_passes_total",
    kind: Kind::Counter,
    unit: None,
    labels: "bit",
    help: "Passes whose fail word had this bit set (a pass with two bits counts in both series).",
};
/// `baro_torn_passes_total`.
pub const TORN: MetricDoc = MetricDoc {
    name: "baro_torn_passes_total",
    kind: Kind::Counter,
    unit: None,
    labels: "",
    help: "Passes whose event-ring frame was torn or overrun (no stage timings).",
};
/// `baro_dropped_frames_total`.
pub const DROPPED: MetricDoc = MetricDoc {
    name: "baro_dropped_frames_total",
    kind: Kind::Counter,
    unit: None,
    labels: "sink",
    help: "Telemetry frames the engine dropped on the way to this sink because it read too slowly.",
};
/// `baro_tokens_per_second`.
pub const TOKENS_PER_SECOND: MetricDoc = MetricDoc {
    name: "baro_tokens_per_second",
    kind: Kind::Gauge,
    unit: None,
    labels: "",
    help: "Passes received in the last 10 s divided by 10 s (or by the time since the first pass, if shorter).",
};
/// `baro_pass_seconds`.
pub const PASS: MetricDoc = MetricDoc {
    name: "baro_pass_seconds",
    kind: Kind::Histogram,
    unit: Some("seconds"),
    labels: "mode",
    help: "GPU time of a pass from timestamp queries (passes without timestamps are not observed).",
};
/// `baro_pass_wall_seconds`.
pub const PASS_WALL: MetricDoc = MetricDoc {
    name: "baro_pass_wall_seconds",
    kind: Kind::Histogram,
    unit: Some("seconds"),
    labels: "mode",
    help: "Host wall time of a pass, submit to fence.",
};
/// `baro_stage_busy_seconds`.
pub const STAGE_BUSY: MetricDoc = MetricDoc {
    name: "baro_stage_busy_seconds",
    kind: Kind::Histogram,
    unit: Some("seconds"),
    labels: "stage_kind, mode",
    help: "Per pass, the busy time (mean over workgroups of their own work) of all stages of one kind, summed.",
};
/// `baro_stage_charged_seconds`.
pub const STAGE_CHARGED: MetricDoc = MetricDoc {
    name: "baro_stage_charged_seconds",
    kind: Kind::Histogram,
    unit: Some("seconds"),
    labels: "stage_kind, mode",
    help: "Per pass, what a span-per-stage profiler charges all stages of one kind (busy plus the barrier waits they close), summed.",
};
/// `baro_attribution_tails_total`.
pub const ATTRIBUTION_TAILS: MetricDoc = MetricDoc {
    name: "baro_attribution_tails_total",
    kind: Kind::Counter,
    unit: None,
    labels: "stage_kind, mode",
    help: "Attribution warnings: per pass, each level's closing stage of this kind whose charged time exceeds its busy time by at least 5000 ns and a fifth of busy (that much is the level's barrier wait, not its cost; the dashboard's warning). A series per kind and mode with stage timings, 0 until one fires.",
};
/// `baro_straggler_passes_total`.
pub const STRAGGLERS: MetricDoc = MetricDoc {
    name: "baro_straggler_passes_total",
    kind: Kind::Counter,
    unit: None,
    labels: "",
    help: "Passes in which one workgroup arrived last at more than a quarter of the grid barriers and at three times its share (passes with at least 32 barriers).",
};
/// `baro_barrier_arrival_spread_seconds`.
pub const BARRIER_ARRIVAL: MetricDoc = MetricDoc {
    name: "baro_barrier_arrival_spread_seconds",
    kind: Kind::Histogram,
    unit: Some("seconds"),
    labels: "mode",
    help: "Per grid barrier (megakernel), last minus first workgroup arrival.",
};
/// `baro_barrier_release_seconds`.
pub const BARRIER_RELEASE: MetricDoc = MetricDoc {
    name: "baro_barrier_release_seconds",
    kind: Kind::Histogram,
    unit: Some("seconds"),
    labels: "mode",
    help: "Per grid barrier (megakernel), first exit minus last arrival.",
};
/// `baro_barrier_exit_spread_seconds`.
pub const BARRIER_EXIT: MetricDoc = MetricDoc {
    name: "baro_barrier_exit_spread_seconds",
    kind: Kind::Histogram,
    unit: Some("seconds"),
    labels: "mode",
    help: "Per grid barrier (megakernel), last minus first workgroup exit.",
};
/// `baro_gpu_sm_clock_hertz`.
pub const SM_CLOCK: MetricDoc = MetricDoc {
    name: "baro_gpu_sm_clock_hertz",
    kind: Kind::Gauge,
    unit: Some("hertz"),
    labels: "",
    help: "GPU shader clock at the last sensor sample.",
};
/// `baro_gpu_memory_clock_hertz`.
pub const MEM_CLOCK: MetricDoc = MetricDoc {
    name: "baro_gpu_memory_clock_hertz",
    kind: Kind::Gauge,
    unit: Some("hertz"),
    labels: "",
    help: "GPU memory clock at the last sensor sample, where the driver reports it.",
};
/// `baro_gpu_throttle_reasons`.
pub const THROTTLE: MetricDoc = MetricDoc {
    name: "baro_gpu_throttle_reasons",
    kind: Kind::Gauge,
    unit: None,
    labels: "",
    help: "Clock throttle reasons at the last sensor sample as the driver's bit mask (NVML), 0 = none.",
};
/// `baro_gpu_other_clients`.
pub const GPU_CLIENTS: MetricDoc = MetricDoc {
    name: "baro_gpu_other_clients",
    kind: Kind::Gauge,
    unit: None,
    labels: "",
    help: "Other processes holding the GPU open at the last sensor sample.",
};
/// `baro_cpu_busy_ratio`.
pub const CPU_BUSY: MetricDoc = MetricDoc {
    name: "baro_cpu_busy_ratio",
    kind: Kind::Gauge,
    unit: Some("ratio"),
    labels: "",
    help: "CPU busy fraction (0 to 1) of other processes over the last sensor interval.",
};
/// `baro_power_mode`.
pub const POWER_MODE: MetricDoc = MetricDoc {
    name: "baro_power_mode",
    kind: Kind::Gauge,
    unit: None,
    labels: "mode",
    help: "1 for the power-state mode the last mode sensor sample classified, 0 for the others.",
};

/// Every family, in exposition order.
pub const CATALOG: [&MetricDoc; 22] = [
    &UP,
    &INFO,
    &PASSES,
    &FAILED,
    &TORN,
    &DROPPED,
    &TOKENS_PER_SECOND,
    &PASS,
    &PASS_WALL,
    &STAGE_BUSY,
    &STAGE_CHARGED,
    &ATTRIBUTION_TAILS,
    &BARRIER_ARRIVAL,
    &BARRIER_RELEASE,
    &BARRIER_EXIT,
    &STRAGGLERS,
    &SM_CLOCK,
    &MEM_CLOCK,
    &THROTTLE,
    &GPU_CLIENTS,
    &CPU_BUSY,
    &POWER_MODE,
];

/// docs/metrics.md's table (markdown), generated from [`CATALOG`].
#[cfg(test)]
pub fn markdown_table() -> String {
    let mut s = String::from("| metric | type | labels | meaning |\n|---|---|---|---|\n");
    for m in CATALOG {
        let labels = if m.labels.is_empty() {
            "–".to_string()
        } else {
            format!("`{}`", m.labels)
        };
        s += &format!(
            "| `{}` | {} | {} | {} |\n",
            m.name,
            m.kind.openmetrics(),
            labels,
            m.help
        );
    }
    s
}
