//! The KV cache's storage type. It lives in the telemetry crate (a run's details carry it, so
//! a recording of an f16 run says so); the engine re-exports it.

pub use baro_telemetry::KvType;
