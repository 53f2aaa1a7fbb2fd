//! The engine's integration tests, one module per subject, linked into one test binary: each
//! file under `tests/` would otherwise be a binary of its own that links the whole dependency
//! graph (minutes of linking on a 2-core CI machine), and the Vulkan modules share one device
//! ([`common::device`]) instead of creating one per binary.
//!
//! Run one subject with a filter on its module: `cargo test --release -p baro-engine --test it
//! real_models::`.

mod common;

mod act_q8;
mod arch;
mod attention;
mod chain;
mod clock_rate;
mod contention_burners;
mod cpu_budget;
mod golden;
mod host_lock_label;
mod idle_wait;
mod kv_f16;
mod prefetch;
mod quant_types;
mod real_models;
mod session;
mod telemetry;
mod tokenizer_vocab;
mod vulkan;
