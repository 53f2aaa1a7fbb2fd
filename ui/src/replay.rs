//! The replay producer: a recording (`.baro`, a file or embedded bytes) read on its own
//! thread and fed to the dashboard's telemetry channel at `--speed` (the recorded `wall_ns`
//! of each pass, divided by the speed; 0 = as fast as possible), steered through
//! [`Control`]: pause, resume, step, stop, plus what only a replay can do — seek to a pass,
//! jump to the slowest pass, restart. Its banner (`REPLAY of …`), position (pass k of N) and
//! notes (damage with its byte offset; requests a replay cannot honour, such as switching the
//! dispatch) reach the screen through [`Control::status`].
//!
//! A seek or restart sends `Start` again (the one in effect there), so the dashboard begins
//! afresh at the new place. A damaged recording replays every sound record: reading goes on
//! past each damaged stretch, and a note names the first's byte offset and counts them; a cut
//! one replays up to the cut.

use std::io::{Cursor, Read, Seek};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use baro_telemetry::control::Command;
use baro_telemetry::recording::{damage_note, Reader, RecordingHeader};
use baro_telemetry::{Dispatch, Telemetry};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use crate::action::{Control, ProducerStatus};

/// The longest pass a replay waits out at its speed: an hour, the most `--watchdog-ms` lets a
/// pass run before the device is abandoned, so no run records a longer one. A recording that
/// says otherwise (a damaged clock, a crafted file) is replayed without the wait, not paused
/// for years.
pub const MAX_PACED_PASS_NS: u64 = 3_600_000_000_000;

/// `wall_ns` as replay paces it: 0 for a pass longer than [`MAX_PACED_PASS_NS`].
pub fn paced_wall_ns(wall_ns: u64) -> u64 {
    if wall_ns > MAX_PACED_PASS_NS {
        0
    } else {
        wall_ns
    }
}

/// Where the recording's bytes are.
#[derive(Clone, Debug)]
pub enum Source {
    /// A file.
    File(PathBuf),
    /// Bytes in memory (the recording embedded in the binary).
    Bytes(&'static [u8]),
}

/// Anything a reader can read from.
pub trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

/// A reader over a [`Source`].
pub type SourceReader = Reader<Box<dyn ReadSeek>>;

impl Source {
    /// A fresh reader at the first message.
    pub fn open(&self) -> baro_telemetry::recording::Result<SourceReader> {
        let src: Box<dyn ReadSeek> = match self {
            // As `Reader::open`: 64 KiB (a search past damage reads heads far apart).
            Source::File(p) => Box::new(std::io::BufReader::with_capacity(
                64 << 10,
                baro_telemetry::input::open(p, "recording", u64::MAX)?.0,
            )),
            Source::Bytes(b) => Box::new(Cursor::new(*b)),
        };
        Reader::new(src)
    }
}

/// A replay.
#[derive(Clone, Debug)]
pub struct ReplayConfig {
    /// The recording.
    pub source: Source,
    /// How it is named in notes (a path).
    pub label: String,
    /// Speed relative to the recording; 0 = as fast as possible.
    pub speed: f64,
    /// At the end of the recording, keep the stream open (the dashboard can seek or
    /// restart); otherwise close it (headless lines end).
    pub hold_at_end: bool,
    /// Lines shown above everything in the dashboard (see [`banner`]).
    pub banner: Vec<String>,
}

/// Whether a recording holds generated telemetry (the synthetic producer's or
/// `baro_telemetry::synth`'s), not measurements.
pub fn is_synthetic(h: &RecordingHeader) -> bool {
    h.run.device == "synthetic" || h.host == "synthetic"
}

/// `REPLAY of LABEL (recorded on DEVICE, DATE, commit C)`; a synthetic recording's starts
/// `SYNTHETIC REPLAY of LABEL (generated telemetry, not measurements; …`, so the word is
/// the first thing read at any width.
pub fn banner(label: &str, h: &RecordingHeader) -> String {
    let (pre, what) = if is_synthetic(h) {
        ("SYNTHETIC ", "generated telemetry, not measurements; ")
    } else {
        ("", "")
    };
    format!(
        "{pre}REPLAY of {label} ({what}recorded on {}, {}, commit {})",
        h.run.device,
        date(h.created_unix_ms),
        if h.commit.is_empty() {
            "unknown"
        } else {
            &h.commit
        }
    )
}

/// `YYYY-MM-DD HH:MM UTC` of a Unix time in ms (`unknown date` for 0).
pub fn date(unix_ms: u64) -> String {
    if unix_ms == 0 {
        return "unknown date".into();
    }
    let c = baro_telemetry::clock::civil_utc(unix_ms / 1000);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        c.year, c.month, c.day, c.hour, c.minute
    )
}

/// [`Control`] for the replay thread.
#[derive(Clone, Debug)]
pub struct ReplayControl {
    tx: Sender<Command>,
    status: Arc<Mutex<ProducerStatus>>,
    dispatch: Dispatch,
}

impl Control for ReplayControl {
    fn send(&self, c: Command) {
        match c {
            Command::SetDispatch(_) => note(
                &self.status,
                format!(
                    "switching the dispatch (m) is not possible in a replay: the recording was \
                     made in {} mode; run baro-top live to switch",
                    self.dispatch
                ),
            ),
            c => {
                let _ = self.tx.try_send(c);
            }
        }
    }
    fn seekable(&self) -> bool {
        true
    }
    fn status(&self) -> Option<ProducerStatus> {
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let out = s.clone();
        s.notes.clear();
        Some(out)
    }
}

fn note(status: &Mutex<ProducerStatus>, text: String) {
    status
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .notes
        .push(text);
}

/// Open the recording (errors before any thread starts: a file that is not a recording) and
/// start the replay thread. Returns the stream, the control, the thread and the header.
pub fn spawn(
    cfg: ReplayConfig,
) -> anyhow::Result<(
    Receiver<Telemetry>,
    ReplayControl,
    JoinHandle<()>,
    RecordingHeader,
)> {
    let mut r = cfg.source.open()?;
    let header = r.header().clone();
    let total = r.ensure_index().ok().map(|i| i.len() as u64);
    let status = Arc::new(Mutex::new(ProducerStatus {
        banner: cfg.banner.clone(),
        total,
        position: Some(0),
        speed: cfg.speed,
        ..Default::default()
    }));
    let (tx, rx) = crossbeam_channel::bounded(256);
    let (ctx, crx) = crossbeam_channel::bounded(64);
    let ctl = ReplayControl {
        tx: ctx,
        status: status.clone(),
        dispatch: header.run.dispatch,
    };
    let run = header.run.clone();
    let h = std::thread::Builder::new()
        .name("baro-replay".into())
        .spawn(move || {
            Player {
                cfg,
                r,
                run,
                tx,
                cmds: crx,
                status,
                paused: false,
                steps: 0,
                force: false,
                clock: Instant::now(),
                slowest: None,
                first_damage: None,
            }
            .play()
        })?;
    Ok((rx, ctl, h, header))
}

/// The replay thread's state.
struct Player {
    cfg: ReplayConfig,
    r: SourceReader,
    run: baro_telemetry::RunDetails,
    tx: Sender<Telemetry>,
    cmds: Receiver<Command>,
    status: Arc<Mutex<ProducerStatus>>,
    paused: bool,
    steps: u32,
    /// Send the next frame at once, paused or not (after a seek: show where it landed).
    force: bool,
    /// When the last frame was due.
    clock: Instant,
    slowest: Option<Option<u64>>,
    /// The first damage iteration met (the note names it and counts the stretches).
    first_damage: Option<String>,
}

/// What the loop does next.
enum Next {
    Go,
    Quit,
}

impl Player {
    fn set(&self, f: impl FnOnce(&mut ProducerStatus)) {
        f(&mut self.status.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn play(mut self) {
        let mut pending: Option<Telemetry> = None;
        let mut at_end = false;
        loop {
            if pending.is_none() && !at_end {
                match self.r.next() {
                    Some(Ok(m)) => pending = Some(m),
                    // Reading goes on from the next sound record: the first damage is noted
                    // at once, the rest counted in one note at the end (the log is capped).
                    Some(Err(e)) => {
                        if self.first_damage.is_none() {
                            note(
                                &self.status,
                                format!(
                                    "{}: damage {e}; replaying on from the next sound record",
                                    self.cfg.label
                                ),
                            );
                            self.first_damage = Some(e.to_string());
                        }
                        // On to the next sound record (every error moves the reader on).
                        continue;
                    }
                    None => {
                        if let Some(first) = &self.first_damage {
                            note(
                                &self.status,
                                format!(
                                    "{}: {}",
                                    self.cfg.label,
                                    damage_note(first, self.r.skips(), "replayed")
                                ),
                            );
                        } else if !self.r.finished() {
                            note(
                                &self.status,
                                format!(
                                    "{}: the recording has no index footer (the recorder did not finish); every complete message was replayed",
                                    self.cfg.label
                                ),
                            );
                        }
                        at_end = true;
                    }
                }
                if at_end {
                    self.set(|s| {
                        if s.total.is_none() {
                            s.total = s.position;
                        }
                    });
                    if !self.cfg.hold_at_end {
                        return;
                    }
                }
            }
            // Wait for what the next message needs (its due time, a step, a resume).
            let frame_wall = match &pending {
                Some(Telemetry::Frame(f)) => Some(f.wall_ns),
                _ => None,
            };
            let wait = match (&pending, frame_wall) {
                (None, _) => None,
                (Some(_), Some(_)) if self.force => Some(Duration::ZERO),
                (Some(_), Some(_)) if self.paused && self.steps == 0 => None,
                (Some(_), Some(_)) if self.paused => Some(Duration::ZERO),
                (Some(_), Some(w)) => Some(self.due(w).saturating_duration_since(Instant::now())),
                (Some(_), None) => Some(Duration::ZERO),
            };
            let cmd = match wait {
                None => self.cmds.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) if d.is_zero() => self.cmds.try_recv().map_err(|e| match e {
                    crossbeam_channel::TryRecvError::Empty => RecvTimeoutError::Timeout,
                    crossbeam_channel::TryRecvError::Disconnected => RecvTimeoutError::Disconnected,
                }),
                Some(d) => self.cmds.recv_timeout(d),
            };
            match cmd {
                Ok(c) => {
                    match self.command(c, &mut pending, &mut at_end) {
                        Next::Go => {}
                        Next::Quit => return,
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) if wait.is_none() => return,
                Err(_) => {}
            }
            let Some(msg) = pending.take() else {
                continue;
            };
            if let Some(w) = frame_wall {
                let due = self.due(w);
                self.clock = if self.force || self.paused {
                    Instant::now()
                } else {
                    due.max(Instant::now() - Duration::from_millis(100))
                };
                if self.paused && !self.force {
                    self.steps = self.steps.saturating_sub(1);
                }
                self.force = false;
                if let Telemetry::Frame(f) = &msg {
                    let pass = f.pass;
                    self.set(|s| {
                        s.pass = Some(pass);
                        s.position = Some(s.position.unwrap_or(0) + 1);
                    });
                }
            }
            if self.tx.send(msg).is_err() {
                return;
            }
        }
    }

    /// When a frame whose pass took `wall_ns` is due (a pass longer than any run records,
    /// [`MAX_PACED_PASS_NS`], is not waited out).
    fn due(&self, wall_ns: u64) -> Instant {
        if self.cfg.speed > 0.0 {
            let wall_ns = paced_wall_ns(wall_ns);
            self.clock + Duration::from_nanos((wall_ns as f64 / self.cfg.speed) as u64)
        } else {
            self.clock
        }
    }

    fn command(&mut self, c: Command, pending: &mut Option<Telemetry>, at_end: &mut bool) -> Next {
        match c {
            Command::Pause => self.paused = true,
            Command::Resume => {
                self.paused = false;
                self.steps = 0;
                self.clock = Instant::now();
            }
            Command::Step => {
                self.paused = true;
                self.steps = self.steps.saturating_add(1);
            }
            Command::Stop => return Next::Quit,
            // Answered by ReplayControl::send: a recording keeps its dispatch.
            Command::SetDispatch(_) => {}
            Command::Restart => match self.cfg.source.open() {
                Ok(r) => {
                    self.r = r;
                    *pending = None;
                    *at_end = false;
                    self.clock = Instant::now();
                    self.set(|s| {
                        s.position = Some(0);
                        s.pass = None;
                    });
                    note(&self.status, format!("{}: restarted", self.cfg.label));
                }
                Err(e) => note(&self.status, format!("cannot restart: {e}")),
            },
            Command::Seek(pass) => return self.seek(pass, pending, at_end),
            Command::SeekSlowest => {
                if self.slowest.is_none() {
                    self.slowest = Some(self.find_slowest());
                }
                match self.slowest.flatten() {
                    Some(p) => {
                        note(&self.status, format!("jumping to the slowest pass, {p}"));
                        return self.seek(p, pending, at_end);
                    }
                    None => note(&self.status, "the recording has no passes".into()),
                }
            }
        }
        Next::Go
    }

    /// The pass with the longest time (GPU, else wall) of every sound frame.
    fn find_slowest(&self) -> Option<u64> {
        let r = self.cfg.source.open().ok()?;
        let mut best: Option<(u64, u64)> = None;
        for m in r {
            let Ok(Telemetry::Frame(f)) = m else {
                continue;
            };
            let d = f.gpu_ns.unwrap_or(f.wall_ns);
            if best.is_none_or(|(_, b)| d > b) {
                best = Some((f.pass, d));
            }
        }
        best.map(|b| b.0)
    }

    /// Continue from `pass`: `Start` again, that frame at once, then on at the speed.
    fn seek(&mut self, pass: u64, pending: &mut Option<Telemetry>, at_end: &mut bool) -> Next {
        let found = match self.r.seek_to_pass(pass) {
            Ok(f) => f,
            // No usable index (a damaged file): a fresh reader, skipping to the pass.
            Err(_) => match self.cfg.source.open() {
                Ok(mut r) => {
                    let (mut hit, mut run) = (false, None);
                    for m in r.by_ref() {
                        // Past damage as iteration goes: from the next sound record.
                        let Ok(m) = m else { continue };
                        match m {
                            Telemetry::Start(d) => run = Some(d),
                            Telemetry::Frame(f) if f.pass == pass => {
                                *pending = Some(Telemetry::Frame(f));
                                hit = true;
                                break;
                            }
                            _ => {}
                        }
                    }
                    if hit {
                        self.r = r;
                        self.arrive(pass, at_end);
                        return self.restart_stream(run);
                    }
                    false
                }
                Err(_) => false,
            },
        };
        if !found {
            note(
                &self.status,
                format!("seek: the recording has no pass {pass}"),
            );
            return Next::Go;
        }
        *pending = None;
        self.arrive(pass, at_end);
        let run = self.r.run_at_pass(pass).ok().flatten();
        self.restart_stream(run)
    }

    fn arrive(&mut self, pass: u64, at_end: &mut bool) {
        *at_end = false;
        self.force = true;
        self.clock = Instant::now();
        let k = self
            .r
            .index()
            .and_then(|i| i.entries().iter().position(|e| e.0 == pass))
            .map(|i| i as u64);
        self.set(|s| s.position = k.or(s.position));
    }

    /// `Start` again: `run`, the run in effect at the new place (a live session that switched
    /// its dispatch, grid or model sent a `Start` of its own, which the recording keeps), else
    /// the header's.
    fn restart_stream(&mut self, run: Option<baro_telemetry::RunDetails>) -> Next {
        let run = run.unwrap_or_else(|| self.run.clone());
        if self.tx.send(Telemetry::Start(run)).is_err() {
            return Next::Quit;
        }
        Next::Go
    }
}
