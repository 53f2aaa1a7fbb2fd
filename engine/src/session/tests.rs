use super::sinks::Sinks;
use super::*;
use baro_telemetry::{fail::bits, FailReport, FailWord, Frame};
use crossbeam_channel::Receiver;

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
        assert!(s.emit(frame(p, 0)));
    }
    assert!(s.emit(frame(5, bits::TIMEOUT)));
    assert!(s.emit(Telemetry::End {
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
    assert!(s.emit(details));
    assert!(s.emit(frame(0, 0)));
    let (tx2, late) = unbounded();
    s.add(SinkKind::Lossy { capacity: 1 }, tx2);
    assert!(matches!(late.try_recv(), Ok(Telemetry::Start(_))));
    drop(rx);
    drop(late);
    assert!(!s.emit(frame(1, 0)), "every sink is gone");
}

#[test]
fn every_sink_gets_the_same_frames_in_order_each_with_its_own_drop_count() {
    // The last sink that takes a message gets the message itself, the others a clone: the
    // contents must not tell them apart (but for each sink's own `dropped`).
    let mut s = Sinks::default();
    let (tx, all) = unbounded();
    s.add(SinkKind::Lossless, tx);
    let (tx, ui) = unbounded();
    s.add(SinkKind::Lossy { capacity: 3 }, tx);
    let (tx, rec) = unbounded();
    s.add(SinkKind::Lossless, tx);
    let (tx, full) = unbounded();
    s.add(SinkKind::Lossy { capacity: 0 }, tx); // last in the list, never takes a frame
    let spans = |p: u64| {
        let mut sp = baro_telemetry::Spans::new(2, 1, 0);
        sp.set_span(0, 1, p as u32, p as u32 + 10);
        sp
    };
    for p in 0..6 {
        let Telemetry::Frame(mut f) = frame(p, 0) else {
            unreachable!()
        };
        f.spans = spans(p);
        assert!(s.emit(Telemetry::Frame(f)));
    }
    assert!(s.emit(frame(6, bits::TIMEOUT)));
    assert!(s.emit(Telemetry::End {
        passes: 7,
        dropped: 0,
        reason: EndReason::Stopped,
    }));
    let passes = |rx: &Receiver<Telemetry>| -> Vec<(u64, u64)> {
        rx.iter()
            .filter_map(|m| match m {
                Telemetry::Frame(f) => {
                    if f.pass < 6 {
                        assert_eq!(f.spans, spans(f.pass), "pass {}", f.pass);
                    }
                    Some((f.pass, f.dropped))
                }
                _ => None,
            })
            .collect()
    };
    let lossless: Vec<(u64, u64)> = (0..7).map(|p| (p, 0)).collect();
    assert_eq!(passes(&all), lossless);
    assert_eq!(passes(&rec), lossless);
    assert_eq!(passes(&ui), [(0, 0), (1, 0), (2, 0), (6, 3)]);
    assert_eq!(
        passes(&full),
        [(6, 6)],
        "only the failed frame gets through"
    );
}
