//! The metrics endpoint over a real socket: routing, methods, request heads, the bind error,
//! and promtool's check of what it serves.

use super::*;

#[path = "../../../tests/exporter_probe/mod.rs"]
mod exporter_probe;
use exporter_probe::{answers_as_an_exporter, tool};

/// `(status, head, body)` of one HTTP request.
fn http(addr: SocketAddr, request: &str) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    let (head, body) = resp.split_once("\r\n\r\n").unwrap_or((&resp, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

fn get(addr: SocketAddr, path: &str, accept: &str) -> (u16, String, String) {
    http(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: x\r\nAccept: {accept}\r\n\r\n"),
    )
}

#[test]
fn endpoint_serves_metrics_an_index_and_404_and_refuses_other_methods() {
    let (tx, rx) = crossbeam_channel::bounded(64);
    let server = super::super::serve("127.0.0.1:0".parse().unwrap(), rx).unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);
    for m in small_stream() {
        tx.send(m).unwrap();
    }
    // The consumer thread ingests asynchronously: wait (bounded) until the passes show.
    let deadline = Instant::now() + Duration::from_secs(20);
    let body = loop {
        let (status, head, body) = get(addr, "/metrics", "*/*");
        assert_eq!(status, 200, "{head}");
        assert!(
            head.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"),
            "{head}"
        );
        if body.contains("baro_passes_total{") {
            break body;
        }
        assert!(Instant::now() < deadline, "no passes after 20 s:\n{body}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(value(&body, "baro_up", ""), "1");

    let (status, head, body) = get(
        addr,
        "/metrics",
        "application/openmetrics-text;version=1.0.0",
    );
    assert_eq!(status, 200);
    assert!(head.contains("Content-Type: application/openmetrics-text; version=1.0.0"));
    assert!(body.ends_with("# EOF\n"));
    let (status, head, body) = get(addr, "/", "*/*");
    assert_eq!(status, 200);
    assert!(
        head.contains("text/html") && body.contains("/metrics"),
        "{body}"
    );
    let (status, head, body) = http(addr, "HEAD /metrics HTTP/1.1\r\n\r\n");
    assert_eq!((status, body.as_str()), (200, ""), "{head}");
    assert_eq!(get(addr, "/nope", "*/*").0, 404);
    let (status, head, _) = http(addr, "POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(status, 405);
    assert!(head.contains("Allow: GET, HEAD"), "{head}");
    assert_eq!(http(addr, "garbage\r\n\r\n").0, 400);

    // The producer goes away: up drops to 0, the endpoint keeps serving the last values.
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(20);
    while value(&get(addr, "/metrics", "*/*").2, "baro_up", "") != "0" {
        assert!(Instant::now() < deadline, "baro_up stayed 1");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        answers_as_an_exporter(addr, Duration::from_secs(30)),
        "the probe must see a live server"
    );
    let t = Instant::now();
    server.shutdown();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    assert!(
        !answers_as_an_exporter(addr, Duration::from_secs(30)),
        "still serving metrics on {addr} after shutdown"
    );
}

/// A head whose lines end in a bare LF (`printf 'GET /metrics HTTP/1.0\n\n' | nc`) is answered
/// at once (was: held to the 2 s head deadline, then 408 "not complete in time"), and an
/// absolute-form target (`GET http://host/metrics`, RFC 9112 §3.2.2) is routed by its path
/// (was: 404).
#[test]
fn a_head_with_bare_lf_line_ends_or_an_absolute_target_is_served_at_once() {
    let (_tx, rx) = crossbeam_channel::bounded::<Telemetry>(1);
    let server = super::super::serve("127.0.0.1:0".parse().unwrap(), rx).unwrap();
    let addr = server.local_addr();
    for (request, want) in [
        ("GET /metrics HTTP/1.0\n\n", "baro_up"),
        ("GET /metrics HTTP/1.1\nHost: x\nAccept: */*\n\n", "baro_up"),
        ("GET /metrics HTTP/1.1\r\nHost: x\n\r\n", "baro_up"),
        (
            &format!("GET http://{addr}/metrics?x=1 HTTP/1.1\r\n\r\n"),
            "baro_up",
        ),
        ("GET HTTP://x HTTP/1.1\r\n\r\n", "/metrics"),
    ] {
        let t = Instant::now();
        let (status, head, body) = http(addr, request);
        assert_eq!(status, 200, "{request:?}: {head}");
        assert!(body.contains(want), "{request:?}: {body}");
        assert!(
            t.elapsed() < super::super::http::HEAD_DEADLINE,
            "{request:?}: {:?}",
            t.elapsed()
        );
    }
    let r = parse_head("GET /metrics HTTP/1.1\nAccept: text/plain\n").unwrap();
    assert_eq!(r.accept.as_deref(), Some("text/plain"));
    // A CR alone is no line end: the head is one malformed request line.
    assert_eq!(parse_head("GET / HTTP/1.1\rAccept: x"), None);
}

/// A head past the 8 KiB cap gets 431 (was: 400 "bad request", as for garbage), also by a
/// client still sending 1 MiB of it, and a head just under the cap is served. (The server
/// reads on and drops the rest before it closes, as RFC 9112 §9.6 asks, so a reset cannot
/// overtake the answer on a real network; on loopback the answer arrived either way.)
#[test]
fn a_head_past_the_cap_gets_431_even_while_the_client_is_still_sending_it() {
    let (_tx, rx) = crossbeam_channel::bounded::<Telemetry>(1);
    let server = super::super::serve("127.0.0.1:0".parse().unwrap(), rx).unwrap();
    let addr = server.local_addr();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = s.try_clone().unwrap();
    let sender = std::thread::spawn(move || {
        let mut head = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
        head.resize(1 << 20, b'a');
        // The server may close first: what it answered is read below either way.
        let _ = w.write_all(&head);
    });
    let mut resp = String::new();
    s.read_to_string(&mut resp).unwrap();
    sender.join().unwrap();
    assert!(resp.starts_with("HTTP/1.1 431 "), "{resp:?}");
    assert!(resp.contains("larger than 8192 bytes"), "{resp}");

    let mut big = "GET /metrics HTTP/1.1\r\nX-Pad: ".to_string();
    big.push_str(&"b".repeat(8000 - big.len()));
    big.push_str("\r\n\r\n");
    assert_eq!(http(addr, &big).0, 200);
    let mut past = "GET /metrics HTTP/1.1\r\nX-Pad: ".to_string();
    past.push_str(&"c".repeat(9000));
    past.push_str("\r\n\r\n");
    assert_eq!(http(addr, &past).0, 431);
}

/// Whether a head at the cap is served does not depend on how it was split into reads: its
/// last line break at byte 8192 is served, at 8193 refused, in one packet or two (split
/// around the empty line, with a pause between).
#[test]
fn a_head_at_the_cap_gets_the_same_answer_however_it_is_split() {
    let (_tx, rx) = crossbeam_channel::bounded::<Telemetry>(1);
    let server = super::super::serve("127.0.0.1:0".parse().unwrap(), rx).unwrap();
    let addr = server.local_addr();
    for (end, want) in [(8192usize, 200u16), (8193, 431)] {
        // The line break before the empty line at byte `end`.
        let mut req = "GET /metrics HTTP/1.1\r\nX-Pad: ".to_string();
        req.push_str(&"p".repeat(end - 1 - req.len()));
        req.push_str("\r\n\r\n");
        assert_eq!(req.as_bytes()[end], b'\n');
        for split in [None, Some(end - 1), Some(end), Some(end + 1), Some(end + 2)] {
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            match split {
                None => s.write_all(req.as_bytes()).unwrap(),
                Some(k) => {
                    s.write_all(&req.as_bytes()[..k]).unwrap();
                    std::thread::sleep(Duration::from_millis(60));
                    let _ = s.write_all(&req.as_bytes()[k..]);
                }
            }
            let mut resp = String::new();
            let _ = s.read_to_string(&mut resp);
            let status: u16 = resp
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            assert_eq!(status, want, "line break at {end}, split at {split:?}");
        }
    }
}

/// Connections refused for their head's size and still open (lingering) can be evicted
/// like slow heads: a scrape behind more of them than there are slots is served, not
/// answered 503 until they time out.
#[test]
fn lingering_refused_connections_make_room_for_a_scrape() {
    let (_tx, rx) = crossbeam_channel::bounded::<Telemetry>(1);
    let server = super::super::serve("127.0.0.1:0".parse().unwrap(), rx).unwrap();
    let addr = server.local_addr();
    let mut held = vec![];
    for _ in 0..super::super::http::MAX_CONNECTIONS + 6 {
        let mut s = TcpStream::connect(addr).unwrap();
        let mut req = b"GET /metrics HTTP/1.1\r\nX-Pad: ".to_vec();
        req.resize(9000, b'q');
        s.write_all(&req).unwrap();
        held.push(s);
    }
    std::thread::sleep(Duration::from_millis(200));
    let t = Instant::now();
    let (status, head, _) = get(addr, "/metrics", "*/*");
    assert_eq!(status, 200, "{head}");
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    drop(held);
}

#[test]
fn binding_an_address_in_use_is_an_error_that_names_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let (_tx, rx) = crossbeam_channel::bounded(1);
    let Err(e) = super::super::serve(addr, rx) else {
        panic!("bound {addr} twice");
    };
    let msg = format!("{e:#}");
    assert!(
        msg.contains(&addr.to_string())
            && msg.contains("in use")
            && msg.contains("another exporter"),
        "{msg}"
    );
    // An address no interface has (TEST-NET-1, RFC 5737) gets its own hint, not that one.
    let (_tx, rx) = crossbeam_channel::bounded(1);
    let Err(e) = super::super::serve("192.0.2.1:0".parse().unwrap(), rx) else {
        panic!("bound 192.0.2.1");
    };
    let msg = format!("{e:#}");
    assert!(
        msg.contains("192.0.2.1:0")
            && msg.contains("no interface")
            && !msg.contains("another exporter"),
        "{msg}"
    );
}

#[test]
fn promtool_check_metrics_accepts_the_exposition() {
    let Some(promtool) = tool("promtool") else {
        return;
    };
    let t = exposition(Format::Prometheus);
    let mut child = std::process::Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(t.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool: {said}\n{t}"
    );
}
