//! `record`: a headless decode written, every message, to a recording (`.baro`) through a
//! lossless sink, with progress on stderr; the host lock and the metrics endpoint as `run`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use baro_engine::session::Check;
use clap::Args;

/// `baro-top record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The recording to write (`.baro`; `-`: stdout). Written as it goes: a run killed
    /// mid-way leaves a file whose every complete pass replays; Ctrl-C or SIGTERM stops the
    /// decode and finishes the file (exit 130 / 143; a second Ctrl-C ends at once). An
    /// existing file is refused without --force (an empty one is taken); the file is locked
    /// while recording.
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Overwrite an existing recording (emptied once the new run has started: a run that
    /// cannot start leaves it as it was).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub model: crate::args::ModelArgs,
    /// Passes to record.
    #[arg(long, default_value_t = 256, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub passes: u64,
    /// Prompt text (encoded with BOS); the sequence restarts from it when the context is full.
    #[arg(long, short = 'i', default_value = "")]
    pub prompt: String,
    #[command(flatten)]
    pub seq: crate::args::SequenceArgs,
    /// Dispatch style.
    #[arg(long, value_enum, alias = "mode")]
    pub dispatch: Option<crate::args::DispatchArg>,
    /// Keep every workgroup's spans for one pass in N (1 = every pass); every pass keeps its
    /// per-stage and per-level timings, fail word and tokens. A 1B pass's spans take ~100 KiB.
    #[arg(long, default_value_t = 1, value_parser = crate::validate::spans_every, allow_negative_numbers = true)]
    pub spans_every: u64,
    /// Do not wait for another timing run that holds this GPU's host lock: record anyway
    /// and say so (the other run is named).
    #[arg(long)]
    pub no_wait: bool,
    /// Which passes the shadow CPU reference judges, as `run --check`: auto, all, off, or N
    /// (the first N positions of every sequence). Its verdicts are recorded.
    #[arg(long, default_value = "auto", value_parser = crate::validate::check)]
    pub check: Check,
    /// Also serve Prometheus/OpenMetrics metrics of the run at ADDR (e.g. 127.0.0.1:9464; port
    /// 0: any free port, printed at start) while it records.
    #[arg(long, value_name = "ADDR", value_parser = crate::validate::addr)]
    pub metrics: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub gpu: crate::args::GpuArgs,
}

/// `record`: a headless decode whose every message goes to the file through a lossless sink,
/// with progress on stderr. Exit status: 0 when the run and every check were clean, 1 when a
/// pass or a verdict failed (the recording is kept: it shows the failure), 2 on errors.
pub fn record(a: RecordArgs) -> anyhow::Result<ExitCode> {
    // Its exit status is a verdict, and a recording into a file must finish: a reader of its
    // diagnostics that goes (`2>&1 | head -1`) silences them, not the recording or the verdict.
    // A recording into stdout whose reader goes still ends quietly (below).
    crate::out::verdict_outlives_the_reader();
    use baro_engine::sensors::host_lock;
    use baro_engine::session::{SessionBuilder, SinkKind};
    crate::ui::terminal::install_signals().context("catching signals")?;
    let model = super::load_model(&a.model)?;
    // After the model (an input: it cannot be the output) and before the GPU: an output
    // that exists or is an input is refused at once; it is created (and locked) once this
    // run holds the GPU's host lock.
    crate::files::check_recording(&a.out, a.force)?;
    // The layer matrices' types (`q4_k+q6_k` for a Q4_K_M file), as the dashboard's `r`
    // recordings say: `diff` refuses two recordings whose weights differ, and the
    // classifier alone (Q6_K in most llama-quantize mixes) does not tell Q4_K_M from Q5_K_M.
    let quant = super::live::quant_name(&model);
    let positions = a.seq.positions(model.config.seq_len)?;
    let dev = super::open_gpu(&a.gpu)?;
    // Two timing runs on one GPU must know of each other: hold the host lock for the run.
    let lock_file = host_lock::lock_path(&host_lock::default_dir(), &dev.info().name);
    // `--no-wait` with another holder: the holder labels every pass (from the first, before
    // the sensor thread's first look at the lock).
    let (_lock, other_holder) = take_host_lock(&lock_file, a.no_wait)?;
    // A file that appeared meanwhile, or that another recorder holds, is refused here.
    let mut out = OutFile::create(&a.out, a.force)?;
    let dispatch = a
        .dispatch
        .unwrap_or(crate::args::DispatchArg::Mega)
        .dispatch();
    let mut opts = a
        .gpu
        .decoder_options(dispatch, positions, &model, dev.info());
    opts.instrument = true;
    let mut b = SessionBuilder::new(&dev, model, opts)
        .passes(Some(a.passes))
        .prompt(a.prompt.as_bytes())
        .check(a.check)
        .host_lock(lock_file.clone(), other_holder);
    let rx = b.subscribe(SinkKind::Lossless);
    let metrics_rx = a
        .metrics
        .as_ref()
        .map(|_| b.subscribe(SinkKind::Lossy { capacity: 1024 }));
    let session = b.spawn().context("starting the decode session")?;
    let _metrics = match (a.metrics, metrics_rx) {
        (Some(addr), Some(rx)) => {
            let s = crate::metrics::serve(addr, rx)?;
            note!(
                "record: serving metrics on http://{}/metrics",
                s.local_addr()
            );
            Some(s)
        }
        _ => None,
    };
    // Into this process's stdout (`-o -`, `/dev/stdout`): a reader that went away (`| head`)
    // ends the process quietly, as every command's stdout does (crate::out).
    let own_stdout = crate::files::is_own_output(&a.out);
    let quiet_if_reader_gone = |e: anyhow::Error| {
        if own_stdout && crate::out::is_broken_pipe(&e) {
            crate::out::reader_gone();
        }
        e
    };
    // The run has started (the session, the metrics port): only now does an existing file
    // (`--force`) give way to the new recording.
    out.start()?;
    let file = out.file.try_clone().context("the recording's file")?;
    let mut rec = baro_telemetry::recording::Recorder::new(
        std::io::BufWriter::with_capacity(1 << 20, file),
        env!("BARO_COMMIT"),
    )
    .quant(Some(quant))
    .spans_every(a.spans_every);
    let live = crate::out::stderr_is_terminal();
    let t0 = Instant::now();
    let mut last_note = Instant::now();
    let mut noted = 0u64;
    let mut stopping = false;
    // The engine never waits for the recorder (its sink is unbounded); the recorder's
    // backlog says how far behind it fell. Nothing stops it but the stream's end: a signal
    // stops the decode, and the sink is drained up to the session's End, then the footer is
    // written, as at a normal end.
    rec.pump(&rx, &crossbeam_channel::never(), |s| {
        if !stopping && crate::ui::terminal::caught().is_some() {
            stopping = true;
            crate::ui::terminal::second_signal_ends();
            session.stop();
            if live {
                note!("");
            }
            note!(
                "record: stopping on a signal: finishing {} (Ctrl-C again ends at once)",
                a.out.display()
            );
        }
        if live && s.records > noted && last_note.elapsed() > Duration::from_millis(250) {
            (last_note, noted) = (Instant::now(), s.records);
            note_progress(s.frames, a.passes, s.bytes, t0.elapsed());
        }
    })
    .map_err(|e| quiet_if_reader_gone(e.into()))
    .with_context(|| format!("writing {}", a.out.display()))?;
    let backlog = rec.backlog();
    let outcome = session.wait().context("the decode session")?;
    let Some((w, stats)) = rec
        .finish()
        .map_err(|e| quiet_if_reader_gone(e.into()))
        .with_context(|| format!("finishing {}", a.out.display()))?
    else {
        bail!("the session ended before it started: nothing was recorded");
    };
    w.into_inner()
        .map_err(|e| quiet_if_reader_gone(e.into_error().into()))
        .with_context(|| format!("flushing {}", a.out.display()))?;
    out.keep();
    if live {
        note!("");
    }
    note!(
        "record: {}: {} passes, {:.1} MiB, {:.1} s; writer backlog at most {} messages; {}",
        a.out.display(),
        stats.frames,
        stats.bytes as f64 / (1 << 20) as f64,
        t0.elapsed().as_secs_f64(),
        backlog,
        outcome.reason
    );
    Ok(if outcome.clean() {
        ExitCode::SUCCESS
    } else {
        note!(
            "record: not clean: {} failed passes, {} failed checks (the recording shows them)",
            outcome.failed_passes,
            outcome.failed_checks
        );
        ExitCode::from(1)
    })
}

/// `record`'s output while it is made: locked (see [`crate::files::create_recording`]); a
/// new file that never got a header is removed again if the command fails before it; an
/// existing one (`--force`) is emptied only once the run has started ([`OutFile::start`]),
/// so a run that cannot start leaves it whole.
struct OutFile<'a> {
    path: &'a Path,
    file: std::fs::File,
    /// An existing file, not yet emptied.
    existed: bool,
    keep: bool,
}

impl<'a> OutFile<'a> {
    fn create(path: &'a Path, force: bool) -> anyhow::Result<Self> {
        let (file, existed) = crate::files::create_recording(path, force)?;
        Ok(OutFile {
            path,
            file,
            existed,
            keep: false,
        })
    }

    /// The new recording begins: an existing file is emptied for it.
    fn start(&mut self) -> anyhow::Result<()> {
        if std::mem::take(&mut self.existed) {
            crate::files::truncate_recording(&self.file, self.path)?;
        }
        Ok(())
    }

    fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for OutFile<'_> {
    fn drop(&mut self) {
        let empty = self
            .file
            .metadata()
            .is_ok_and(|m| m.is_file() && m.len() == 0);
        if !self.keep && !self.existed && empty {
            let _ = std::fs::remove_file(self.path);
        }
    }
}

/// Hold the GPU's host lock `lock_file` for the recording: wait for another timing run, or
/// with `no_wait` record anyway, returning the other run (which then labels every pass
/// contended).
fn take_host_lock(
    lock_file: &Path,
    no_wait: bool,
) -> anyhow::Result<(
    Option<baro_engine::sensors::host_lock::HostLock>,
    Option<baro_telemetry::LockHolder>,
)> {
    use baro_engine::sensors::host_lock::{self, HostLock, LockError};
    let mut other_holder = None;
    let lock = if no_wait {
        match HostLock::try_lock(lock_file, host_lock::this_process()) {
            Ok(l) => Some(l),
            Err(LockError::Held { holder, .. }) => {
                let h = holder.unwrap_or_default();
                note!(
                    "record: --no-wait: another timing run holds this GPU ({}): recording anyway; every pass is labelled contended",
                    holder_name(&h)
                );
                other_holder = Some(h);
                None
            }
            Err(e) => return Err(e).context("taking the GPU's host lock"),
        }
    } else {
        Some(
            HostLock::lock_wait(
                lock_file,
                host_lock::this_process(),
                None,
                Duration::from_millis(200),
                |h| {
                    note!(
                        "record: waiting for the GPU's host lock {}, held by {} (--no-wait records anyway)",
                        lock_file.display(),
                        h.map_or("an unknown process".into(), holder_name)
                    )
                },
            )
            .context("taking the GPU's host lock")?,
        )
    };
    Ok((lock, other_holder))
}

/// A lock holder as the user reads it: `pid 4242 (baro-top bench -m x.gguf)`.
fn holder_name(h: &baro_telemetry::LockHolder) -> String {
    if h.pid == 0 {
        "an unknown process".into()
    } else {
        h.to_string()
    }
}

fn note_progress(frames: u64, total: u64, bytes: u64, t: Duration) {
    use std::io::Write;
    let mut e = std::io::stderr().lock();
    let _ = write!(
        e,
        "\rrecord: pass {frames}/{total}, {:.1} MiB, {:.1} s ",
        bytes as f64 / (1 << 20) as f64,
        t.as_secs_f64()
    );
    let _ = e.flush();
}
