//! The contention label sees a busy CPU for real: a session decodes stories260K on the Vulkan
//! device (lavapipe in CI), first as the machine is, then while CPU burner processes
//! (`sh -c 'while :; do :; done'`, two more than the CPUs, at least three) run. Passes while burning are labelled contended with a
//! "CPU NN% busy" reason; the CPU-busy reading rises; and before, a pass carries that reason
//! exactly when its reading is over the threshold (a shared CI machine may already be busy:
//! then the comparison of readings is what is asserted, not a quiet baseline).
//!
//! The burners are killed when the test ends, however it ends (a guard kills them on drop,
//! unwinding included).

#![allow(clippy::unwrap_used)]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::device_alone;
use baro_engine::model::Model;
use baro_engine::session::{Check, SessionBuilder, SinkKind};
use baro_engine::telemetry::labels::ContentionConfig;
use baro_engine::telemetry::{ContentionReason, Frame, Telemetry};
use baro_engine::vulkan::{DecoderOptions, Dispatch};
use crossbeam_channel::Receiver;

/// CPU burner processes, killed and reaped on drop.
struct Burners(Vec<Child>);

impl Burners {
    fn start(n: usize) -> Burners {
        let mut b = Burners(vec![]);
        for _ in 0..n {
            b.0.push(
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .stdin(Stdio::null())
                    .spawn()
                    .expect("sh runs"),
            );
        }
        b
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The frames that end within `d`, with their CPU-busy reading where a sample was fresh; on
/// a machine that decodes too slowly for `readings` of them to carry a reading within `d`,
/// on until they do (60 s at most: then the caller's count says so).
fn frames_for(rx: &Receiver<Telemetry>, d: Duration, readings: usize) -> Vec<Frame> {
    let start = Instant::now();
    let (end, limit) = (start + d, start + Duration::from_secs(60));
    let mut v: Vec<Frame> = vec![];
    let enough =
        |v: &[Frame]| v.iter().filter(|f| f.contention.cpu_busy.is_some()).count() >= readings;
    loop {
        let now = Instant::now();
        let until = if now < end { end } else { limit };
        if now >= limit || (now >= end && enough(&v)) {
            return v;
        }
        match rx.recv_timeout(until - now) {
            Ok(Telemetry::Frame(f)) => v.push(*f),
            Ok(Telemetry::End { reason, .. }) => panic!("the session ended: {reason}"),
            Ok(_) | Err(_) => {}
        }
    }
}

fn cpu_reason(f: &Frame) -> Option<f32> {
    f.contention.reasons.iter().find_map(|r| match r {
        ContentionReason::CpuBusy { fraction } => Some(*fraction),
        _ => None,
    })
}

fn median(mut v: Vec<f32>) -> f32 {
    assert!(!v.is_empty());
    v.sort_by(f32::total_cmp);
    v[v.len() / 2]
}

#[test]
fn passes_under_cpu_burners_are_labelled_contended_cpu_busy_and_the_reading_rises() {
    let Some((ctx, _turn)) = device_alone() else {
        return;
    };
    let threshold = ContentionConfig::default().cpu_busy_threshold;
    let opts = DecoderOptions {
        dispatch: Dispatch::Mega,
        instrument: true,
        max_seq: 64,
        ..Default::default()
    };
    let mut b = SessionBuilder::new(&ctx.into(), Model::embedded().unwrap(), opts)
        .check(Check::Off)
        .stop_on_fail(false);
    let rx = b.subscribe(SinkKind::Lossless);
    let session = b.spawn().expect("session");

    // The machine as it is (the sensor's first sample gives no CPU figure: a second later
    // every pass has one).
    let _ = frames_for(&rx, Duration::from_secs(1), 0);
    let before = frames_for(&rx, Duration::from_secs(4), 4);
    // Twice as many burners as CPUs: with this process's pool threads runnable too, and a
    // CPU-only test of this binary on the other test thread (those take no turn), they take
    // two thirds of every CPU, on 2 cores or 64.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let burners = Burners::start(2 * cpus + 2);
    // Settle: passes that started before the burners, and a sensor interval.
    let _ = frames_for(&rx, Duration::from_millis(1500), 0);
    let during = frames_for(&rx, Duration::from_secs(4), 4);
    drop(burners);
    session.stop();
    let outcome = session.wait().unwrap();
    assert_eq!(outcome.failed_passes, 0);

    let reading =
        |fs: &[Frame]| -> Vec<f32> { fs.iter().filter_map(|f| f.contention.cpu_busy).collect() };
    let (rb, rd) = (reading(&before), reading(&during));
    assert!(
        rb.len() >= 2 && rd.len() >= 2,
        "too few passes with a CPU reading: {} before, {} during",
        rb.len(),
        rd.len()
    );
    let (mb, md) = (median(rb), median(rd));
    eprintln!(
        "CPU busy (others) median {mb:.2} over {} passes before, {md:.2} over {} passes while burning",
        before.len(),
        during.len()
    );

    // While burning: every pass is contended, with the CPU reason over the threshold, and its
    // sentence says how busy.
    for f in &during {
        let frac = cpu_reason(f).unwrap_or_else(|| {
            panic!(
                "pass {} while burning has no CPU-busy reason: {:?}",
                f.pass, f.contention
            )
        });
        assert!(frac >= threshold, "pass {}: {frac}", f.pass);
        assert!(!f.contention.is_quiet());
        assert!(
            f.contention
                .summary()
                .contains(&format!("CPU {:.0}% busy", frac * 100.0)),
            "{}",
            f.contention.summary()
        );
    }
    // The reading rose: the burners take a share of every core (more where the machine was
    // already busy, which leaves less room: the rise is asserted, not its size beyond 5%).
    assert!(
        md >= mb + 0.05,
        "CPU busy did not rise: {mb:.2} before, {md:.2} while burning"
    );
    // Before: the reason follows the reading, pass by pass (quiet where the CPU was, even on
    // a busy machine).
    for f in &before {
        match f.contention.cpu_busy {
            Some(c) if c >= threshold => assert_eq!(cpu_reason(f), Some(c), "pass {}", f.pass),
            Some(_) => assert_eq!(cpu_reason(f), None, "pass {}", f.pass),
            None => {}
        }
    }
    // A machine quiet before (median under the threshold) had most passes without the CPU
    // reason.
    if mb < threshold {
        let cpu_flagged = before.iter().filter(|f| cpu_reason(f).is_some()).count();
        assert!(
            cpu_flagged * 2 <= before.len(),
            "{cpu_flagged} of {} passes before the burners were CPU-busy at median {mb:.2}",
            before.len()
        );
    }
}
