//! Recordings on disk: `replay` (headless lines or JSON, at a chosen speed), `export` (traces:
//! Perfetto protobuf and Trace Event JSON; CSVs) and `diff` (two recordings side by side). The
//! file format is the telemetry crate's (`baro_telemetry::recording`); a damaged or cut file is
//! read up to the damage, every complete message is used, and the damage is reported with its
//! byte offset.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use baro_engine::session::Check;
use baro_telemetry::recording::{diff, export, Reader};
use baro_telemetry::Telemetry;
use clap::Args;

/// `baro-top replay`.
#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The recording (`.baro`).
    pub file: PathBuf,
    /// Replay speed relative to the recording (2 = twice as fast), 0.0001..=1000; 0 = as fast
    /// as possible.
    /// Default: 1 in the dashboard, 0 with --headless.
    #[arg(long, value_parser = crate::validate::speed, allow_negative_numbers = true)]
    pub speed: Option<f64>,
    /// Print per-pass lines instead of opening the dashboard.
    #[arg(long)]
    pub headless: bool,
    /// With --headless: the JSON lines `run --json` printed live, one message per line.
    #[arg(long, requires = "headless")]
    pub json: bool,
    /// Dashboard layout preset name or TOML file (dashboard only).
    #[arg(long, conflicts_with = "headless")]
    pub layout: Option<String>,
    /// Dashboard redraws per second at most, 1..=240.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=240), conflicts_with = "headless")]
    pub fps: u32,
    /// Dashboard: draw with ASCII only (no braille, block or box glyphs).
    #[arg(long, conflicts_with = "headless")]
    pub ascii: bool,
}

/// `replay FILE` without --headless: the dashboard on a terminal (headless lines otherwise,
/// said once on stderr). Exit status as `replay --headless` where stdout is not a terminal;
/// 0 after the dashboard.
pub fn replay_dashboard(a: &ReplayArgs) -> anyhow::Result<ExitCode> {
    use std::io::IsTerminal;
    let label = a.file.display().to_string();
    // Check the file before the terminal changes (a file that is not a recording).
    let r = open(&a.file)?;
    let banner = vec![crate::ui::replay::banner(&label, r.header())];
    drop(r);
    let tty = std::io::stdout().is_terminal();
    let cfg = crate::ui::replay::ReplayConfig {
        source: crate::ui::replay::Source::File(a.file.clone()),
        label,
        speed: a.speed.unwrap_or(if tty { 1.0 } else { 0.0 }),
        hold_at_end: tty,
        banner,
    };
    play(
        cfg,
        a.layout.as_deref().unwrap_or("default"),
        a.fps,
        a.ascii,
    )
}

/// Play a replay in the dashboard (or headless lines where stdout is not a terminal).
pub fn play(
    cfg: crate::ui::replay::ReplayConfig,
    layout: &str,
    fps: u32,
    ascii: bool,
) -> anyhow::Result<ExitCode> {
    use crate::ui;
    let layout = ui::layout::Layout::load(layout)?;
    let (rx, ctl, producer, header) = ui::replay::spawn(cfg)?;
    let depth = ui::theme::ColorDepth::detect(|k| std::env::var(k).ok());
    let opts = ui::app::Options {
        layout,
        fps,
        theme: ui::theme::Theme::new(depth, ascii),
    };
    let r = ui::app::run_or_headless(rx, &ctl, meta(&header), opts);
    use ui::action::Control;
    ctl.stop();
    let _ = producer.join();
    r.map(|()| ExitCode::SUCCESS)
}

/// Display extras from a recording's header: its quant, and a token decoder where one is
/// known (the synthetic words for synthetic recordings, the embedded stories260K tokenizer
/// for stories260K runs; otherwise token ids are shown).
pub fn meta(h: &baro_telemetry::recording::RecordingHeader) -> crate::ui::state::Meta {
    let model = h.run.model.to_lowercase();
    let decoder: Option<crate::ui::state::Decoder> = if model.starts_with("synthetic") {
        Some(std::sync::Arc::new(|id| {
            crate::ui::synthetic::word(id).into_bytes()
        }))
    } else if model.contains("stories260k") {
        baro_engine::model::Model::embedded().ok().map(|m| {
            let t = m.tokenizer;
            std::sync::Arc::new(move |id: u32| t.decode(0, id).to_vec())
                as crate::ui::state::Decoder
        })
    } else {
        None
    };
    crate::ui::state::Meta {
        quant: h.quant.clone(),
        ids_label: decoder
            .is_none()
            .then(|| "token ids: no vocabulary recorded".into()),
        decoder,
        ..Default::default()
    }
}

/// `baro-top export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    /// The recording (`.baro`).
    pub file: PathBuf,
    /// Write a Trace Event JSON trace (Perfetto, chrome://tracing, speedscope): one process,
    /// a track for the passes, the power mode, the grid aggregate and each workgroup,
    /// counters for tok/s and clocks. A name ending in `.gz` is gzipped.
    #[arg(long, value_name = "OUT.json")]
    pub perfetto: Option<PathBuf>,
    /// Write the same trace in Perfetto's native protobuf format (≈ 4× smaller than the
    /// JSON; what Perfetto recommends for large traces). A name ending in `.gz` is gzipped.
    #[arg(long, value_name = "OUT.pftrace")]
    pub perfetto_proto: Option<PathBuf>,
    /// Traces: keep the workgroup tracks of one pass in N of those with spans (the others
    /// keep their pass, mode and grid-aggregate slices); `auto` picks the smallest N that
    /// keeps at most --span-budget spans.
    #[arg(long, default_value = "auto", value_parser = parse_spans_every)]
    pub spans_every: SpansEveryArg,
    /// Traces: with `--spans-every auto`, the most workgroup spans (stage spans and barrier
    /// waits) to keep; the default keeps the JSON near 50 MB and the protobuf near 11 MB.
    #[arg(long, default_value_t = export::DEFAULT_SPAN_BUDGET, value_parser = crate::validate::span_budget)]
    pub span_budget: u64,
    /// Traces: which workgroups get a track: `all`, `slowest` (per pass, the one with the
    /// most stage work) or a list such as `0,3,8-11`.
    #[arg(long, default_value = "all", value_parser = parse_workgroups)]
    pub workgroups: export::WgSelect,
    /// Traces: only these passes (`P` or `A-B`, inclusive) and the sensor samples between
    /// them.
    #[arg(long, value_name = "A-B", value_parser = parse_pass_range)]
    pub passes: Option<std::ops::RangeInclusive<u64>>,
    /// Write one CSV row per pass per stage.
    #[arg(long, value_name = "OUT.csv")]
    pub csv: Option<PathBuf>,
    /// Write one CSV row per pass (wall and GPU time, host timestamp, token, fail word, mode,
    /// contention, whether it has spans), joining --csv on `pass`.
    #[arg(long, value_name = "OUT.csv")]
    pub csv_passes: Option<PathBuf>,
}

/// `--spans-every`: `auto` or N.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpansEveryArg {
    /// The span budget picks N.
    Auto,
    /// One pass in N.
    Every(u64),
}

fn parse_spans_every(s: &str) -> Result<SpansEveryArg, String> {
    if s == "auto" {
        return Ok(SpansEveryArg::Auto);
    }
    crate::validate::spans_every(s).map(SpansEveryArg::Every)
}

fn parse_pass_range(s: &str) -> Result<std::ops::RangeInclusive<u64>, String> {
    let num = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|_| format!("{x:?} is not a pass number (expected P or A-B)"))
    };
    let (a, b) = match s.split_once('-') {
        Some((a, b)) => (num(a)?, num(b)?),
        None => (num(s)?, num(s)?),
    };
    if a > b {
        return Err(format!("{s}: the range runs backwards"));
    }
    Ok(a..=b)
}

fn parse_workgroups(s: &str) -> Result<export::WgSelect, String> {
    s.parse()
}

/// `baro-top diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// Recording A (`.baro`).
    pub a: PathBuf,
    /// Recording B (`.baro`).
    pub b: PathBuf,
    /// Compare recordings of different models, devices or weights anyway (the Δ then
    /// measures the setups, not a change; each difference is printed as a warning).
    #[arg(long)]
    pub force: bool,
    /// Print the report as one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

fn open(path: &Path) -> anyhow::Result<Reader<std::io::BufReader<std::fs::File>>> {
    Reader::open(path).with_context(|| format!("opening recording {}", path.display()))
}

/// Describe a recording's origin in one line (stderr).
pub fn describe(r: &Reader<impl std::io::Read + std::io::Seek>) -> String {
    let h = r.header();
    format!(
        "recording of {} on {}, {} x {} lanes, dispatch {}, recorded {} by baro-top {} ({})",
        h.run.model,
        baro_ui::text::device_label(&h.run.device, &h.run.driver),
        h.run.grid,
        h.run.wg_size,
        h.run.dispatch,
        h.host,
        h.baro_top_version,
        h.commit
    )
}

/// `replay --headless [--json]`: every message of the recording, paced by `--speed` against
/// the recorded pass times. Exit status: 0 if the recorded run ended cleanly and the file was
/// whole, 1 if the recorded run failed, 2 if the file is damaged (after printing everything
/// before the damage).
pub fn replay_headless(a: &ReplayArgs) -> anyhow::Result<ExitCode> {
    let mut r = open(&a.file)?;
    note!("baro-top: replaying {}", describe(&r));
    let speed = a.speed.unwrap_or(0.0);
    let t0 = Instant::now();
    let mut recorded_ns = 0u64;
    let mut said_unpaced = false;
    let mut failed = false;
    let mut ended_ok = None;
    let mut damage = None;
    let mut out = crate::out::Stdout::lock();
    let mut lines = crate::ui::headless::Printer::new(meta(r.header()).decoder);
    let mut json = baro_telemetry::analysis::JsonLines::new();
    use std::io::Write;
    for msg in r.by_ref() {
        let msg = match msg {
            Ok(m) => m,
            Err(e) => {
                damage = Some(e);
                break;
            }
        };
        if let Telemetry::Frame(f) = &msg {
            failed |= f.failed();
            if speed > 0.0 {
                let wall_ns = crate::ui::replay::paced_wall_ns(f.wall_ns);
                if wall_ns != f.wall_ns && !said_unpaced {
                    said_unpaced = true;
                    note!(
                        "baro-top: {}: pass {} says it took {} s, longer than any run records (an hour): replayed without waiting it out",
                        a.file.display(),
                        f.pass,
                        f.wall_ns / 1_000_000_000
                    );
                }
                recorded_ns = recorded_ns.saturating_add(wall_ns);
                let due = Duration::from_nanos((recorded_ns as f64 / speed) as u64);
                if let Some(wait) = due.checked_sub(t0.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
        }
        if let Telemetry::End { reason, .. } = &msg {
            ended_ok = Some(matches!(
                reason,
                baro_telemetry::EndReason::Completed | baro_telemetry::EndReason::Stopped
            ));
        }
        if a.json {
            lines.count(&msg);
            let line = json.line(msg, true);
            writeln!(out, "{}", line.context("encoding a message as JSON")?)?;
        } else {
            // Text lines quote the file's strings: cleaned of escape sequences.
            for l in lines.push(msg) {
                writeln!(out, "{}", crate::out::clean(&l))?;
            }
        }
    }
    // The held lines and the summary (what was replayed, up to any damage); beside JSON on
    // stderr, so stdout stays JSON.
    if a.json {
        note!("baro-top: {}", lines.summary().line());
    } else {
        for l in lines.finish() {
            writeln!(out, "{}", crate::out::clean(&l))?;
        }
    }
    if let Some(e) = damage {
        note!(
            "baro-top: {}: the recording is damaged or cut: {e}; everything before it was replayed",
            a.file.display()
        );
        return Ok(ExitCode::from(2));
    }
    if !r.finished() {
        note!(
            "baro-top: {}: the recording has no index footer (the recorder did not finish); every complete message was replayed",
            a.file.display()
        );
    }
    Ok(if failed || ended_ok == Some(false) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Where an export goes: the file, gzipped where its name ends in `.gz`.
fn export_to(
    out: &Path,
    what: impl FnOnce(&mut dyn std::io::Write) -> baro_telemetry::recording::Result<export::ExportStats>,
) -> anyhow::Result<export::ExportStats> {
    let gz = out.extension().is_some_and(|e| e == "gz");
    let mut stats = None;
    crate::files::write_atomic(out, |tmp| {
        let f = std::fs::File::create(tmp)?;
        if gz {
            let mut z = flate2::write::GzEncoder::new(f, flate2::Compression::default());
            stats = Some(what(&mut z)?);
            z.finish()?;
        } else {
            let mut f = f;
            stats = Some(what(&mut f)?);
        }
        Ok(())
    })?;
    Ok(stats.expect("written"))
}

/// Two outputs of one command must not be one file (the second would silently replace the
/// first). A path that exists and is not a regular file (`/dev/stdout`, a FIFO) may repeat:
/// the outputs follow one another there.
fn distinct_outputs(outs: &[(&str, &Option<PathBuf>)]) -> anyhow::Result<()> {
    let key = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let given: Vec<(&str, &PathBuf)> = outs
        .iter()
        .filter_map(|(flag, p)| p.as_ref().map(|p| (*flag, p)))
        .collect();
    for (i, (fa, pa)) in given.iter().enumerate() {
        let stream = std::fs::metadata(pa).is_ok_and(|m| !m.is_file());
        if stream {
            continue;
        }
        if let Some((fb, _)) = given[i + 1..].iter().find(|(_, pb)| key(pb) == key(pa)) {
            bail!(
                "{fa} and {fb} both name {}: each output needs a file of its own",
                pa.display()
            );
        }
    }
    Ok(())
}

/// `export`: traces (JSON, protobuf) and/or CSVs, each written through a temporary file.
pub fn export(a: &ExportArgs) -> anyhow::Result<ExitCode> {
    if a.perfetto.is_none()
        && a.perfetto_proto.is_none()
        && a.csv.is_none()
        && a.csv_passes.is_none()
    {
        bail!("export needs --perfetto OUT.json, --perfetto-proto OUT.pftrace, --csv OUT.csv and/or --csv-passes OUT.csv");
    }
    let traces = a.perfetto.is_some() || a.perfetto_proto.is_some();
    if let (Some(r), false) = (&a.passes, traces) {
        bail!(
            "--passes {}-{} selects a trace's passes, and no trace is asked for (--perfetto, --perfetto-proto); the CSVs hold every pass",
            r.start(),
            r.end()
        );
    }
    distinct_outputs(&[
        ("--perfetto", &a.perfetto),
        ("--perfetto-proto", &a.perfetto_proto),
        ("--csv", &a.csv),
        ("--csv-passes", &a.csv_passes),
    ])?;
    let mut damaged = false;
    let mut report = |out: &Path, s: &export::ExportStats, what: &str| {
        note!(
            "baro-top: {}: {} passes, {} {what}",
            out.display(),
            s.passes,
            s.events
        );
        if let Some(d) = &s.damage {
            note!("baro-top: the recording is damaged or cut: {d}; exported everything before it");
            damaged = true;
        }
    };
    if traces {
        let opts = export::TraceOptions {
            spans_every: match a.spans_every {
                SpansEveryArg::Auto => export::SpansEvery::Auto {
                    budget: a.span_budget,
                },
                SpansEveryArg::Every(n) => export::SpansEvery::Every(n),
            },
            workgroups: a.workgroups.clone(),
            passes: a.passes.clone(),
        };
        let survey = export::survey(&mut open(&a.file)?, opts.passes.as_ref());
        if let (Some(r), 0) = (&opts.passes, survey.passes) {
            bail!(
                "--passes {}-{}: no pass of {} is in that range ({})",
                r.start(),
                r.end(),
                a.file.display(),
                match survey.span_of_all {
                    Some((f, l)) => format!("its passes are {f}-{l}"),
                    None => "it holds no pass".into(),
                }
            );
        }
        let opts = opts.resolve(&survey);
        let mut left_out = None;
        if let Some(out) = &a.perfetto {
            let mut r = open(&a.file)?;
            let s = export_to(out, |w| export::json_trace(&mut r, w, &opts))?;
            report(out, &s, "trace events");
            left_out = s.left_out();
        }
        if let Some(out) = &a.perfetto_proto {
            let mut r = open(&a.file)?;
            let s = export_to(out, |w| export::proto_trace(&mut r, w, &opts))?;
            report(out, &s, "trace events");
            left_out = s.left_out();
        }
        match left_out {
            Some(l) => note!(
                "baro-top: the trace {l}{}",
                if a.spans_every == SpansEveryArg::Auto {
                    format!(" (--spans-every auto for a budget of {} spans; --spans-every 1 keeps them all)", a.span_budget)
                } else {
                    String::new()
                }
            ),
            None => note!("baro-top: the trace holds every recorded span"),
        }
    }
    if let Some(out) = &a.csv {
        let mut r = open(&a.file)?;
        let s = export_to(out, |w| export::csv(&mut r, w))?;
        report(out, &s, "rows");
    }
    if let Some(out) = &a.csv_passes {
        let mut r = open(&a.file)?;
        let s = export_to(out, |w| export::csv_passes(&mut r, w))?;
        report(out, &s, "rows");
    }
    Ok(if damaged {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// `diff A B`: the total pass time and tok/s, then per stage kind median busy and charged
/// side by side with Δ%, over the passes of one power mode common to both (no Δ where none
/// is), and whether the two token streams agree. Recordings of different models, devices or
/// weights are refused without `--force`. Exit 0 when the token streams agree, 1 when they
/// differ, 2 when either file is damaged or cut, the token streams have no pass in common,
/// or the comparison is refused.
pub fn diff(a: &DiffArgs) -> anyhow::Result<ExitCode> {
    let mut ra = open(&a.a)?;
    let mut rb = open(&a.b)?;
    let report = diff::compare(&mut ra, &mut rb).context("comparing the recordings")?;
    let mismatch = report.mismatch();
    if !mismatch.is_empty() && !a.force {
        bail!(
            "{}: the Δ would measure the setups, not a change (--force compares them anyway)",
            mismatch.join("; ")
        );
    }
    if a.json {
        outln!("{}", report.to_json())?;
    } else {
        outln!("{}", crate::out::clean(&report.to_string()))?;
    }
    for (name, side) in [(&a.a, &report.a), (&a.b, &report.b)] {
        if let Some(d) = &side.damage {
            note!(
                "baro-top: {}: the recording is damaged or cut: {}; compared everything before it",
                name.display(),
                d
            );
        }
    }
    Ok(if report.damaged() {
        ExitCode::from(2)
    } else {
        match report.tokens {
            diff::Tokens::Differ { .. } => ExitCode::from(1),
            diff::Tokens::Empty { .. } => {
                note!("baro-top: diff: the token streams have no pass in common: NOT COMPARABLE");
                ExitCode::from(2)
            }
            _ => ExitCode::SUCCESS,
        }
    })
}

/// `baro-top record`.
#[derive(Args, Debug)]
pub struct RecordArgs {
    /// The recording to write (`.baro`; `-`: stdout). Written as it goes: a run killed
    /// mid-way leaves a file whose every complete pass replays; Ctrl-C or SIGTERM stops the
    /// decode and finishes the file (exit 130 / 143; a second Ctrl-C ends at once). An
    /// existing file is refused without --force; the file is locked while recording.
    #[arg(long, short = 'o')]
    pub out: PathBuf,
    /// Overwrite an existing recording.
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
    let out = OutFile::create(&a.out, a.force)?;
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
/// new file that never got a header is removed again if the command fails before it.
struct OutFile<'a> {
    path: &'a Path,
    file: std::fs::File,
    keep: bool,
}

impl<'a> OutFile<'a> {
    fn create(path: &'a Path, force: bool) -> anyhow::Result<Self> {
        let file = crate::files::create_recording(path, force)?;
        Ok(OutFile {
            path,
            file,
            keep: false,
        })
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
        if !self.keep && empty {
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
