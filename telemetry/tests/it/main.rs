//! The telemetry crate's integration tests, one module per subject, linked into one test
//! binary: each file under `tests/` would otherwise be a binary of its own that links the whole
//! dependency graph (minutes of linking on a 2-core CI machine).
//!
//! Run one subject with a filter on its module: `cargo test --release -p baro-telemetry --test
//! it recording::`.

mod diff_modes;
mod golden;
mod recording;
mod recording_bench;
mod recording_crash;
mod recording_export;
mod recording_resync;
mod scenarios;
mod trace_importers;
mod window;
