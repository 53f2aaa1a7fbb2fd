//! The endpoint: a deliberately small HTTP/1.1 server on std's `TcpListener`.
//!
//! Why not a crate: a scrape endpoint needs `GET` of two paths, one header read (`Accept`)
//! and a `Connection: close` response with a `Content-Length`. That is ~150 lines that are
//! easy to bound completely (head size, read/write timeouts, concurrent connections), with
//! no new dependency to build on a shared 2-core machine and no async runtime beside the
//! engine's threads.
//!
//! It must never block the telemetry consumer: a scrape locks the aggregator only to clone
//! it (a few KiB of fixed arrays) and renders the clone outside the lock.
//!
//! Slow clients cannot starve the others (slowloris): the whole request head must arrive
//! within [`HEAD_DEADLINE`] of the connection (not a timeout per read, which one byte every
//! few seconds resets), and when every slot is taken a new connection evicts the oldest one
//! still sending its head instead of being turned away (a scraper sends its head in one
//! packet, so only a slow client is ever that old).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Context;
use baro_telemetry::Telemetry;
use crossbeam_channel::{Receiver, RecvTimeoutError};

use super::aggregate::Aggregator;
use super::catalog::CATALOG;
use super::expose::{render, Format};

/// Largest request head read (request line + headers).
const MAX_HEAD: usize = 8 * 1024;
/// Connections served at once; a new one past this evicts the oldest still sending its
/// head, and gets a 503 only where none is (every slot answering a request).
pub const MAX_CONNECTIONS: usize = 64;
/// Write timeout of a connection.
const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// The whole request head must have arrived this long after the connection was accepted.
pub const HEAD_DEADLINE: Duration = Duration::from_secs(2);
/// How long a connection refused for its head's size is read on (and dropped) after the
/// answer, and how many bytes at most.
const LINGER: Duration = Duration::from_secs(2);
const LINGER_BYTES: usize = 4 << 20;
/// How often the accept and consumer loops look at the stop flag.
const POLL: Duration = Duration::from_millis(50);

/// Shared between the consumer, the accept loop and the connections.
struct Shared {
    agg: Mutex<Aggregator>,
    epoch: Instant,
    stop: AtomicBool,
    active: AtomicUsize,
    /// Connections still sending their request head: (id, accepted at, a handle to shut
    /// it down).
    heads: Mutex<Vec<(u64, Instant, TcpStream)>>,
    next_id: std::sync::atomic::AtomicU64,
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    fn snapshot(&self) -> Aggregator {
        self.agg.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn heads(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Instant, TcpStream)>> {
        self.heads.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shut down the connection that has been sending its head the longest; whether there
    /// was one.
    fn evict_slowest(&self) -> bool {
        let mut heads = self.heads();
        let Some(i) = (0..heads.len()).min_by_key(|&i| heads[i].1) else {
            return false;
        };
        let (_, _, s) = heads.swap_remove(i);
        let _ = s.shutdown(std::net::Shutdown::Both);
        true
    }
}

/// A running endpoint; stops (and joins its threads) on [`MetricsServer::shutdown`] or drop.
pub struct MetricsServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

/// Serve `/metrics` on `addr` (port 0: any free port; see [`MetricsServer::local_addr`]),
/// fed by `rx`. Binding errors (an address in use, one not on this host) are returned with
/// the address in the message.
pub fn serve(addr: SocketAddr, rx: Receiver<Telemetry>) -> anyhow::Result<MetricsServer> {
    let listener = TcpListener::bind(addr).map_err(|e| {
        let hint = match e.kind() {
            std::io::ErrorKind::AddrInUse => " (another exporter on that port?)",
            std::io::ErrorKind::AddrNotAvailable => {
                " (no interface of this host has that address: 127.0.0.1 or 0.0.0.0 listen here)"
            }
            std::io::ErrorKind::PermissionDenied => " (ports below 1024 need privileges)",
            _ => "",
        };
        anyhow::Error::new(e).context(format!("cannot listen on {addr} for --metrics{hint}"))
    })?;
    let addr = listener.local_addr().context("reading the bound address")?;
    listener
        .set_nonblocking(true)
        .context("setting the listener non-blocking")?;
    let shared = Arc::new(Shared {
        agg: Mutex::new(Aggregator::new()),
        epoch: Instant::now(),
        stop: AtomicBool::new(false),
        active: AtomicUsize::new(0),
        heads: Mutex::new(vec![]),
        next_id: std::sync::atomic::AtomicU64::new(0),
    });
    let consumer = {
        let sh = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("metrics-ingest".into())
            .spawn(move || consume(&sh, &rx))
            .context("starting the metrics consumer thread")?
    };
    let acceptor = {
        let sh = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("metrics-http".into())
            .spawn(move || accept_loop(&sh, &listener))
            .context("starting the metrics HTTP thread")?
    };
    Ok(MetricsServer {
        addr,
        shared,
        threads: vec![consumer, acceptor],
    })
}

impl MetricsServer {
    /// The address actually bound.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stop accepting and consuming, and join both threads (connections in flight finish on
    /// their own, bounded by the I/O timeout).
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn consume(sh: &Shared, rx: &Receiver<Telemetry>) {
    while !sh.stop.load(Ordering::Relaxed) {
        match rx.recv_timeout(POLL) {
            Ok(msg) => {
                let now = sh.now_ns();
                sh.agg
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .ingest(&msg, now);
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                sh.agg.lock().unwrap_or_else(|e| e.into_inner()).closed();
                return;
            }
        }
    }
}

fn accept_loop(sh: &Arc<Shared>, listener: &TcpListener) {
    while !sh.stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                // Full: a connection still sending its head makes room (the evicted thread
                // ends within moments, so at most twice the slots are ever in use).
                let n = sh.active.fetch_add(1, Ordering::SeqCst);
                if n >= MAX_CONNECTIONS && (n >= 2 * MAX_CONNECTIONS || !sh.evict_slowest()) {
                    sh.active.fetch_sub(1, Ordering::SeqCst);
                    let _ = stream.set_write_timeout(Some(Duration::from_millis(500)));
                    let _ = respond(stream, 503, "text/plain; charset=utf-8", b"busy\n", false);
                    continue;
                }
                let conn = Arc::clone(sh);
                let spawned = std::thread::Builder::new()
                    .name("metrics-conn".into())
                    .spawn(move || {
                        let _ = handle(&conn, stream);
                        conn.active.fetch_sub(1, Ordering::SeqCst);
                    });
                if spawned.is_err() {
                    sh.active.fetch_sub(1, Ordering::SeqCst);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => std::thread::sleep(POLL),
            // A connection that failed before we took it (reset, out of fds): keep serving.
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

/// A parsed request head: what routing needs.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `HEAD`, …
    pub method: String,
    /// The path without its query.
    pub path: String,
    /// The `Accept` header, if any.
    pub accept: Option<String>,
}

/// Parse a request head (up to and excluding the blank line); `None` when malformed. Lines
/// end in CRLF or a bare LF (RFC 9112 §2.2 lets a server take a bare LF: `printf 'GET
/// /metrics HTTP/1.0\n\n' | nc` is a common check). The target may be in origin form
/// (`/metrics`) or absolute form (`http://host:port/metrics`, which §3.2.2 says a server
/// must accept).
pub fn parse_head(head: &str) -> Option<Request> {
    let mut lines = head.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
    let mut first = lines.next()?.split(' ');
    let (method, target, version) = (first.next()?, first.next()?, first.next()?);
    if first.next().is_some() || !version.starts_with("HTTP/1.") || method.is_empty() {
        return None;
    }
    let target = match ["http://", "https://"].iter().find_map(|scheme| {
        target
            .get(..scheme.len())
            .filter(|p| p.eq_ignore_ascii_case(scheme))
            .map(|p| &target[p.len()..])
    }) {
        // The authority ends at the path, the query or the end (then the path is `/`).
        Some(rest) => match rest.find(['/', '?', '#']) {
            Some(i) if rest[i..].starts_with('/') => &rest[i..],
            _ => "/",
        },
        None => target,
    };
    let path = target.split(['?', '#']).next().unwrap_or("").to_string();
    let mut accept = None;
    for l in lines.filter(|l| !l.is_empty()) {
        let (k, v) = l.split_once(':')?;
        if k.trim().eq_ignore_ascii_case("accept") {
            accept = Some(v.trim().to_string());
        }
    }
    Some(Request {
        method: method.to_string(),
        path,
        accept,
    })
}

/// Where the head in `buf` ends: at its empty line, whether lines end in CRLF or a bare LF
/// (`\n\n`, `\n\r\n`): the offset of the line break before the empty line.
fn head_end(buf: &[u8]) -> Option<usize> {
    (0..buf.len()).find(|&j| {
        buf[j] == b'\n'
            && (buf.get(j + 1) == Some(&b'\n')
                || (buf.get(j + 1) == Some(&b'\r') && buf.get(j + 2) == Some(&b'\n')))
    })
}

/// What arrived as a request head.
enum Head {
    /// The head, up to its empty line.
    Complete(String),
    /// Not UTF-8, or the connection closed before the empty line.
    Malformed,
    /// The head runs past [`MAX_HEAD`] bytes (to the line break before its empty line).
    TooLarge,
}

/// The request head, which must be complete by `deadline`: `Err(TimedOut)` after it.
fn read_head(stream: &mut TcpStream, deadline: Instant) -> io::Result<Head> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    // Where the search for the empty line goes on (the 2 bytes before may start it).
    let mut searched = 0;
    loop {
        if let Some(end) = head_end(&buf[searched..]) {
            if searched + end > MAX_HEAD {
                return Ok(Head::TooLarge);
            }
            buf.truncate(searched + end);
            return Ok(String::from_utf8(buf).map_or(Head::Malformed, Head::Complete));
        }
        searched = buf.len().saturating_sub(2);
        // Past this, any empty line still to come ends the head after MAX_HEAD bytes (the
        // line break before it starts at most 2 bytes before the buffer's end): the verdict
        // does not depend on how the bytes were split into reads.
        if buf.len() > MAX_HEAD + 2 {
            return Ok(Head::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        let n = match stream.read(&mut chunk) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                return Err(io::ErrorKind::TimedOut.into())
            }
            r => r?,
        };
        if n == 0 {
            return Ok(Head::Malformed);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// The `/` page: a pointer to `/metrics` and the catalog (escaped for HTML).
fn index_page() -> String {
    let esc = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut s = String::from(
        "<!doctype html>\n<html><head><title>baro-top metrics</title></head><body>\n\
         <h1>baro-top</h1>\n<p>Prometheus / OpenMetrics exposition: \
         <a href=\"/metrics\">/metrics</a></p>\n<ul>\n",
    );
    for m in CATALOG {
        let labels = if m.labels.is_empty() {
            String::new()
        } else {
            format!(" {{{}}}", m.labels)
        };
        s += &format!(
            "<li><code>{}{}</code> ({}): {}</li>\n",
            m.name,
            esc(&labels),
            m.kind.openmetrics(),
            esc(m.help)
        );
    }
    s + "</ul>\n</body></html>\n"
}

fn handle(sh: &Shared, mut stream: TcpStream) -> io::Result<()> {
    let deadline = Instant::now() + HEAD_DEADLINE;
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    let id = sh.next_id.fetch_add(1, Ordering::Relaxed);
    let accepted = Instant::now();
    if let Ok(handle) = stream.try_clone() {
        sh.heads().push((id, accepted, handle));
    }
    let head = read_head(&mut stream, deadline);
    sh.heads().retain(|h| h.0 != id);
    let head = match head {
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            return respond(
                stream,
                408,
                "text/plain; charset=utf-8",
                b"request head not complete in time\n",
                false,
            )
        }
        Ok(Head::TooLarge) => {
            respond(
                stream.try_clone()?,
                431,
                "text/plain; charset=utf-8",
                format!("request head larger than {MAX_HEAD} bytes\n").as_bytes(),
                false,
            )?;
            // The rest of the head is still arriving: closing on unread bytes would reset
            // the connection, and the client could lose the answer before reading it. It
            // lingers as a head still arriving: a new connection may evict it.
            if let Ok(handle) = stream.try_clone() {
                sh.heads().push((id, accepted, handle));
            }
            linger(stream);
            sh.heads().retain(|h| h.0 != id);
            return Ok(());
        }
        Ok(Head::Complete(head)) => Some(head),
        Ok(Head::Malformed) => None,
        Err(e) => return Err(e),
    };
    let Some(req) = head.as_deref().and_then(parse_head) else {
        return respond(
            stream,
            400,
            "text/plain; charset=utf-8",
            b"bad request\n",
            false,
        );
    };
    let head_only = req.method == "HEAD";
    if req.method != "GET" && !head_only {
        return respond(
            stream,
            405,
            "text/plain; charset=utf-8",
            b"only GET and HEAD\n",
            false,
        );
    }
    match req.path.as_str() {
        "/metrics" => {
            let format = Format::negotiate(req.accept.as_deref());
            let now = sh.now_ns();
            let body = render(&sh.snapshot(), now, format);
            respond(
                stream,
                200,
                format.content_type(),
                body.as_bytes(),
                head_only,
            )
        }
        "/" => respond(
            stream,
            200,
            "text/html; charset=utf-8",
            index_page().as_bytes(),
            head_only,
        ),
        _ => respond(
            stream,
            404,
            "text/plain; charset=utf-8",
            b"not found: try /metrics\n",
            head_only,
        ),
    }
}

/// Read and drop what the client still sends, until it closes, [`LINGER`] has passed or
/// [`LINGER_BYTES`] were dropped: the answer already written reaches it before the close.
fn linger(mut stream: TcpStream) {
    let until = Instant::now() + LINGER;
    let mut chunk = [0u8; 16 * 1024];
    let mut dropped = 0;
    while dropped < LINGER_BYTES {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
            return;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => dropped += n,
        }
    }
}

fn respond(
    mut stream: TcpStream,
    code: u16,
    content_type: &str,
    body: &[u8],
    head_only: bool,
) -> io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        431 => "Request Header Fields Too Large",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        _ => "Service Unavailable",
    };
    let mut head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if code == 405 {
        head += "Allow: GET, HEAD\r\n";
    }
    head += "\r\n";
    stream.write_all(head.as_bytes())?;
    if !head_only {
        stream.write_all(body)?;
    }
    stream.flush()?;
    let _ = stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}
