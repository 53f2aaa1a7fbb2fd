//! Recording a live session from the dashboard (`r` starts, `r` again stops). The dashboard's
//! sink is lossy; a recording gets its own lossless sink, subscribed when it starts (a late
//! sink gets the current `Start` first, which becomes the file's header) and dropped when it
//! stops. A writer thread per recording encodes and writes (the telemetry crate's
//! [`Recorder`], as `record` and `bench rec`), so neither the engine nor the UI waits for the
//! disk. Quitting while recording lets the writer take everything up to the
//! session's `End` and write the footer.

use std::fs::{File, OpenOptions};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::Context;
use baro_engine::session::{Session, SinkKind};
use baro_engine::telemetry::Telemetry;
use baro_telemetry::recording::Recorder;
use crossbeam_channel::{Receiver, Sender};

use crate::ui::action::{Note, RecStatus};
use crate::ui::state::Severity;

/// What a finished recording holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary {
    /// The file.
    pub path: PathBuf,
    /// Frame records (passes).
    pub passes: u64,
    /// Bytes of the file.
    pub bytes: u64,
}

impl Summary {
    /// The log line of a finished recording.
    pub fn line(&self) -> String {
        format!(
            "recorded {}: {} passes, {:.1} MiB (replay: baro-top replay {})",
            self.path.display(),
            self.passes,
            self.bytes as f64 / (1 << 20) as f64,
            self.path.display()
        )
    }
}

/// Check that recordings can be written to `dir` (exists, is a directory, accepts a new
/// file): a bad `--record-dir` is refused at startup, not when `r` is pressed.
pub fn check_dir(dir: &Path) -> anyhow::Result<()> {
    let meta = std::fs::metadata(dir)
        .with_context(|| format!("--record-dir {}: cannot be read", dir.display()))?;
    if !meta.is_dir() {
        anyhow::bail!("--record-dir {}: not a directory", dir.display());
    }
    let probe = dir.join(format!(".baro-top-write-test-{}", std::process::id()));
    File::create(&probe)
        .with_context(|| format!("--record-dir {}: not writable", dir.display()))?;
    let _ = std::fs::remove_file(&probe);
    Ok(())
}

/// `baro-YYYYMMDD-HHMMSS.baro` for `unix_s` seconds since the epoch, in UTC.
pub fn file_name(unix_s: u64) -> String {
    let c = baro_telemetry::clock::civil_utc(unix_s);
    format!(
        "baro-{:04}{:02}{:02}-{:02}{:02}{:02}.baro",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

/// Create a new file for a recording in `dir` named for now (`-2`, `-3`, … when that name is
/// taken: an existing file is never overwritten).
fn create_file(dir: &Path) -> anyhow::Result<(PathBuf, File)> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let name = file_name(now);
    let stem = name.trim_end_matches(".baro");
    for n in 1..1000 {
        let path = if n == 1 {
            dir.join(&name)
        } else {
            dir.join(format!("{stem}-{n}.baro"))
        };
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", path.display())),
        }
    }
    anyhow::bail!(
        "{}: 999 recordings named {stem}-N.baro exist",
        dir.display()
    )
}

/// Write the stream `rx` to `file` until `stop` fires (what is queued by then is written) or
/// the stream ends (its `End` is written); then the footer. `bytes` follows the file as it
/// grows.
pub fn write_stream(
    rx: Receiver<Telemetry>,
    stop: Receiver<()>,
    path: &Path,
    file: File,
    quant: Option<String>,
    bytes: &AtomicU64,
) -> anyhow::Result<Summary> {
    let mut rec = recorder(file, quant);
    rec.pump(&rx, &stop, |s| bytes.store(s.bytes, Ordering::Relaxed))
        .with_context(|| format!("writing {}", path.display()))?;
    finish(rec, path, bytes)
}

/// The recorder of a dashboard or `bench rec` recording into `file` (the header's quant
/// and baro-top's commit).
pub fn recorder(file: File, quant: Option<String>) -> Recorder<BufWriter<File>> {
    Recorder::new(BufWriter::with_capacity(1 << 20, file), env!("BARO_COMMIT")).quant(quant)
}

/// Write the footer, flush and sync the file: what it holds. `bytes` is set to its size. A
/// pipe, FIFO or terminal (`bench rec --out -`) is flushed only: it has no disk to sync to
/// (fsync fails there, EINVAL) and no size; its size is the bytes written.
pub fn finish(
    rec: Recorder<BufWriter<File>>,
    path: &Path,
    bytes: &AtomicU64,
) -> anyhow::Result<Summary> {
    let shown = path.display();
    let Some((out, stats)) = rec.finish().with_context(|| format!("finishing {shown}"))? else {
        anyhow::bail!("{shown}: the session sent nothing to record (it had not started)");
    };
    let f = out
        .into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("flushing {shown}"))?;
    let regular = f.metadata().is_ok_and(|m| m.is_file());
    let bytes_now = if regular {
        f.sync_all()
            .with_context(|| format!("syncing {shown} to disk"))?;
        f.metadata().map_or(0, |m| m.len())
    } else {
        stats.bytes
    };
    bytes.store(bytes_now, Ordering::Relaxed);
    Ok(Summary {
        path: path.to_path_buf(),
        passes: stats.frames,
        bytes: bytes_now,
    })
}

/// The recording in progress.
struct Active {
    path: PathBuf,
    bytes: Arc<AtomicU64>,
    stop: Sender<()>,
    join: JoinHandle<anyhow::Result<Summary>>,
}

/// Starts and stops recordings of one session (module doc).
pub struct LiveRecorder {
    dir: PathBuf,
    quant: Option<String>,
    notes: Sender<Note>,
    active: Mutex<Option<Active>>,
    /// Stopped recordings whose writers may still be finishing.
    done: Mutex<Vec<JoinHandle<anyhow::Result<Summary>>>>,
}

impl LiveRecorder {
    /// Recordings go to `dir`; their outcome goes to `notes` (the dashboard's log).
    pub fn new(dir: PathBuf, quant: Option<String>, notes: Sender<Note>) -> LiveRecorder {
        LiveRecorder {
            dir,
            quant,
            notes,
            active: Mutex::new(None),
            done: Mutex::new(vec![]),
        }
    }

    /// Start a recording of `session`, or stop the one in progress.
    pub fn toggle(&self, session: &Session) {
        let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = active.take() {
            // The writer writes what is queued, the footer, then says so in the log.
            let _ = a.stop.send(());
            self.done
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(a.join);
            return;
        }
        match self.start(session) {
            Ok(a) => {
                self.note(Severity::Info, format!("recording to {}", a.path.display()));
                *active = Some(a);
            }
            Err(e) => self.note(Severity::Error, format!("recording failed to start: {e:#}")),
        }
    }

    fn start(&self, session: &Session) -> anyhow::Result<Active> {
        let (path, file) = create_file(&self.dir)?;
        let rx = session.subscribe(SinkKind::Lossless);
        let (stop, stop_rx) = crossbeam_channel::bounded(1);
        let bytes = Arc::new(AtomicU64::new(0));
        let (p, b, q, notes) = (
            path.clone(),
            bytes.clone(),
            self.quant.clone(),
            self.notes.clone(),
        );
        let join = std::thread::Builder::new()
            .name("baro-recorder".into())
            .spawn(move || {
                let r = write_stream(rx, stop_rx, &p, file, q, &b);
                let note = match &r {
                    Ok(s) => Note {
                        sev: Severity::Info,
                        text: s.line(),
                    },
                    Err(e) => Note {
                        sev: Severity::Error,
                        text: format!("recording {} failed: {e:#}", p.display()),
                    },
                };
                let _ = notes.send(note);
                r
            })
            .context("starting the recorder thread")?;
        Ok(Active {
            path,
            bytes,
            stop,
            join,
        })
    }

    /// The recording in progress, for the header.
    pub fn status(&self) -> Option<RecStatus> {
        let active = self.active.lock().unwrap_or_else(|p| p.into_inner());
        active.as_ref().map(|a| RecStatus {
            file: a.path.display().to_string(),
            bytes: a.bytes.load(Ordering::Relaxed),
        })
    }

    /// Every writer, the one still recording included (not stopped: once the session has
    /// ended it writes up to the `End` and the footer). Join them after the session ended.
    pub fn into_writers(self) -> Writers {
        let mut w = Writers {
            joins: self.done.into_inner().unwrap_or_else(|p| p.into_inner()),
            stops: vec![],
        };
        if let Some(a) = self.active.into_inner().unwrap_or_else(|p| p.into_inner()) {
            w.stops.push(a.stop);
            w.joins.push(a.join);
        }
        w
    }

    fn note(&self, sev: Severity, text: String) {
        let _ = self.notes.send(Note { sev, text });
    }
}

/// The writers of a session's recordings (see [`LiveRecorder::into_writers`]).
pub struct Writers {
    joins: Vec<JoinHandle<anyhow::Result<Summary>>>,
    /// Held, not sent: a writer still recording ends with the session's `End`.
    stops: Vec<Sender<()>>,
}

impl Writers {
    /// Wait for every writer; each recording's summary or error, in the order started.
    pub fn join(self) -> Vec<anyhow::Result<Summary>> {
        let r = self
            .joins
            .into_iter()
            .map(|j| {
                j.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("the recorder thread panicked")))
            })
            .collect();
        drop(self.stops);
        r
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("baro-live-rec-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn file_names_are_baro_utc_yyyymmdd_hhmmss() {
        assert_eq!(file_name(0), "baro-19700101-000000.baro");
        assert_eq!(file_name(1_796_042_096), "baro-20261130-123456.baro");
        assert_eq!(file_name(951_868_799), "baro-20000229-235959.baro");
    }

    #[test]
    fn a_missing_or_non_directory_record_dir_is_refused_naming_it() {
        let d = temp_dir("refused");
        let missing = d.join("nope");
        let e = format!("{:#}", check_dir(&missing).unwrap_err());
        assert!(e.contains("--record-dir") && e.contains("nope"), "{e}");
        let file = d.join("f");
        std::fs::write(&file, b"x").unwrap();
        let e = format!("{:#}", check_dir(&file).unwrap_err());
        assert!(e.contains("not a directory"), "{e}");
        check_dir(&d).unwrap();
        assert_eq!(
            std::fs::read_dir(&d).unwrap().count(),
            1,
            "the probe is gone"
        );
    }
}
