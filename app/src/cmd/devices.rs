//! `baro-top devices`: every Vulkan device, its capabilities, and (with --probe) the largest
//! grid the real megakernel passes a residency probe with.

use std::process::ExitCode;

use anyhow::Context;
use baro_engine::device::{kind_words, Device};
use clap::Args;

use crate::args::ModelArgs;

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
    let devs = Device::list().context("listing Vulkan devices")?;
    if devs.is_empty() {
        outln!("no Vulkan devices (for the lavapipe CPU device: apt-get install mesa-vulkan-drivers libvulkan1)")?;
        return Ok(ExitCode::from(1));
    }
    for d in &devs {
        outln!(
            "device {}: {} [{}] vendor {:#06x}",
            d.index,
            d.name,
            kind_words(d.kind),
            d.vendor_id
        )?;
        outln!("  driver           {}", d.driver)?;
        outln!("  vulkan           {}", d.api)?;
        outln!(
            "  subgroup         {} (arithmetic and shuffle in compute: {})",
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
            "  f16 KV cache     {}",
            if d.storage_16bit {
                "yes (storageBuffer16BitAccess; --kv auto, the default, stores f16 for q8 runs of models 4096 wide and up)"
            } else {
                "no: --kv f16 is refused, --kv auto stores f32 (lacks storageBuffer16BitAccess)"
            }
        )?;
        // The check a decoder makes before a q8 run, and the one --act auto goes by.
        outln!(
            "  q8 activations   {}",
            match baro_engine::act::ActCaps::of(d).q8 {
                true => "yes (shaderIntegerDotProduct; --act auto, the default, runs q8 on all-quantised models)".to_string(),
                false if !d.integer_dot => {
                    "no: --act q8 is refused, --act auto runs f32 (lacks shaderIntegerDotProduct)"
                        .to_string()
                }
                false => format!(
                    "no: --act q8 is refused, --act auto runs f32 (subgroups of {} lanes, not a multiple of 8)",
                    d.subgroup_size
                ),
            }
        )?;
        outln!(
            "  compiler stats   {}",
            if d.pipeline_stats {
                "yes (VK_KHR_pipeline_executable_properties: registers, spills in a run's details)"
            } else {
                "no (the driver does not report registers or spills)"
            }
        )?;
        outln!("  buffer checks    {}", robustness_words(d))?;
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
            let dev = Device::open(Some(&d.index.to_string()))?;
            let model = super::load_model(&a.model)?;
            let (g, tried) = dev.probe_residency(&model, a.probe_max)?;
            outln!(
                "  residency probe  largest passing grid {g} (default {}), tried {tried}",
                dev.default_grid()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// What `devices` says of a device's buffer robustness: the driver's default for storage
/// buffers where it reports one, and whether `--robust-buffers off` can run.
fn robustness_words(d: &baro_engine::device::DeviceInfo) -> String {
    let default = match d.storage_checked_by_default {
        Some(true) => "storage buffers bounds-checked by default",
        Some(false) => "storage buffers unchecked by default",
        None => "default behaviour not reported",
    };
    if d.pipeline_robustness {
        format!("{default}; --robust-buffers off asks for none (VK_EXT_pipeline_robustness)")
    } else {
        format!("{default}; --robust-buffers off is refused (lacks VK_EXT_pipeline_robustness)")
    }
}
