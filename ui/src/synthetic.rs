//! A synthetic producer of realistic telemetry: a llama-shaped program (q/k/v, attention, wo,
//! ffn_up, ffn_down per layer, then head and a one-workgroup argmax) on G workgroups, with
//! per-workgroup jitter, a **level-tail trap** (one workgroup is slower on the FFN so it
//! arrives last and its wait is charged to whichever stage closes the level), an occasional
//! failing pass, tokens that restart when the context is full, and correctness verdicts (a
//! near-tie, a mismatch). Deterministic for a seed: tests and benches build fixed streams
//! with [`Synth`]; `baro-top live --synthetic` runs [`spawn`] on a thread at a target pass
//! rate, steered through [`Control`]. It must never need a GPU.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use baro_telemetry::control::Command;
use baro_telemetry::fail::bits;
use baro_telemetry::{
    Correctness, DeviceKind, Dispatch, EndReason, FailReport, FailWord, Frame, LevelDetails,
    PowerMode, RunDetails, Spans, StageDetails, StageKind, Telemetry, Verdict,
};
use crossbeam_channel::{Receiver, Sender, TrySendError};

use crate::action::Control;

/// Shape and events of a synthetic run.
#[derive(Clone, Debug)]
pub struct SynthConfig {
    /// Workgroups.
    pub grid: u32,
    /// Transformer layers (7 stages and 5 levels each, plus head and argmax).
    pub layers: u32,
    /// Dispatch at the start.
    pub dispatch: Dispatch,
    /// RNG seed.
    pub seed: u64,
    /// Context length: the sequence restarts at position 0 when full.
    pub ctx: u32,
    /// The workgroup caught in the level-tail trap (30 % slower on ffn_up and ffn_down), if any.
    pub tail_wg: Option<u32>,
    /// Every this many passes a pass fails (fail word: barrier timeout + poisoned), if any.
    pub fail_every: Option<u64>,
    /// Position in every sequence where the reference sees a near-tie, if any.
    pub near_tie_pos: Option<u32>,
    /// The pass whose token mismatches the reference, if any.
    pub mismatch_at: Option<u64>,
    /// Target passes per second for [`spawn`] (0 = as fast as possible).
    pub rate_hz: f64,
    /// Stop after this many passes (then `End`), if any.
    pub passes: Option<u64>,
}

impl Default for SynthConfig {
    fn default() -> Self {
        SynthConfig {
            grid: 132,
            layers: 16,
            dispatch: Dispatch::Mega,
            seed: 1,
            ctx: 256,
            tail_wg: Some(97),
            fail_every: Some(1000),
            near_tie_pos: Some(120),
            mismatch_at: Some(600),
            rate_hz: 60.0,
            passes: None,
        }
    }
}

/// Mean work of a stage kind on one workgroup, ns (a 1B-like pass at G = 132).
fn base_ns(k: StageKind) -> u32 {
    match k {
        StageKind::Q => 8_000,
        StageKind::K | StageKind::V => 3_000,
        StageKind::Attn => 12_000,
        StageKind::Wo => 8_000,
        StageKind::Ffn => 25_000,
        StageKind::Down => 14_000,
        StageKind::Head => 30_000,
        StageKind::Argmax => 2_000,
    }
}

/// Bytes of weights a stage of `kind` reads (1B-like, Q4_0: 0.5625 B per weight).
pub fn weight_bytes(kind: StageKind) -> u64 {
    let (dim, hidden, kv, vocab) = (2048u64, 8192u64, 512u64, 32_000u64);
    let w = match kind {
        StageKind::Q | StageKind::Wo => dim * dim,
        StageKind::K | StageKind::V => dim * kv,
        StageKind::Ffn => 2 * dim * hidden,
        StageKind::Down => dim * hidden,
        StageKind::Head => dim * vocab,
        StageKind::Attn | StageKind::Argmax => 0,
    };
    w * 9 / 16
}

/// A word for a synthetic token id (the synthetic "tokenizer").
pub fn word(id: u32) -> String {
    const WORDS: [&str; 24] = [
        " the", " cat", " sat", " on", " a", " warm", " mat", ".", " It", " was", " happy", " and",
        " sleepy", ",", " so", " it", " dreamed", " of", " fish", "\n", " Once", " upon", " time",
        " there",
    ];
    match id {
        1 => "<s>".into(),
        id => WORDS[id as usize % WORDS.len()].into(),
    }
}

/// Deterministic generator of one synthetic run's messages.
pub struct Synth {
    cfg: SynthConfig,
    details: RunDetails,
    kinds: Vec<StageKind>,
    rng: u64,
    pass: u64,
    pos: u32,
    token: u32,
    diverged: Option<u64>,
    /// The dispatch of the next pass (switch with [`Synth::set_dispatch`], which keeps the
    /// `Start` details in step).
    pub dispatch: Dispatch,
}

impl Synth {
    /// A generator for `cfg`.
    pub fn new(cfg: SynthConfig) -> Self {
        let grid = cfg.grid.max(1);
        let mut stages = vec![];
        let mut levels: Vec<LevelDetails> = vec![];
        let mut add_level = |name: String, ks: &[StageKind], layer: Option<u32>| {
            let index = levels.len() as u32;
            let mut ids = vec![];
            for &k in ks {
                let id = stages.len() as u32;
                let name = match layer {
                    Some(l) => format!("{}.l{l}", k.name()),
                    None => k.name().to_string(),
                };
                let rows = (weight_bytes(k) * 16 / 9 / 2048) as u32;
                stages.push(StageDetails {
                    id,
                    name: name.into(),
                    level: index,
                    kind: k,
                    rows,
                    units: rows.max(32),
                    weight_bytes: 0,
                });
                ids.push(id);
            }
            levels.push(LevelDetails {
                index,
                name: name.into(),
                stages: ids,
            });
        };
        use StageKind as K;
        for l in 0..cfg.layers {
            add_level(format!("qkv.l{l}"), &[K::Q, K::K, K::V], Some(l));
            add_level(format!("attn.l{l}"), &[K::Attn], Some(l));
            add_level(format!("wo.l{l}"), &[K::Wo], Some(l));
            add_level(format!("ffn_up.l{l}"), &[K::Ffn], Some(l));
            add_level(format!("ffn_down.l{l}"), &[K::Down], Some(l));
        }
        add_level("head".into(), &[K::Head], None);
        add_level("argmax".into(), &[K::Argmax], None);
        let kinds = stages.iter().map(|s| s.kind).collect();
        let details = RunDetails {
            schema_version: baro_telemetry::SCHEMA_VERSION,
            device: "Synthetic GPU (no device)".into(),
            driver: "synthetic 1.0".into(),
            device_kind: DeviceKind::Other,
            model: format!("synthetic llama {} layers", cfg.layers),
            dispatch: cfg.dispatch,
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
        };
        Synth {
            rng: cfg.seed ^ 0x9e37_79b9_7f4a_7c15,
            dispatch: cfg.dispatch,
            cfg: SynthConfig { grid, ..cfg },
            details,
            kinds,
            pass: 0,
            pos: 0,
            token: 1,
            diverged: None,
        }
    }

    /// The run's static details (the `Start` message).
    pub fn details(&self) -> &RunDetails {
        &self.details
    }

    /// Switch the dispatch style from the next pass on; [`Synth::details`] says the new one
    /// (the `Start` a producer sends again on a switch, as the live session does on a rebuild).
    pub fn set_dispatch(&mut self, d: Dispatch) {
        self.dispatch = d;
        self.details.dispatch = d;
    }

    /// The pass the next frame will carry.
    pub fn next_pass(&self) -> u64 {
        self.pass
    }

    fn next_u64(&mut self) -> u64 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, n).
    fn below(&mut self, n: u32) -> u32 {
        (((self.next_u64() >> 32) * n as u64) >> 32) as u32
    }

    /// `base` ± 8 %.
    fn jitter(&mut self, base: u32) -> u32 {
        let spread = (base / 12).max(1);
        base - spread + self.below(2 * spread)
    }

    /// The next pass.
    pub fn frame(&mut self) -> Frame {
        let (spans, dispatch_ns, span_ns) = self.spans();
        let d = &self.details;
        let stages = spans.stage_timings(&d.stages, &d.levels, &dispatch_ns);
        let barriers = spans.barrier_timings();
        let pass = self.pass;
        let fail = FailReport::new(self.fail_word(pass), |l| d.level_name(l).into_owned());
        let (next, correctness) = self.correctness(pass);
        let gpu = span_ns + 4_000;
        let frame = Frame {
            pass,
            pos: self.pos,
            token: self.token,
            next,
            wall_ns: gpu + 60_000,
            gpu_ns: Some(gpu),
            fail,
            torn: false,
            dropped: 0,
            host_start_ns: None,
            timestamp_start_ns: None,
            device_start_ns: Some(pass * 2_000_000),
            stages,
            barriers,
            dispatch_ns,
            prefetched_bytes: 0,
            correctness: Some(correctness),
            check: baro_telemetry::CheckState::Checked,
            check_lag: 0,
            mode: PowerMode::Fast,
            contention: Default::default(),
            spans,
        };
        self.pass += 1;
        self.pos += 1;
        self.token = next;
        if self.pos >= self.cfg.ctx.max(1) {
            self.pos = 0;
            self.token = 1;
        }
        frame
    }

    /// The next pass's spans (jittered work per workgroup, the level-tail trap, barriers in
    /// megakernel mode), its per-dispatch times (multi mode) and its span, ns.
    fn spans(&mut self) -> (Spans, Vec<u64>, u64) {
        let g = self.cfg.grid;
        let (ns, nl) = (
            self.details.stages.len() as u32,
            self.details.levels.len() as u32,
        );
        let mega = self.dispatch == Dispatch::Mega;
        let mut spans = Spans::new(g, ns, if mega { nl } else { 0 });
        let mut dispatch_ns = vec![];
        let tail = self.cfg.tail_wg.filter(|&w| w < g);
        let mut now = vec![0u32; g as usize];
        let levels = self.details.levels.clone();
        let mut t_multi = 0u32;
        for (li, lv) in levels.iter().enumerate() {
            for &sid in &lv.stages {
                let kind = self.kinds[sid as usize];
                let one_wg = kind == StageKind::Argmax;
                let mut lo = u32::MAX;
                let mut hi = 0;
                for w in 0..if one_wg { 1 } else { g } {
                    let mut work = self.jitter(base_ns(kind));
                    if Some(w) == tail && matches!(kind, StageKind::Ffn | StageKind::Down) {
                        work += base_ns(kind) * 3 / 10;
                    }
                    let start = if mega {
                        now[w as usize]
                    } else {
                        t_multi + self.below(400)
                    };
                    let end = start + work;
                    spans.set_span(sid, w, start, end);
                    now[w as usize] = end + 40;
                    lo = lo.min(start);
                    hi = hi.max(end);
                }
                if !mega {
                    dispatch_ns.resize(ns as usize, 0);
                    dispatch_ns[sid as usize] = (hi - lo) as u64 + 2_000;
                    t_multi = hi + 3_000;
                }
            }
            if mega && li + 1 < levels.len() {
                let last = now.iter().copied().max().unwrap_or(0);
                let release = last + 1_000 + self.below(400);
                for w in 0..g {
                    let exit = release + self.below(300);
                    spans.set_barrier(li as u32, w, now[w as usize], exit);
                    now[w as usize] = exit + 50;
                }
            }
        }
        let span_ns = if mega {
            now.iter().copied().max().unwrap_or(0)
        } else {
            t_multi
        } as u64;
        (spans, dispatch_ns, span_ns)
    }

    /// Pass `pass`'s fail word: clean, or every `fail_every` passes a barrier timeout.
    fn fail_word(&self, pass: u64) -> FailWord {
        let g = self.cfg.grid;
        let tail = self.cfg.tail_wg.filter(|&w| w < g);
        let failing = self
            .cfg
            .fail_every
            .is_some_and(|n| n > 0 && pass % n == n - 1);
        let mut word = FailWord::clean(g);
        if failing {
            let level = self
                .details
                .levels
                .iter()
                .position(|l| l.name.starts_with("ffn_up"))
                .unwrap_or(0) as u32;
            word = FailWord {
                bits: bits::TIMEOUT | bits::POISONED,
                first: bits::TIMEOUT,
                level: Some(level),
                seen: g - 1,
                wg: tail.unwrap_or(0),
                resident: g,
                started: g,
                arrivals: g - 1,
                grid: g,
            };
        }
        word
    }

    /// The next token and the reference's verdict on it (a mismatch or a near-tie where the
    /// config puts one; uncompared after a divergence until the sequence restarts).
    fn correctness(&mut self, pass: u64) -> (u32, Correctness) {
        if self.pos == 0 {
            self.diverged = None;
        }
        let next = 2 + self.below(200);
        let mut verdict = Verdict::Match;
        let mut reference = next;
        let mut margin = 0.5 + self.below(2500) as f32 / 1000.0;
        if self.diverged.is_some() {
            verdict = Verdict::Uncompared;
        } else if self.cfg.mismatch_at == Some(pass) {
            verdict = Verdict::Mismatch;
            reference = next + 1;
            margin = 0.25;
        } else if self.cfg.near_tie_pos == Some(self.pos) {
            verdict = Verdict::NearTie;
            reference = next + 1;
            margin = 0.0004;
        }
        if matches!(verdict, Verdict::Mismatch | Verdict::NearTie) {
            self.diverged = Some(pass);
        }
        let c = Correctness {
            gpu_token: next,
            reference: Some(reference),
            runner_up: Some(if reference == next { next + 1 } else { next }),
            margin: Some(margin),
            verdict,
            first_divergence: self.diverged,
        };
        (next, c)
    }

    /// A whole fixed stream: `Start` then `n` frames (tests).
    pub fn stream(&mut self, n: u64) -> Vec<Telemetry> {
        let mut v = vec![Telemetry::Start(self.details.clone())];
        v.extend((0..n).map(|_| Telemetry::Frame(Box::new(self.frame()))));
        v
    }
}

/// [`Control`] for the synthetic producer thread.
#[derive(Clone, Debug)]
pub struct SyntheticControl {
    tx: Sender<Command>,
}

impl Control for SyntheticControl {
    fn send(&self, c: Command) {
        let _ = self.tx.try_send(c);
    }
}

/// Start the producer on a named thread: telemetry out through a bounded channel (never
/// blocking on a slow reader: dropped frames are counted and carried), control in.
pub fn spawn(cfg: SynthConfig) -> (Receiver<Telemetry>, SyntheticControl, JoinHandle<()>) {
    let (tx, rx) = crossbeam_channel::bounded(256);
    let (ctx, crx) = crossbeam_channel::bounded(64);
    let h = std::thread::Builder::new()
        .name("baro-synthetic".into())
        .spawn(move || produce(cfg, tx, crx))
        .unwrap_or_else(|e| panic!("cannot start the synthetic producer thread: {e}"));
    (rx, SyntheticControl { tx: ctx }, h)
}

fn produce(cfg: SynthConfig, tx: Sender<Telemetry>, cmds: Receiver<Command>) {
    let period = (cfg.rate_hz > 0.0).then(|| Duration::from_secs_f64(1.0 / cfg.rate_hz));
    let limit = cfg.passes;
    let mut s = Synth::new(cfg);
    if tx.send(Telemetry::Start(s.details().clone())).is_err() {
        return;
    }
    let (mut paused, mut steps, mut dropped) = (false, 0u32, 0u64);
    let mut next_at = Instant::now();
    let reason = loop {
        let wait = if paused && steps == 0 {
            Duration::from_millis(100)
        } else {
            next_at.saturating_duration_since(Instant::now())
        };
        match cmds.recv_timeout(wait) {
            Ok(Command::Pause) => paused = true,
            Ok(Command::Resume) => {
                paused = false;
                next_at = Instant::now();
            }
            Ok(Command::Step) => steps += 1,
            Ok(Command::SetDispatch(d)) => {
                // As the live session does when it rebuilds for another dispatch: the new
                // run's `Start`, before its first frame.
                s.set_dispatch(d);
                if tx.send(Telemetry::Start(s.details().clone())).is_err() {
                    return;
                }
            }
            Ok(Command::Stop) => break EndReason::Stopped,
            // Generated telemetry has no recording to move about in.
            Ok(Command::Seek(_) | Command::SeekSlowest | Command::Restart) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                break EndReason::ConsumerGone
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
        }
        if limit.is_some_and(|n| s.next_pass() >= n) {
            break EndReason::Completed;
        }
        if (paused && steps == 0) || Instant::now() < next_at {
            continue;
        }
        steps = steps.saturating_sub(1);
        let mut f = s.frame();
        f.dropped = dropped;
        let msg = Telemetry::Frame(Box::new(f));
        if msg.must_deliver() {
            if tx.send(msg).is_err() {
                return;
            }
        } else {
            match tx.try_send(msg) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => dropped += 1,
                Err(TrySendError::Disconnected(_)) => return,
            }
        }
        next_at = match period {
            Some(p) => (next_at + p).max(Instant::now() - p * 4),
            None => Instant::now(),
        };
    };
    let _ = tx.send(Telemetry::End {
        passes: s.next_pass(),
        dropped,
        reason,
    });
}

/// The synthetic run's display extras (weight bytes per stage and the "measured" peak).
pub fn meta(details: &RunDetails) -> crate::state::Meta {
    crate::state::Meta {
        quant: Some("Q4_0".into()),
        peak_bytes_per_s: Some(4.3e12),
        weight_bytes: details
            .stages
            .iter()
            .map(|s| weight_bytes(s.kind))
            .collect(),
        decoder: Some(Arc::new(|id| word(id).into_bytes())),
        ids_label: None,
    }
}
