//! A session watching a host lock that another process holds (`flock(1)` as that process)
//! labels its passes contended naming the holder, keeps doing so across a decoder rebuild
//! (the sensor reports the holder only when it changes), and stops once the lock is free.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crate::common::device_alone;
use baro_engine::model::Model;
use baro_engine::sensors::host_lock;
use baro_engine::session::{Check, Command as SessionCommand, SessionBuilder, SinkKind};
use baro_engine::telemetry::{ContentionReason, Frame, Telemetry};
use baro_engine::vulkan::{DecoderOptions, Dispatch};
use crossbeam_channel::Receiver;

/// The lock's holder process and its directory, both gone on drop.
struct Holder(Child, PathBuf);

impl Drop for Holder {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
        let _ = std::fs::remove_dir_all(&self.1);
    }
}

fn next_frame(rx: &Receiver<Telemetry>) -> Frame {
    let end = Instant::now() + Duration::from_secs(120);
    loop {
        match rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            Ok(Telemetry::Frame(f)) => return *f,
            Ok(_) => {}
            Err(e) => panic!("no frame: {e}"),
        }
    }
}

fn lock_reason(f: &Frame) -> Option<u32> {
    f.contention.reasons.iter().find_map(|r| match r {
        ContentionReason::HostLock { holder } => Some(holder.pid),
        _ => None,
    })
}

#[test]
fn passes_name_another_processs_lock_across_a_rebuild_and_not_once_it_is_free() {
    let Some((ctx, _turn)) = device_alone() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("baro-lock-label-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("gpu-test.lock");
    std::fs::write(&path, "pid=4242\ncommand=other-timing-run\n").unwrap();
    let child = Command::new("flock")
        .arg("-x")
        .arg(&path)
        .args(["sleep", "120"])
        .spawn()
        .expect("flock(1) runs");
    let holder = Holder(child, dir);
    let deadline = Instant::now() + Duration::from_secs(10);
    while host_lock::holder(&path)
        .unwrap()
        .is_none_or(|h| h.pid != 4242)
    {
        assert!(Instant::now() < deadline, "flock did not take the lock");
        std::thread::sleep(Duration::from_millis(20));
    }

    let opts = DecoderOptions {
        dispatch: Dispatch::Mega,
        instrument: true,
        max_seq: 64,
        ..Default::default()
    };
    let mut b = SessionBuilder::new(&ctx.into(), Model::embedded().unwrap(), opts)
        .check(Check::Off)
        .host_lock(path.clone(), None);
    let rx = b.subscribe(SinkKind::Lossless);
    let session = b.spawn().expect("session");
    // The sensor's first look names the holder. How many passes go by before it does is a
    // race between the sensor thread (its first sample also scans /proc) and the decode:
    // bounded in time, not in passes, so a fast device or a starved sensor thread cannot
    // fail it. A session that never names the holder still fails here.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut f = next_frame(&rx);
    while lock_reason(&f).is_none() && Instant::now() < deadline {
        f = next_frame(&rx);
    }
    assert_eq!(lock_reason(&f), Some(4242), "{:?}", f.contention);
    assert!(f
        .contention
        .summary()
        .contains("another timing run holds the GPU lock: pid 4242 (other-timing-run)"));

    // A rebuild keeps the holder: every pass after it is still labelled.
    session
        .command(SessionCommand::SetDispatch(Dispatch::Multi))
        .expect("rebuild");
    for _ in 0..4 {
        let f = next_frame(&rx);
        assert_eq!(lock_reason(&f), Some(4242), "pass {}", f.pass);
    }

    // Free: within a few sensor intervals, passes no longer name it.
    drop(holder);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let f = next_frame(&rx);
        if lock_reason(&f).is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still labelled after the lock was freed"
        );
    }
    session.stop();
    assert_eq!(session.wait().unwrap().failed_passes, 0);
}
