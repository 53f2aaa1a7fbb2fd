//! `baro-top bench ab`: two arms in alternating pairs (A B, B A, ...), each a set of bench
//! options (`--a "--dispatch mega --wg-size 512"`), or two binaries (`--a-binary PATH`: each
//! sample set is a child `bench` run of that binary, one arm, JSON lines back). Prints the
//! median (min) per arm, Δ% of B against A, the bitwise parity of their logits and, with
//! `--predict`, the frozen-prediction protocol: the prediction is logged with the UTC time and
//! commit before anything runs, the verdict after.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{bail, Context};
use baro_engine::act::act_words;
use baro_engine::bench::{run_bench, stats, Arm, ArmResult, BenchConfig, BenchReport, Sample};
use baro_engine::kv::kv_words;
use baro_engine::telemetry::labels::{ModeConfig, ModeTally};
use baro_engine::telemetry::PowerMode;
use clap::Parser;

use super::output::{self, common_mode, in_mode, mode_label, ArmInfo, Format, Row};
use super::{Instrument, Workload};
use crate::args::{DispatchArg, GpuArgs};

#[derive(clap::Args, Debug)]
pub struct AbArgs {
    #[command(flatten)]
    pub work: Workload,
    /// Arm A's options: --dispatch mega|multi, --instrument off|on, --chain, --kv, --grid,
    /// --wg-size, --rows, --spin-timeout-ms, --watchdog-ms (with --a-binary: any options of
    /// that binary's bench but the workload's: --depth, --tokens, --prompts, -m, ... go to
    /// `bench ab` itself). Arms with different --kv or --act cannot have bitwise-equal
    /// logits (the act each arm resolved: `--act auto`, the default, is q8 on an
    /// all-quantised model, so an arm without --act and one with --act q8 can match there).
    #[arg(
        long = "a",
        value_name = "ARGS",
        default_value = "",
        allow_hyphen_values = true
    )]
    pub a: String,
    /// Arm B's options (as --a).
    #[arg(
        long = "b",
        value_name = "ARGS",
        default_value = "",
        allow_hyphen_values = true
    )]
    pub b: String,
    /// Run arm A as this binary's `bench` (the other arm defaults to this binary).
    #[arg(long, value_name = "PATH")]
    pub a_binary: Option<PathBuf>,
    /// Run arm B as this binary's `bench`.
    #[arg(long, value_name = "PATH")]
    pub b_binary: Option<PathBuf>,
    /// Pairs (each arm runs the prompt set once per pair), at least 1.
    #[arg(long, default_value_t = 5, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub pairs: u64,
    /// Predicted Δ of B's generation tok/s against A's, "LO%..HI%" (e.g. "5%..15%"): logged
    /// before running, judged after.
    #[arg(long, value_name = "LO%..HI%", value_parser = parse_range, allow_hyphen_values = true)]
    pub predict: Option<PctRange>,
    /// The predictions log (appended; `-` is stdout).
    #[arg(long, value_name = "FILE", default_value = "baro-predictions.log")]
    pub log: PathBuf,
    /// Vulkan device: index or name substring (one device for both arms).
    #[arg(long)]
    pub device: Option<String>,
}

/// One in-process arm's options (a subset of `bench`'s, so one string serves both ways).
#[derive(Parser, Debug)]
#[command(name = "arm", no_binary_name = true, disable_help_flag = true)]
struct ArmArgs {
    #[arg(long, value_enum, default_value_t = DispatchArg::Mega)]
    dispatch: DispatchArg,
    #[arg(long, value_enum, default_value_t = Instrument::Off)]
    instrument: Instrument,
    #[command(flatten)]
    gpu: GpuArgs,
}

/// A predicted range of Δ%, inclusive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PctRange {
    pub lo: f64,
    pub hi: f64,
}

/// Parse "LO%..HI%" (the `%` signs optional; negative bounds allowed).
pub fn parse_range(s: &str) -> Result<PctRange, String> {
    let Some((lo, hi)) = s.split_once("..") else {
        return Err(format!(
            "{s:?} is not a range: write LO%..HI%, e.g. 5%..15%"
        ));
    };
    let num = |t: &str| -> Result<f64, String> {
        let t = t.trim();
        let v = t.strip_suffix('%').unwrap_or(t).trim();
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() => Ok(x),
            _ => Err(format!(
                "{t:?} in {s:?} is not a percentage (LO%..HI%, e.g. 5%..15%)"
            )),
        }
    };
    let (lo, hi) = (num(lo)?, num(hi)?);
    if lo > hi {
        return Err(format!("{s:?}: LO {lo}% is above HI {hi}%"));
    }
    Ok(PctRange { lo, hi })
}

/// Where a measured Δ falls against the prediction (`unmeasured` for no number).
pub fn verdict(r: PctRange, delta: f64) -> &'static str {
    if !delta.is_finite() {
        "unmeasured"
    } else if delta < r.lo {
        "below"
    } else if delta > r.hi {
        "above"
    } else {
        "inside"
    }
}

/// Δ% of `b` against `a`.
pub fn delta_pct(a: f64, b: f64) -> f64 {
    (b / a - 1.0) * 100.0
}

/// The parity line of two arms' logits checksums: whether they are bitwise identical.
pub fn parity(a: u64, b: u64) -> (bool, String) {
    if a == b {
        (
            true,
            format!("OK (bitwise identical logits, checksum {a:016x})"),
        )
    } else {
        (false, format!("DIFFER (A {a:016x}, B {b:016x})"))
    }
}

/// The workload's options (the same for both arms of an A/B, given to `bench ab` itself): a
/// binary arm's options string naming one would run that arm on another workload than the
/// one its rows are compared on.
const WORKLOAD_FLAGS: [&str; 14] = [
    "--depth",
    "--tokens",
    "--prompts",
    "--model",
    "-m",
    "--tokenizer",
    "-z",
    "--runs",
    "--output",
    "-o",
    "--json",
    "--out",
    "--allow-cpu",
    "--no-wait",
];

/// The first workload option in a binary arm's words, if any (`--x`, `--x=v`, `-mFILE`).
fn workload_flag(words: &[String]) -> Option<&'static str> {
    words.iter().find_map(|w| {
        WORKLOAD_FLAGS.iter().copied().find(|f| {
            w == f
                || (f.starts_with("--") && w.starts_with(&format!("{f}=")))
                || (!f.starts_with("--") && w.starts_with(f) && w.len() > f.len())
        })
    })
}

/// Split an options string on whitespace, honouring '…' and "…" quotes.
pub fn split_args(s: &str) -> anyhow::Result<Vec<String>> {
    let mut out = vec![];
    let mut cur = String::new();
    let mut quote = None;
    let mut any = false;
    for c in s.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => cur.push(c),
        }
    }
    if quote.is_some() {
        bail!("unclosed quote in {s:?}");
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    Ok(out)
}

/// `2026-11-30T12:34:56Z` from Unix seconds (UTC, proleptic Gregorian).
pub fn utc(secs: u64) -> String {
    let c = baro_telemetry::clock::civil_utc(secs);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    )
}

fn now_utc() -> String {
    utc(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()))
}

/// Append one line to the predictions log (`-`: stdout). A regular file is synced, so that
/// a prediction outlives whatever the run does next; a pipe, a terminal or `/dev/null` has
/// no disk to sync (fsync refuses them). Into this process's own stdout whose reader went
/// away, the process ends quietly, as every command's stdout does (crate::out).
fn append_log(path: &Path, line: &str) -> anyhow::Result<()> {
    let ctx = || format!("--log {}", path.display());
    if path == Path::new("-") {
        return writeln!(crate::out::Stdout::lock(), "{line}").with_context(ctx);
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(ctx)?;
    if let Err(e) = writeln!(f, "{line}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe && crate::files::is_own_output(path) {
            crate::out::reader_gone();
        }
        return Err(e).with_context(ctx);
    }
    if f.metadata().with_context(ctx)?.is_file() {
        f.sync_all().with_context(ctx)?;
    }
    Ok(())
}

/// Parse one in-process arm's options.
fn arm_options(flag: &str, s: &str) -> anyhow::Result<(ArmArgs, Vec<String>)> {
    let words = split_args(s).with_context(|| flag.to_string())?;
    let a = ArmArgs::try_parse_from(&words)
        .map_err(|e| anyhow::anyhow!("{flag} {s:?}: {}", e.render().to_string().trim()))?;
    if a.gpu.device.is_some() {
        bail!("{flag} {s:?}: --device goes outside --a/--b (both arms run on one device)");
    }
    if a.instrument == Instrument::Both {
        bail!("{flag} {s:?}: --instrument both is two arms; an arm is one configuration");
    }
    Ok((a, words))
}

pub fn run(a: AbArgs) -> anyhow::Result<ExitCode> {
    // Its exit status is a verdict: a reader that goes silences the lines, not the verdict.
    crate::out::verdict_outlives_the_reader();
    let binaries = a.a_binary.is_some() || a.b_binary.is_some();
    for (flag, p) in [("--a-binary", &a.a_binary), ("--b-binary", &a.b_binary)] {
        if let Some(p) = p {
            if !p.is_file() {
                bail!("{flag} {}: no such file", p.display());
            }
        }
    }
    // In-process arms are checked before anything is logged or run.
    let arms_args = if binaries {
        None
    } else {
        Some((arm_options("--a", &a.a)?, arm_options("--b", &a.b)?))
    };
    let commit = env!("BARO_COMMIT");
    if let Some(r) = a.predict {
        log_prediction(&a, r, commit)?;
    }
    let gpu = GpuArgs {
        device: a.device.clone(),
        ..GpuArgs::default()
    };
    let p = super::prepare(&a.work, &gpu)?;
    let (_lock, contended) = super::take_lock(&p.device, a.work.timing.no_wait)?;
    let meta = super::meta(
        &a.work,
        &p.model,
        &p.device,
        p.prompts.len(),
        a.pairs,
        contended,
    );
    let (report, infos) = match arms_args {
        Some(((aa, _), (bb, _))) => run_in_process(&a, &p, [&aa, &bb], commit)?,
        None => {
            drop(p);
            run_binaries(&a)?
        }
    };
    super::note_nondeterminism(&report);
    let rows = output::rows(&meta, &infos, &report);
    if a.work.output != Format::Text {
        super::emit(a.work.output, &meta, &rows, &report, None)?;
    } else {
        outln!("{}", output::text(&meta, &rows, &report).trim_end())?;
    }
    // The summary: on stdout for text, on stderr beside machine-readable rows.
    let (lines, same) = summary(&a, &report, commit)?;
    for l in lines {
        if a.work.output == Format::Text {
            outln!("{l}")?;
        } else {
            note!("{l}");
        }
    }
    Ok(if same && report.nondeterministic_samples() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Log the prediction (`--predict`) before anything runs: the line stays whatever happens
/// next.
fn log_prediction(a: &AbArgs, r: PctRange, commit: &str) -> anyhow::Result<()> {
    let line = format!(
        "{} commit={commit} PREDICT B vs A generation tok/s in [{:+}%, {:+}%] | a={:?} b={:?}{}{} model={} tokens={} depth={} pairs={}",
        now_utc(),
        r.lo,
        r.hi,
        a.a,
        a.b,
        a.a_binary.as_ref().map_or(String::new(), |p| format!(" a_binary={}", p.display())),
        a.b_binary.as_ref().map_or(String::new(), |p| format!(" b_binary={}", p.display())),
        a.work.model.model.as_ref().map_or("stories260K (embedded)".into(), |p| p.display().to_string()),
        a.work.tokens,
        a.work.depth,
        a.pairs
    );
    append_log(&a.log, &line)?;
    note!("bench ab: prediction logged to {}: {line}", a.log.display());
    Ok(())
}

/// The two arms as option strings, in this process: alternating pairs on one device.
fn run_in_process(
    a: &AbArgs,
    p: &super::Prepared,
    [aa, bb]: [&ArmArgs; 2],
    commit: &str,
) -> anyhow::Result<(BenchReport, Vec<ArmInfo>)> {
    let arm = |name: &str, x: &ArmArgs| {
        let mut o = x
            .gpu
            .decoder_options(x.dispatch.dispatch(), 0, &p.model, p.device.info());
        o.instrument = x.instrument == Instrument::On;
        Arm {
            name: name.into(),
            options: o,
        }
    };
    for (flag, x) in [("--a", aa), ("--b", bb)] {
        if let Some(wg) = x.gpu.wg_size {
            crate::validate::wg_size_fits(wg, p.device.info()).with_context(|| flag.to_string())?;
        }
    }
    let arms = vec![arm("A", aa), arm("B", bb)];
    let cfg = BenchConfig {
        prompts: p.prompts.clone(),
        gen_tokens: a.work.tokens,
        runs: a.pairs,
        arms: arms.clone(),
        mode: ModeConfig::default(),
        depth: a.work.depth,
    };
    let report = run_bench(&p.device, &p.model, &cfg, |grids| {
        note!(
            "bench ab: {} | {}{} prompts + {} tokens, {} pairs, A = {:?} (activations {}, KV cache {}), B = {:?} (activations {}, KV cache {}), grids {grids:?}",
            p.model.source,
            super::depth_note(a.work.depth),
            p.prompts.len(),
            a.work.tokens,
            a.pairs,
            a.a,
            act_words(arms[0].options.act, arms[0].options.act_auto),
            kv_words(arms[0].options.kv, arms[0].options.kv_auto),
            a.b,
            act_words(arms[1].options.act, arms[1].options.act_auto),
            kv_words(arms[1].options.kv, arms[1].options.kv_auto)
        )
    })
    .context("benchmarking")?;
    super::note_pipelines(&report);
    let infos = ArmInfo::of_report(&arms, &report, commit);
    Ok((report, infos))
}

/// The summary lines (each arm's medians, Δ, the parity of their logits, and the verdict on
/// a prediction, which is logged too), and whether the arms' logits and tokens are the same.
fn summary(a: &AbArgs, report: &BenchReport, commit: &str) -> anyhow::Result<(Vec<String>, bool)> {
    let mut lines = vec![];
    let mode = common_mode(&report.arms);
    let [ra, rb] = [&report.arms[0], &report.arms[1]];
    for r in [ra, rb] {
        let s = in_mode(r, mode);
        let tg: Vec<f64> = s.iter().map(|s| s.gen_tok_s()).collect();
        let pp: Vec<f64> = s.iter().map(|s| s.prompt_tok_s()).collect();
        let (tm, tl, _) = stats(&tg);
        let (pm, pl, _) = stats(&pp);
        lines.push(format!(
            "{}: generation {tm:.2} tok/s median ({tl:.2} min), prompt {pm:.2} tok/s median ({pl:.2} min), {} samples in mode {} ({})",
            r.arm.name,
            s.len(),
            mode_label(mode),
            output::sample_tally(r)
        ));
    }
    let (pa, ta) = output::medians(ra, mode);
    let (pb, tb) = output::medians(rb, mode);
    let d_gen = delta_pct(ta, tb);
    lines.push(format!(
        "Δ B vs A: generation {d_gen:+.2}%, prompt {:+.2}% (within mode {})",
        delta_pct(pa, pb),
        mode_label(mode)
    ));
    let (same, pline) = parity(ra.logits_checksum, rb.logits_checksum);
    let same = same && ra.tokens == rb.tokens;
    lines.push(format!("parity of logits: {pline}"));
    if let Some(r) = a.predict {
        let v = verdict(r, d_gen);
        let judged = format!(
            "{v} — predicted {:+}%..{:+}%, measured {d_gen:+.2}% (A {ta:.2}, B {tb:.2} generation tok/s, mode {})",
            r.lo,
            r.hi,
            mode_label(mode)
        );
        append_log(
            &a.log,
            &format!(
                "{} commit={commit} VERDICT {judged}; parity {}",
                now_utc(),
                if same { "OK" } else { "DIFFER" }
            ),
        )?;
        lines.push(format!("verdict: {judged}"));
    }
    Ok((lines, same))
}

/// The two arms as child runs of their binaries, alternating A B, B A, ...
fn run_binaries(a: &AbArgs) -> anyhow::Result<(BenchReport, Vec<ArmInfo>)> {
    let me = std::env::current_exe().context("finding this binary")?;
    let bins = [
        a.a_binary.clone().unwrap_or_else(|| me.clone()),
        a.b_binary.clone().unwrap_or(me),
    ];
    let (common, arm_words) = child_args(a)?;
    let names = ["A", "B"];
    let mut results: Vec<Option<ArmResult>> = vec![None, None];
    let mut infos: Vec<Option<ArmInfo>> = vec![None, None];
    for pair in 0..a.pairs {
        let order = if pair.is_multiple_of(2) {
            [0, 1]
        } else {
            [1, 0]
        };
        for i in order {
            let child = Child {
                name: names[i],
                bin: &bins[i],
                common: &common,
                words: &arm_words[i],
            };
            let rows = child.run(a)?;
            let (res, info) = child_arm(names[i], pair, &rows)
                .with_context(|| format!("arm {} ({})", names[i], bins[i].display()))?;
            match &mut results[i] {
                None => {
                    results[i] = Some(res);
                    infos[i] = Some(info);
                }
                Some(acc) => {
                    if acc.logits_checksum != res.logits_checksum {
                        acc.differing.push((pair, 0));
                    }
                    acc.samples.extend(res.samples);
                    acc.modes.fast += res.modes.fast;
                    acc.modes.slow += res.modes.slow;
                    acc.modes.unknown += res.modes.unknown;
                }
            }
        }
    }
    let arms: Vec<ArmResult> = results.into_iter().flatten().collect();
    let infos: Vec<ArmInfo> = infos.into_iter().flatten().collect();
    let grids = infos.iter().map(|i| i.grid).collect();
    Ok((BenchReport { arms, grids }, infos))
}

/// A child `bench` run's words: those both arms share (one sample set of the workload, as
/// JSON lines), and each arm's own (from --a and --b, one dispatch style by default).
fn child_args(a: &AbArgs) -> anyhow::Result<(Vec<String>, Vec<Vec<String>>)> {
    let mut common: Vec<String> = vec![
        "bench".into(),
        "--ab-child".into(),
        "--runs".into(),
        "1".into(),
        "-o".into(),
        "jsonl".into(),
        "--tokens".into(),
        a.work.tokens.to_string(),
    ];
    let mut path_arg = |flag: &str, p: &Option<PathBuf>| {
        if let Some(p) = p {
            common.push(flag.into());
            common.push(p.display().to_string());
        }
    };
    path_arg("--model", &a.work.model.model);
    path_arg("--tokenizer", &a.work.model.tokenizer);
    path_arg("--prompts", &a.work.prompts);
    // Only where set: a binary from before the option then still runs without one.
    if a.work.depth > 0 {
        common.extend(["--depth".into(), a.work.depth.to_string()]);
    }
    if let Some(d) = &a.device {
        common.extend(["--device".into(), d.clone()]);
    }
    if a.work.timing.allow_cpu {
        common.push("--allow-cpu".into());
    }
    let mut arm_words = vec![];
    for (flag, s) in [("--a", &a.a), ("--b", &a.b)] {
        let mut w = split_args(s).with_context(|| flag.to_string())?;
        if let Some(x) = workload_flag(&w) {
            bail!(
                "{flag} {s:?}: {x} belongs to the workload, which both arms share: give it to `bench ab` itself (an A/B compares two builds or configurations on one workload)"
            );
        }
        // A child arm is one configuration: plain bench's default is both dispatch styles.
        if !w
            .iter()
            .any(|x| x == "--dispatch" || x.starts_with("--dispatch="))
        {
            w.extend(["--dispatch".into(), "mega".into()]);
        }
        arm_words.push(w);
    }
    Ok((common, arm_words))
}

/// One child run of an arm's binary.
struct Child<'a> {
    name: &'a str,
    bin: &'a Path,
    common: &'a [String],
    words: &'a [String],
}

impl Child<'_> {
    /// Run it once and read its JSON rows, refusing a failed run or one that ran another
    /// workload than the comparison's.
    fn run(&self, a: &AbArgs) -> anyhow::Result<Vec<Row>> {
        let (name, bin) = (self.name, self.bin.display());
        let o = Command::new(self.bin)
            .args(self.common)
            .args(self.words)
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("running arm {name} ({bin})"))?;
        let stdout = String::from_utf8_lossy(&o.stdout);
        if !o.status.success() && o.status.code() != Some(1) {
            let err = String::from_utf8_lossy(&o.stderr);
            let tail: Vec<&str> = err.lines().rev().take(8).collect();
            bail!(
                "arm {name} ({bin} {} {}) failed ({}):\n{}",
                self.common.join(" "),
                self.words.join(" "),
                o.status,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        let rows: Vec<Row> = stdout
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(serde_json::from_str)
            .collect::<Result<_, _>>()
            .with_context(|| format!("arm {name} ({bin}): reading its JSON rows"))?;
        // The comparison is only fair on the parent's workload.
        if let Some(r) = rows
            .iter()
            .find(|r| r.n_depth != a.work.depth || (r.test == "tg" && r.n_gen != a.work.tokens))
        {
            bail!(
                "arm {name} ({bin}) ran depth {} and {} generated tokens, not the comparison's depth {} and {} tokens",
                r.n_depth,
                rows.iter().find(|r| r.test == "tg").map_or(0, |r| r.n_gen),
                a.work.depth,
                a.work.tokens
            );
        }
        Ok(rows)
    }
}

/// One child run's rows (one `pp` and one `tg` row) as an arm's result.
pub fn child_arm(name: &str, run: u64, rows: &[Row]) -> anyhow::Result<(ArmResult, ArmInfo)> {
    let (Some(pp), Some(tg), 2) = (
        rows.iter().find(|r| r.test == "pp"),
        rows.iter().find(|r| r.test == "tg"),
        rows.len(),
    ) else {
        bail!(
            "the child printed {} rows, not one pp and one tg row: an arm is one configuration (one --dispatch, one --instrument)",
            rows.len()
        );
    };
    let n = pp.samples_ns.len();
    if [
        tg.samples_ns.len(),
        pp.samples_n.len(),
        tg.samples_n.len(),
        pp.samples_mode.len(),
    ]
    .iter()
    .any(|&m| m != n)
    {
        bail!("the child's rows disagree on the number of samples");
    }
    let mode = |s: &str| match s {
        "fast" => Ok(PowerMode::Fast),
        "slow" => Ok(PowerMode::Slow),
        "unknown" => Ok(PowerMode::Unknown),
        other => Err(anyhow::anyhow!(
            "unknown power mode {other:?} in the child's rows"
        )),
    };
    let samples = (0..n)
        .map(|k| {
            Ok(Sample {
                run,
                prompt: k,
                prompt_tokens: pp.samples_n[k],
                prompt_ns: pp.samples_ns[k],
                gen_tokens: tg.samples_n[k],
                gen_ns: tg.samples_ns[k],
                mode: mode(&pp.samples_mode[k])?,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let checksum = u64::from_str_radix(&pp.logits_checksum, 16)
        .map_err(|e| anyhow::anyhow!("logits_checksum {:?}: {e}", pp.logits_checksum))?;
    let res = ArmResult {
        arm: Arm {
            name: name.into(),
            options: Default::default(),
        },
        samples,
        modes: ModeTally {
            fast: pp.passes_fast,
            slow: pp.passes_slow,
            unknown: pp.passes_unknown,
        },
        logits_checksum: checksum,
        tokens: vec![],
        differing: vec![],
        pipelines: vec![],
        prefetch_mib: pp.prefetch_mib.unwrap_or(0),
        device_clock_off: None,
        idle_wait_ns: pp.idle_wait_ns.unwrap_or(0),
    };
    let info = ArmInfo {
        name: name.into(),
        dispatch: pp.dispatch.clone(),
        instrument: pp.instrument,
        grid: pp.grid,
        chain: pp.chain,
        kv: pp.kv.clone(),
        act: pp.act.clone(),
        commit: pp.commit.clone(),
        registers: pp.registers,
        spills: pp.spills,
        prefetch_mib: pp.prefetch_mib,
        idle_wait_ns: pp.idle_wait_ns,
        robust_buffers: pp.robust_buffers.clone(),
    };
    Ok((res, info))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    #[test]
    fn workload_options_in_a_binary_arm_are_found_in_every_spelling() {
        let w = |s: &str| workload_flag(&split_args(s).unwrap());
        assert_eq!(w("--dispatch multi --depth 300"), Some("--depth"));
        assert_eq!(w("--tokens=5"), Some("--tokens"));
        assert_eq!(w("-m /tmp/x.gguf"), Some("-m"));
        assert_eq!(w("-m/tmp/x.gguf"), Some("-m"));
        assert_eq!(w("--instrument on --prompts p.txt"), Some("--prompts"));
        assert_eq!(
            w("--dispatch mega --instrument on --chain 4 --kv f16"),
            None
        );
        assert_eq!(w("--model-free --dispatch mega"), None);
    }

    use super::*;

    #[test]
    fn percent_ranges_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_range("5%..15%").unwrap(),
            PctRange { lo: 5.0, hi: 15.0 }
        );
        assert_eq!(
            parse_range("-3..2.5%").unwrap(),
            PctRange { lo: -3.0, hi: 2.5 }
        );
        assert!(parse_range("15%..5%").unwrap_err().contains("above"));
        assert!(parse_range("5%").unwrap_err().contains("LO%..HI%"));
        assert!(parse_range("x%..5%")
            .unwrap_err()
            .contains("not a percentage"));
        assert!(parse_range("nan..5")
            .unwrap_err()
            .contains("not a percentage"));
    }

    #[test]
    fn verdicts_are_below_inside_or_above_the_range() {
        let r = PctRange { lo: 5.0, hi: 15.0 };
        assert_eq!(verdict(r, 4.9), "below");
        assert_eq!(verdict(r, 5.0), "inside");
        assert_eq!(verdict(r, 15.0), "inside");
        assert_eq!(verdict(r, 15.1), "above");
        assert_eq!(verdict(r, f64::NAN), "unmeasured");
        assert!((delta_pct(100.0, 110.0) - 10.0).abs() < 1e-9);
    }

    #[test]
    fn differing_checksums_are_a_parity_failure_naming_both() {
        let (ok, line) = parity(0xab, 0xab);
        assert!(ok && line.starts_with("OK"), "{line}");
        let (ok, line) = parity(0xab, 0xac);
        assert!(!ok, "{line}");
        assert!(
            line.contains("DIFFER")
                && line.contains("00000000000000ab")
                && line.contains("00000000000000ac")
        );
    }

    #[test]
    fn options_strings_split_on_spaces_and_honour_quotes() {
        assert_eq!(
            split_args(" --grid 2  --wg-size 64 ").unwrap(),
            ["--grid", "2", "--wg-size", "64"]
        );
        assert_eq!(
            split_args("-m 'a b.gguf' \"\"").unwrap(),
            ["-m", "a b.gguf", ""]
        );
        assert!(split_args("--x 'open").is_err());
        assert!(split_args("").unwrap().is_empty());
    }

    #[test]
    fn utc_times_are_iso_8601() {
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc(1_764_504_000), "2025-11-30T12:00:00Z");
    }

    #[test]
    fn arm_strings_refuse_a_device_and_both_instrument_settings() {
        assert!(arm_options("--a", "--device 0")
            .unwrap_err()
            .to_string()
            .contains("one device"));
        assert!(arm_options("--b", "--instrument both")
            .unwrap_err()
            .to_string()
            .contains("one configuration"));
        let e = arm_options("--a", "--frobnicate").unwrap_err().to_string();
        assert!(e.contains("--a") && e.contains("--frobnicate"), "{e}");
        let (x, _) = arm_options("--a", "--dispatch multi --wg-size 64").unwrap();
        assert_eq!((x.dispatch, x.gpu.wg_size), (DispatchArg::Multi, Some(64)));
    }
}
