//! The synthetic demo recording shipped in `recordings/`: regenerated with `BLESS=1`,
//! otherwise checked to be exactly what the generator makes, whole, and small.

use std::path::PathBuf;

use baro_telemetry::recording::Reader;
use baro_telemetry::Telemetry;
use baro_ui::demo::{synthetic_demo, DEMO_PASSES};

fn path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../recordings/synthetic-demo.baro")
}

#[test]
fn shipped_synthetic_demo_is_what_the_generator_makes_and_under_two_mib() {
    let bytes = synthetic_demo();
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(path(), &bytes).expect("writing recordings/synthetic-demo.baro");
    }
    let shipped =
        std::fs::read(path()).expect("recordings/synthetic-demo.baro exists (BLESS=1 writes it)");
    assert!(shipped.len() < 2 << 20, "{} bytes", shipped.len());
    assert!(
        shipped == bytes,
        "recordings/synthetic-demo.baro differs from the generator: rerun with BLESS=1"
    );
}

#[test]
fn synthetic_demo_replays_every_pass_and_ends_cleanly() {
    let mut r = Reader::new(std::io::Cursor::new(synthetic_demo())).expect("opens");
    assert_eq!(r.index().map(|i| i.len() as u64), Some(DEMO_PASSES));
    let msgs = r.read_all().expect("whole");
    let frames = msgs
        .iter()
        .filter(|m| matches!(m, Telemetry::Frame(_)))
        .count();
    assert_eq!(frames as u64, DEMO_PASSES);
    assert!(r.finished());
}
