//! Prometheus / OpenMetrics endpoint: the telemetry stream folded into counters, gauges and
//! histograms, so a fleet of GPU boxes is watched by the Prometheus and Grafana a team
//! already runs.
//!
//! ```text
//!  Receiver<Telemetry> ──▶ metrics-ingest thread ──▶ Mutex<Aggregator> ◀── clone ── GET /metrics
//!   (a session sink,          (ingest: no per-frame                        (render the clone
//!    or --synthetic)           allocation)                                  outside the lock)
//! ```
//!
//! - [`catalog`]: every metric's name, type, unit, labels and help, and the histogram buckets
//!   (docs/metrics.md's table is generated from it; a test keeps them equal);
//! - [`aggregate`]: the [`aggregate::Aggregator`];
//! - [`expose`]: the Prometheus text format 0.0.4 and OpenMetrics 1.0 (when the scraper's
//!   `Accept` ranks `application/openmetrics-text` first, as Prometheus does), label escaping;
//! - [`http`]: the small HTTP/1.1 server ([`serve`], [`http::MetricsServer`]).
//!
//! The commands that feed it (`serve`: a live session or `--synthetic`; `--metrics ADDR` on
//! `live` and `record`) live with the other commands; this module names none of them.
//!
//! # Conventions
//!
//! Names are `baro_` + snake_case, base units in the name (`_seconds`, `_hertz`, `_ratio`),
//! counters end in `_total`. Labels are closed, small sets (`dispatch`, `mode`, `contention`,
//! `stage_kind`, `bit`, `sink`) plus the run's `baro_info` labels: never a pass, a stage
//! instance, a level or a workgroup (those belong in recordings, not in a time-series
//! database). Histograms share one bucket ladder, [`catalog::BUCKETS_NS`]: 250 ns to 10 s in
//! 1–2.5–5 steps. Sensor gauges are absent until their sensor reports (absent, not 0).
//!
//! # Wiring a live session (`serve`, and `--metrics ADDR` on `live` and `record`)
//!
//! ```ignore
//! let server = metrics::serve(addr, session_sink)?; // Receiver<baro_telemetry::Telemetry>
//! // … run; dropping `server` (or `server.shutdown()`) stops the endpoint.
//! ```
//!
//! This module never blocks the producer: it only reads its receiver, and a scrape holds the
//! aggregator's lock for one clone.

pub mod aggregate;
pub mod catalog;
pub mod expose;
pub mod http;

pub use http::serve;

#[cfg(test)]
mod tests;
