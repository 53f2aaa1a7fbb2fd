//! The bench's results as rows in llama-bench's spirit (one row per arm and test: `pp` the
//! prompt, `tg` the generation), and their formats: text, json, jsonl, csv, md.
//!
//! Statistics (`avg_*`, `stddev_*`, `median_ts`, `min_ts`, `max_ts`) are over the samples in
//! the compared power mode (`mode`; `all` where no mode is common to every arm); `samples_*`
//! list every sample, with its mode in `samples_mode`, so a reader can redo the selection.

use baro_engine::bench::{mean_stddev, stats, ArmResult, BenchReport, Sample};
use baro_engine::telemetry::labels::{mode_name, ModeTally};
use baro_engine::telemetry::PowerMode;
use clap::ValueEnum;
use serde::{Deserialize, Serialize};

/// `-o`: how results are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A table for people.
    Text,
    /// One JSON array of row objects.
    Json,
    /// One JSON object a line.
    Jsonl,
    /// Comma-separated, with a header line.
    Csv,
    /// A Markdown table.
    Md,
}

/// What every row repeats: the model, the device, the build and the workload.
#[derive(Clone, Debug)]
pub struct Meta {
    /// Model file (or the embedded model's name).
    pub model_filename: String,
    /// Matrix type of the blocks (`q4_0`, `f32`, ...).
    pub model_type: String,
    /// Weight bytes.
    pub model_size: u64,
    /// Parameters.
    pub model_n_params: u64,
    /// Device name.
    pub device: String,
    /// Driver.
    pub driver: String,
    /// Commit baro-top was built from.
    pub commit: String,
    /// Prompts per run.
    pub prompts: usize,
    /// Runs (repetitions of the prompt set) per arm.
    pub runs: u64,
    /// Generated tokens per sample.
    pub n_gen: usize,
    /// Positions of (zeroed) context before every prompt (`--depth`).
    pub n_depth: usize,
    /// Another timing run held the GPU lock (`--no-wait`): every pass is contended.
    pub contended: bool,
}

/// One arm's configuration as rows print it.
#[derive(Clone, Debug)]
pub struct ArmInfo {
    /// `mega`, `A`, ...
    pub name: String,
    /// `mega` or `multi` (or the child's, for binaries).
    pub dispatch: String,
    /// The event ring was on.
    pub instrument: bool,
    /// Workgroups.
    pub grid: u32,
    /// Passes per submission in the timed passes.
    pub chain: u32,
    /// KV cache storage (`f32`, `f16`).
    pub kv: String,
    /// What quantised matrices multiplied against (`f32`, `q8`).
    pub act: String,
    /// Commit of the binary that ran it.
    pub commit: String,
    /// Registers per lane of its (stamping) decode pipeline, where the driver reports them.
    pub registers: Option<u64>,
    /// Spills of that pipeline, where the driver reports them.
    pub spills: Option<u64>,
    /// The megakernel's read-ahead budget, MiB, where the binary reports it.
    pub prefetch_mib: Option<u32>,
    /// The megakernel's idle wait, ns, where the binary reports it.
    pub idle_wait_ns: Option<u32>,
    /// The driver's bounds checks (`--robust-buffers`: `default` or `off`), where the binary
    /// reports it.
    pub robust_buffers: Option<String>,
}

impl ArmInfo {
    /// Every arm of an in-process bench as its rows print it (the report's grids and
    /// compiler statistics beside each arm's options).
    pub fn of_report(
        arms: &[baro_engine::bench::Arm],
        report: &BenchReport,
        commit: &str,
    ) -> Vec<ArmInfo> {
        arms.iter()
            .zip(&report.grids)
            .zip(&report.arms)
            .map(|((arm, &grid), res)| {
                let (registers, spills) = ArmInfo::compiler(&res.pipelines);
                ArmInfo {
                    name: arm.name.clone(),
                    dispatch: arm.options.dispatch.to_string(),
                    instrument: arm.options.instrument,
                    grid,
                    chain: arm.options.chain,
                    kv: arm.options.kv.to_string(),
                    act: arm.options.act.to_string(),
                    commit: commit.into(),
                    registers,
                    spills,
                    prefetch_mib: Some(res.prefetch_mib),
                    idle_wait_ns: Some(res.idle_wait_ns),
                    robust_buffers: Some(arm.options.robust_buffers.name().into()),
                }
            })
            .collect()
    }

    /// Registers and spills of the first (stamping) pipeline of `stats`: what the rows carry.
    pub fn compiler(stats: &[baro_engine::telemetry::PipelineStats]) -> (Option<u64>, Option<u64>) {
        stats
            .first()
            .map_or((None, None), |p| (p.registers(), p.spills()))
    }
}

fn one() -> u32 {
    1
}

fn f32_name() -> String {
    "f32".into()
}

/// One row: an arm's prompt (`pp`) or generation (`tg`) numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub model_filename: String,
    pub model_type: String,
    pub model_size: u64,
    pub model_n_params: u64,
    pub device: String,
    pub driver: String,
    pub commit: String,
    pub arm: String,
    pub dispatch: String,
    pub instrument: bool,
    pub grid: u32,
    /// Passes per submission in the timed passes (generated tokens chained on the GPU);
    /// rows from binaries before chaining read 1.
    #[serde(default = "one")]
    pub chain: u32,
    /// KV cache storage, `f32` or `f16`; rows from binaries before the f16 option read f32.
    #[serde(default = "f32_name")]
    pub kv: String,
    /// What quantised matrices multiplied against, `f32` or `q8`; rows from binaries before
    /// the q8 option read f32.
    #[serde(default = "f32_name")]
    pub act: String,
    /// Registers per lane of the arm's decode pipeline as the driver's compiler reports them
    /// (VK_KHR_pipeline_executable_properties); absent where it does not.
    #[serde(default)]
    pub registers: Option<u64>,
    /// Spills of that pipeline as the driver reports them; absent where it does not.
    #[serde(default)]
    pub spills: Option<u64>,
    /// The megakernel's read-ahead budget, MiB (`--prefetch-mib`, the device default
    /// resolved; 0: none); absent in rows from binaries before it was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch_mib: Option<u32>,
    /// The megakernel's idle wait, ns (`--idle-wait-ns`, the device default resolved; 0:
    /// none); absent in rows from binaries before it was reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_wait_ns: Option<u32>,
    /// The driver's bounds checks on the decoder's buffers (`--robust-buffers`): `default`
    /// (the device's own behaviour) or `off`; absent in rows from binaries before the option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub robust_buffers: Option<String>,
    /// `pp` (prompt) or `tg` (generation).
    pub test: String,
    /// Prompt tokens per sample (mean over the prompt set, BOS included); 0 in `tg` rows.
    pub n_prompt: usize,
    /// Generated tokens per sample; 0 in `pp` rows.
    pub n_gen: usize,
    /// Positions of context before every prompt (`--depth`, zeroed cache rows); rows from
    /// binaries before the option read 0.
    #[serde(default)]
    pub n_depth: usize,
    pub prompts: usize,
    pub runs: u64,
    /// The power mode the statistics are over: `fast`, `slow`, or `all`.
    pub mode: String,
    /// Samples in that mode.
    pub samples_in_mode: usize,
    pub avg_ns: f64,
    pub stddev_ns: f64,
    pub avg_ts: f64,
    pub stddev_ts: f64,
    pub median_ts: f64,
    pub min_ts: f64,
    pub max_ts: f64,
    /// Every sample's time, ns.
    pub samples_ns: Vec<u64>,
    /// Every sample's tokens per second.
    pub samples_ts: Vec<f64>,
    /// Every sample's tokens.
    pub samples_n: Vec<usize>,
    /// Every sample's power mode.
    pub samples_mode: Vec<String>,
    /// The arm's passes (prompt and generation) per mode.
    pub passes_fast: u64,
    pub passes_slow: u64,
    pub passes_unknown: u64,
    /// Passes run while another timing run held the GPU.
    pub contended_passes: u64,
    /// Every arm's logits bitwise identical to every other's.
    pub parity: bool,
    /// FNV-1a of every pass's logits bits (the parity sweep), hex.
    pub logits_checksum: String,
}

/// The mode every arm has samples in: fast if each has one, else slow; `None` (compare all
/// samples) when no mode is common.
pub fn common_mode(arms: &[ArmResult]) -> Option<PowerMode> {
    [PowerMode::Fast, PowerMode::Slow]
        .into_iter()
        .find(|&m| arms.iter().all(|a| a.samples.iter().any(|s| s.mode == m)))
}

/// `fast`, `slow`, or `all` for no common mode.
pub fn mode_label(m: Option<PowerMode>) -> &'static str {
    m.map_or("all", mode_name)
}

/// An arm's samples in mode `m` (all of them for `None`).
pub fn in_mode(a: &ArmResult, m: Option<PowerMode>) -> Vec<&Sample> {
    a.samples
        .iter()
        .filter(|s| m.is_none_or(|m| s.mode == m))
        .collect()
}

/// Per-sample modes, counted.
pub fn sample_tally(a: &ArmResult) -> ModeTally {
    ModeTally::of(a.samples.iter().map(|s| s.mode))
}

/// Median tok/s of an arm's prompt and generation samples in mode `m`.
pub fn medians(a: &ArmResult, m: Option<PowerMode>) -> (f64, f64) {
    let s = in_mode(a, m);
    let pp: Vec<f64> = s.iter().map(|s| s.prompt_tok_s()).collect();
    let tg: Vec<f64> = s.iter().map(|s| s.gen_tok_s()).collect();
    (stats(&pp).0, stats(&tg).0)
}

/// The rows of a report: per arm, `pp` then `tg`.
pub fn rows(meta: &Meta, arms: &[ArmInfo], report: &BenchReport) -> Vec<Row> {
    let mode = common_mode(&report.arms);
    let parity = report.parity();
    let mut out = vec![];
    for (info, a) in arms.iter().zip(&report.arms) {
        let passes: u64 = a
            .samples
            .iter()
            .map(|s| (s.prompt_tokens + s.gen_tokens) as u64)
            .sum();
        for test in ["pp", "tg"] {
            let pp = test == "pp";
            let ns = |s: &Sample| if pp { s.prompt_ns } else { s.gen_ns };
            let n = |s: &Sample| if pp { s.prompt_tokens } else { s.gen_tokens };
            let ts = |s: &Sample| if pp { s.prompt_tok_s() } else { s.gen_tok_s() };
            let sel = in_mode(a, mode);
            let sel_ns: Vec<f64> = sel.iter().map(|s| ns(s) as f64).collect();
            let sel_ts: Vec<f64> = sel.iter().map(|s| ts(s)).collect();
            let (avg_ns, stddev_ns) = mean_stddev(&sel_ns);
            let (avg_ts, stddev_ts) = mean_stddev(&sel_ts);
            let (median_ts, min_ts, max_ts) = stats(&sel_ts);
            let n_prompt = if pp {
                let total: usize = a.samples.iter().map(|s| s.prompt_tokens).sum();
                (total as f64 / a.samples.len().max(1) as f64).round() as usize
            } else {
                0
            };
            out.push(Row {
                model_filename: meta.model_filename.clone(),
                model_type: meta.model_type.clone(),
                model_size: meta.model_size,
                model_n_params: meta.model_n_params,
                device: meta.device.clone(),
                driver: meta.driver.clone(),
                commit: info.commit.clone(),
                arm: info.name.clone(),
                dispatch: info.dispatch.clone(),
                instrument: info.instrument,
                grid: info.grid,
                chain: info.chain,
                kv: info.kv.clone(),
                act: info.act.clone(),
                registers: info.registers,
                spills: info.spills,
                prefetch_mib: info.prefetch_mib,
                idle_wait_ns: info.idle_wait_ns,
                robust_buffers: info.robust_buffers.clone(),
                test: test.into(),
                n_prompt,
                n_gen: if pp { 0 } else { meta.n_gen },
                n_depth: meta.n_depth,
                prompts: meta.prompts,
                runs: meta.runs,
                mode: mode_label(mode).into(),
                samples_in_mode: sel.len(),
                avg_ns,
                stddev_ns,
                avg_ts,
                stddev_ts,
                median_ts,
                min_ts,
                max_ts,
                samples_ns: a.samples.iter().map(ns).collect(),
                samples_ts: a.samples.iter().map(ts).collect(),
                samples_n: a.samples.iter().map(n).collect(),
                samples_mode: a.samples.iter().map(|s| mode_name(s.mode).into()).collect(),
                passes_fast: a.modes.fast,
                passes_slow: a.modes.slow,
                passes_unknown: a.modes.unknown,
                contended_passes: if meta.contended { passes } else { 0 },
                parity,
                logits_checksum: format!("{:016x}", a.logits_checksum),
            });
        }
    }
    out
}

/// The CSV columns, in order (every field of [`Row`]).
const COLUMNS: [&str; 44] = [
    "model_filename",
    "model_type",
    "model_size",
    "model_n_params",
    "device",
    "driver",
    "commit",
    "arm",
    "dispatch",
    "instrument",
    "grid",
    "chain",
    "kv",
    "act",
    "registers",
    "spills",
    "prefetch_mib",
    "idle_wait_ns",
    "robust_buffers",
    "test",
    "n_prompt",
    "n_gen",
    "n_depth",
    "prompts",
    "runs",
    "mode",
    "samples_in_mode",
    "avg_ns",
    "stddev_ns",
    "avg_ts",
    "stddev_ts",
    "median_ts",
    "min_ts",
    "max_ts",
    "samples_ns",
    "samples_ts",
    "samples_n",
    "samples_mode",
    "passes_fast",
    "passes_slow",
    "passes_unknown",
    "contended_passes",
    "parity",
    "logits_checksum",
];

fn csv_cell(v: &serde_json::Value) -> String {
    let s = match v {
        serde_json::Value::String(s) => s.clone(),
        // Not reported (a driver without compiler statistics): an empty cell.
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

/// The rows in a machine-readable format (`Text` is printed by the caller: it needs more
/// than the rows).
pub fn render(format: Format, rows: &[Row]) -> anyhow::Result<String> {
    let mut out = String::new();
    match format {
        Format::Text => anyhow::bail!("render: text is not a row format"),
        Format::Json => {
            out = serde_json::to_string_pretty(rows)?;
            out.push('\n');
        }
        Format::Jsonl => {
            for r in rows {
                out.push_str(&serde_json::to_string(r)?);
                out.push('\n');
            }
        }
        Format::Csv => {
            let cols = &COLUMNS;
            out.push_str(&cols.join(","));
            out.push('\n');
            for r in rows {
                let v = serde_json::to_value(r)?;
                let cells: Vec<String> = cols.iter().map(|c| csv_cell(&v[*c])).collect();
                out.push_str(&cells.join(","));
                out.push('\n');
            }
        }
        Format::Md => {
            out.push_str("| model | type | size | params | device | arm | test | mode | t/s | median (min, max) |\n");
            out.push_str("| --- | --- | ---: | ---: | --- | --- | --- | --- | ---: | ---: |\n");
            for r in rows {
                let test = test_label(r);
                out.push_str(&format!(
                    "| {} | {} | {:.2} MiB | {} | {} | {} | {} | {} ({}) | {:.2} ± {:.2} | {:.2} ({:.2}, {:.2}) |\n",
                    r.model_filename,
                    r.model_type,
                    r.model_size as f64 / (1u64 << 20) as f64,
                    r.model_n_params,
                    r.device,
                    r.arm,
                    test,
                    r.mode,
                    r.samples_in_mode,
                    r.avg_ts,
                    r.stddev_ts,
                    r.median_ts,
                    r.min_ts,
                    r.max_ts
                ));
            }
        }
    }
    Ok(out)
}

/// A row's test as llama-bench names it: `pp7`, `tg128`, `tg128 @ d4096` at a depth.
pub fn test_label(r: &Row) -> String {
    let t = if r.test == "pp" {
        format!("pp{}", r.n_prompt)
    } else {
        format!("tg{}", r.n_gen)
    };
    if r.n_depth > 0 {
        format!("{t} @ d{}", r.n_depth)
    } else {
        t
    }
}

/// The text report: per arm prompt and generation tok/s, median (min, max), and the passes
/// and samples per mode; then which mode was compared.
pub fn text(meta: &Meta, rows: &[Row], report: &BenchReport) -> String {
    let mut s = format!(
        "{:<14} {:>15} {:>32} {:>30} {:>20}\n",
        "arm", "test", "tok/s median (min, max)", "mean ± stddev", "passes fast/slow/unk"
    );
    for r in rows {
        let test = test_label(r);
        s.push_str(&format!(
            "{:<14} {:>15} {:>32} {:>30} {:>20}\n",
            r.arm,
            test,
            format!("{:.1} ({:.1}, {:.1})", r.median_ts, r.min_ts, r.max_ts),
            format!("{:.1} ± {:.1}", r.avg_ts, r.stddev_ts),
            format!("{}/{}/{}", r.passes_fast, r.passes_slow, r.passes_unknown),
        ));
    }
    let mode = common_mode(&report.arms);
    let per_arm: Vec<String> = report
        .arms
        .iter()
        .map(|a| {
            format!(
                "{} {} of {} samples ({})",
                a.arm.name,
                in_mode(a, mode).len(),
                a.samples.len(),
                sample_tally(a)
            )
        })
        .collect();
    s.push_str(&match mode {
        Some(m) => format!(
            "compared within the {} mode: {}\n",
            mode_name(m),
            per_arm.join("; ")
        ),
        None => format!(
            "no power mode common to every arm: compared over all samples: {}\n",
            per_arm.join("; ")
        ),
    });
    if meta.contended {
        s.push_str("CONTENDED: another timing run held this GPU (--no-wait): every pass is labelled contended\n");
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use baro_engine::bench::Arm;
    use baro_engine::device::DecoderOptions;

    fn arm(name: &str, modes: &[PowerMode]) -> ArmResult {
        ArmResult {
            arm: Arm {
                name: name.into(),
                options: DecoderOptions::default(),
            },
            samples: modes
                .iter()
                .enumerate()
                .map(|(i, &m)| Sample {
                    run: 0,
                    prompt: i,
                    prompt_tokens: 10,
                    prompt_ns: 1_000_000 * (i as u64 + 1),
                    gen_tokens: 4,
                    gen_ns: 2_000_000,
                    mode: m,
                })
                .collect(),
            modes: ModeTally::default(),
            logits_checksum: 1,
            tokens: vec![],
            differing: vec![],
            pipelines: vec![],
            prefetch_mib: 16,
            device_clock_off: None,
            idle_wait_ns: 2000,
        }
    }

    #[test]
    fn arms_are_compared_in_the_fast_mode_when_each_has_it_else_slow_else_all() {
        use PowerMode::*;
        let both_fast = [arm("A", &[Fast, Slow]), arm("B", &[Slow, Fast])];
        assert_eq!(common_mode(&both_fast), Some(Fast));
        let only_slow = [arm("A", &[Fast, Slow]), arm("B", &[Slow, Unknown])];
        assert_eq!(common_mode(&only_slow), Some(Slow));
        let none = [arm("A", &[Fast]), arm("B", &[Slow])];
        assert_eq!(common_mode(&none), None);
    }

    /// A bench's metadata for `prompts` prompts, one run of 4 generated tokens.
    fn test_meta(prompts: usize, contended: bool) -> Meta {
        Meta {
            model_filename: "m".into(),
            model_type: "f32".into(),
            model_size: 1,
            model_n_params: 1,
            device: "d".into(),
            driver: "v".into(),
            commit: "c".into(),
            prompts,
            runs: 1,
            n_gen: 4,
            n_depth: 0,
            contended,
        }
    }

    #[test]
    fn statistics_are_over_the_compared_mode_and_samples_list_all() {
        use PowerMode::*;
        let report = BenchReport {
            arms: vec![arm("A", &[Fast, Slow, Fast]), arm("B", &[Fast, Fast, Fast])],
            grids: vec![2, 2],
        };
        let meta = test_meta(3, true);
        let info = |n: &str| ArmInfo {
            name: n.into(),
            dispatch: "mega".into(),
            instrument: false,
            grid: 2,
            chain: 1,
            kv: "f32".into(),
            act: "f32".into(),
            commit: "c".into(),
            registers: None,
            spills: None,
            prefetch_mib: Some(16),
            idle_wait_ns: Some(2000),
            robust_buffers: Some("off".into()),
        };
        let r = rows(&meta, &[info("A"), info("B")], &report);
        assert_eq!(r.len(), 4);
        let a_pp = &r[0];
        assert_eq!((a_pp.test.as_str(), a_pp.mode.as_str()), ("pp", "fast"));
        assert_eq!(a_pp.samples_in_mode, 2);
        assert_eq!(a_pp.samples_ns, vec![1_000_000, 2_000_000, 3_000_000]);
        // Fast samples are 1 ms and 3 ms for 10 tokens: 10000 and 3333.3 tok/s.
        assert!((a_pp.avg_ns - 2_000_000.0).abs() < 1e-6);
        assert!((a_pp.max_ts - 10_000.0).abs() < 1e-6);
        assert_eq!(a_pp.contended_passes, 3 * 14);
        let fields = serde_json::to_value(&r[0]).unwrap();
        let fields = fields.as_object().unwrap();
        assert_eq!(fields.len(), COLUMNS.len(), "csv has a column per field");
        assert!(COLUMNS.iter().all(|c| fields.contains_key(*c)));
        let csv = render(Format::Csv, &r).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert!(header.contains(&"avg_ts") && header.contains(&"samples_ns"));
        assert_eq!(lines.count(), 4);
    }

    #[test]
    fn rows_carry_the_kv_type_and_read_ahead_and_rows_written_before_them_read_f32_and_unknown() {
        let report = BenchReport {
            arms: vec![arm("A", &[PowerMode::Fast])],
            grids: vec![2],
        };
        let meta = test_meta(1, false);
        let info = ArmInfo {
            name: "A".into(),
            dispatch: "mega".into(),
            instrument: false,
            grid: 2,
            chain: 1,
            kv: "f16".into(),
            act: "f32".into(),
            commit: "c".into(),
            registers: None,
            spills: None,
            prefetch_mib: Some(16),
            idle_wait_ns: Some(2000),
            robust_buffers: Some("off".into()),
        };
        let r = rows(&meta, &[info], &report);
        assert!(r.iter().all(|r| r.kv == "f16"));
        let csv = render(Format::Csv, &r).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = header.iter().position(|c| *c == "kv").expect("a kv column");
        let first: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(first[col], "f16");
        let mut old = serde_json::to_value(&r[0]).unwrap();
        old.as_object_mut().unwrap().remove("kv");
        let back: Row = serde_json::from_value(old).unwrap();
        assert_eq!(back.kv, "f32");
        // The read-ahead budget travels too; rows from before it read as unknown, not 0.
        assert_eq!(r[0].prefetch_mib, Some(16));
        let mut old = serde_json::to_value(&r[0]).unwrap();
        old.as_object_mut().unwrap().remove("prefetch_mib");
        let back: Row = serde_json::from_value(old).unwrap();
        assert_eq!(back.prefetch_mib, None);
        // So does the idle wait.
        assert_eq!(r[0].idle_wait_ns, Some(2000));
        let mut old = serde_json::to_value(&r[0]).unwrap();
        old.as_object_mut().unwrap().remove("idle_wait_ns");
        let back: Row = serde_json::from_value(old).unwrap();
        assert_eq!(back.idle_wait_ns, None);
        // And the driver's bounds checks: a CSV column, absent (unknown) in older rows.
        assert!(r.iter().all(|r| r.robust_buffers.as_deref() == Some("off")));
        let col = header
            .iter()
            .position(|c| *c == "robust_buffers")
            .expect("a column");
        assert_eq!(first[col], "off");
        let mut old = serde_json::to_value(&r[0]).unwrap();
        old.as_object_mut().unwrap().remove("robust_buffers");
        let back: Row = serde_json::from_value(old).unwrap();
        assert_eq!(back.robust_buffers, None);
    }

    #[test]
    fn rows_carry_registers_and_spills_where_reported_empty_csv_cells_where_not() {
        use baro_engine::telemetry::{PipelineStat, PipelineStats, StatValue};
        let report = BenchReport {
            arms: vec![arm("A", &[PowerMode::Fast]), arm("B", &[PowerMode::Fast])],
            grids: vec![2, 2],
        };
        let stats = PipelineStats {
            pipeline: "decode".into(),
            executable: "compute".into(),
            subgroup_size: 32,
            stats: vec![
                PipelineStat {
                    name: "Register Count".into(),
                    value: StatValue::U64(72),
                },
                PipelineStat {
                    name: "Spill bytes".into(),
                    value: StatValue::U64(0),
                },
            ],
        };
        let (registers, spills) = ArmInfo::compiler(std::slice::from_ref(&stats));
        assert_eq!((registers, spills), (Some(72), Some(0)));
        assert_eq!(ArmInfo::compiler(&[]), (None, None));
        let info = |n: &str, registers, spills| ArmInfo {
            name: n.into(),
            dispatch: "mega".into(),
            instrument: true,
            grid: 2,
            chain: 1,
            kv: "f32".into(),
            act: "f32".into(),
            commit: "c".into(),
            registers,
            spills,
            prefetch_mib: None,
            idle_wait_ns: None,
            robust_buffers: None,
        };
        let r = rows(
            &test_meta(1, false),
            &[info("A", registers, spills), info("B", None, None)],
            &report,
        );
        assert_eq!((r[0].registers, r[0].spills), (Some(72), Some(0)));
        assert_eq!((r[2].registers, r[2].spills), (None, None));
        let csv = render(Format::Csv, &r).unwrap();
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let col = header.iter().position(|c| *c == "registers").unwrap();
        let cells: Vec<Vec<String>> = lines
            .map(|l| l.split(',').map(str::to_string).collect())
            .collect();
        assert_eq!(cells[0][col], "72");
        assert_eq!(cells[0][col + 1], "0");
        assert_eq!(cells[2][col], "");
        let mut old = serde_json::to_value(&r[0]).unwrap();
        old.as_object_mut().unwrap().remove("registers");
        let back: Row = serde_json::from_value(old).unwrap();
        assert_eq!(back.registers, None);
    }
}
