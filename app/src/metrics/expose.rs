//! Rendering an [`Aggregator`] as the Prometheus text format 0.0.4 or OpenMetrics 1.0 text,
//! and choosing between them from a scraper's `Accept` header.

use std::fmt::{Display, Write};

use baro_telemetry::fail::bits;
use baro_telemetry::StageKind;

use super::aggregate::{Aggregator, Histogram, KINDS};
use super::catalog::{self as c, MetricDoc, BUCKETS_NS, CONTENTIONS, DISPATCHES, MODES};

/// An exposition format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4.
    Prometheus,
    /// OpenMetrics 1.0 text (ends with `# EOF`).
    OpenMetrics,
}

impl Format {
    /// The response's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// OpenMetrics when the `Accept` header ranks it above plain text (as Prometheus does:
    /// `application/openmetrics-text;version=1.0.0,…,text/plain;version=0.0.4;q=0.5,*/*;q=0.1`),
    /// else the Prometheus text format (also for no header at all).
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Prometheus;
        };
        let (mut om, mut text) = (0.0f32, 0.0f32);
        for part in accept.split(',') {
            let mut it = part.split(';');
            let ty = it.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = it
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|v| v.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match ty.as_str() {
                "application/openmetrics-text" => om = om.max(q),
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if om > text {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }
}

/// A label value with `\`, `"` and newlines escaped (both formats).
pub fn escape_label_value(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for ch in v.chars() {
        match ch {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// Seconds from ns, exactly, in plain decimal (`250` → `0.00000025`, `2_500_000_000` → `2.5`).
pub fn seconds(ns: u64) -> String {
    let (whole, frac) = (ns / 1_000_000_000, ns % 1_000_000_000);
    if frac == 0 {
        return whole.to_string();
    }
    let f = format!("{frac:09}");
    format!("{whole}.{}", f.trim_end_matches('0'))
}

/// A float sample value as both formats spell it: `NaN`, `+Inf`, `-Inf` (Rust writes `inf`,
/// which OpenMetrics refuses), else its shortest decimal.
pub fn float(v: f32) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        v.to_string()
    }
}

struct Out {
    s: String,
    format: Format,
}

impl Out {
    fn family(&mut self, m: &MetricDoc) {
        let om = self.format == Format::OpenMetrics;
        let name = if om { m.openmetrics_family() } else { m.name };
        // HELP: `\` and newline escaped; OpenMetrics also escapes `"`.
        let mut help = String::with_capacity(m.help.len());
        for ch in m.help.chars() {
            match ch {
                '\\' => help.push_str("\\\\"),
                '\n' => help.push_str("\\n"),
                '"' if om => help.push_str("\\\""),
                c => help.push(c),
            }
        }
        let kind = if om {
            m.kind.openmetrics()
        } else {
            m.kind.prometheus()
        };
        let _ = writeln!(self.s, "# HELP {name} {help}");
        let _ = writeln!(self.s, "# TYPE {name} {kind}");
        if let (true, Some(unit)) = (om, m.unit) {
            let _ = writeln!(self.s, "# UNIT {name} {unit}");
        }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl Display) {
        self.s.push_str(name);
        if !labels.is_empty() {
            self.s.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.s.push(',');
                }
                let _ = write!(self.s, "{k}=\"{}\"", escape_label_value(v));
            }
            self.s.push('}');
        }
        let _ = writeln!(self.s, " {value}");
    }

    fn histogram(&mut self, m: &MetricDoc, labels: &[(&str, &str)], h: &Histogram) {
        let bucket = format!("{}_bucket", m.name);
        for (bound, n) in h.cumulative() {
            let le = bound.map_or_else(|| "+Inf".to_string(), seconds);
            let mut with_le: Vec<(&str, &str)> = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, n);
        }
        self.sample(&format!("{}_sum", m.name), labels, seconds(h.sum_ns));
        self.sample(&format!("{}_count", m.name), labels, h.count);
    }

    /// Histograms by mode (and kind); only label sets with observations are exposed.
    fn histograms_by_mode(&mut self, m: &MetricDoc, hs: &[Histogram; MODES.len()]) {
        if hs.iter().all(|h| h.count == 0) {
            return;
        }
        self.family(m);
        for (mode, h) in MODES.iter().zip(hs) {
            if h.count > 0 {
                self.histogram(m, &[("mode", mode)], h);
            }
        }
    }

    fn stage_histograms(&mut self, m: &MetricDoc, hs: &[[Histogram; KINDS]; MODES.len()]) {
        if hs.iter().flatten().all(|h| h.count == 0) {
            return;
        }
        self.family(m);
        for kind in StageKind::ALL {
            for (mode, per_kind) in MODES.iter().zip(hs) {
                let h = &per_kind[kind.code() as usize];
                if h.count > 0 {
                    self.histogram(m, &[("stage_kind", kind.name()), ("mode", mode)], h);
                }
            }
        }
    }

    fn gauge(&mut self, m: &MetricDoc, v: Option<impl Display>) {
        if let Some(v) = v {
            self.family(m);
            self.sample(m.name, &[], v);
        }
    }
}

/// The whole exposition at `now_ns` (the clock [`Aggregator::ingest`] was given).
pub fn render(a: &Aggregator, now_ns: u64, format: Format) -> String {
    let mut o = Out {
        s: String::with_capacity(16 * 1024),
        format,
    };
    o.family(&c::UP);
    o.sample(c::UP.name, &[], u8::from(a.live));

    if let Some(r) = &a.run {
        o.family(&c::INFO);
        let grid = r.grid.to_string();
        o.sample(
            c::INFO.name,
            &[
                ("device", &r.device),
                ("device_kind", r.device_kind),
                ("driver", &r.driver),
                ("model", &r.model),
                ("quant", r.quant),
                ("dispatch", r.dispatch),
                ("grid", &grid),
                ("kv", r.kv),
                ("act", r.act),
                ("version", env!("CARGO_PKG_VERSION")),
            ],
            1,
        );
    }

    let seen = a.passes.iter().flatten().flatten().any(|&n| n > 0);
    if seen {
        o.family(&c::PASSES);
        for (d, per_d) in DISPATCHES.iter().zip(&a.passes) {
            for (m, per_m) in MODES.iter().zip(per_d) {
                for (ct, &n) in CONTENTIONS.iter().zip(per_m) {
                    if n > 0 {
                        o.sample(
                            c::PASSES.name,
                            &[("dispatch", d), ("mode", m), ("contention", ct)],
                            n,
                        );
                    }
                }
            }
        }
    }

    // Every bit always (0 until it fires), so an alert on its rate has a series to watch.
    o.family(&c::FAILED);
    let names = bits::NAMES.iter().map(|(_, n)| *n).chain([c::UNKNOWN_BIT]);
    for (name, &n) in names.zip(&a.failed) {
        o.sample(c::FAILED.name, &[("bit", name)], n);
    }
    o.family(&c::TORN);
    o.sample(c::TORN.name, &[], a.torn);
    o.family(&c::DROPPED);
    o.sample(c::DROPPED.name, &[("sink", c::SINK)], a.dropped());
    o.family(&c::TOKENS_PER_SECOND);
    o.sample(c::TOKENS_PER_SECOND.name, &[], a.tokens_per_second(now_ns));

    o.histograms_by_mode(&c::PASS, &a.pass_gpu);
    o.histograms_by_mode(&c::PASS_WALL, &a.pass_wall);
    o.stage_histograms(&c::STAGE_BUSY, &a.busy);
    o.stage_histograms(&c::STAGE_CHARGED, &a.charged);
    // A series wherever the stage timings have one, so a rate has 0 to start from.
    if a.busy.iter().flatten().any(|h| h.count > 0) {
        o.family(&c::ATTRIBUTION_TAILS);
        for kind in StageKind::ALL {
            let k = kind.code() as usize;
            for (m, mode) in MODES.iter().enumerate() {
                if a.busy[m][k].count > 0 {
                    let labels = [("stage_kind", kind.name()), ("mode", *mode)];
                    o.sample(c::ATTRIBUTION_TAILS.name, &labels, a.tails[m][k]);
                }
            }
        }
    }
    o.histograms_by_mode(&c::BARRIER_ARRIVAL, &a.arrival);
    o.histograms_by_mode(&c::BARRIER_RELEASE, &a.release);
    o.histograms_by_mode(&c::BARRIER_EXIT, &a.exit);
    o.family(&c::STRAGGLERS);
    o.sample(c::STRAGGLERS.name, &[], a.stragglers);

    let s = &a.sensors;
    o.gauge(&c::SM_CLOCK, s.sm_hz);
    o.gauge(&c::MEM_CLOCK, s.mem_hz);
    o.gauge(&c::THROTTLE, s.throttle);
    o.gauge(&c::GPU_CLIENTS, s.gpu_clients);
    o.gauge(&c::CPU_BUSY, s.cpu_busy.map(float));
    if let Some(current) = s.mode {
        o.family(&c::POWER_MODE);
        for (i, m) in MODES.iter().enumerate() {
            o.sample(c::POWER_MODE.name, &[("mode", m)], u8::from(i == current));
        }
    }

    if format == Format::OpenMetrics {
        o.s.push_str("# EOF\n");
    }
    debug_assert!(BUCKETS_NS.windows(2).all(|w| w[0] < w[1]));
    o.s
}
