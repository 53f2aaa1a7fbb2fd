//! The recorder as a specification: what a stream becomes on disk, and how a pump ends.

use std::io::Cursor;

use super::*;
use crate::recording::Reader;
use crate::synth::{synthetic_frame, synthetic_run};
use crate::{EndReason, RunDetails};

fn end(passes: u64) -> Telemetry {
    Telemetry::End {
        passes,
        dropped: 0,
        reason: EndReason::Completed,
    }
}

fn frame(run: &RunDetails, pass: u64) -> Telemetry {
    Telemetry::Frame(Box::new(synthetic_frame(run, pass, 7)))
}

/// The messages a finished recording holds.
fn read_back(bytes: Vec<u8>) -> (Reader<Cursor<Vec<u8>>>, Vec<Telemetry>) {
    let mut r = Reader::new(Cursor::new(bytes)).unwrap();
    let msgs = r.by_ref().map(|m| m.unwrap()).collect();
    assert!(r.finished(), "the footer was written");
    (r, msgs)
}

#[test]
fn the_first_start_becomes_the_header_and_nothing_before_it_is_written() {
    let run = synthetic_run(4, 3, 2);
    let mut rec = Recorder::new(vec![], "abc123").quant(Some("q8_0".into()));
    rec.put(frame(&run, 0)).unwrap();
    assert!(!rec.started());
    assert_eq!(rec.stats(), WriteStats::default());
    for m in [Telemetry::Start(run.clone()), frame(&run, 1), end(2)] {
        rec.put(m).unwrap();
    }
    assert!(rec.started());
    let (out, stats) = rec.finish().unwrap().expect("started");
    assert_eq!((stats.records, stats.frames), (3, 1));
    let (r, msgs) = read_back(out);
    assert_eq!(r.header().run, run);
    assert_eq!(r.header().commit, "abc123");
    assert_eq!(r.header().quant.as_deref(), Some("q8_0"));
    assert_eq!(
        msgs,
        [Telemetry::Start(run.clone()), frame(&run, 1), end(2)]
    );
}

#[test]
fn a_stream_that_never_starts_finishes_as_nothing_written() {
    let run = synthetic_run(4, 3, 2);
    let mut rec = Recorder::new(vec![], "c");
    rec.put(frame(&run, 0)).unwrap();
    assert!(rec.finish().unwrap().is_none());
}

#[test]
fn spans_every_n_keeps_the_spans_of_every_nth_pass_and_every_frames_timings() {
    let run = synthetic_run(4, 3, 2);
    let mut rec = Recorder::new(vec![], "c").spans_every(3);
    rec.put(Telemetry::Start(run.clone())).unwrap();
    for pass in 0..7 {
        rec.put(frame(&run, pass)).unwrap();
    }
    let (out, _) = rec.finish().unwrap().unwrap();
    let (_, msgs) = read_back(out);
    let frames: Vec<&crate::Frame> = msgs
        .iter()
        .filter_map(|m| match m {
            Telemetry::Frame(f) => Some(&**f),
            _ => None,
        })
        .collect();
    assert_eq!(frames.len(), 7);
    for f in frames {
        let Telemetry::Frame(sent) = frame(&run, f.pass) else {
            unreachable!()
        };
        assert_eq!(f.spans.is_empty(), f.pass % 3 != 0, "pass {}", f.pass);
        assert_eq!(f.stages, sent.stages, "pass {}", f.pass);
    }
}

#[test]
fn a_repeated_start_after_a_new_subscription_is_not_written_once() {
    let run = synthetic_run(4, 3, 2);
    let mut rec = Recorder::new(vec![], "c");
    rec.put(Telemetry::Start(run.clone())).unwrap();
    rec.skip_repeated_start();
    rec.put(Telemetry::Start(run.clone())).unwrap();
    rec.put(frame(&run, 0)).unwrap();
    rec.skip_repeated_start();
    rec.put(frame(&run, 1)).unwrap();
    rec.put(Telemetry::Start(run.clone())).unwrap();
    let (out, _) = rec.finish().unwrap().unwrap();
    let (_, msgs) = read_back(out);
    let starts = msgs
        .iter()
        .filter(|m| matches!(m, Telemetry::Start(_)))
        .count();
    assert_eq!((msgs.len(), starts), (4, 2), "{msgs:?}");
}

#[test]
fn a_pump_ends_with_the_streams_end_and_counts_its_backlog() {
    let run = synthetic_run(4, 3, 2);
    let (tx, rx) = crossbeam_channel::unbounded();
    for m in [Telemetry::Start(run.clone()), frame(&run, 0), end(1)] {
        tx.send(m).unwrap();
    }
    tx.send(frame(&run, 1)).unwrap(); // after the End: not this recording's
    let mut rec = Recorder::new(vec![], "c");
    let mut calls = 0;
    let p = rec
        .pump(&rx, &crossbeam_channel::never(), |_| calls += 1)
        .unwrap();
    assert_eq!(
        p,
        Pumped {
            ended: true,
            drained: 0
        }
    );
    assert_eq!((calls, rec.backlog()), (3, 3));
    assert_eq!(rec.stats().records, 3);
}

#[test]
fn a_pump_ends_when_every_sender_is_gone() {
    let run = synthetic_run(4, 3, 2);
    let (tx, rx) = crossbeam_channel::unbounded();
    tx.send(Telemetry::Start(run.clone())).unwrap();
    drop(tx);
    let mut rec = Recorder::new(vec![], "c");
    let p = rec.pump(&rx, &crossbeam_channel::never(), |_| ()).unwrap();
    assert!(p.ended);
    assert_eq!(rec.stats().records, 1);
}

#[test]
fn a_stopped_pump_writes_what_was_queued_and_says_how_much() {
    let run = synthetic_run(4, 3, 2);
    let (tx, rx) = crossbeam_channel::unbounded();
    let (stop, stop_rx) = crossbeam_channel::bounded(1);
    // Stop first: whichever the pump takes first, every queued message is written.
    stop.send(()).unwrap();
    for m in [
        Telemetry::Start(run.clone()),
        frame(&run, 0),
        frame(&run, 1),
    ] {
        tx.send(m).unwrap();
    }
    let mut rec = Recorder::new(vec![], "c");
    let p = rec.pump(&rx, &stop_rx, |_| ()).unwrap();
    assert!(!p.ended);
    assert!(p.drained <= 3, "{p:?}");
    assert_eq!(rec.stats().records, 3);
}
