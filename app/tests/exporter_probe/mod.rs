//! Shared by the metrics tests (app/tests and the unit tests in app/src/metrics, which include
//! this file by path): whether an address serves baro-top's metrics, and the Prometheus tools.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::Duration;

/// Whether something on `addr` answers `GET /metrics` with baro-top's families, waiting up to
/// `patience` to connect and to read the answer. A bare `connect` cannot tell: once the port
/// is free, a connect to it can meet itself (TCP simultaneous open, when the kernel picks the
/// same port as the source) or another test's fresh listener on a reused ephemeral port, and
/// both happened under CI load. A closed port is refused at once, so a generous `patience`
/// costs nothing there; it is what a live server on a loaded machine (it polls every 50 ms)
/// needs to accept and answer.
pub fn answers_as_an_exporter(addr: SocketAddr, patience: Duration) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(&addr, patience) else {
        return false;
    };
    if s.local_addr().ok() == s.peer_addr().ok() {
        return false;
    }
    let _ = s.set_read_timeout(Some(patience));
    if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut resp = String::new();
    let _ = s.read_to_string(&mut resp);
    resp.contains("baro_up")
}

/// A Prometheus tool (`prometheus`, `promtool`) on PATH. Missing: a failure in CI (CI=true)
/// and by default; a printed skip (`None`) only outside CI with BARO_SKIP_PROMETHEUS set.
pub fn tool(name: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    });
    if found.is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        if !ci && std::env::var_os("BARO_SKIP_PROMETHEUS").is_some() {
            eprintln!("skipped: {name} is not installed (BARO_SKIP_PROMETHEUS is set)");
            return None;
        }
        panic!("{name} is not installed: `apt-get install prometheus` (scripts/test.sh does)");
    }
    found
}
