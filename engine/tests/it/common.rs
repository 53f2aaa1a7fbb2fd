//! Shared by the Vulkan tests: one device, taken in turns.
//!
//! Most tests share their turn: lavapipe runs one submission at a time on its queue thread
//! (its pool threads are the grid), so two tests' passes never overlap, while their CPU work —
//! pipeline builds (most of a lavapipe test), the CPU reference — runs on both cores. A test
//! whose assertion depends on the machine being quiet (CPU contention labels, timings,
//! watchdogs, stall injection) takes the device alone: no other test runs beside it.

use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use baro_engine::gate::GateReport;
use baro_engine::vulkan::GpuContext;

/// A test's turn on the device: shared with other sharing tests, or alone.
#[allow(dead_code)] // held for its drop
pub enum Turn {
    Shared(RwLockReadGuard<'static, ()>),
    Alone(RwLockWriteGuard<'static, ()>),
}

static TURN: RwLock<()> = RwLock::new(());

/// The device, beside other tests that share it (see the module's note).
pub fn device() -> Option<(Arc<GpuContext>, Turn)> {
    let ctx = context()?;
    Some((
        ctx,
        Turn::Shared(TURN.read().unwrap_or_else(|p| p.into_inner())),
    ))
}

/// The device with no other test running: for assertions that need a quiet machine.
#[allow(dead_code)] // not every test module needs it
pub fn device_alone() -> Option<(Arc<GpuContext>, Turn)> {
    let ctx = context()?;
    Some((
        ctx,
        Turn::Alone(TURN.write().unwrap_or_else(|p| p.into_inner())),
    ))
}

/// One device for the whole binary.
fn context() -> Option<Arc<GpuContext>> {
    static CTX: OnceLock<Result<Arc<GpuContext>, String>> = OnceLock::new();
    let ctx = CTX.get_or_init(|| {
        if std::env::var_os("LP_NUM_THREADS").is_none() {
            // Co-residency on lavapipe = its pool threads; the fault tests rely on 2.
            std::env::set_var("LP_NUM_THREADS", "2");
        }
        GpuContext::new(None)
            .map(Arc::new)
            .map_err(|e| e.to_string())
    });
    match ctx {
        Ok(c) => Some(c.clone()),
        Err(e) => {
            let in_ci =
                std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
            if !in_ci && std::env::var_os("BARO_SKIP_VULKAN").is_some() {
                eprintln!("SKIPPED (BARO_SKIP_VULKAN set): no Vulkan device: {e}");
                return None;
            }
            panic!("no usable Vulkan device: {e}\ninstall lavapipe: apt-get install mesa-vulkan-drivers libvulkan1 (or run scripts/test.sh)");
        }
    }
}

/// A gate over forced tokens passed: every one of `passes` positions compared, mega and multi
/// bit-identical, and every dispatch style within `max_rel_l2` of the reference.
#[allow(dead_code)] // not every test binary runs a gate
pub fn assert_gate_clean(r: &GateReport, passes: usize, max_rel_l2: f64, what: &str) {
    let fails: Vec<_> = r.passes.iter().flat_map(|p| p.failures.clone()).collect();
    assert!(r.ok(), "{what}: {fails:?}");
    assert_eq!(r.passes.len(), passes, "{what}: every position compared");
    for p in &r.passes {
        assert_eq!(p.bitwise_equal, Some(true), "{what}: pass {}", p.pos);
        for m in &p.modes {
            assert!(
                m.rel_l2 < max_rel_l2,
                "{what}: pass {} {}: rel-L2 {}",
                p.pos,
                m.dispatch.name(),
                m.rel_l2
            );
        }
    }
}

/// The tiny shape with one KV head and four query heads (two layers): one attention unit per
/// level at short context, so one of lavapipe's two co-resident workgroups idles through
/// every attention level (the read-ahead's and the idle wait's subject).
#[allow(dead_code)] // not every test module needs it
pub fn one_head_group(ty: baro_engine::quant::GgmlType, seed: u64) -> baro_engine::model::Model {
    let (mut cfg, tied) = baro_engine::synth::Shape::Tiny.config();
    cfg.n_layers = 2;
    cfg.n_heads = 4;
    cfg.n_kv_heads = 1;
    baro_engine::synth::generate(&cfg, tied, ty, seed, |_, _| {}).expect("model")
}

/// Every device kind but the CPU's.
#[allow(dead_code)] // not every test module needs it
pub const GPU_KINDS: [baro_engine::vulkan::DeviceKind; 4] = [
    baro_engine::vulkan::DeviceKind::Discrete,
    baro_engine::vulkan::DeviceKind::Integrated,
    baro_engine::vulkan::DeviceKind::Virtual,
    baro_engine::vulkan::DeviceKind::Other,
];

/// A 3-pass gate of mega and multi on `m` (prompt BOS, 5, 77) with the decoder options `set`
/// makes, asserted clean.
#[allow(dead_code)] // not every test module needs it
pub fn assert_gate_clean_with(
    ctx: &Arc<GpuContext>,
    m: &baro_engine::model::Model,
    set: impl FnOnce(&mut baro_engine::vulkan::DecoderOptions),
    what: &str,
) {
    use baro_engine::vulkan::Dispatch;
    let mut g = baro_engine::gate::GateConfig::new(
        3,
        vec![Dispatch::Mega, Dispatch::Multi],
        vec![m.tokenizer.bos_id(), 5, 77],
    );
    set(&mut g.decoder);
    let r = baro_engine::gate::run_gate(&ctx.clone().into(), m, &g, |_, _| {}).expect("gate ran");
    assert_gate_clean(&r, 3, g.max_rel_l2, what);
}
