//! Recordings on disk: `replay` (headless lines or JSON, at a chosen speed), `export` (traces:
//! Perfetto protobuf and Trace Event JSON; CSVs) and `diff` (two recordings side by side). The
//! file format is the telemetry crate's (`baro_telemetry::recording`); a damaged or cut file is
//! read past the damage (from the next sound record on), every sound message is used, and the
//! damage is reported with its byte offset and the stretches skipped; the exit status is 2.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use baro_telemetry::recording::{damage_note, diff, export, Reader};
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
    let tty = std::io::stdout().is_terminal();
    if !tty {
        // The same lines as --headless, and its exit status: 2 for a damaged or cut file, 1
        // for a run that failed (the dashboard's headless fallback ended 0 either way).
        note!("baro-top: stdout is not a terminal: printing one line per pass instead of the dashboard (like top -b)");
        return replay_headless(a);
    }
    let label = a.file.display().to_string();
    // Check the file before the terminal changes (a file that is not a recording).
    let r = open(&a.file)?;
    let banner = vec![crate::ui::replay::banner(&label, r.header())];
    drop(r);
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
/// whole, 1 if the recorded run failed, 2 if the file is damaged (after printing every sound
/// message around the damage).
pub fn replay_headless(a: &ReplayArgs) -> anyhow::Result<ExitCode> {
    // Its exit status is a verdict: a reader that goes silences the lines, not the verdict.
    crate::out::verdict_outlives_the_reader();
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
            // Reading goes on from the next sound record; the first damage is named.
            Err(e) => {
                damage.get_or_insert(e);
                continue;
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
    if r.skipped() > 0 {
        note!(
            "baro-top: {}: {} record{} of a kind this baro-top does not know skipped (written by a newer one?): passes may be missing",
            a.file.display(),
            r.skipped(),
            if r.skipped() == 1 { "" } else { "s" }
        );
    }
    if let Some(e) = damage {
        note!(
            "baro-top: {}: {}",
            a.file.display(),
            damage_note(&e, r.skips(), "replayed")
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
    // A file without its index footer was cut between records (a crash, kill -9): said once,
    // beside what was exported, as replay says it. The grid checks --workgroups below.
    let (unfinished, grid) = {
        let r = open(&a.file)?;
        (r.index().is_none(), r.header().run.grid)
    };
    let mut damaged = false;
    let mut report = |out: &Path, s: &export::ExportStats, what: &str| {
        note!(
            "baro-top: {}: {} passes, {} {what}",
            out.display(),
            s.passes,
            s.events
        );
        if let Some(d) = &s.damage {
            note!(
                "baro-top: {}: {}",
                a.file.display(),
                damage_note(d, &s.skips, "exported")
            );
            damaged = true;
        }
    };
    if let (export::WgSelect::List(l), true) = (&a.workgroups, traces) {
        // A workgroup the run did not have would get no track, and the trace would read as
        // one that left every span out by sampling.
        if let Some(w) = l.iter().find(|&&w| w >= grid) {
            bail!(
                "--workgroups: workgroup {w} is not in {}'s grid of {grid} (0-{})",
                a.file.display(),
                grid.saturating_sub(1)
            );
        }
    }
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
            if out == Path::new("-") {
                crate::files::refuse_binary_onto_a_terminal("a protobuf trace")?;
            }
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
    if unfinished && !damaged {
        note!(
            "baro-top: {}: the recording has no index footer (the recorder did not finish); every complete pass was exported",
            a.file.display()
        );
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
    // Its exit status is a verdict: a reader that goes silences the lines, not the verdict.
    crate::out::verdict_outlives_the_reader();
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
    for (name, side, r) in [(&a.a, &report.a, &ra), (&a.b, &report.b, &rb)] {
        if let Some(d) = &side.damage {
            note!("baro-top: {}: {d}", name.display());
        } else if !r.finished() {
            note!(
                "baro-top: {}: the recording has no index footer (the recorder did not finish); every complete pass was compared",
                name.display()
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
