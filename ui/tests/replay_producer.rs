//! The replay producer on its own (no terminal): pacing at a speed, pause/step/seek/slowest/
//! restart and the frames they put on the channel, damage and `m` reported as notes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use baro_telemetry::recording::{RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{Dispatch, EndReason, Telemetry};
use baro_ui::action::Control;
use baro_ui::replay::{spawn, ReplayConfig, Source};
use crossbeam_channel::{Receiver, RecvTimeoutError};

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("baro-replay-prod-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d.join(name)
}

/// `passes` passes of `wall_ms` each; pass `slow` has a GPU time far above the others.
fn write(path: &Path, passes: u64, wall_ms: u64, slow: Option<u64>) {
    let run = synthetic_run(4, 9, 3);
    let mut w = Writer::create(path, &RecordingHeader::new(run.clone(), "t")).expect("writer");
    w.write(&Telemetry::Start(run.clone())).expect("start");
    for p in 0..passes {
        let mut f = synthetic_frame(&run, p, 3);
        f.wall_ns = wall_ms * 1_000_000;
        f.gpu_ns = Some(if Some(p) == slow { 9_000_000 } else { 100_000 });
        w.write(&Telemetry::Frame(Box::new(f))).expect("frame");
    }
    w.write(&Telemetry::End {
        passes,
        dropped: 0,
        reason: EndReason::Completed,
    })
    .expect("end");
    w.finish().expect("finish");
}

fn cfg(path: &Path, speed: f64, hold: bool) -> ReplayConfig {
    ReplayConfig {
        source: Source::File(path.to_path_buf()),
        label: path.display().to_string(),
        speed,
        hold_at_end: hold,
        banner: vec!["REPLAY of test".into()],
    }
}

/// The next frame's pass within `t` (skipping other messages).
fn next_pass(rx: &Receiver<Telemetry>, t: Duration) -> Option<u64> {
    let until = Instant::now() + t;
    loop {
        match rx.recv_deadline(until) {
            Ok(Telemetry::Frame(f)) => return Some(f.pass),
            Ok(_) => {}
            Err(_) => return None,
        }
    }
}

#[test]
fn speed_paces_frames_by_recorded_wall_time_and_speed_zero_does_not_wait() {
    let f = tmp("pace.baro");
    write(&f, 10, 20, None); // 200 ms recorded
    let t0 = Instant::now();
    let (rx, _ctl, h, _) = spawn(cfg(&f, 2.0, false)).expect("spawn");
    assert_eq!(
        rx.iter()
            .filter(|m| matches!(m, Telemetry::Frame(_)))
            .count(),
        10
    );
    let paced = t0.elapsed();
    h.join().expect("thread");
    // The pacing is the lower bound: 200 ms recorded at speed 2 never arrive in under 90 ms.
    // The upper one only catches a gross over-wait (a wrong time unit: ms for µs is 100 s);
    // it is wide because a starved machine delays every wake-up of both threads.
    assert!(paced >= Duration::from_millis(90), "speed 2: {paced:?}");
    assert!(paced < Duration::from_secs(30), "speed 2: {paced:?}");

    // Speed 0 does not wait for the recorded wall time at all: 10 passes of 60 s (600 s
    // recorded, still 30 s at speed 20) all arrive within 30 s, a bound far above the time
    // they take on a loaded machine (milliseconds) but far below any pacing.
    let slow = tmp("pace-slow.baro");
    write(&slow, 10, 60_000, None);
    let t0 = Instant::now();
    let (rx, _ctl, h, _) = spawn(cfg(&slow, 0.0, false)).expect("spawn");
    let until = t0 + Duration::from_secs(30);
    let mut frames = 0;
    loop {
        match rx.recv_deadline(until) {
            Ok(Telemetry::Frame(_)) => frames += 1,
            Ok(_) => {}
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => {
                panic!("speed 0: {frames} of 10 frames after {:?}", t0.elapsed())
            }
        }
    }
    assert_eq!(frames, 10);
    h.join().expect("thread");
}

#[test]
fn pause_holds_frames_and_step_sends_exactly_one() {
    let f = tmp("step.baro");
    write(&f, 200, 10, None); // 2 s at speed 1: still flowing when the pause lands
    let (rx, ctl, h, _) = spawn(cfg(&f, 1.0, true)).expect("spawn");
    assert!(
        next_pass(&rx, Duration::from_secs(10)).is_some(),
        "frames flow at speed 1"
    );
    ctl.pause();
    // How many frames go out before the replay thread sees the pause is up to the scheduler.
    // Commands are handled in order, so a seek sent after the pause marks the point where the
    // pause is in effect: its Start, then its pass at once (paused or not), then nothing.
    ctl.seek(150);
    let until = Instant::now() + Duration::from_secs(10);
    let mut saw_start = false;
    loop {
        match rx.recv_deadline(until).expect("the seek's Start and pass") {
            Telemetry::Start(_) => saw_start = true,
            Telemetry::Frame(f) if saw_start => {
                assert_eq!(f.pass, 150, "the seek's pass comes right after its Start");
                break;
            }
            _ => {} // frames sent before the pause landed
        }
    }
    assert_eq!(next_pass(&rx, Duration::from_millis(300)), None, "paused");
    // A step sends the pass after the last sent, then holds again.
    ctl.step();
    assert_eq!(next_pass(&rx, Duration::from_secs(10)), Some(151));
    assert_eq!(
        next_pass(&rx, Duration::from_millis(300)),
        None,
        "one pass per step"
    );
    ctl.step();
    assert_eq!(next_pass(&rx, Duration::from_secs(10)), Some(152));
    ctl.resume();
    assert_eq!(next_pass(&rx, Duration::from_secs(10)), Some(153));
    ctl.stop();
    h.join().expect("thread");
}

/// Every frame of a `passes`-pass recording replayed at speed 0 with `hold_at_end`: after
/// the last, the replay thread waits for a command (nothing else is still to come).
fn play_to_the_end(rx: &Receiver<Telemetry>, passes: u64) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match rx.recv_deadline(until).expect("every pass at speed 0") {
            Telemetry::Frame(f) if f.pass + 1 == passes => return,
            _ => {}
        }
    }
}

#[test]
fn seek_sends_start_then_the_pass_even_when_paused_and_reports_position() {
    let f = tmp("seek.baro");
    write(&f, 40, 10, None);
    let (rx, ctl, h, _) = spawn(cfg(&f, 0.0, true)).expect("spawn");
    play_to_the_end(&rx, 40);
    ctl.pause();
    ctl.seek(25);
    let until = Instant::now() + Duration::from_secs(10);
    let mut saw_start = false;
    let pass = loop {
        match rx.recv_deadline(until).expect("a message after the seek") {
            Telemetry::Start(_) => saw_start = true,
            Telemetry::Frame(f) => break f.pass,
            _ => {}
        }
    };
    assert!(saw_start, "a seek restarts the stream with Start");
    assert_eq!(pass, 25);
    let st = ctl.status().expect("a replay has a status");
    assert_eq!(
        (st.pass, st.position, st.total),
        (Some(25), Some(26), Some(40))
    );
    assert_eq!(st.banner, vec!["REPLAY of test".to_string()]);
    ctl.seek(999);
    // The note comes when the replay thread has handled the seek (notes are handed over
    // once: keep what each look returns).
    let until = Instant::now() + Duration::from_secs(10);
    let mut notes: Vec<String> = vec![];
    while !notes.iter().any(|n| n.contains("no pass 999")) {
        assert!(Instant::now() < until, "no note after seek(999): {notes:?}");
        std::thread::sleep(Duration::from_millis(10));
        notes.extend(ctl.status().expect("status").notes);
    }
    ctl.stop();
    h.join().expect("thread");
}

#[test]
fn slowest_jumps_to_the_longest_pass_and_restart_begins_at_pass_zero() {
    let f = tmp("slow.baro");
    write(&f, 30, 10, Some(17));
    let (rx, ctl, h, _) = spawn(cfg(&f, 0.0, true)).expect("spawn");
    play_to_the_end(&rx, 30);
    ctl.pause();
    ctl.seek_slowest();
    assert_eq!(next_pass(&rx, Duration::from_secs(10)), Some(17));
    ctl.restart();
    assert_eq!(next_pass(&rx, Duration::from_secs(2)), None, "still paused");
    ctl.step();
    assert_eq!(next_pass(&rx, Duration::from_secs(10)), Some(0));
    ctl.stop();
    h.join().expect("thread");
}

#[test]
fn a_cut_file_replays_up_to_the_cut_and_notes_its_byte_offset() {
    let f = tmp("cut.baro");
    write(&f, 20, 1, None);
    let bytes = std::fs::read(&f).expect("read");
    let cut = bytes.len() / 2;
    std::fs::write(&f, &bytes[..cut]).expect("cut");
    let (rx, ctl, h, _) = spawn(cfg(&f, 0.0, false)).expect("spawn");
    let frames = rx
        .iter()
        .filter(|m| matches!(m, Telemetry::Frame(_)))
        .count();
    h.join().expect("thread");
    assert!(frames > 0 && frames < 20, "{frames} frames");
    let notes = ctl.status().expect("status").notes;
    let line = notes
        .iter()
        .find(|n| n.contains("damaged or cut"))
        .unwrap_or_else(|| panic!("no damage note in {notes:?}"));
    assert!(line.contains("at byte "), "{line}");
    let st = ctl.status().expect("status");
    assert!(st.notes.is_empty(), "notes are handed over once");
    assert_eq!(st.total, Some(frames as u64));
}

#[test]
fn a_flipped_byte_costs_its_pass_and_the_replay_goes_on_to_the_end_with_a_note() {
    let f = tmp("flip.baro");
    write(&f, 20, 1, None);
    let at = baro_telemetry::recording::Reader::open(&f)
        .expect("open")
        .index()
        .and_then(|i| i.offset_of(9))
        .expect("pass 9 is indexed");
    let mut bytes = std::fs::read(&f).expect("read");
    bytes[at as usize + 25] ^= 0x20;
    std::fs::write(&f, &bytes).expect("write");
    let (rx, ctl, h, _) = spawn(cfg(&f, 0.0, false)).expect("spawn");
    let passes: Vec<u64> = rx
        .iter()
        .filter_map(|m| match m {
            Telemetry::Frame(f) => Some(f.pass),
            _ => None,
        })
        .collect();
    h.join().expect("thread");
    assert_eq!(passes, (0..20).filter(|&p| p != 9).collect::<Vec<_>>());
    let notes = ctl.status().expect("status").notes;
    let line = notes
        .iter()
        .find(|n| n.contains("damaged stretch"))
        .unwrap_or_else(|| panic!("no damage note in {notes:?}"));
    assert!(line.contains(&format!("at byte {at} ")), "{line}");
    assert!(
        line.contains("replayed every sound record around it"),
        "{line}"
    );
}

#[test]
fn switching_dispatch_in_a_replay_is_refused_in_a_note() {
    let f = tmp("m.baro");
    write(&f, 3, 1, None);
    let (rx, ctl, h, _) = spawn(cfg(&f, 0.0, false)).expect("spawn");
    ctl.set_dispatch(Dispatch::Multi);
    let notes = ctl.status().expect("status").notes;
    assert!(
        notes.iter().any(|n| n.contains("not possible in a replay")),
        "{notes:?}"
    );
    drop(rx);
    h.join().expect("thread");
}

#[test]
fn a_seek_sends_the_start_in_effect_at_the_pass_a_live_dispatch_switch_included() {
    // A live session that switched to multi at pass 10 sent a Start of its own, which the
    // recording keeps; its frames carry no per-dispatch times.
    let f = tmp("switch.baro");
    let mega = synthetic_run(4, 9, 3);
    let multi = baro_telemetry::RunDetails {
        dispatch: Dispatch::Multi,
        ..mega.clone()
    };
    let mut w = Writer::create(&f, &RecordingHeader::new(mega.clone(), "t")).expect("writer");
    for p in 0..20 {
        if p == 0 || p == 10 {
            let run = if p == 0 { &mega } else { &multi };
            w.write(&Telemetry::Start(run.clone())).expect("start");
        }
        let mut fr = synthetic_frame(&mega, p, 3);
        fr.wall_ns = 1_000_000;
        assert!(fr.dispatch_ns.is_empty());
        w.write(&Telemetry::Frame(Box::new(fr))).expect("frame");
    }
    w.write(&Telemetry::End {
        passes: 20,
        dropped: 0,
        reason: EndReason::Completed,
    })
    .expect("end");
    w.finish().expect("finish");
    let (rx, ctl, h, _) = spawn(cfg(&f, 0.0, true)).expect("spawn");
    play_to_the_end(&rx, 20);
    ctl.pause();
    for (pass, want) in [
        (15, Dispatch::Multi),
        (5, Dispatch::Mega),
        (10, Dispatch::Multi),
    ] {
        ctl.seek(pass);
        let until = Instant::now() + Duration::from_secs(10);
        let mut start = None;
        let got = loop {
            match rx.recv_deadline(until).expect("a message after the seek") {
                Telemetry::Start(d) => start = Some(d.dispatch),
                Telemetry::Frame(f) => break f.pass,
                _ => {}
            }
        };
        assert_eq!((got, start), (pass, Some(want)), "seek to {pass}");
    }
    ctl.stop();
    h.join().expect("thread");
}
