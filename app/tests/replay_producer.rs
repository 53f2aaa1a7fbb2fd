//! The replay producer on its own (no terminal): pacing at a speed, pause/step/seek/slowest/
//! restart and the frames they put on the channel, damage and `m` reported as notes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use baro_telemetry::recording::{RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{Dispatch, EndReason, Telemetry};
use baro_top_ui::action::Control;
use baro_top_ui::replay::{spawn, ReplayConfig, Source};
use crossbeam_channel::Receiver;

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
    assert!(paced >= Duration::from_millis(90), "speed 2: {paced:?}");
    assert!(paced < Duration::from_millis(1500), "speed 2: {paced:?}");

    let t0 = Instant::now();
    let (rx, _ctl, h, _) = spawn(cfg(&f, 0.0, false)).expect("spawn");
    assert_eq!(
        rx.iter()
            .filter(|m| matches!(m, Telemetry::Frame(_)))
            .count(),
        10
    );
    assert!(
        t0.elapsed() < Duration::from_millis(90),
        "{:?}",
        t0.elapsed()
    );
    h.join().expect("thread");
}

#[test]
fn pause_holds_frames_and_step_sends_exactly_one() {
    let f = tmp("step.baro");
    write(&f, 50, 10, None);
    let (rx, ctl, h, _) = spawn(cfg(&f, 1.0, true)).expect("spawn");
    ctl.pause();
    let first = next_pass(&rx, Duration::from_millis(300));
    std::thread::sleep(Duration::from_millis(100));
    let queued: Vec<u64> = rx
        .try_iter()
        .filter_map(|m| match m {
            Telemetry::Frame(f) => Some(f.pass),
            _ => None,
        })
        .collect();
    assert!(queued.len() <= 1, "paused, yet {queued:?} after {first:?}");
    assert_eq!(next_pass(&rx, Duration::from_millis(150)), None);
    // The pass a step sends: the one after the last sent (0 when paused before any).
    let n = queued.last().copied().or(first).map_or(0, |p| p + 1);
    ctl.step();
    assert_eq!(next_pass(&rx, Duration::from_secs(2)), Some(n));
    assert_eq!(next_pass(&rx, Duration::from_millis(150)), None);
    ctl.step();
    assert_eq!(next_pass(&rx, Duration::from_secs(2)), Some(n + 1));
    ctl.resume();
    assert_eq!(next_pass(&rx, Duration::from_secs(2)), Some(n + 2));
    ctl.stop();
    h.join().expect("thread");
}

#[test]
fn seek_sends_start_then_the_pass_even_when_paused_and_reports_position() {
    let f = tmp("seek.baro");
    write(&f, 40, 10, None);
    let (rx, ctl, h, _) = spawn(cfg(&f, 0.0, true)).expect("spawn");
    ctl.pause();
    std::thread::sleep(Duration::from_millis(100));
    while rx.try_recv().is_ok() {}
    ctl.seek(25);
    let until = Instant::now() + Duration::from_secs(2);
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
    std::thread::sleep(Duration::from_millis(100));
    let notes = ctl.status().expect("status").notes;
    assert!(notes.iter().any(|n| n.contains("no pass 999")), "{notes:?}");
    ctl.stop();
    h.join().expect("thread");
}

#[test]
fn slowest_jumps_to_the_longest_pass_and_restart_begins_at_pass_zero() {
    let f = tmp("slow.baro");
    write(&f, 30, 10, Some(17));
    let (rx, ctl, h, _) = spawn(cfg(&f, 0.0, true)).expect("spawn");
    ctl.pause();
    std::thread::sleep(Duration::from_millis(100));
    while rx.try_recv().is_ok() {}
    ctl.seek_slowest();
    assert_eq!(next_pass(&rx, Duration::from_secs(2)), Some(17));
    ctl.restart();
    assert_eq!(next_pass(&rx, Duration::from_secs(2)), None, "still paused");
    ctl.step();
    assert_eq!(next_pass(&rx, Duration::from_secs(2)), Some(0));
    ctl.stop();
    h.join().expect("thread");
}

#[test]
fn damaged_file_replays_up_to_the_damage_and_notes_its_byte_offset() {
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
