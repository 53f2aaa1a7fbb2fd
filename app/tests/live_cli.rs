//! `baro-top live` on the engine with stdout not a terminal (lavapipe is enough): one line per
//! pass with the fail word, said once on stderr; it decodes past the context (the sequence
//! restarts) and without a bound until stopped; `--metrics` serves the session.
//!
//! In CI (`CI` set) a missing Vulkan device fails; outside CI `BARO_SKIP_VULKAN` skips with
//! a printed reason.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_baro-top"));
    c.env("LP_NUM_THREADS", "2");
    c
}

fn baro(args: &[&str]) -> Output {
    bin().args(args).output().unwrap()
}

fn has_vulkan() -> bool {
    let ok = baro(&["devices"]).status.success();
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    if !ok {
        if in_ci || std::env::var_os("BARO_SKIP_VULKAN").is_none() {
            panic!("no usable Vulkan device (install lavapipe: apt-get install mesa-vulkan-drivers libvulkan1; outside CI, BARO_SKIP_VULKAN=1 skips)");
        }
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set): no Vulkan device");
    }
    ok
}

/// Kills the child on every way out of a test.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn piped_live_prints_one_line_per_pass_with_the_fail_word_and_says_so_once() {
    if !has_vulkan() {
        return;
    }
    let o = baro(&["live", "--passes", "4"]);
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines[0].starts_with("start: ") && lines[0].contains("stories260K"),
        "{out}"
    );
    let passes: Vec<&&str> = lines.iter().filter(|l| l.starts_with("pass ")).collect();
    assert_eq!(passes.len(), 4, "{out}");
    for (i, l) in passes.iter().enumerate() {
        assert!(l.starts_with(&format!("pass {i} pos {i} ")), "{l}");
        assert!(l.ends_with("fail-word 0x00000000 PASS"), "{l}");
    }
    assert!(lines[lines.len() - 2].starts_with("end: 4 passes"), "{out}");
    assert!(
        lines.last().unwrap().starts_with("summary: 4 passes"),
        "{out}"
    );
    assert_eq!(err.matches("not a terminal").count(), 1, "{err}");
}

#[test]
fn live_decodes_past_a_full_context_by_restarting_the_sequence() {
    if !has_vulkan() {
        return;
    }
    let o = baro(&["live", "--ctx", "4", "--passes", "10", "--check", "off"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let pos: Vec<u32> = out
        .lines()
        .filter(|l| l.starts_with("pass "))
        .map(|l| l.split_whitespace().nth(3).unwrap().parse().unwrap())
        .collect();
    assert_eq!(pos, [0, 1, 2, 3, 0, 1, 2, 3, 0, 1], "{out}");
}

#[test]
fn unbounded_piped_live_keeps_printing_pass_lines_until_killed() {
    if !has_vulkan() {
        return;
    }
    let mut c = Kill(
        bin()
            .args(["live"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut r = BufReader::new(c.0.stdout.take().unwrap());
    let mut passes = 0;
    let mut line = String::new();
    while passes < 6 {
        line.clear();
        assert!(r.read_line(&mut line).unwrap() > 0, "stdout ended early");
        if line.starts_with("pass ") {
            assert!(line.contains("fail-word 0x00000000 PASS"), "{line}");
            passes += 1;
        }
        assert!(!line.starts_with("end: "), "ended without a bound: {line}");
    }
    assert!(c.0.try_wait().unwrap().is_none(), "still decoding");
}

#[test]
fn live_metrics_serves_the_sessions_passes() {
    if !has_vulkan() {
        return;
    }
    let mut c = Kill(
        bin()
            .args(["live", "--metrics", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut err = BufReader::new(c.0.stderr.take().unwrap());
    let mut line = String::new();
    let addr = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "no metrics address");
        if let Some(rest) = line.trim().strip_prefix("live: metrics on http://") {
            break rest.trim_end_matches("/metrics").to_string();
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        // A server that stops answering fails the test rather than hanging it.
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).unwrap();
        // Summed over the mode and contention series (a pass's labels depend on the load).
        let passes: f64 = body
            .lines()
            .filter(|l| l.starts_with("baro_passes_total{"))
            .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
            .sum();
        if passes >= 2.0 {
            assert!(body.contains("stories260K"), "{body}");
            break;
        }
        assert!(Instant::now() < deadline, "no passes counted: {body}");
        std::thread::sleep(Duration::from_millis(500));
    }
}
