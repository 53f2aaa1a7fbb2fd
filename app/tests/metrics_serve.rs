//! `baro-top serve` as a user runs it: refusals with status 2, the endpoint on synthetic
//! telemetry and on a live lavapipe decode, a clean stop on SIGINT and SIGTERM, a scrape
//! answered while slow clients hold every slot, a slow request head cut at its deadline.

#![allow(clippy::unwrap_used)]

mod exporter_probe;
use exporter_probe::answers_as_an_exporter;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn baro(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .output()
        .expect("baro-top runs")
}

/// Kills the child on drop (a failed assertion must not leave a server running).
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `serve --metrics 127.0.0.1:0` with `extra` arguments; the address it printed, and
/// the rest of stderr.
fn start_serve(extra: &[&str]) -> (Guard, SocketAddr, mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(["serve", "--metrics", "127.0.0.1:0"])
        .args(extra)
        .env("LP_NUM_THREADS", "2")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baro-top runs");
    let stderr = child.stderr.take().expect("stderr piped");
    let guard = Guard(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // A live session builds its decoder first (seconds on lavapipe).
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx
            .recv_timeout(left)
            .expect("serve printed its address within 120 s");
        if let Some(rest) = line.split("serving metrics on http://").nth(1) {
            let addr = rest
                .split('/')
                .next()
                .unwrap_or("")
                .parse()
                .expect("an address");
            return (guard, addr, rx);
        }
    }
}

fn get(addr: SocketAddr, path: &str) -> (String, String) {
    let mut s = TcpStream::connect(addr).expect("connects");
    // The server answers at once and closes; the bound is only there so that a server that
    // never answers fails the test instead of hanging it, and is generous because a serve
    // decoding on lavapipe shares two loaded cores with the test.
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    (head.to_string(), body.to_string())
}

#[test]
fn serve_synthetic_refuses_engine_flags_with_status_2_naming_the_flag() {
    for (flag, value) in [("--model", "x.gguf"), ("--device", "0"), ("--temp", "0.5")] {
        let out = baro(&[
            "serve",
            "--metrics",
            "127.0.0.1:0",
            "--synthetic",
            flag,
            value,
        ]);
        assert_eq!(out.status.code(), Some(2), "{flag}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("{flag} is not honoured with --synthetic")),
            "{flag}: {err}"
        );
    }
}

/// Signal `guard`'s process and wait (20 s at most) for its exit status.
fn stop_with(guard: &mut Guard, signal: libc::c_int) -> std::process::ExitStatus {
    // SAFETY: kill(2) on our own child's pid.
    assert_eq!(unsafe { libc::kill(guard.0.id() as i32, signal) }, 0);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = guard.0.try_wait().unwrap() {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "still running 20 s after signal {signal}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Everything the child printed on stderr after `stop_with`: the reader thread forwards lines
/// until EOF, which can come after the exit status, so read until it hangs up (10 s at most)
/// rather than taking only what has already arrived.
fn rest_of_stderr(lines: &mpsc::Receiver<String>) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut said = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match lines.recv_timeout(left) {
            Ok(line) => said.push(line),
            Err(mpsc::RecvTimeoutError::Disconnected) => return said,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("stderr still open 10 s after the exit; so far: {said:?}")
            }
        }
    }
}

#[test]
fn serve_live_decodes_stories260k_into_stage_histograms_and_exits_0_on_sigterm() {
    let (mut guard, addr, lines) = start_serve(&["--device", "0"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let body = loop {
        let (head, body) = get(addr, "/metrics");
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        // Five passes in: the stage histograms of a real decode, not a synthetic run.
        if body.contains("baro_stage_busy_seconds_count{stage_kind=\"ffn_up\"")
            && body.contains("baro_passes_total{dispatch=\"mega\"")
            && body
                .lines()
                .filter(|l| l.starts_with("baro_passes_total{"))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
                >= 5.0
        {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "not 5 passes within 60 s:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(body.contains("model=\"stories260K (embedded)\""), "{body}");
    assert!(body.contains("device_kind=\"cpu\""), "{body}");
    assert!(body.contains("baro_tokens_per_second "), "{body}");
    let status = stop_with(&mut guard, libc::SIGTERM);
    assert_eq!(status.code(), Some(0));
    let said = rest_of_stderr(&lines);
    assert!(
        said.iter()
            .any(|l| l.contains("metrics endpoint stopped after") && l.contains("(stopped)")),
        "{said:?}"
    );
    assert!(
        !answers_as_an_exporter(addr, Duration::from_secs(2)),
        "still serving on {addr}"
    );
}

#[test]
fn serve_with_a_malformed_address_exits_2_naming_it() {
    let out = baro(&["serve", "--metrics", "localhost-ish:99999", "--synthetic"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("'localhost-ish:99999' is not IP:PORT"),
        "{err}"
    );
}

#[test]
fn serve_on_a_port_in_use_exits_2_naming_the_address() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = baro(&["serve", "--metrics", &addr, "--synthetic"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("cannot listen on {addr}")) && err.contains("in use"),
        "{err}"
    );
}

#[test]
fn serve_synthetic_exposes_passes_and_stops_cleanly_on_sigterm_and_sigint() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let (mut guard, addr, lines) = start_serve(&["--synthetic", "--rate", "50"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (head, body) = get(addr, "/metrics");
            assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
            if body.contains("baro_passes_total{dispatch=\"mega\"") {
                assert!(body.contains("baro_up 1"), "{body}");
                break;
            }
            assert!(Instant::now() < deadline, "no passes within 30 s:\n{body}");
            std::thread::sleep(Duration::from_millis(100));
        }
        let status = stop_with(&mut guard, signal);
        assert_eq!(status.code(), Some(0), "signal {signal}");
        let said = rest_of_stderr(&lines);
        assert!(
            said.iter()
                .any(|l| l.contains("metrics endpoint stopped after")),
            "{said:?}"
        );
        assert!(
            !answers_as_an_exporter(addr, Duration::from_secs(2)),
            "still serving on {addr}"
        );
    }
}

#[test]
fn record_metrics_serves_the_recorded_runs_passes_while_it_records() {
    let dir = std::env::temp_dir().join(format!("baro-rec-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("run.baro");
    let mut child = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(["record", "--device", "0", "--passes", "100000", "--metrics"])
        .arg("127.0.0.1:0")
        .arg("-o")
        .arg(&out)
        .env("LP_NUM_THREADS", "2")
        .env("BARO_TOP_LOCK_DIR", &dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baro-top runs");
    let stderr = child.stderr.take().unwrap();
    let guard = Guard(child);
    let mut lines = BufReader::new(stderr).lines().map_while(Result::ok);
    let addr: SocketAddr = lines
        .find_map(|l| {
            l.split("record: serving metrics on http://")
                .nth(1)
                .map(|r| r.trim_end_matches("/metrics").to_string())
        })
        .expect("record printed its metrics address")
        .parse()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (head, body) = get(addr, "/metrics");
        assert!(head.starts_with("HTTP/1.1 200 OK"), "{head}");
        let passes: f64 = body
            .lines()
            .filter(|l| l.starts_with("baro_passes_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        if passes >= 3.0 {
            assert!(body.contains("model=\"stories260K (embedded)\""), "{body}");
            assert!(
                body.contains("baro_stage_busy_seconds_count{stage_kind=\"q\""),
                "{body}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no 3 passes within 60 s:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn slow_clients_holding_every_slot_do_not_starve_a_scrape() {
    let (_guard, addr, _stderr) = start_serve(&["--synthetic"]);
    // 80 slowloris clients (more than the 64 slots), each trickling a byte every 500 ms and
    // reconnecting 50 ms after the server drops it.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let slow: Vec<_> = (0..80)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(50));
                    let Ok(mut c) = TcpStream::connect(addr) else {
                        continue;
                    };
                    for b in b"GET /metrics HTTP/1.1\r\nX-Slow: ".iter().cycle() {
                        if stop.load(std::sync::atomic::Ordering::Relaxed)
                            || c.write_all(&[*b]).is_err()
                        {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(500));
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(3));
    // Every scrape while they keep going is answered 200.
    for _ in 0..5 {
        let mut s = TcpStream::connect(addr).expect("connects");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        write!(s, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
        let mut resp = String::new();
        let _ = s.read_to_string(&mut resp);
        assert!(
            resp.starts_with("HTTP/1.1 200"),
            "a scrape among slow clients: {:?}",
            resp.lines().next()
        );
        std::thread::sleep(Duration::from_millis(700));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in slow {
        let _ = t.join();
    }
}

#[test]
fn a_slow_request_head_is_cut_at_the_whole_request_deadline() {
    let (_guard, addr, _stderr) = start_serve(&["--synthetic"]);
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let t = Instant::now();
    let mut resp = vec![];
    // One byte every 300 ms (each well inside any per-read timeout) until the server answers.
    for b in b"GET /metrics HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa".iter() {
        if c.write_all(&[*b]).is_err() {
            break;
        }
        let mut buf = [0u8; 256];
        if let Ok(n) = c.read(&mut buf) {
            resp.extend_from_slice(&buf[..n]);
            if n == 0 || !resp.is_empty() {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let took = t.elapsed();
    let resp = String::from_utf8_lossy(&resp);
    assert!(resp.starts_with("HTTP/1.1 408"), "{resp:?} after {took:?}");
    assert!(took < Duration::from_secs(10), "cut after {took:?}");
}
