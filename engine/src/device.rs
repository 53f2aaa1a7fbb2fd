//! The device as the app sees it: open one, list them, describe one, probe how large a grid
//! stays resident. The app reaches the GPU only through this module, [`crate::session`],
//! [`crate::gate`] and [`crate::bench`]; the `vulkan` module's types stay inside the engine.

use std::sync::Arc;

use crate::model::Model;
use crate::vulkan::{default_grid, GpuContext, VulkanDecoder};
use crate::Result;

pub use crate::vulkan::{
    kind_words, max_wg_size, ActType, DecoderOptions, DeviceInfo, DeviceKind, Dispatch, KvType,
    RobustBuffers, MAX_CHAIN, MAX_IDLE_WAIT_NS, MAX_PREFETCH_MIB, MAX_PREFETCH_SKEW,
};

/// An open Vulkan device, shared by sessions, gates and benches (cheap to clone).
#[derive(Clone)]
pub struct Device {
    ctx: Arc<GpuContext>,
}

impl From<Arc<GpuContext>> for Device {
    fn from(ctx: Arc<GpuContext>) -> Self {
        Device { ctx }
    }
}

impl Device {
    /// Open a device: `selector` is an index or a case-insensitive name substring; `None`
    /// prefers a discrete GPU, then integrated, virtual, and CPU last.
    pub fn open(selector: Option<&str>) -> Result<Device> {
        Ok(Device {
            ctx: Arc::new(GpuContext::new(selector)?),
        })
    }

    /// Every Vulkan device with its capabilities.
    pub fn list() -> Result<Vec<DeviceInfo>> {
        crate::vulkan::list_devices()
    }

    /// The device's capabilities.
    pub fn info(&self) -> &DeviceInfo {
        &self.ctx.info
    }

    /// One line naming the device and its driver.
    pub fn describe(&self) -> String {
        self.ctx.describe()
    }

    /// The grid a decoder uses when none is given.
    pub fn default_grid(&self) -> u32 {
        default_grid(&self.ctx)
    }

    /// The Vulkan context (engine internals and tests).
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// Whether any device of this process missed a watchdog: the process should then leave
    /// with `_exit` after flushing (see [`crate::vulkan::any_device_hung`]).
    pub fn any_hung() -> bool {
        crate::vulkan::any_device_hung()
    }

    /// The residency probe: doubling, then bisection, on the grid size of the real
    /// megakernel (one pass of `model`); a grid is good when its fail word stays zero.
    /// Returns the largest good grid up to `max` and the grids tried (`"g:ok"`/`"g:fail"`).
    pub fn probe_residency(&self, model: &Model, max: u32) -> Result<(u32, String)> {
        let clean = |g: u32| -> Result<bool> {
            let opts = DecoderOptions {
                dispatch: Dispatch::Mega,
                grid: Some(g),
                max_seq: 2,
                spin_timeout: std::time::Duration::from_millis(200),
                ..Default::default()
            };
            let mut dec = VulkanDecoder::new(self.ctx.clone(), model, opts)?;
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
}

/// One pass of a [`GpuDecoder`], as `generate` prints it.
#[derive(Clone, Debug)]
pub struct PassSummary {
    /// Argmax of the logits.
    pub argmax: u32,
    /// The fail word and its line.
    pub fail: baro_telemetry::FailReport,
    /// FNV-1a of the logits' bits: equal across dispatch styles and builds iff bit-identical.
    pub logits_hash: u64,
}

/// A GPU decoder for one-shot generation (`generate --backend vulkan`): the decode loop is
/// the caller's, every pass's fail word comes back with its logits.
pub struct GpuDecoder {
    dec: VulkanDecoder,
}

impl GpuDecoder {
    /// Upload `model` and build the pipeline.
    pub fn new(device: &Device, model: &Model, opts: DecoderOptions) -> Result<GpuDecoder> {
        Ok(GpuDecoder {
            dec: VulkanDecoder::new(device.context().clone(), model, opts)?,
        })
    }

    /// `dispatch mega grid 2 x 64 lanes, 27 levels, 45 stages`.
    /// On a CPU device with its loop estimate: `…, 12 levels, 16 stages, ~9120 of 64000 loop
    /// iterations an invocation (CPU device)`.
    pub fn layout_line(&self) -> String {
        let mut line = format!(
            "dispatch {} grid {} x {} lanes, {} levels, {} stages",
            self.dec.opts.dispatch,
            self.dec.grid,
            self.dec.wg_size,
            self.dec.program.levels.len(),
            self.dec.program.stages.len()
        );
        if let Some(n) = self.dec.cpu_pass_loops() {
            line += &format!(
                ", ~{n} of {} loop iterations an invocation (CPU device)",
                crate::vulkan::CPU_LOOP_BUDGET
            );
        }
        line
    }

    /// Run `token` at `pos`; a failed pass is reported in [`PassSummary::fail`].
    pub fn step(&mut self, token: u32, pos: usize) -> Result<PassSummary> {
        let p = self.dec.step(token, pos)?;
        let fail = baro_telemetry::FailReport::new(p.fail, |l| self.dec.level_name(l));
        let logits_hash = self
            .dec
            .logits()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, v| {
                (h ^ v.to_bits() as u64).wrapping_mul(0x0100_0000_01b3)
            });
        Ok(PassSummary {
            argmax: p.argmax,
            fail,
            logits_hash,
        })
    }

    /// Logits of the last pass (samplers scale them in place).
    pub fn logits_mut(&mut self) -> &mut [f32] {
        self.dec.logits_mut()
    }
}

impl crate::generate::Decode for GpuDecoder {
    fn max_seq(&self) -> usize {
        crate::generate::Decode::max_seq(&self.dec)
    }

    fn forward(&mut self, token: u32, pos: usize) -> Result<&mut [f32]> {
        crate::generate::Decode::forward(&mut self.dec, token, pos)
    }
}
