//! What the engine thread's per-pass host work costs, without a GPU: the measuring code of
//! `cargo bench -p baro-engine --bench host` (bench/rounds/host1.md).
//!
//! A synthetic ring frame shaped like the llama-1b program (132 workgroups; per block a
//! `q k v` level, then `attn`, `wo`, `ffn`, `down`; then `head` and the one-workgroup
//! `argmax`: 114 stages in 82 levels) is laid out in a byte buffer the way the decoder's
//! readback buffer is mapped (sync words, outputs, then the ring frame), with 64-bit stamps.
//! Each pass then runs the engine thread's steps on it, each timed alone, and the whole path
//! once more in one piece. The consumer side (what a sink's thread does with a frame) is timed
//! separately: it does not run on the engine thread. Never a test: numbers depend on the
//! machine.

use std::sync::Arc;
use std::time::Instant;

use baro_telemetry::labels::PassLabeler;
use baro_telemetry::recording::{RecordingHeader, Writer};
use baro_telemetry::synth::synthetic_frame;
use baro_telemetry::{
    DecodedRing, DeviceKind, Dispatch, FailReport, FailWord, Frame, LevelDetails, RingLayout,
    RunDetails, StageDetails, StageKind, Telemetry,
};
use crossbeam_channel::{unbounded, Receiver};

use super::frames::{Builder, Frames, Job, RingCopy};
use super::sinks::{Shared, Sinks};
use super::SinkKind;

/// What to measure.
#[derive(Clone, Debug)]
pub struct Config {
    /// Workgroups.
    pub grid: u32,
    /// Transformer blocks (16: llama-1b).
    pub layers: u32,
    /// Vocabulary (the outputs before the ring in the readback buffer).
    pub vocab: usize,
    /// Timed passes per step.
    pub passes: usize,
    /// Untimed passes first.
    pub warmup: usize,
    /// Time only the whole path (for a profiler).
    pub only_path: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            grid: 132,
            layers: 16,
            vocab: 128_256,
            passes: 400,
            warmup: 50,
            only_path: false,
        }
    }
}

/// The run details of the llama program at `grid` workgroups and `layers` blocks, with the
/// stage and level structure `vulkan::program::Program::new` builds (d 2048, ffn 8192, 32/8
/// heads, vocab 128256 for the units).
pub fn llama_run(grid: u32, layers: u32) -> RunDetails {
    use StageKind::*;
    let mut stages: Vec<StageDetails> = vec![];
    let mut levels: Vec<LevelDetails> = vec![];
    let mut level = |name: String, st: &[(StageKind, u32, u32, String)]| {
        let li = levels.len() as u32;
        let first = stages.len() as u32;
        for (kind, units, rows, name) in st {
            stages.push(StageDetails {
                id: stages.len() as u32,
                name: name.as_str().into(),
                level: li,
                kind: *kind,
                rows: *rows,
                units: *units,
                weight_bytes: 0,
            });
        }
        levels.push(LevelDetails {
            index: li,
            name: name.into(),
            stages: (first..stages.len() as u32).collect(),
        });
    };
    for l in 0..layers {
        let n = |k: &str| format!("{k}.l{l}");
        level(
            n("qkv"),
            &[
                (Q, 1024, 2048, n("q")),
                (K, 256, 512, n("k")),
                (V, 512, 512, n("v")),
            ],
        );
        level(n("attn"), &[(Attn, 32, 0, n("attn"))]);
        level(n("wo"), &[(Wo, 2048, 2048, n("wo"))]);
        level(n("ffn"), &[(Ffn, 8192, 8192, n("ffn_up"))]);
        level(n("down"), &[(Down, 2048, 2048, n("ffn_down"))]);
    }
    level("head".into(), &[(Head, 128_256, 128_256, "head".into())]);
    level("argmax".into(), &[(Argmax, 1, 0, "argmax".into())]);
    RunDetails {
        schema_version: baro_telemetry::SCHEMA_VERSION,
        device: "synthetic".into(),
        driver: "synthetic 0".into(),
        device_kind: DeviceKind::Other,
        model: format!("llama {layers} blocks (host cost bench)"),
        dispatch: Dispatch::Mega,
        grid,
        wg_size: 512,
        stages,
        levels,
        instrumented: true,
        check: None,
        kv: Default::default(),
        kv_auto: false,
        act: Default::default(),
        act_auto: false,
        prefetch_mib: 0,
        idle_wait_ns: 0,
        pass_loop: false,
        robust_buffers_off: false,
        device_clock_off: None,
        pipelines: Vec::new(),
    }
}

/// An arbitrary device clock origin with a non-zero high word, as on a GPU.
const DEVICE_T0: u64 = 0x0000_1234_5678_0000;

/// Ring frame words of pass `pass_id` (sequence `pass_id + 1`) carrying `f`'s spans and
/// barrier stamps at device time [`DEVICE_T0`] + offset (0 where a stamp is missing).
pub fn ring_words(run: &RunDetails, f: &Frame, pass_id: u32) -> Vec<u32> {
    let lay = run.ring_layout();
    let mut w = vec![0u32; lay.frame_words()];
    w[0] = pass_id.wrapping_add(1);
    w[1] = pass_id;
    w[2] = lay.grid;
    let mut put = |at: usize, a: Option<u32>, b: Option<u32>| {
        for (k, v) in [a, b].into_iter().enumerate() {
            if let Some(v) = v {
                let t = DEVICE_T0 + u64::from(v);
                w[at + 2 * k] = t as u32;
                w[at + 2 * k + 1] = (t >> 32) as u32;
            }
        }
    };
    for s in 0..lay.stages {
        for g in 0..lay.grid {
            let sp = f.spans.span(s, g);
            put(lay.stage_record(s, g), sp.map(|x| x.0), sp.map(|x| x.1));
        }
    }
    for l in 0..lay.levels {
        for g in 0..lay.grid {
            put(
                lay.barrier_record(l, g),
                f.spans.arrive(l, g),
                f.spans.exit(l, g),
            );
        }
    }
    w
}

/// The readback buffer as the decoder maps it: the sync words, `vocab + 2 + 2G` output
/// words, then the ring frame; returns the bytes and the ring's byte offset.
fn readback(cfg: &Config, ring: &[u32]) -> (Vec<u8>, usize) {
    let g = cfg.grid as usize;
    let sync = crate::vulkan::program::sync_words(cfg.grid);
    let start = (sync + cfg.vocab + 2 + 2 * g) * 4;
    let mut b = vec![0u8; start];
    b.extend(ring.iter().flat_map(|w| w.to_le_bytes()));
    (b, start)
}

/// One step's per-pass times, µs.
#[derive(Clone, Debug)]
pub struct Step {
    /// What was timed.
    pub name: &'static str,
    /// On the engine thread's path, in series with the GPU (else the frame builder's or a
    /// consumer's thread, or a part or a replaced step shown for comparison).
    pub engine: bool,
    /// Per-pass times, µs, sorted.
    pub us: Vec<f64>,
}

impl Step {
    /// The `q` quantile (0–1), µs.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.us.is_empty() {
            return f64::NAN;
        }
        let i = ((self.us.len() - 1) as f64 * q).round() as usize;
        self.us[i.min(self.us.len() - 1)]
    }
}

/// The measurement.
#[derive(Clone, Debug)]
pub struct Report {
    /// The configuration.
    pub cfg: Config,
    /// Spans and barrier stamps per pass.
    pub spans: usize,
    /// Ring frame words.
    pub words: usize,
    /// Steps in order.
    pub steps: Vec<Step>,
}

impl Report {
    /// The report as text lines: one row per step, median and p90 µs.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![
            format!(
                "host cost per pass: grid {}, {} blocks, ring {} words, {} spans; {} passes timed per step after {} warm-up",
                self.cfg.grid, self.cfg.layers, self.words, self.spans, self.cfg.passes, self.cfg.warmup
            ),
            format!(
                "{:<64} {:>9} {:>9}",
                "step ([engine]: on the engine thread, in series with the GPU)", "median µs", "p90 µs"
            ),
        ];
        for s in &self.steps {
            let name = format!(
                "{} {}",
                if s.engine { "[engine]" } else { "        " },
                s.name
            );
            v.push(format!(
                "{:<64} {:>9.1} {:>9.1}",
                name,
                s.quantile(0.5),
                s.quantile(0.9)
            ));
        }
        v
    }
}

/// The synthetic passes cycled through (their ring frames, ≈ 0.4 MB each for the 1B shape,
/// do not all fit in this machine's L2: each pass reads its ring from L3 or memory, as the
/// engine reads a ring the GPU just wrote).
const DISTINCT: u64 = 16;

/// Time `f` on every pass (after the warm-up), µs per call: `prep` makes its input, and
/// `f`'s result is dropped and `after` cleans up, all untimed.
fn timed<T, R>(
    cfg: &Config,
    mut prep: impl FnMut(u64) -> T,
    mut f: impl FnMut(T, u64) -> R,
    mut after: impl FnMut(),
) -> Vec<f64> {
    let mut us = Vec::with_capacity(cfg.passes);
    for p in 0..(cfg.warmup + cfg.passes) as u64 {
        let x = prep(p);
        let t = Instant::now();
        let r = f(x, p);
        let e = t.elapsed().as_secs_f64() * 1e6;
        drop(r);
        after();
        if p >= cfg.warmup as u64 {
            us.push(e);
        }
    }
    us.sort_by(f64::total_cmp);
    us
}

/// Time `f` on every pass (after the warm-up), µs per call.
fn time(cfg: &Config, mut f: impl FnMut(u64)) -> Vec<f64> {
    timed(cfg, |_| (), |(), p| f(p), || {})
}

/// The frame as the decoder starts it (`VulkanDecoder::frame`), before the ring is read.
fn frame_head(run: &RunDetails, syn: &Frame, pass: u64) -> Frame {
    Frame {
        pass,
        pos: syn.pos,
        token: syn.token,
        next: syn.next,
        wall_ns: syn.wall_ns,
        gpu_ns: syn.gpu_ns,
        fail: FailReport::new(FailWord::clean(run.grid), |l| run.level_name(l)),
        timestamp_start_ns: syn.timestamp_start_ns,
        host_start_ns: syn.host_start_ns,
        ..Default::default()
    }
}

/// [`sinks`], shared as the engine shares them with the frame builder.
fn shared_sinks() -> (Arc<Shared>, Vec<Receiver<Telemetry>>) {
    let (s, rxs) = sinks();
    let shared = Arc::new(Shared::default());
    *shared.lock() = s;
    (shared, rxs)
}

/// The sinks of a recording live session: the dashboard (lossy) and the recorder.
fn sinks() -> (Sinks, Vec<Receiver<Telemetry>>) {
    let mut s = Sinks::default();
    let (tx, ui) = unbounded();
    s.add(SinkKind::Lossy { capacity: 1 << 16 }, tx);
    let (tx, rec) = unbounded();
    s.add(SinkKind::Lossless, tx);
    (s, vec![ui, rec])
}

/// The synthetic passes every step reads: their frames, their readback buffers (ring frame
/// after the outputs, as the decoder maps it) and the rings decoded once.
struct Passes {
    run: RunDetails,
    lay: RingLayout,
    syn: Vec<Frame>,
    bufs: Vec<(Vec<u8>, usize)>,
    decoded: Vec<Option<DecodedRing>>,
}

/// Which of the [`DISTINCT`] passes pass `p` reads.
fn at(p: u64) -> usize {
    (p % DISTINCT) as usize
}

/// The ring sequence number pass `p` expects.
fn seq(p: u64) -> u32 {
    at(p) as u32 + 1
}

impl Passes {
    fn new(cfg: &Config) -> Passes {
        let run = llama_run(cfg.grid, cfg.layers);
        let lay = run.ring_layout();
        let syn: Vec<Frame> = (0..DISTINCT).map(|p| synthetic_frame(&run, p, 7)).collect();
        let bufs = syn
            .iter()
            .enumerate()
            .map(|(i, f)| readback(cfg, &ring_words(&run, f, i as u32)))
            .collect();
        let mut ps = Passes {
            run,
            lay,
            syn,
            bufs,
            decoded: vec![],
        };
        ps.decoded = (0..DISTINCT)
            .map(|p| ps.lay.decode(&ps.words_of(p), seq(p), true).ok())
            .collect();
        ps
    }

    /// Ring frame words.
    fn n_words(&self) -> usize {
        self.lay.frame_words()
    }

    /// Pass `p`'s ring frame, bytes, where it lies in its readback buffer.
    fn ring(&self, p: u64) -> &[u8] {
        let (b, start) = &self.bufs[at(p)];
        &b[*start..*start + self.n_words() * 4]
    }

    /// Pass `p`'s ring frame copied into words (the engine's way before the builder).
    fn words_of(&self, p: u64) -> Vec<u32> {
        self.ring(p)
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect()
    }

    /// Pass `p`'s frame as the decoder starts it.
    fn head(&self, p: u64) -> Frame {
        frame_head(&self.run, &self.syn[at(p)], p)
    }

    /// Pass `p`'s whole frame, as the engine builds it, for the steps that take one.
    fn full(&self, p: u64) -> Frame {
        let mut f = self.head(p);
        if let Some(d) = self.decoded[at(p)].clone() {
            f.stages = d
                .spans
                .stage_timings(&self.run.stages, &self.run.levels, &[]);
            f.barriers = d.spans.barrier_timings();
            f.device_start_ns = Some(d.device_start_ns);
            f.spans = d.spans;
        }
        f
    }

    /// Spans and barrier stamps per pass.
    fn spans(&self) -> usize {
        self.decoded
            .first()
            .and_then(|d| d.as_ref())
            .map_or(0, |d| {
                d.spans.iter().count() + d.spans.levels() as usize * self.lay.grid as usize
            })
    }

    /// Pass `p`'s frame-builder job: its head and its ring copied into `bytes`.
    fn job(&self, p: u64, mut bytes: Vec<u8>, details: &Arc<RunDetails>) -> Job {
        bytes.clear();
        bytes.extend_from_slice(self.ring(p));
        Job::Pass {
            frame: Box::new(self.head(p)),
            ring: Some(RingCopy {
                bytes,
                expect_seq: seq(p),
                mega: true,
            }),
            details: details.clone(),
        }
    }
}

/// Run the measurement.
pub fn run(cfg: &Config) -> Report {
    let ps = Passes::new(cfg);
    let mut steps = vec![];
    let whole = engine_path(cfg, &ps);
    let built = builder_path(cfg, &ps);
    if cfg.only_path {
        steps.push(step("ENGINE THREAD PATH PER PASS", true, whole));
        steps.push(step(
            "FRAME BUILDER PATH PER PASS (its own thread)",
            false,
            built,
        ));
    } else {
        ring_steps(cfg, &ps, &mut steps);
        let frames: Vec<Frame> = (0..DISTINCT).map(|p| ps.full(p)).collect();
        builder_steps(cfg, &ps, &frames, &mut steps);
        steps.push(step(
            "ENGINE THREAD PATH PER PASS (head, ring copy, queue)",
            true,
            whole,
        ));
        steps.push(step(
            "FRAME BUILDER PATH PER PASS (its own thread)",
            false,
            built,
        ));
        consumer_steps(cfg, &ps, &frames, &mut steps);
    }
    Report {
        cfg: cfg.clone(),
        spans: ps.spans(),
        words: ps.n_words(),
        steps,
    }
}

fn step(name: &'static str, engine: bool, us: Vec<f64>) -> Step {
    Step { name, engine, us }
}

/// The engine thread's path, as `one_pass` runs it after `step`: the frame's head, the ring
/// copied out of the readback into a recycled buffer, the job queued to the frame builder
/// (the real one, on its thread). Between passes (untimed) the thread sleeps for a 1B GPU
/// pass, as it waits for the pass's fence, while the builder does its work on the other
/// core.
fn engine_path(cfg: &Config, ps: &Passes) -> Vec<f64> {
    let details = Arc::new(ps.run.clone());
    let (shared, rxs) = shared_sinks();
    let mut us = Vec::with_capacity(cfg.passes);
    let frames = match Frames::spawn(shared.clone(), PassLabeler::for_run(&ps.run)) {
        Ok(f) => f,
        Err(e) => panic!("host cost bench: {e}"),
    };
    for p in 0..(cfg.warmup + cfg.passes) as u64 {
        let t = Instant::now();
        let job = ps.job(p, frames.buffer(), &details);
        let sent = frames.send(job).is_ok();
        let e = t.elapsed().as_secs_f64() * 1e6;
        assert!(sent, "the frame builder ended");
        // The next GPU pass (1B: ≈ 1.5 ms), waited for as the engine waits for its fence.
        std::thread::sleep(std::time::Duration::from_micros(1500));
        for rx in &rxs {
            rx.try_iter().for_each(drop);
        }
        if p >= cfg.warmup as u64 {
            us.push(e);
        }
    }
    drop(frames);
    us.sort_by(f64::total_cmp);
    us
}

/// The frame builder's path per pass (its thread, off the engine's): ring read with timings,
/// labels, emit to the sinks (`Builder::handle`). Before the builder, all of this and a copy
/// of the ring into words ran on the engine thread.
fn builder_path(cfg: &Config, ps: &Passes) -> Vec<f64> {
    let details = Arc::new(ps.run.clone());
    let (shared, rxs) = shared_sinks();
    let mut b = Builder::new(shared, PassLabeler::for_run(&ps.run));
    let spare = std::cell::Cell::new(None::<Vec<u8>>);
    timed(
        cfg,
        |p| ps.job(p, spare.take().unwrap_or_default(), &details),
        |job, _| b.handle(job, |buf| spare.set(Some(buf))),
        || {
            for rx in &rxs {
                rx.try_iter().for_each(drop);
            }
        },
    )
}

/// The engine thread's first steps alone, then the builder's ring read: level by level
/// against decode-then-sweep, its parts, and the steps it replaced.
fn ring_steps(cfg: &Config, ps: &Passes, steps: &mut Vec<Step>) {
    let (run, lay) = (&ps.run, &ps.lay);
    steps.push(step(
        "frame head + fail report",
        true,
        time(cfg, |p| {
            std::hint::black_box(ps.head(p));
        }),
    ));
    let mut buf: Vec<u8> = vec![];
    steps.push(step(
        "ring copy out of the readback (recycled buffer)",
        true,
        time(cfg, |p| {
            buf.clear();
            buf.extend_from_slice(ps.ring(p));
            std::hint::black_box(&buf);
        }),
    ));
    steps.push(step(
        "builder: ring read + timings (Frame::read_ring)",
        false,
        timed(
            cfg,
            |p| ps.head(p),
            |mut f, p| {
                f.read_ring(run, ps.ring(p), seq(p), true);
                f // dropped outside the timed call
            },
            || {},
        ),
    ));
    // Level by level (read_ring) against decode-then-sweep, interleaved pass by pass so the
    // machine's drift hits both alike.
    let (mut fused, mut seq_us) = (vec![], vec![]);
    for p in 0..(cfg.warmup + cfg.passes) as u64 {
        let mut f = ps.head(p);
        let t = Instant::now();
        f.read_ring(run, ps.ring(p), seq(p), true);
        let e1 = t.elapsed().as_secs_f64() * 1e6;
        drop(f);
        let mut f = ps.head(p + 1);
        let t = Instant::now();
        if let Ok(r) = lay.decode_le_bytes(ps.ring(p + 1), seq(p + 1), true) {
            f.stages = r.spans.stage_timings(&run.stages, &run.levels, &[]);
            f.barriers = r.spans.barrier_timings();
            f.spans = r.spans;
        }
        let e2 = t.elapsed().as_secs_f64() * 1e6;
        drop(f);
        if p >= cfg.warmup as u64 {
            fused.push(e1);
            seq_us.push(e2);
        }
    }
    fused.sort_by(f64::total_cmp);
    seq_us.sort_by(f64::total_cmp);
    steps.push(step(
        "  A: read_ring, level by level (interleaved)",
        false,
        fused,
    ));
    steps.push(step(
        "  B: decode, then the two sweeps (interleaved)",
        false,
        seq_us,
    ));
    // Its parts alone (each sweep reads its rows again), and the steps it replaced.
    steps.push(step(
        "  part: ring decode in place (decode_le_bytes)",
        false,
        time(cfg, |p| {
            std::hint::black_box(lay.decode_le_bytes(ps.ring(p), seq(p), true).ok());
        }),
    ));
    steps.push(step(
        "  part: stage_timings of decoded spans",
        false,
        time(cfg, |p| {
            if let Some(d) = &ps.decoded[at(p)] {
                std::hint::black_box(d.spans.stage_timings(&run.stages, &run.levels, &[]));
            }
        }),
    ));
    steps.push(step(
        "  part: barrier_timings of decoded spans",
        false,
        time(cfg, |p| {
            if let Some(d) = &ps.decoded[at(p)] {
                std::hint::black_box(d.spans.barrier_timings());
            }
        }),
    ));
    steps.push(step(
        "  before: ring words copy (mapped -> Vec<u32>)",
        false,
        time(cfg, |p| {
            std::hint::black_box(ps.words_of(p));
        }),
    ));
    let words: Vec<Vec<u32>> = (0..DISTINCT).map(|p| ps.words_of(p)).collect();
    steps.push(step(
        "  before: decode of the copy (RingLayout::decode)",
        false,
        time(cfg, |p| {
            std::hint::black_box(lay.decode(&words[at(p)], seq(p), true).ok());
        }),
    ));
}

/// The builder's other steps alone: the labeler and the emit to a recording session's sinks.
fn builder_steps(cfg: &Config, ps: &Passes, frames: &[Frame], steps: &mut Vec<Step>) {
    let mut labeler = PassLabeler::for_run(&ps.run);
    steps.push(step(
        "builder: labeler (PassLabeler::label)",
        false,
        timed(
            cfg,
            |p| frames[at(p)].clone(),
            |mut f, _| {
                std::hint::black_box(labeler.label(&mut f));
                f // dropped outside the timed call
            },
            || {},
        ),
    ));
    let (mut sk, rxs) = sinks();
    steps.push(step(
        "builder: emit to 2 sinks (lossy UI + lossless)",
        false,
        timed(
            cfg,
            |p| frames[at(p)].clone(),
            |f, _| {
                std::hint::black_box(sk.emit(Telemetry::Frame(Box::new(f))));
            },
            || {
                for rx in &rxs {
                    rx.try_iter().for_each(drop);
                }
            },
        ),
    ));
}

/// Consumers: what a sink's thread does with a frame.
fn consumer_steps(cfg: &Config, ps: &Passes, frames: &[Frame], steps: &mut Vec<Step>) {
    let msgs: Vec<Telemetry> = frames
        .iter()
        .map(|f| Telemetry::Frame(Box::new(f.clone())))
        .collect();
    steps.push(step(
        "  consumer: clone of a Telemetry::Frame",
        false,
        time(cfg, |p| {
            std::hint::black_box(msgs[at(p)].clone());
        }),
    ));
    steps.push(step(
        "  consumer: JSON line (to_json_line)",
        false,
        time(cfg, |p| {
            std::hint::black_box(msgs[at(p)].to_json_line().ok());
        }),
    ));
    let header = RecordingHeader::new(ps.run.clone(), "bench");
    if let Ok(mut w) = Writer::new(std::io::sink(), &header) {
        steps.push(step(
            "  consumer: recording write (to io::sink)",
            false,
            time(cfg, |p| {
                std::hint::black_box(w.write(&msgs[at(p)]).ok());
            }),
        ));
    }
}
