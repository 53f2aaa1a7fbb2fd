//! `baro-top devices`: every Vulkan device, its capabilities, and (with --probe) the largest
//! grid the real megakernel passes a residency probe with.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use baro_engine::vulkan::{
    default_grid, list_devices, DecoderOptions, GpuContext, Mode, VulkanDecoder,
};
use clap::Args;

use crate::ModelArgs;

#[derive(Args, Debug)]
pub struct DevicesArgs {
    /// Run the residency probe: the real megakernel on the model at growing grids.
    #[arg(long)]
    pub probe: bool,
    /// Largest grid the probe tries, 1..=65535.
    #[arg(long, default_value_t = 4096, value_parser = crate::validate::probe_max, allow_negative_numbers = true)]
    pub probe_max: u32,
    #[command(flatten)]
    pub model: ModelArgs,
}

pub fn run(a: DevicesArgs) -> anyhow::Result<ExitCode> {
    let devs = list_devices().context("listing Vulkan devices")?;
    if devs.is_empty() {
        outln!("no Vulkan devices (for the lavapipe CPU device: apt-get install mesa-vulkan-drivers libvulkan1)")?;
        return Ok(ExitCode::from(1));
    }
    for d in &devs {
        outln!(
            "device {}: {} [{}] vendor {:#06x}",
            d.index,
            d.name,
            super::kind_name(d.kind),
            d.vendor_id
        )?;
        outln!("  driver           {}", d.driver)?;
        outln!("  vulkan           {}", d.api)?;
        outln!(
            "  subgroup         {} (arithmetic in compute: {})",
            d.subgroup_size,
            d.subgroup_arith
        )?;
        outln!(
            "  device clock     {}",
            if d.device_clock {
                "yes (VK_KHR_shader_clock)"
            } else {
                "no: barrier spins bounded by iteration budget only"
            }
        )?;
        outln!("  memory model     {}", d.memory_model)?;
        outln!(
            "  SMs / CUs        {}",
            d.sm_count.map_or("unknown".into(), |n| n.to_string())
        )?;
        outln!(
            "  shared memory    {} bytes/workgroup, max workgroup {}",
            d.max_shared,
            d.max_wg
        )?;
        outln!(
            "  timestamps       {} ns/tick, {} valid bits, calibrated: {}",
            d.timestamp_period,
            d.timestamp_bits,
            d.calibrated_timestamps
        )?;
        let missing = d.missing();
        outln!(
            "  decoder          {}",
            if missing.is_empty() {
                "supported".to_string()
            } else {
                format!("NOT supported: lacks {}", missing.join(", "))
            }
        )?;
        if a.probe && missing.is_empty() {
            let ctx = Arc::new(GpuContext::new(Some(&d.index.to_string()))?);
            let model = super::load_model(&a.model)?;
            let (g, tried) = probe(&ctx, &model, a.probe_max)?;
            outln!(
                "  residency probe  largest passing grid {g} (default {}), tried {tried}",
                default_grid(&ctx)
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Doubling, then bisection, on the grid size: a pass is clean when its fail word is zero
/// and its argmax equals the one from grid 1.
fn probe(
    ctx: &Arc<GpuContext>,
    model: &baro_engine::model::Model,
    max: u32,
) -> anyhow::Result<(u32, String)> {
    let clean = |g: u32| -> anyhow::Result<bool> {
        let opts = DecoderOptions {
            mode: Mode::Mega,
            grid: Some(g),
            max_seq: 2,
            spin_timeout: std::time::Duration::from_millis(200),
            ..Default::default()
        };
        let mut dec = VulkanDecoder::new(ctx.clone(), model, opts)?;
        let p = dec.step(model.tokenizer.bos_id(), 0)?;
        Ok(p.fail.ok())
    };
    let mut tried = vec![];
    let mut good = 0;
    let mut g = 1;
    while g <= max {
        let ok = clean(g)?;
        tried.push(format!("{g}:{}", if ok { "ok" } else { "fail" }));
        if !ok {
            break;
        }
        good = g;
        g *= 2;
    }
    let (mut lo, mut hi) = (good, g.min(max + 1));
    while hi - lo > 1 && good > 0 {
        let mid = (lo + hi) / 2;
        let ok = clean(mid)?;
        tried.push(format!("{mid}:{}", if ok { "ok" } else { "fail" }));
        if ok {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((lo, tried.join(" ")))
}
