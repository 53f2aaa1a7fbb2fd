//! The synthetic demo recording (`recordings/synthetic-demo.baro`): what `baro-top` replays
//! on a machine with no Vulkan device until real recordings are shipped. Generated from the
//! telemetry crate's synthetic frames (plausible, never measurements), deterministic, and
//! small; `BLESS=1 cargo test --release -p baro-ui --test demo_recording` rewrites it.

use baro_telemetry::recording::{RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{EndReason, Telemetry};

/// Passes in the demo.
pub const DEMO_PASSES: u64 = 160;

/// The recorded wall time of a demo pass (25 tok/s, so the replay is watchable at speed 1).
pub const DEMO_WALL_NS: u64 = 40_000_000;

/// The demo recording's bytes.
pub fn synthetic_demo() -> Vec<u8> {
    // Five llama layers plus head and argmax on 16 workgroups.
    let run = synthetic_run(16, 37, 27);
    let header = RecordingHeader {
        quant: Some("synthetic".into()),
        host: "synthetic".into(),
        baro_top_version: env!("CARGO_PKG_VERSION").into(),
        commit: "synthetic".into(),
        created_unix_ms: 1_767_225_600_000,
        calibrations: vec![],
        run: run.clone(),
    };
    let mut w = Writer::new(Vec::new(), &header).unwrap_or_else(|e| panic!("demo header: {e}"));
    let mut put = |m: &Telemetry| w.write(m).unwrap_or_else(|e| panic!("demo record: {e}"));
    put(&Telemetry::Start(run.clone()));
    for p in 0..DEMO_PASSES {
        let mut f = synthetic_frame(&run, p, 7);
        f.wall_ns = DEMO_WALL_NS;
        put(&Telemetry::Frame(Box::new(f)));
    }
    put(&Telemetry::End {
        passes: DEMO_PASSES,
        dropped: 0,
        reason: EndReason::Completed,
    });
    w.finish().unwrap_or_else(|e| panic!("demo footer: {e}"))
}
