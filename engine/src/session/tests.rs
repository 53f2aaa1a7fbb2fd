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

/// A ring frame of `run`'s layout for pass `pass_id` with every stage stamped on every
/// workgroup (`seq` is its sequence word; another pass's makes it torn).
fn ring_bytes(run: &RunDetails, seq: u32) -> Vec<u8> {
    let f = baro_telemetry::synth::synthetic_frame(run, u64::from(seq), 3);
    let mut w = super::host_cost::ring_words(run, &f, seq.wrapping_sub(1));
    w[0] = seq;
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

#[test]
fn the_frame_builder_emits_every_message_in_the_order_queued_and_flags_a_torn_ring() {
    use super::frames::{Frames, Job, RingCopy};
    use baro_telemetry::{SensorReading, SensorSample};
    let run = Arc::new(baro_telemetry::synth::synthetic_run(4, 12, 6));
    let shared = Arc::new(sinks::Shared::default());
    let (tx, all) = unbounded();
    shared.lock().add(SinkKind::Lossless, tx);
    let frames = Frames::spawn(
        shared.clone(),
        baro_telemetry::labels::PassLabeler::for_run(&run),
    )
    .expect("builder");
    assert!(frames
        .send(Job::Msg(Telemetry::Start((*run).clone())))
        .is_ok());
    for p in 0..40u64 {
        if p % 7 == 0 {
            let s = SensorSample {
                host_ns: p,
                reading: SensorReading::CpuBusy { fraction: 0.99 },
            };
            assert!(frames.send(Job::Sensor(s)).is_ok());
        }
        // Pass 13's ring carries another pass's sequence word: torn.
        let seq = if p == 13 { 99 } else { p as u32 + 1 };
        let mut bytes = frames.buffer();
        bytes.clear();
        bytes.extend(ring_bytes(&run, seq));
        let job = Job::Pass {
            frame: Box::new(Frame {
                pass: p,
                ..Default::default()
            }),
            ring: Some(RingCopy {
                bytes,
                expect_seq: p as u32 + 1,
                mega: true,
            }),
            details: run.clone(),
        };
        assert!(frames.send(job).is_ok());
    }
    frames.flush().expect("flushed");
    // Everything queued before the flush is out, in order.
    let got: Vec<Telemetry> = all.try_iter().collect();
    assert!(matches!(got.first(), Some(Telemetry::Start(_))));
    let mut next = 0u64;
    for m in &got[1..] {
        match m {
            Telemetry::Sensor(s) => {
                assert_eq!(s.host_ns, next, "a sample goes out just before its pass");
            }
            Telemetry::Frame(f) => {
                assert_eq!(f.pass, next, "frames in pass order");
                assert_eq!(f.torn, f.pass == 13);
                assert_eq!(f.spans.is_empty(), f.pass == 13);
                if f.pass != 13 {
                    assert_eq!(f.stages.len(), 12);
                    assert_eq!(f.barriers.len(), 5);
                }
                next += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(next, 40, "every pass has its frame");
    assert!(frames.alive());
    drop(all);
    assert!(frames
        .send(Job::Sensor(SensorSample {
            host_ns: 0,
            reading: SensorReading::CpuBusy { fraction: 0.0 },
        }))
        .is_ok());
    frames.flush().expect("flushed");
    assert!(!frames.alive(), "every sink is gone");
}
