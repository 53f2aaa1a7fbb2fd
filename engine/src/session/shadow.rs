//! The shadow CPU reference that judges the GPU's tokens beside the engine (`baro-shadow`).

use super::*;
use crate::act::ActType;
use crate::kv::KvType;

/// Work for the shadow reference.
pub(super) enum ToShadow {
    /// Judge the GPU's `gpu_token` for `token` at `pos`.
    Pass {
        pass: u64,
        pos: usize,
        token: u32,
        gpu_token: u32,
    },
    /// Follow another model from now on, with the new decoder's positions, KV storage and
    /// activation types (a LoadModel under `--act auto` / `--kv auto` may resolve others).
    Model(Box<Model>, usize, (KvType, ActType)),
}

/// The shadow reference's thread: the CPU reference, in order, one pass at a time.
pub(super) struct Shadow {
    pub(super) tx: Sender<ToShadow>,
    pub(super) rx: Receiver<(u64, Correctness)>,
    pub(super) cancel: Arc<AtomicBool>,
    pub(super) join: Option<JoinHandle<()>>,
    pub(super) sent: u64,
    pub(super) received: u64,
}

impl Shadow {
    pub(super) fn spawn(
        model: Model,
        max_seq: usize,
        types: (KvType, ActType),
        near_tie: f32,
        hook: Option<ReferenceHook>,
    ) -> Result<Shadow> {
        let (tx, jobs) = unbounded::<ToShadow>();
        let (out, rx) = unbounded();
        let cancel = Arc::new(AtomicBool::new(false));
        let c2 = cancel.clone();
        let join = std::thread::Builder::new()
            .name("baro-shadow".into())
            .spawn(move || shadow_main(model, (max_seq, types), near_tie, hook, jobs, out, c2))
            .map_err(|e| Error::EngineThread(format!("spawning the shadow reference: {e}")))?;
        Ok(Shadow {
            tx,
            rx,
            cancel,
            join: Some(join),
            sent: 0,
            received: 0,
        })
    }

    pub(super) fn lag(&self) -> u64 {
        self.sent - self.received
    }
}

/// `cache`: the reference's KV cache and matvec inputs, as the decoder's (positions, KV
/// storage type, activation type).
pub(super) fn shadow_main(
    mut model: Model,
    (mut max_seq, (mut kv, mut act)): (usize, (KvType, ActType)),
    near_tie: f32,
    hook: Option<ReferenceHook>,
    jobs: Receiver<ToShadow>,
    out: Sender<(u64, Correctness)>,
    cancel: Arc<AtomicBool>,
) {
    loop {
        let (next, next_seq, (next_kv, next_act)): (Box<Model>, usize, (KvType, ActType)) = {
            // The reference's KV cache stores what the decoder's does (f16: rounded keys and
            // values; q8: quantised matvec inputs), so an f16-KV or q8 session is judged
            // against a reference that rounds the same way.
            let mut cpu = CpuDecoder::with_types(&model.config, &model.weights, max_seq, kv, act);
            // q8: an f32-activation reference beside it sets each pass's near-tie
            // (crate::gate::q8_bounds).
            let mut cpu_f32 = (act == ActType::Q8).then(|| {
                CpuDecoder::with_types(&model.config, &model.weights, max_seq, kv, ActType::F32)
            });
            let mut judge = Judge::new(near_tie);
            let vocab = model.config.vocab_size as u32;
            loop {
                let job = match jobs.recv() {
                    Ok(j) => j,
                    Err(_) => return,
                };
                match job {
                    ToShadow::Model(m, seq, a) => break (m, seq, a),
                    ToShadow::Pass {
                        pass,
                        pos,
                        token,
                        gpu_token,
                    } => {
                        if cancel.load(Ordering::Relaxed) {
                            return;
                        }
                        // Every sequence is compared from its start.
                        if pos == 0 {
                            judge = Judge::new(near_tie);
                        }
                        if pos >= cpu.max_seq() || token >= vocab {
                            // Not reachable from the engine (it checks both); skip quietly.
                            continue;
                        }
                        let logits = cpu.forward(token, pos);
                        // The bound comes from the reference as computed, before a test
                        // hook alters it (a lifted logit must not widen its own near-tie).
                        if let Some(c32) = &mut cpu_f32 {
                            let (nt, _) = crate::gate::q8_bounds(
                                logits,
                                c32.forward(token, pos),
                                near_tie,
                                0.0,
                            );
                            judge.set_near_tie(nt);
                        }
                        if let Some(h) = &hook {
                            h(pass, pos, logits);
                        }
                        let c = judge.judge(pass, gpu_token, None, logits);
                        if out.send((pass, c)).is_err() {
                            return;
                        }
                    }
                }
            }
        };
        model = *next;
        max_seq = next_seq;
        kv = next_kv;
        act = next_act;
    }
}
