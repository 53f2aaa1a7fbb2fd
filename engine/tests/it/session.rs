//! The live session on the Vulkan device (lavapipe in CI): commands and the frames that
//! follow each, sinks that drop and sinks that do not, the shadow reference's verdicts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::device;
use baro_engine::device::Device;
use baro_engine::model::Model;
use baro_engine::session::{Check, Command, Reply, SessionBuilder, SinkKind};
use baro_engine::telemetry::{CheckPlan, CheckState, EndReason, Frame, Telemetry, Verdict};
use baro_engine::vulkan::{DecoderOptions, Dispatch, VulkanDecoder};
use baro_engine::ErrorKind;
use crossbeam_channel::Receiver;

const LONG: Duration = Duration::from_secs(120);

/// The next frame on `rx` (other messages are collected into `seen`).
fn next_frame(rx: &Receiver<Telemetry>, seen: &mut Vec<Telemetry>) -> Box<Frame> {
    let deadline = Instant::now() + LONG;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left).expect("a frame within the deadline") {
            Telemetry::Frame(f) => return f,
            other => seen.push(other),
        }
    }
}

/// Everything on `rx` within `d`, asserting that no frame is among it.
fn no_frame_for(rx: &Receiver<Telemetry>, d: Duration, what: &str) {
    let deadline = Instant::now() + d;
    while let Ok(t) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        assert!(
            !matches!(t, Telemetry::Frame(_)),
            "{what}: a frame arrived: {t:?}"
        );
    }
}

fn opts(dispatch: Dispatch, max_seq: usize) -> DecoderOptions {
    DecoderOptions {
        dispatch,
        instrument: true,
        max_seq,
        ..Default::default()
    }
}

#[test]
fn a_model_that_cannot_be_built_fails_spawn_with_its_error() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    let bad = DecoderOptions {
        wg_size: Some(100_000),
        ..opts(Dispatch::Multi, 8)
    };
    let err = SessionBuilder::new(&ctx.into(), model, bad)
        .spawn()
        .err()
        .expect("spawn must fail");
    assert_eq!(err.kind(), ErrorKind::Invalid, "{err}");
    assert!(err.to_string().contains("workgroup size 100000"), "{err}");
}

#[test]
fn pause_step_resume_dispatch_switch_restart_and_stop_each_shape_the_frames_that_follow() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    let mut b = SessionBuilder::new(&ctx.into(), model, opts(Dispatch::Mega, 64))
        .check(Check::Plan(CheckPlan::All));
    let rx = b.subscribe(SinkKind::Lossless);
    let s = b.spawn().expect("session");
    let mut seen = vec![];
    let first = next_frame(&rx, &mut seen);
    assert!(matches!(seen.first(), Some(Telemetry::Start(d)) if d.dispatch == Dispatch::Mega));
    assert_eq!((first.pass, first.pos), (0, 0));

    // Pause: the reply names the passes run; the last frame before it is the one before.
    let Reply::Paused { passes } = s.command(Command::Pause).expect("pause") else {
        panic!("pause reply")
    };
    assert!(passes >= 1);
    let mut last = first.pass;
    while last + 1 < passes {
        last = next_frame(&rx, &mut seen).pass;
    }
    no_frame_for(&rx, Duration::from_millis(400), "paused");

    // Step: exactly one pass, the next one, then paused again.
    assert_eq!(
        s.command(Command::Step).expect("step"),
        Reply::Stepped { pass: passes }
    );
    let f = next_frame(&rx, &mut seen);
    assert_eq!(f.pass, passes);
    no_frame_for(&rx, Duration::from_millis(300), "paused after a step");

    // Switch the dispatch style: a new Start, and the sequence restarts at position 0.
    let Reply::Rebuilt(d) = s
        .command(Command::SetDispatch(Dispatch::Multi))
        .expect("switch")
    else {
        panic!("rebuild reply")
    };
    assert_eq!(d.dispatch, Dispatch::Multi);
    assert_eq!(
        s.command(Command::Step).expect("step"),
        Reply::Stepped { pass: passes + 1 }
    );
    seen.clear();
    let f = next_frame(&rx, &mut seen);
    assert!(
        seen.iter()
            .any(|t| matches!(t, Telemetry::Start(d) if d.dispatch == Dispatch::Multi)),
        "a Start for the new decoder comes before its first frame: {seen:?}"
    );
    assert_eq!((f.pass, f.pos), (passes + 1, 0));
    assert!(
        f.dispatch_ns.len() > 1,
        "multi frames carry per-dispatch times"
    );

    // Resume: frames flow again, positions go on.
    assert_eq!(s.command(Command::Resume).expect("resume"), Reply::Resumed);
    let f = next_frame(&rx, &mut seen);
    assert_eq!((f.pass, f.pos), (passes + 2, 1));

    // Restart: the frame of the pass named in the reply is at position 0.
    let Reply::Restarted { next_pass } = s.command(Command::Restart).expect("restart") else {
        panic!("restart reply")
    };
    let f = loop {
        let f = next_frame(&rx, &mut seen);
        if f.pass == next_pass {
            break f;
        }
        assert!(f.pass < next_pass);
    };
    assert_eq!(f.pos, 0);

    // Another grid: a Start with it.
    let Reply::Rebuilt(d) = s.command(Command::SetGrid(Some(1))).expect("grid") else {
        panic!("rebuild reply")
    };
    assert_eq!(d.grid, 1);
    // Frames of the old decoder may still be queued: the new Start marks the switch.
    loop {
        match rx.recv_timeout(LONG).expect("the new Start") {
            Telemetry::Start(d) if d.grid == 1 => break,
            t => seen.push(t),
        }
    }
    let f = next_frame(&rx, &mut seen);
    assert_eq!(
        f.pos, 0,
        "the first frame after a rebuild starts a sequence"
    );

    // Stop: End is the last message, the outcome comes from the engine.
    assert_eq!(s.command(Command::Stop).expect("stop"), Reply::Stopping);
    let rest: Vec<Telemetry> = rx.iter().collect();
    seen.extend(rest);
    assert!(
        matches!(
            seen.last(),
            Some(Telemetry::End {
                reason: EndReason::Stopped,
                ..
            })
        ),
        "{:?}",
        seen.last()
    );
    let o = s.wait().expect("outcome");
    assert_eq!(o.reason, EndReason::Stopped);
    assert!(o.clean(), "{o:?}");
    // Every verdict that came is a match: stories260K decodes the same on both sides.
    for t in &seen {
        if let Telemetry::Correctness { pass, correctness } = t {
            assert_eq!(correctness.verdict, Verdict::Match, "pass {pass}");
        }
    }
}

/// Grid larger than lavapipe's co-residency (its pool threads): the barrier spin times out.
fn too_big_grid(d: &Device) -> u32 {
    if d.info().kind.is_cpu() {
        let threads = std::env::var("LP_NUM_THREADS")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(2);
        threads * 2
    } else {
        60_000
    }
}

#[test]
fn a_failed_pass_and_the_end_reach_a_full_lossy_sink_and_a_lossless_sink_loses_nothing() {
    let Some((ctx, _turn)) = device() else { return };
    let dev: Device = ctx.into();
    let model = Model::embedded().expect("model");
    // The default spin timeout (1 s): the first passes must stay clean on a loaded machine,
    // where a pool thread (or the whole CPU-quota'd container) can be off the CPU for longer
    // than a short timeout while its partner waits at a barrier. The oversubscribed pass
    // below still fails, one timeout later.
    let o = opts(Dispatch::Mega, 64);
    let mut b = SessionBuilder::new(&dev, model, o).check(Check::Off);
    let ui = b.subscribe(SinkKind::Lossy { capacity: 2 });
    let rec = b.subscribe(SinkKind::Lossless);
    let s = b.spawn().expect("session");
    // Let the unread UI sink overflow: the recorder sees every frame meanwhile.
    let mut recorded = vec![];
    while recorded
        .iter()
        .filter(|t| matches!(t, Telemetry::Frame(_)))
        .count()
        < 8
    {
        recorded.push(rec.recv_timeout(LONG).expect("recorder message"));
    }
    // A grid that cannot be co-resident: the next pass fails for real.
    let Reply::Rebuilt(_) = s
        .command(Command::SetGrid(Some(too_big_grid(&dev))))
        .expect("grid")
    else {
        panic!("rebuild reply")
    };
    let o = s.wait().expect("outcome");
    assert!(
        matches!(o.reason, EndReason::FailedPass { .. }),
        "{:?}",
        o.reason
    );
    assert!(!o.clean() && o.failed_passes == 1);

    let ui: Vec<Telemetry> = ui.try_iter().collect();
    let failed: Vec<&Frame> = ui
        .iter()
        .filter_map(|t| match t {
            Telemetry::Frame(f) if !f.fail.word.ok() => Some(&**f),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "the failed pass reached the full UI sink");
    assert!(failed[0].dropped > 0, "frames were dropped before it");
    match ui.last() {
        Some(Telemetry::End {
            dropped,
            reason: EndReason::FailedPass { pass, .. },
            ..
        }) => {
            assert_eq!(*pass, failed[0].pass);
            assert!(*dropped >= failed[0].dropped);
        }
        other => panic!("End comes last on the UI sink: {other:?}"),
    }

    recorded.extend(rec.try_iter());
    let passes: Vec<u64> = recorded
        .iter()
        .filter_map(|t| match t {
            Telemetry::Frame(f) => Some(f.pass),
            _ => None,
        })
        .collect();
    assert_eq!(passes, (0..o.passes).collect::<Vec<_>>(), "no frame lost");
    assert!(recorded
        .iter()
        .all(|t| !matches!(t, Telemetry::Frame(f) if f.dropped != 0)));
    assert!(matches!(
        recorded.last(),
        Some(Telemetry::End { dropped: 0, .. })
    ));
}

/// Perturb the reference so that its top-1 is the token after its own argmax, `delta` above.
fn lift_next(logits: &mut [f32], delta: f32) {
    let mut a = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[a] {
            a = i;
        }
    }
    let t = (a + 1) % logits.len();
    logits[t] = logits[a] + delta;
}

/// A q8 session's shadow widens the near-tie by the q8 reference's distance to an f32 one,
/// computed before any hook: a reference lifted by 50 (far above q8's noise) is a mismatch.
#[test]
fn a_q8_sessions_shadow_still_catches_a_forced_mismatch() {
    let Some((ctx, _turn)) = device() else { return };
    let (mut cfg, tied) = baro_engine::synth::Shape::Tiny.config();
    cfg.n_layers = 1;
    let model =
        baro_engine::synth::generate(&cfg, tied, baro_engine::quant::GgmlType::Q4_0, 5, |_, _| {})
            .expect("model");
    let hook = Arc::new(|pass: u64, _pos: usize, logits: &mut [f32]| {
        if pass == 0 {
            lift_next(logits, 50.0)
        }
    });
    let mut o = opts(Dispatch::Mega, 3);
    o.act = baro_engine::act::ActType::Q8;
    let mut b = SessionBuilder::new(&ctx.into(), model, o)
        .passes(Some(3))
        .check(Check::Plan(CheckPlan::All))
        .reference_hook(hook);
    let rx = b.subscribe(SinkKind::Lossless);
    let o = b.spawn().expect("session").wait().expect("outcome");
    assert_eq!((o.checked, o.failed_checks), (3, 1));
    let first = rx.try_iter().find_map(|t| match t {
        Telemetry::Correctness {
            pass: 0,
            correctness,
        } => Some(correctness.verdict),
        _ => None,
    });
    assert_eq!(first, Some(Verdict::Mismatch));
}

#[test]
fn live_correctness_marks_a_forced_near_tie_and_mismatch_in_its_verdicts() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    // Sequences of 5 positions: passes 0-4 and 5-9; the comparison restarts with each.
    let hook = Arc::new(|pass: u64, _pos: usize, logits: &mut [f32]| match pass {
        2 => lift_next(logits, 1e-4),
        7 => lift_next(logits, 5.0),
        _ => {}
    });
    let mut b = SessionBuilder::new(&ctx.into(), model, opts(Dispatch::Multi, 5))
        .passes(Some(10))
        .check(Check::Plan(CheckPlan::All))
        .reference_hook(hook);
    let rx = b.subscribe(SinkKind::Lossless);
    let o = b.spawn().expect("session").wait().expect("outcome");
    assert_eq!(o.reason, EndReason::Completed);
    assert_eq!((o.checked, o.failed_checks), (10, 1));
    assert!(!o.clean(), "a mismatch fails the run");
    let all: Vec<Telemetry> = rx.try_iter().collect();
    let mut verdicts = vec![None; 10];
    for t in &all {
        match t {
            Telemetry::Frame(f) => assert_eq!(f.check, CheckState::Pending, "pass {}", f.pass),
            Telemetry::Correctness { pass, correctness } => {
                verdicts[*pass as usize] = Some(correctness.verdict)
            }
            _ => {}
        }
    }
    use Verdict::*;
    let want = [
        Match, Match, NearTie, Uncompared, Uncompared, Match, Match, Mismatch, Uncompared,
        Uncompared,
    ];
    assert_eq!(
        verdicts,
        want.iter().map(|&v| Some(v)).collect::<Vec<_>>(),
        "verdict per pass"
    );
    assert!(matches!(all.last(), Some(Telemetry::End { .. })));
}

#[test]
fn two_decoders_on_two_threads_share_one_context() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Arc::new(Model::embedded().expect("model"));
    let run = |dispatch: Dispatch| {
        let (ctx, model) = (ctx.clone(), model.clone());
        std::thread::spawn(move || {
            let mut dec = VulkanDecoder::new(ctx, &model, opts(dispatch, 16)).expect("decoder");
            let mut t = model.tokenizer.bos_id();
            let mut toks = vec![];
            for pos in 0..12 {
                let p = dec.step(t, pos).expect("pass");
                assert!(p.fail.ok(), "{}", p.fail.line(|l| dec.level_name(l)));
                t = p.argmax;
                toks.push(t);
            }
            toks
        })
    };
    let (a, b) = (run(Dispatch::Multi), run(Dispatch::Multi));
    let (a, b) = (a.join().expect("thread a"), b.join().expect("thread b"));
    assert_eq!(a, b, "the same tokens from both threads");
}

#[test]
fn a_lossless_sink_gets_every_pass_in_order_then_the_end_while_frames_are_built_off_the_engine_thread(
) {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    let mut b = SessionBuilder::new(&ctx.into(), model, opts(Dispatch::Mega, 64))
        .passes(Some(30))
        .check(Check::Off);
    let rx = b.subscribe(SinkKind::Lossless);
    let s = b.spawn().expect("session");
    let all: Vec<Telemetry> = rx.iter().collect();
    let outcome = s.wait().expect("outcome");
    assert_eq!(outcome.passes, 30);
    assert!(matches!(all.first(), Some(Telemetry::Start(_))));
    assert!(
        matches!(
            all.last(),
            Some(Telemetry::End {
                passes: 30,
                dropped: 0,
                ..
            })
        ),
        "{:?}",
        all.last()
    );
    let passes: Vec<u64> = all
        .iter()
        .filter_map(|t| match t {
            Telemetry::Frame(f) => {
                assert!(!f.torn && !f.spans.is_empty() && !f.stages.is_empty());
                assert!(f.fail.word.ok(), "{}", f.fail.line);
                Some(f.pass)
            }
            _ => None,
        })
        .collect();
    assert_eq!(passes, (0..30).collect::<Vec<_>>());
}

/// (pass, pos, token, next, fail bits, has spans) of every frame of a greedy session.
fn greedy_frames(
    ctx: &Device,
    chain: u32,
    max_seq: usize,
    passes: u64,
) -> Vec<(u64, u32, u32, u32, u32, bool)> {
    let model = Model::embedded().expect("model");
    let o = DecoderOptions {
        chain,
        ..opts(Dispatch::Mega, max_seq)
    };
    let mut b = SessionBuilder::new(ctx, model, o)
        .check(Check::Off)
        .passes(Some(passes));
    let rx = b.subscribe(SinkKind::Lossless);
    let out = b.spawn().expect("session").wait().expect("outcome");
    assert!(out.reason.is_success(), "{:?}", out.reason);
    rx.try_iter()
        .filter_map(|t| match t {
            Telemetry::Frame(f) => Some((
                f.pass,
                f.pos,
                f.token,
                f.next,
                f.fail.word.bits,
                !f.spans.is_empty(),
            )),
            _ => None,
        })
        .collect()
}

#[test]
fn a_chained_greedy_session_streams_the_same_passes_as_one_pass_per_submission_across_restarts() {
    let Some((ctx, _turn)) = device() else { return };
    let dev: Device = ctx.into();
    // A context of 12 positions: 30 passes wrap it twice, so chains are cut at its end and
    // the passes after the cut (run speculatively) must not reach the stream.
    let want = greedy_frames(&dev, 1, 12, 30);
    let got = greedy_frames(&dev, 5, 12, 30);
    assert_eq!(want.len(), 30);
    assert!(
        want.iter().all(|f| f.4 == 0 && f.5),
        "clean passes with spans: {want:?}"
    );
    assert!(
        want.iter().filter(|f| f.1 == 0).count() >= 3,
        "restarts: {want:?}"
    );
    assert_eq!(got, want);
}

#[test]
fn a_temperature_that_overflows_the_logits_ends_the_run_in_an_error_after_its_pass_is_streamed() {
    let Some((ctx, _turn)) = device() else { return };
    let model = Model::embedded().expect("model");
    // 1e-38: every logit of stories260K divided by it is ±inf. The pass itself is clean and
    // reaches the sink; the run then ends in an error naming the temperature, not in tokens
    // sampled from NaN probabilities.
    let mut b = SessionBuilder::new(&ctx.into(), model, opts(Dispatch::Mega, 16))
        .passes(Some(4))
        .sampling(1e-38, 0.9, 7)
        .check(Check::Off);
    let rx = b.subscribe(SinkKind::Lossless);
    let outcome = b.spawn().expect("session").wait().expect("outcome");
    let all: Vec<Telemetry> = rx.iter().collect();
    let frames: Vec<&Frame> = all
        .iter()
        .filter_map(|t| match t {
            Telemetry::Frame(f) => Some(&**f),
            _ => None,
        })
        .collect();
    assert_eq!(frames.len(), 1, "{all:?}");
    assert!(frames[0].fail.word.ok(), "{}", frames[0].fail.line);
    match &outcome.reason {
        EndReason::Error { message } => assert!(message.contains("temperature 1e-38"), "{message}"),
        r => panic!("ended {r:?}, expected the temperature's error"),
    }
}

/// The shadow reference's logits, as it computed them (pass, position, logits).
type Logged = Arc<std::sync::Mutex<Vec<(u64, usize, Vec<f32>)>>>;

/// A session of stories260K with `o`, every pass checked, the shadow's logits logged; its
/// first frame seen.
fn logged_session(
    ctx: Arc<baro_engine::vulkan::GpuContext>,
    o: DecoderOptions,
) -> (baro_engine::session::Session, Receiver<Telemetry>, Logged) {
    let logged: Logged = Arc::default();
    let log = logged.clone();
    let hook = Arc::new(move |pass: u64, pos: usize, logits: &mut [f32]| {
        log.lock().expect("log").push((pass, pos, logits.to_vec()));
    });
    let mut b = SessionBuilder::new(&ctx.into(), Model::embedded().expect("model"), o)
        .check(Check::Plan(CheckPlan::All))
        .reference_hook(hook);
    let rx = b.subscribe(SinkKind::Lossless);
    let s = b.spawn().expect("session");
    next_frame(&rx, &mut vec![]);
    (s, rx, logged)
}

/// After a LoadModel: the first pass (and its token) of the run whose Start `is_new` picks,
/// once `judged` of its passes have been judged, each a match.
fn first_pass_of_the_load(
    rx: &Receiver<Telemetry>,
    is_new: impl Fn(&baro_engine::telemetry::RunDetails) -> bool,
    judged: usize,
) -> (u64, u32) {
    let deadline = Instant::now() + LONG;
    let (mut first, mut token, mut n) = (None::<u64>, None, 0);
    while n < judged {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx
            .recv_timeout(left)
            .expect("frames and verdicts of the loaded model")
        {
            Telemetry::Start(d) if is_new(&d) => first = Some(u64::MAX),
            Telemetry::Frame(f) if first == Some(u64::MAX) => {
                assert_eq!(f.pos, 0, "a loaded model starts its sequence");
                first = Some(f.pass);
                token = Some(f.token);
            }
            Telemetry::Correctness { pass, correctness }
                if first.is_some_and(|p| p != u64::MAX && pass >= p) =>
            {
                assert_eq!(correctness.verdict, Verdict::Match, "pass {pass}");
                n += 1;
            }
            _ => {}
        }
    }
    (first.expect("a first pass"), token.expect("its token"))
}

/// The shadow's logits of `pass` at position 0.
fn shadow_at_0(logged: &Logged, pass: u64) -> Vec<f32> {
    logged
        .lock()
        .expect("log")
        .iter()
        .find(|(p, pos, _)| *p == pass && *pos == 0)
        .map(|(_, _, l)| l.clone())
        .expect("the shadow's logits of the loaded model's first pass")
}

#[test]
fn a_loaded_model_under_act_auto_takes_its_own_activation_type_and_the_shadow_follows_it() {
    use baro_engine::act::ActType;
    use baro_engine::reference::CpuDecoder;
    use baro_engine::telemetry::KvType;
    let Some((ctx, _turn)) = device() else { return };
    // stories260K's matrices are F32: auto is f32 there.
    let o = DecoderOptions {
        act: ActType::F32,
        act_auto: true,
        ..opts(Dispatch::Mega, 32)
    };
    let (s, rx, logged) = logged_session(ctx, o);

    // A Q4_0 model: every matrix quantised, and lavapipe has integer dot products: q8. (Before
    // the fix the session kept the first model's f32.)
    let q4 = crate::common::one_head_group(baro_engine::quant::GgmlType::Q4_0, 5);
    let q4_ref = q4.clone();
    let Reply::Rebuilt(d) = s
        .command(Command::LoadModel(Box::new(q4)))
        .expect("load Q4_0")
    else {
        panic!("rebuild reply")
    };
    assert_eq!((d.act, d.act_auto), (ActType::Q8, true), "{d:?}");
    // Its passes are judged by a q8 reference: every verdict a match (an f32 reference's
    // distance to q8 logits is far past the f32 bounds).
    let (p0, t0) = first_pass_of_the_load(&rx, |d| d.act == ActType::Q8, 4);

    // The shadow judged those passes with the q8 reference's logits, bit for bit (not the f32
    // reference's, which differ by the q8 noise).
    let shadow = shadow_at_0(&logged, p0);
    let reference = |act| {
        CpuDecoder::with_types(&q4_ref.config, &q4_ref.weights, 32, KvType::F32, act)
            .forward(t0, 0)
            .to_vec()
    };
    let (q8, f32s) = (reference(ActType::Q8), reference(ActType::F32));
    assert_ne!(q8, f32s, "q8 and f32 references differ on this model");
    assert_eq!(
        shadow, q8,
        "the shadow runs the q8 reference after the load"
    );

    // Back to stories260K: f32 again (before the fix the rebuild was refused: q8 on F32
    // matrices).
    let Reply::Rebuilt(d) = s
        .command(Command::LoadModel(Box::new(
            Model::embedded().expect("model"),
        )))
        .expect("load stories260K")
    else {
        panic!("rebuild reply")
    };
    assert_eq!((d.act, d.act_auto), (ActType::F32, true), "{d:?}");
    assert_eq!(s.command(Command::Stop).expect("stop"), Reply::Stopping);
    let o = s.wait().expect("outcome");
    assert!(o.clean(), "{o:?}");
}

#[test]
fn a_loaded_wide_model_under_kv_auto_takes_the_f16_cache_and_the_shadow_rounds_its_cache_too() {
    use baro_engine::act::ActType;
    use baro_engine::kv::KV_AUTO_F16_DIM;
    use baro_engine::reference::CpuDecoder;
    use baro_engine::telemetry::KvType;
    let Some((ctx, _turn)) = device() else { return };
    // stories260K runs f32 activations: auto keeps the f32 cache there.
    let o = DecoderOptions {
        act: ActType::F32,
        act_auto: true,
        kv: KvType::F32,
        kv_auto: true,
        ..opts(Dispatch::Mega, 32)
    };
    let (s, rx, logged) = logged_session(ctx, o);

    // A narrow Q4_0 model: q8, but under KV_AUTO_F16_DIM wide, so the cache stays f32.
    let narrow = crate::common::one_head_group(baro_engine::quant::GgmlType::Q4_0, 5);
    let Reply::Rebuilt(d) = s
        .command(Command::LoadModel(Box::new(narrow)))
        .expect("load the narrow Q4_0")
    else {
        panic!("rebuild reply")
    };
    assert_eq!(
        (d.act, d.kv, d.kv_auto),
        (ActType::Q8, KvType::F32, true),
        "{d:?}"
    );

    // One layer KV_AUTO_F16_DIM wide: q8 and the f16 cache (lavapipe stores f16).
    let (mut cfg, tied) = baro_engine::synth::Shape::Tiny.config();
    cfg.dim = KV_AUTO_F16_DIM;
    cfg.hidden_dim = 256;
    cfg.n_layers = 1;
    cfg.n_heads = 32;
    cfg.n_kv_heads = 8;
    let wide =
        baro_engine::synth::generate(&cfg, tied, baro_engine::quant::GgmlType::Q4_0, 7, |_, _| {})
            .expect("wide model");
    let wide_ref = wide.clone();
    let Reply::Rebuilt(d) = s
        .command(Command::LoadModel(Box::new(wide)))
        .expect("load the wide Q4_0")
    else {
        panic!("rebuild reply")
    };
    assert_eq!(
        (d.act, d.kv, d.kv_auto),
        (ActType::Q8, KvType::F16, true),
        "{d:?}"
    );
    assert!(
        d.path_labels().contains(&"kv f16 (auto)".to_string()),
        "{:?}",
        d.path_labels()
    );
    // Its first pass, judged a match by a reference that rounds its cache to f16 too, with
    // the logits of that reference bit for bit (not the f32 cache's).
    let (p0, t0) = first_pass_of_the_load(&rx, |d| d.kv == KvType::F16, 1);
    let shadow = shadow_at_0(&logged, p0);
    let reference = |kv| {
        CpuDecoder::with_types(&wide_ref.config, &wide_ref.weights, 32, kv, ActType::Q8)
            .forward(t0, 0)
            .to_vec()
    };
    let (f16, f32s) = (reference(KvType::F16), reference(KvType::F32));
    assert_ne!(f16, f32s, "the f16 and f32 caches' references differ here");
    assert_eq!(
        shadow, f16,
        "the shadow rounds its cache to f16 after the load"
    );
    assert_eq!(s.command(Command::Stop).expect("stop"), Reply::Stopping);
    let o = s.wait().expect("outcome");
    assert!(o.clean(), "{o:?}");
}
