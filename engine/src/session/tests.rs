use super::sinks::Sinks;
use super::*;
use baro_telemetry::{fail::bits, FailReport, FailWord, Frame};

fn frame(pass: u64, bits: u32) -> Telemetry {
    Telemetry::Frame(Box::new(Frame {
        pass,
        fail: FailReport::new(
            FailWord {
                bits,
                grid: 2,
                ..Default::default()
            },
            |_| "x",
        ),
        ..Default::default()
    }))
}

#[test]
fn a_full_lossy_sink_drops_and_counts_clean_frames_but_never_a_failed_one_or_the_end() {
    let mut s = Sinks::default();
    let (tx, rx) = unbounded();
    s.add(SinkKind::Lossy { capacity: 2 }, tx);
    let (tx2, all) = unbounded();
    s.add(SinkKind::Lossless, tx2);
    for p in 0..5 {
        assert!(s.emit(&frame(p, 0)));
    }
    assert!(s.emit(&frame(5, bits::TIMEOUT)));
    assert!(s.emit(&Telemetry::End {
        passes: 6,
        dropped: 0,
        reason: EndReason::Stopped,
    }));
    let got: Vec<Telemetry> = rx.iter().collect();
    assert_eq!(
        got.len(),
        4,
        "two clean frames, the failed one, the end; then closed"
    );
    match &got[2] {
        Telemetry::Frame(f) => assert_eq!((f.pass, f.dropped), (5, 3)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(got[3], Telemetry::End { dropped: 3, .. }));
    let lossless: Vec<Telemetry> = all.iter().collect();
    assert_eq!(lossless.len(), 7, "the lossless sink lost nothing");
    assert!(matches!(lossless[6], Telemetry::End { dropped: 0, .. }));
}

#[test]
fn a_late_sink_gets_the_start_first_and_gone_sinks_end_the_run() {
    let mut s = Sinks::default();
    let details = baro_telemetry::Telemetry::from_json_line(
        r#"{"type":"start","schema_version":1,"device":"d","driver":"v","device_kind":"cpu","model":"m","dispatch":"multi","grid":1,"wg_size":8,"stages":[],"levels":[],"instrumented":false}"#,
    )
    .unwrap();
    let (tx, rx) = unbounded();
    s.add(SinkKind::Lossless, tx);
    assert!(s.emit(&details));
    assert!(s.emit(&frame(0, 0)));
    let (tx2, late) = unbounded();
    s.add(SinkKind::Lossy { capacity: 1 }, tx2);
    assert!(matches!(late.try_recv(), Ok(Telemetry::Start(_))));
    drop(rx);
    drop(late);
    assert!(!s.emit(&frame(1, 0)), "every sink is gone");
}
