//! `cargo bench -p baro-engine --bench host`: the live session's per-pass host cost on the
//! CPU alone (no GPU): each step of the engine thread's path for a synthetic llama-1b-shaped
//! ring frame, median and p90 µs. The measuring code is
//! [`baro_engine::session::host_cost`]; `BARO_HOST_PASSES=N` times N passes per step;
//! `BARO_HOST_ONLY_PATH=1` times only the whole path (to run under a profiler).

use baro_engine::session::host_cost::{self, Config};

fn main() {
    let mut cfg = Config::default();
    if let Some(n) = std::env::var("BARO_HOST_PASSES")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cfg.passes = n;
    }
    cfg.only_path = std::env::var_os("BARO_HOST_ONLY_PATH").is_some();
    for l in host_cost::run(&cfg).lines() {
        println!("{l}");
    }
}
