//! `baro-top bench rec`: what recording costs the decode, measured inside one session.
//!
//! One engine session decodes continuously (as `record` does). A stats sink (lossless, on in
//! both arms) takes every frame. After one warm-up block, the recorder is switched off and on
//! every `--block` passes, starting off: on means a lossless sink subscribed to the session and
//! a `baro-recorder` writer thread encoding and writing it to one `.baro` file, the same code
//! as `record` and the dashboard's `r` (the telemetry crate's
//! [`Recorder`](baro_telemetry::recording::Recorder)); off means that sink dropped (the writer writes what
//! was queued, then waits). The file keeps the run's `Start` once and the frames of every
//! on-block (pass numbers jump over the off-blocks), and replays.
//!
//! The first passes of every block, in both arms, are a switch's transition (the engine may
//! be up to a submission ahead of the switch: `--chain` passes run and are handed on
//! together; an off-block may still see the writer drain its backlog) and are not measured. Per arm: the median per-pass wall time (the frames'
//! `wall_ns`, submit to fence) and the median pass period (between consecutive passes' host
//! start times, which also holds the engine thread's work between passes: its sinks). Δ% is
//! on against off; its spread comes from the per-block pairs (off block, the on block after
//! it): their Δ% median, min and max, and a bootstrap 95 % interval of their mean.

use std::fs::File;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context};
use baro_engine::session::{Check, Session, SessionBuilder, SinkKind};
use baro_engine::telemetry::Telemetry;
use clap::Args;
use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};

use crate::args::{DispatchStyle, GpuArgs, ModelArgs, SequenceArgs, TimingArgs};
use crate::cmd::live_record::{self, Summary};

/// `baro-top bench rec` options.
#[derive(Args, Debug)]
pub struct RecBenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Measured passes (after one warm-up block), at least 2 x --block; whole pairs of
    /// blocks are measured.
    #[arg(long, default_value_t = 3000, value_parser = crate::validate::repetitions, allow_negative_numbers = true)]
    pub passes: u64,
    /// Passes per block: the recorder switches on or off every B passes, at least 10.
    #[arg(long, default_value_t = 100, value_parser = crate::validate::rec_block, allow_negative_numbers = true)]
    pub block: u64,
    #[command(flatten)]
    pub dispatch: DispatchStyle,
    /// Keep the recording here (default: a temporary file, removed at the end).
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Which passes the shadow CPU reference judges, as `record --check`: auto, all, off, or
    /// N (default off: the reference's CPU work would compete with the recorder's).
    #[arg(long, default_value = "off", value_parser = crate::validate::check)]
    pub check: Check,
    #[command(flatten)]
    pub seq: SequenceArgs,
    #[command(flatten)]
    pub timing: TimingArgs,
    #[command(flatten)]
    pub gpu: GpuArgs,
}

/// The passes at the start of every block that are not measured: a tenth of the block (at
/// least 2), and the rest of a submission of `chain` passes, which the engine runs and hands
/// on together, so a switch can land up to `chain - 1` passes late.
pub fn transition(block: u64, chain: u32) -> u64 {
    (block / 10).max(2) + u64::from(chain.max(1)) - 1
}

/// One measured pass.
#[derive(Clone, Copy, Debug)]
struct Sample {
    block: usize,
    wall_ns: u64,
    period_ns: Option<u64>,
}

/// The writer thread: one file for the whole bench; each subscription sent on `ctl` is
/// written until `stop` fires.
struct Recorder {
    ctl: Sender<Receiver<Telemetry>>,
    stop: Sender<()>,
    join: JoinHandle<anyhow::Result<(Summary, u64)>>,
}

impl Recorder {
    fn spawn(path: PathBuf, file: File, quant: Option<String>) -> anyhow::Result<Recorder> {
        let (ctl, ctl_rx) = unbounded::<Receiver<Telemetry>>();
        let (stop, stop_rx) = unbounded::<()>();
        // Into this process's stdout (`--out -`, `/dev/stdout`): a reader that went away
        // (`| head`) ends the process quietly, as every command's stdout does (crate::out).
        let own_stdout = crate::files::is_own_output(&path);
        let join = std::thread::Builder::new()
            .name("baro-recorder".into())
            .spawn(move || {
                let write = || {
                    let mut rec = live_record::recorder(file, quant);
                    let mut backlog = 0;
                    let mut again = false;
                    for rx in ctl_rx.iter() {
                        if again {
                            // A new subscription starts with the run's Start, already written.
                            rec.skip_repeated_start();
                        }
                        let p = rec
                            .pump(&rx, &stop_rx, |_| ())
                            .with_context(|| format!("writing {}", path.display()))?;
                        again = true;
                        backlog = backlog.max(p.drained);
                        if p.ended {
                            break;
                        }
                    }
                    Ok((
                        live_record::finish(rec, &path, &AtomicU64::new(0))?,
                        backlog,
                    ))
                };
                let r = write();
                if let Err(e) = &r {
                    if own_stdout && crate::out::is_broken_pipe(e) {
                        crate::out::reader_gone();
                    }
                }
                r
            })
            .context("starting the recorder thread")?;
        Ok(Recorder { ctl, stop, join })
    }

    fn on(&self, session: &Session) -> anyhow::Result<()> {
        self.ctl
            .send(session.subscribe(SinkKind::Lossless))
            .map_err(|_| anyhow::anyhow!("the recorder thread ended early"))
    }

    fn off(&self) -> anyhow::Result<()> {
        self.stop
            .send(())
            .map_err(|_| anyhow::anyhow!("the recorder thread ended early"))
    }

    /// The file's summary and the most messages left to write at a switch-off.
    fn join(self) -> anyhow::Result<(Summary, u64)> {
        drop(self.ctl);
        self.join
            .join()
            .unwrap_or_else(|_| Err(anyhow::anyhow!("the recorder thread panicked")))
    }
}

pub fn run(a: RecBenchArgs) -> anyhow::Result<ExitCode> {
    if a.passes < 2 * a.block {
        bail!(
            "--passes {} is less than 2 x --block {}: at least one pair of blocks (recorder off, on) is measured",
            a.passes,
            a.block
        );
    }
    let chain = a.gpu.chain.unwrap_or(crate::args::DEFAULT_CHAIN);
    let skip = transition(a.block, chain);
    if 2 * skip > a.block {
        bail!(
            "--block {} with --chain {chain}: the first {skip} passes of every block are a switch's transition (a submission runs {chain} passes), more than half the block; pass a --block of at least {} or a smaller --chain",
            a.block,
            2 * skip,
        );
    }
    if a.out.as_ref().is_some_and(|p| p.is_dir()) {
        bail!("--out names the recording to write, not a directory");
    }
    let model = super::super::load_model(&a.model)?;
    if let Some(out) = &a.out {
        // Before the device: an input (the model) or a directory is refused at once.
        crate::files::check_recording(out, true)?;
    }
    let quant = super::super::live::quant_name(&model);
    let positions = a.seq.positions(model.config.seq_len)?;
    let dev = super::super::open_gpu(&a.gpu)?;
    if dev.info().kind.is_cpu() && !a.timing.allow_cpu {
        bail!(
            "{} is a CPU device: a GPU benchmark refuses it (pass --allow-cpu to measure it anyway)",
            dev.info().name
        );
    }
    let (_lock, contended) = super::take_lock(&dev, a.timing.no_wait)?;
    let (path, temp) = match &a.out {
        Some(p) => (p.clone(), false),
        None => (
            std::env::temp_dir().join(format!("baro-bench-rec-{}.baro", std::process::id())),
            true,
        ),
    };
    // The shared writer: never onto an input (the model), a device or FIFO written in place.
    let (file, existed) = crate::files::create_recording(&path, true)?;
    if existed {
        crate::files::truncate_recording(&file, &path)?;
    }
    let source = model.source.clone();
    let dispatch = a.dispatch.get();
    let mut opts = a
        .gpu
        .decoder_options(dispatch, positions, &model, dev.info());
    opts.instrument = true;
    let mut b = SessionBuilder::new(&dev, model, opts)
        .check(a.check)
        .stop_on_fail(false);
    let stats = b.subscribe(SinkKind::Lossless);
    let session = b.spawn().context("starting the decode session")?;
    let rec = Recorder::spawn(path.clone(), file, Some(quant))?;
    let blocks = (a.passes / a.block / 2 * 2) as usize;
    let measured = measure(&session, &stats, &rec, a.block, blocks, skip, |d| {
        note!(
            "bench rec: {source} on {}, {} grid {}{}; warm-up block, then {blocks} blocks of {} passes, recorder off/on alternating; the first {skip} passes of every block are a switch's transition, not measured",
            d.device,
            d.dispatch,
            d.grid,
            if contended { " (contended)" } else { "" },
            a.block
        )
    });
    session.stop();
    let written = rec.join();
    let outcome = session.wait().context("the decode session")?;
    if temp {
        let _ = std::fs::remove_file(&path);
    }
    let samples = measured?;
    let (summary, backlog) = written?;
    // The recording is on stdout (`--out -`, `/dev/stdout`): the results go to stderr, as
    // `record`'s, so that stdout holds the recording alone.
    let to_stderr = a.out.as_deref().is_some_and(crate::files::is_own_output);
    print(&samples, blocks, to_stderr)?;
    say(
        to_stderr,
        format_args!(
            "recorded {}: {} passes, {:.2} MiB; writer backlog at a switch-off at most {backlog} messages{}",
            summary.path.display(),
            summary.passes,
            summary.bytes as f64 / (1 << 20) as f64,
            if temp { " (temporary file, removed)" } else { "" }
        ),
    )?;
    if outcome.failed_passes > 0 || outcome.failed_checks > 0 {
        note!(
            "bench rec: {} failed passes, {} failed checks",
            outcome.failed_passes,
            outcome.failed_checks
        );
    }
    Ok(ExitCode::from(super::super::live::exit_code(&outcome)))
}

/// Take frames from `stats`: one warm-up block, then `blocks` blocks of `block` passes (even
/// blocks recorder off, odd on), switching the recorder at each block's end.
fn measure(
    session: &Session,
    stats: &Receiver<Telemetry>,
    rec: &Recorder,
    block: u64,
    blocks: usize,
    skip: u64,
    started: impl FnOnce(&baro_engine::telemetry::RunDetails),
) -> anyhow::Result<Vec<Sample>> {
    let wait = Duration::from_secs(60) + session.pass_budget();
    match stats.recv_timeout(wait) {
        Ok(Telemetry::Start(d)) => started(&d),
        Ok(_) => bail!("the session's first message was not its Start"),
        Err(_) => bail!("no Start message from the session within 60 s"),
    }
    let mut samples = Vec::with_capacity(blocks * block as usize);
    // None: the warm-up block.
    let mut current: Option<usize> = None;
    let mut in_block = 0u64;
    let mut prev: Option<(u64, Option<u64>)> = None;
    loop {
        let f = match stats.recv_timeout(wait) {
            Ok(Telemetry::Frame(f)) => f,
            Ok(Telemetry::End { reason, .. }) => {
                bail!("the decode session ended during the measurement: {reason}")
            }
            Ok(_) => continue,
            Err(RecvTimeoutError::Timeout) => bail!("no pass within {} s", wait.as_secs()),
            Err(RecvTimeoutError::Disconnected) => {
                bail!("the decode session's telemetry stopped during the measurement")
            }
        };
        let period_ns = match (prev, f.host_start_ns) {
            (Some((p, Some(h0))), Some(h1)) if f.pass == p + 1 => h1.checked_sub(h0),
            _ => None,
        };
        prev = Some((f.pass, f.host_start_ns));
        if let Some(b) = current {
            if in_block >= skip {
                samples.push(Sample {
                    block: b,
                    wall_ns: f.wall_ns,
                    period_ns,
                });
            }
        }
        in_block += 1;
        if in_block < block {
            continue;
        }
        in_block = 0;
        let next = current.map_or(0, |b| b + 1);
        if next == blocks {
            return Ok(samples);
        }
        if next % 2 == 1 {
            rec.on(session)?;
        } else if next > 0 {
            rec.off()?;
        }
        current = Some(next);
    }
}

/// The median of `v` (sorted in place); NaN when empty.
fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The 2.5th and 97.5th percentiles of the mean of `xs` resampled with replacement
/// (deterministic generator).
fn bootstrap_mean_95(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let mut s: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        s
    };
    let n = xs.len();
    let mut means: Vec<f64> = (0..2000)
        .map(|_| {
            (0..n)
                .map(|_| xs[(next() % n as u64) as usize])
                .sum::<f64>()
                / n as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    (means[49], means[1949])
}

/// Per arm: the medians of `pick` (µs) and the count; the per-pair Δ% of the block medians.
fn arm_stats(
    samples: &[Sample],
    blocks: usize,
    pick: impl Fn(&Sample) -> Option<u64>,
) -> ([(f64, usize); 2], Vec<f64>) {
    let us = |s: &Sample| pick(s).map(|ns| ns as f64 / 1e3);
    let arm = |on: usize| -> (f64, usize) {
        let mut v: Vec<f64> = samples
            .iter()
            .filter(|s| s.block % 2 == on)
            .filter_map(us)
            .collect();
        let n = v.len();
        (median(&mut v), n)
    };
    let block_median = |b: usize| {
        let mut v: Vec<f64> = samples
            .iter()
            .filter(|s| s.block == b)
            .filter_map(us)
            .collect();
        median(&mut v)
    };
    let pairs = (0..blocks / 2)
        .map(|k| (block_median(2 * k + 1) / block_median(2 * k) - 1.0) * 100.0)
        .filter(|d| d.is_finite())
        .collect();
    ([arm(0), arm(1)], pairs)
}

/// One line of results: on stdout, or on stderr where stdout holds the recording.
fn say(to_stderr: bool, line: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    if to_stderr {
        note!("{line}");
        Ok(())
    } else {
        outln!("{line}")
    }
}

fn print(samples: &[Sample], blocks: usize, to_stderr: bool) -> anyhow::Result<()> {
    let (wall, wall_pairs) = arm_stats(samples, blocks, |s| Some(s.wall_ns));
    let (period, period_pairs) = arm_stats(samples, blocks, |s| s.period_ns);
    macro_rules! outln {
        ($($t:tt)*) => { say(to_stderr, format_args!($($t)*)) };
    }
    outln!(
        "{:<4} {:>7} {:>15} {:>17} {:>8}",
        "arm",
        "passes",
        "median wall µs",
        "median period µs",
        "periods"
    )?;
    for (i, name) in ["off", "on"].into_iter().enumerate() {
        outln!(
            "{:<4} {:>7} {:>15.2} {:>17.2} {:>8}",
            name,
            wall[i].1,
            wall[i].0,
            period[i].0,
            period[i].1
        )?;
    }
    let delta = |a: [(f64, usize); 2]| (a[1].0 / a[0].0 - 1.0) * 100.0;
    outln!(
        "Δ% on vs off (positive: slower with the recorder): wall {:+.2} %, period {:+.2} % (tok/s {:+.2} %)",
        delta(wall),
        delta(period),
        (period[0].0 / period[1].0 - 1.0) * 100.0
    )?;
    for (what, pairs) in [("wall", wall_pairs), ("period", period_pairs)] {
        if pairs.is_empty() {
            outln!("per block pair Δ% ({what}): no pairs with passes")?;
            continue;
        }
        let (lo, hi) = bootstrap_mean_95(&pairs);
        let min = pairs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = pairs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let n = pairs.len();
        let mut sorted = pairs;
        outln!(
            "per block pair Δ% ({what}, {n} pairs): median {:+.2}, min {min:+.2}, max {max:+.2}; bootstrap 95 % interval of the mean [{lo:+.2}, {hi:+.2}]",
            median(&mut sorted)
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_the_bootstrap_interval_hold_the_data() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
        let (lo, hi) = bootstrap_mean_95(&[1.0, 2.0, 3.0, 4.0]);
        assert!(
            (1.0..=2.5).contains(&lo) && (2.5..=4.0).contains(&hi),
            "{lo} {hi}"
        );
        assert_eq!(bootstrap_mean_95(&[5.0]), (5.0, 5.0));
    }

    #[test]
    fn arms_are_even_blocks_off_and_odd_blocks_on_paired_in_order() {
        let s = |block, us: u64| Sample {
            block,
            wall_ns: us * 1000,
            period_ns: None,
        };
        let samples = [s(0, 100), s(0, 100), s(1, 110), s(2, 200), s(3, 190)];
        let (arms, pairs) = arm_stats(&samples, 4, |x| Some(x.wall_ns));
        assert_eq!(arms[0], (100.0, 3));
        assert_eq!(arms[1], (150.0, 2));
        assert_eq!(pairs.len(), 2);
        assert!((pairs[0] - 10.0).abs() < 1e-9 && (pairs[1] + 5.0).abs() < 1e-9);
        let (none, no_pairs) = arm_stats(&samples, 4, |x| x.period_ns);
        assert_eq!(none[0].1, 0);
        assert!(no_pairs.is_empty());
    }

    #[test]
    fn a_blocks_transition_is_a_tenth_of_it_plus_the_rest_of_a_submission() {
        assert_eq!(transition(10, 1), 2);
        assert_eq!(transition(100, 1), 10);
        assert_eq!(transition(100, 16), 25);
        assert_eq!(transition(10, 0), 2, "chain 0 is read as 1");
    }
}
