//! A real Prometheus scrapes `baro-top serve` decoding stories260K on the first Vulkan device
//! (lavapipe in CI) on loopback, and its HTTP API finds the series; `promtool check metrics`
//! accepts the live exposition.
//!
//! Needs `prometheus` and `promtool` (Debian's `prometheus` package; scripts/test.sh installs
//! it). Missing, they fail the test in CI (CI=true) and by default; outside CI,
//! BARO_SKIP_PROMETHEUS=1 turns that into a printed skip.

#![allow(clippy::unwrap_used)]

mod exporter_probe;
use exporter_probe::tool;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Kills the child on drop.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let p = std::env::temp_dir().join(format!("baro-prom-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A port that was free a moment ago (bound to :0, then released). Another process can take
/// it before Prometheus binds it: [`start_prometheus`] then tries another.
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind :0");
    l.local_addr().expect("addr").port()
}

/// Start Prometheus with `config`, storage and log in `dir`, on a free loopback port, and wait
/// until it is ready. The port comes from [`free_port`], so it can be taken by someone else
/// (another test's listener, an outgoing connection's local port) between the probe and
/// Prometheus's bind: Prometheus then exits saying so, and another port is tried.
fn start_prometheus(prometheus: &Path, config: &Path, dir: &Path) -> (Guard, SocketAddr, PathBuf) {
    for attempt in 0..5 {
        let prom: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
        let log = dir.join(format!("prometheus-{attempt}.log"));
        let log_file = std::fs::File::create(&log).unwrap();
        let mut guard = Guard(
            Command::new(prometheus)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.join(format!("data-{attempt}")).display()
                ))
                .arg(format!("--web.listen-address={prom}"))
                .stdout(log_file.try_clone().unwrap())
                .stderr(log_file)
                .spawn()
                .expect("prometheus runs"),
        );
        // Prometheus starts in well under a second on an idle machine; the bound is for a
        // loaded 2-core one, where serve's decode keeps both cores busy.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if matches!(get(prom, "/-/ready"), Ok((200, _))) {
                return (guard, prom, log);
            }
            if let Some(status) = guard.0.try_wait().unwrap() {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                if said.contains("address already in use") {
                    break;
                }
                panic!("prometheus exited ({status}) before it was ready:\n{said}");
            }
            if Instant::now() > deadline {
                let said = std::fs::read_to_string(&log).unwrap_or_default();
                panic!("prometheus ready: not within 120 s; prometheus said:\n{said}");
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        eprintln!(
            "port {} was taken before prometheus bound it: another port",
            prom.port()
        );
    }
    panic!("five free ports in a row were taken before prometheus could bind them");
}

/// `(status, body)` of `GET path` over HTTP/1.0 (no chunking, the server closes). The read
/// timeout only turns a server that never answers into an error; it is generous because some
/// of the queries below are asked once, on a machine whose cores serve's decode keeps busy.
fn get(addr: SocketAddr, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut resp = String::new();
    s.read_to_string(&mut resp)?;
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Ok((status, body.to_string()))
}

fn urlencode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The instant-vector result of a PromQL query (empty on any error: the caller retries).
fn query(prom: SocketAddr, q: &str) -> Vec<Value> {
    let Ok((200, body)) = get(prom, &format!("/api/v1/query?query={}", urlencode(q))) else {
        return vec![];
    };
    let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

fn wait_for<T>(what: &str, limit: Duration, log: &Path, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(t) = f() {
            return t;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(log).unwrap_or_default();
            panic!("{what}: not within {limit:?}; prometheus said:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn start_serve() -> (Guard, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(["serve", "--metrics", "127.0.0.1:0", "--device", "0"])
        .env("LP_NUM_THREADS", "2")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baro-top runs");
    let stderr = child.stderr.take().expect("stderr piped");
    let guard = Guard(child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("serving metrics on http://").nth(1) {
                let _ = tx.send(rest.split('/').next().unwrap_or("").to_string());
            }
        }
    });
    // The decoder is built before the endpoint starts (seconds on lavapipe).
    let addr = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("serve printed its address within 120 s");
    (guard, addr.parse().expect("an address"))
}

#[test]
fn prometheus_scrapes_a_live_lavapipe_serve_finding_stage_histograms_tok_s_and_labels_and_promtool_accepts_it(
) {
    let (Some(prometheus), Some(promtool)) = (tool("prometheus"), tool("promtool")) else {
        return;
    };
    let (_serve, target) = start_serve();

    // The live exposition, once passes are in it, passes promtool's parser and linter.
    let deadline = Instant::now() + Duration::from_secs(120);
    let text = loop {
        let (status, text) = get(target, "/metrics").expect("GET /metrics");
        assert_eq!(status, 200);
        if text.contains("baro_stage_busy_seconds_bucket{") {
            break text;
        }
        assert!(Instant::now() < deadline, "no pass within 120 s:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut lint = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool runs");
    lint.stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = lint.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}\n{text}"
    );

    // A Prometheus on loopback, scraping every 2 s (a scrape may take over a second on a
    // loaded machine: 2 s is the timeout too), storage in a temp dir.
    let dir = TempDir::new();
    let config = dir.0.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 2s\n  scrape_timeout: 2s\n  evaluation_interval: 2s\n\
             scrape_configs:\n  - job_name: baro-top\n    static_configs:\n      - targets: [\"{target}\"]\n"
        ),
    )
    .unwrap();
    let (_prometheus, prom, log) = start_prometheus(&prometheus, &config, &dir.0);
    // The waits below return as soon as the series are there (seconds on an idle machine);
    // their bounds are for a loaded 2-core CI machine, where serve's decode, Prometheus and
    // the test share the cores.
    let passes = wait_for(
        "baro_passes_total in prometheus",
        Duration::from_secs(120),
        &log,
        || {
            let r = query(prom, "baro_passes_total");
            (!r.is_empty()).then_some(r)
        },
    );

    // The counter by its labels, from our job: every pass has a power mode and a
    // contention label (their values depend on the machine's load).
    let labels: Vec<&Value> = passes.iter().map(|s| &s["metric"]).collect();
    assert!(
        labels.iter().all(|m| m["job"] == "baro-top"
            && m["dispatch"] == "mega"
            && ["fast", "slow", "unknown"].contains(&m["mode"].as_str().unwrap_or(""))
            && !m["contention"].as_str().unwrap_or("").is_empty()),
        "{passes:?}"
    );
    // Per stage kind busy histograms of the real decode (every kind stories260K runs).
    let kinds = wait_for(
        "stage busy histograms in prometheus",
        Duration::from_secs(120),
        &log,
        || {
            let r = query(
                prom,
                r#"count by (stage_kind) (baro_stage_busy_seconds_bucket{le="+Inf"})"#,
            );
            let kinds: Vec<String> = r
                .iter()
                .filter_map(|s| s["metric"]["stage_kind"].as_str().map(String::from))
                .collect();
            ["q", "k", "v", "attn", "wo", "ffn_up", "ffn_down", "head"]
                .iter()
                .all(|k| kinds.iter().any(|x| x == k))
                .then_some(kinds)
        },
    );
    assert!(!kinds.is_empty());
    let tps = query(prom, "baro_tokens_per_second");
    let tok_s: f64 = tps
        .first()
        .and_then(|s| s["value"][1].as_str()?.parse().ok())
        .unwrap_or(0.0);
    assert!(tok_s > 0.0, "{tps:?}");
    let info = query(prom, "baro_info");
    assert_eq!(info.len(), 1, "{info:?}");
    assert_eq!(info[0]["metric"]["model"], "stories260K (embedded)");
    assert_eq!(info[0]["metric"]["dispatch"], "mega");
    let up = query(prom, "baro_up");
    assert_eq!(
        up.first().map(|s| &s["value"][1]),
        Some(&Value::from("1")),
        "{up:?}"
    );
    let fails = query(prom, "baro_failed_passes_total");
    // One series per known fail bit, plus "unknown".
    assert_eq!(
        fails.len(),
        baro_engine::telemetry::fail::bits::NAMES.len() + 1,
        "{fails:?}"
    );
    // The CPU sensor reads /proc everywhere (GPU clocks need NVML or AMD sysfs).
    let cpu = query(prom, "baro_cpu_busy_ratio");
    assert_eq!(cpu.len(), 1, "{cpu:?}");
    let spreads = query(prom, "baro_barrier_arrival_spread_seconds_count");
    assert!(!spreads.is_empty(), "{spreads:?}");

    // Prometheus chose OpenMetrics (it asks for it first): units only travel that way.
    let target_ok = wait_for("target health up", Duration::from_secs(60), &log, || {
        let (_, body) = get(prom, "/api/v1/targets").ok()?;
        let v: Value = serde_json::from_str(&body).ok()?;
        let t = v["data"]["activeTargets"].as_array()?.first()?.clone();
        (t["health"] == "up").then_some(t)
    });
    assert_eq!(target_ok["lastError"], "", "{target_ok:?}");
    let (_, meta) = get(prom, "/api/v1/metadata?metric=baro_stage_busy_seconds").expect("metadata");
    let meta: Value = serde_json::from_str(&meta).expect("metadata JSON");
    let m = &meta["data"]["baro_stage_busy_seconds"][0];
    assert_eq!(m["type"], "histogram", "{meta}");
    assert_eq!(m["unit"], "seconds", "{meta}");
}
