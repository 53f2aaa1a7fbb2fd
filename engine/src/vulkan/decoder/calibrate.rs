//! Clock calibration: device clock ↔ timestamp queries ↔ host CLOCK_MONOTONIC.

use super::*;
use baro_telemetry::clock::ClockRate;

/// Device clock ↔ timestamp-query calibration (see [`VulkanDecoder::calibrate`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Calibration {
    /// `timestamp_ns − clock_ns` at the sample (low 32 bits of the clock are what moves on
    /// lavapipe: apply with wrapping arithmetic).
    pub offset_ns: i64,
    /// Half the width of the timestamp window around the clock sample.
    pub uncertainty_ns: u64,
    /// Timestamp (ns) at which it was taken.
    pub at_ts_ns: u64,
}

impl VulkanDecoder {
    /// Upload `model` and build the pipeline. Where the run would use the device clock, its
    /// unit is checked first (by the device's first decoder, [`Self::measure_clock_rate`];
    /// [`GpuContext::clock_rate`] keeps the result): a clock that does not count ns would
    /// misstate every stage span, barrier time, spin timeout and idle wait, so the decoder
    /// is built again without it and says why ([`Self::clock_off`]).
    pub fn new(ctx: Arc<GpuContext>, model: &Model, opts: DecoderOptions) -> Result<VulkanDecoder> {
        let mut dec = Self::build(ctx.clone(), model, opts.clone())?;
        if !dec.has_clock() {
            return Ok(dec);
        }
        let rate = match opts.test_clock_rate {
            Some(r) => Some(ClockRate {
                ticks_per_ns: r,
                uncertainty: 0.0,
            }),
            None => match ctx.clock_rate.get() {
                Some(r) => *r,
                None => {
                    // A verdict against the clock is measured twice (a thread descheduled
                    // between two samples, or a clock stepped, misleads one measurement);
                    // what the device keeps is the last measurement.
                    let during = "measuring the device clock's rate against the timestamp queries";
                    let mut r = dec.measure_clock_rate().map_err(|e| e.during(during))?;
                    if r.is_some_and(|r| !r.counts_ns()) {
                        r = dec.measure_clock_rate().map_err(|e| e.during(during))?;
                    }
                    *ctx.clock_rate.get_or_init(|| r)
                }
            },
        };
        let Some(r) = rate.filter(|r| !r.counts_ns()) else {
            return Ok(dec);
        };
        let why = format!(
            "the device clock ticks at {:.1} MHz (±{:.1}), not once a ns: it is off, so no stage or barrier times (nor a pass loop's per-pass GPU times)",
            r.mhz(),
            r.mhz_uncertainty()
        );
        drop(dec);
        let opts = DecoderOptions {
            no_device_clock: true,
            ..opts
        };
        let mut dec = Self::build(ctx, model, opts).map_err(|e| match e {
            Error::Invalid(m) => Error::Invalid(format!("{m} ({why})")),
            e => e,
        })?;
        dec.clock_off = Some(why);
        Ok(dec)
    }

    /// Why this decoder runs without the device clock its device has (the clock does not
    /// count ns); `None` where it runs with it, or was asked to run without.
    pub fn clock_off(&self) -> Option<&str> {
        self.clock_off.as_deref()
    }

    /// The device clock's rate against the timestamp queries: two calibrations (the tightest
    /// of four windows each) 20 ms apart. `None` without a device clock or timestamps, or
    /// where the two samples cannot give a rate ([`ClockRate::between`]).
    pub fn measure_clock_rate(&mut self) -> Result<Option<ClockRate>> {
        let Some(a) = self.calibrate(4)? else {
            return Ok(None);
        };
        std::thread::sleep(Duration::from_millis(20));
        let Some(b) = self.calibrate(4)? else {
            return Ok(None);
        };
        let sample = |c: Calibration| {
            let clock = (c.at_ts_ns as i64).wrapping_sub(c.offset_ns) as u64;
            (c.at_ts_ns, clock, c.uncertainty_ns)
        };
        Ok(ClockRate::between(sample(a), sample(b)))
    }

    /// Calibrate the shader's device clock against the timestamp-query domain: `samples`
    /// single-workgroup dispatches that read the clock between two timestamps; the tightest
    /// window wins. Returns `None` without a device clock or timestamps.
    pub fn calibrate(&mut self, samples: usize) -> Result<Option<Calibration>> {
        if !self.has_clock() || self.ctx.info.timestamp_bits == 0 {
            return Ok(None);
        }
        let period = self.ctx.info.timestamp_period as f64;
        let mut best: Option<Calibration> = None;
        let (pipeline, layout, set, qpool, sync, readback) = (
            self.pipeline,
            self.layout,
            self.sets[0],
            self.qpool,
            self.sync.buffer,
            self.readback.buffer,
        );
        for _ in 0..samples.max(1) {
            let push: [u32; PUSH_WORDS] = calibration_push();
            // SAFETY: `cb` is recording (one_shot begins it); the query pool, pipeline,
            // layout, set and buffers are this decoder's live handles; the copy reads 8 bytes
            // inside `sync` and writes them at the start of `readback`.
            self.one_shot(|d, cb| unsafe {
                d.cmd_reset_query_pool(cb, qpool, 0, 2);
                d.cmd_bind_pipeline(cb, vk::PipelineBindPoint::COMPUTE, pipeline);
                d.cmd_bind_descriptor_sets(
                    cb,
                    vk::PipelineBindPoint::COMPUTE,
                    layout,
                    0,
                    &[set],
                    &[],
                );
                d.cmd_push_constants(
                    cb,
                    layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    unsafe_words_as_bytes(&push),
                );
                d.cmd_write_timestamp(cb, vk::PipelineStageFlags::TOP_OF_PIPE, qpool, 0);
                d.cmd_dispatch(cb, 1, 1, 1);
                d.cmd_write_timestamp(cb, vk::PipelineStageFlags::BOTTOM_OF_PIPE, qpool, 1);
                barrier(
                    d,
                    cb,
                    vk::PipelineStageFlags::COMPUTE_SHADER,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::AccessFlags::SHADER_WRITE,
                    vk::AccessFlags::TRANSFER_READ,
                );
                d.cmd_copy_buffer(
                    cb,
                    sync,
                    readback,
                    &[vk::BufferCopy {
                        src_offset: sy::CALIB as u64 * 4,
                        dst_offset: 0,
                        size: 8,
                    }],
                );
                barrier(
                    d,
                    cb,
                    vk::PipelineStageFlags::TRANSFER,
                    vk::PipelineStageFlags::HOST,
                    vk::AccessFlags::TRANSFER_WRITE,
                    vk::AccessFlags::HOST_READ,
                );
            })?;
            let mut ts = [0u64; 2];
            // SAFETY: the queries were written by the submission waited on above.
            let got = unsafe {
                self.ctx.device.get_query_pool_results(
                    qpool,
                    0,
                    &mut ts,
                    vk::QueryResultFlags::TYPE_64,
                )
            };
            vkr("vkGetQueryPoolResults", got)?;
            let map = readback_map(&self.readback)?;
            let clock = u64::from_le_bytes([
                map[0], map[1], map[2], map[3], map[4], map[5], map[6], map[7],
            ]);
            let t0 = (ts[0] as f64 * period) as u64;
            let t1 = (ts[1] as f64 * period) as u64;
            let mid = t0 / 2 + t1 / 2;
            let c = Calibration {
                offset_ns: mid as i64 - clock as i64,
                uncertainty_ns: t1.saturating_sub(t0) / 2,
                at_ts_ns: mid,
            };
            if best.is_none_or(|b| c.uncertainty_ns < b.uncertainty_ns) {
                best = Some(c);
            }
        }
        Ok(best)
    }

    /// The last pass's timestamp window `(start, end)` in ns of the timestamp domain.
    pub fn last_pass_window(&self) -> Option<(u64, u64)> {
        self.last_window
    }
}

/// The host-mapped readback buffer's bytes.
pub(super) fn readback_map(readback: &Buffer) -> Result<&[u8]> {
    readback
        .alloc
        .as_ref()
        .and_then(|a| a.mapped_slice())
        .ok_or_else(|| Error::Vulkan("readback buffer is not host-mapped".into()))
}
