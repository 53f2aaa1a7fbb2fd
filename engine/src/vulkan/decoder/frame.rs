//! What a decoder reports: run details, the frame of a pass (ring decoding), accessors.

use super::*;

impl VulkanDecoder {
    /// The device this decoder runs on.
    pub fn context(&self) -> &Arc<GpuContext> {
        &self.ctx
    }

    /// Whether the kernel reads the device clock (VK_KHR_shader_clock present and not
    /// disabled).
    pub fn has_clock(&self) -> bool {
        self.ctx.info.device_clock && !self.opts.no_device_clock
    }

    /// The read-ahead budget this decoder runs with, MiB ([`DecoderOptions::prefetch_mib`],
    /// the device's default resolved; 0: none). Multi runs it too but has no attention level
    /// to idle in, so its passes read nothing ahead.
    pub fn prefetch_mib(&self) -> u32 {
        self.opts.prefetch_mib.unwrap_or(0)
    }

    /// Whether the output projection's prologue combines the attention's chunks
    /// ([`DecoderOptions::att_prologue_combine`], the default resolved for this workgroup size).
    pub fn att_prologue_combine(&self) -> bool {
        self.opts
            .att_prologue_combine
            .unwrap_or_else(|| super::default_att_prologue_combine(self.wg_size))
    }

    /// The idle workgroups' wait this decoder runs with, ns
    /// ([`DecoderOptions::idle_wait_ns`], the device's default resolved; 0: none). Multi has
    /// no barrier inside a dispatch, so it waits nowhere.
    pub fn idle_wait_ns(&self) -> u32 {
        self.opts.idle_wait_ns.unwrap_or(0)
    }

    /// Name of level `i`.
    pub fn level_name(&self, i: u32) -> String {
        self.program
            .levels
            .get(i as usize)
            .map_or_else(|| format!("#{i}"), |l| l.name.clone())
    }

    /// Logits of the last pass (valid when `read_logits` is on).
    pub fn logits(&self) -> &[f32] {
        self.logits_at(self.last_slot)
    }

    /// Logits of pass `i` of the last submission ([`Self::step_chain`]; valid when
    /// `read_logits` is on). Panics past the submission's passes.
    pub fn logits_at(&self, i: usize) -> &[f32] {
        assert!(
            i < self.last_count.max(1),
            "pass {i} of a {}-pass submission",
            self.last_count
        );
        &self.logits[i * self.vocab..(i + 1) * self.vocab]
    }

    /// Whether the passes that write no ring run on a second, plain pipeline (an instrumented
    /// decoder stamping every N-th pass, N > 1): those passes then cost what an
    /// uninstrumented decoder's do.
    pub fn has_unstamped_pipeline(&self) -> bool {
        self.pipeline_plain != vk::Pipeline::null()
    }

    /// Static details of this decoder's program for the telemetry stream.
    pub fn run_details(&self, model: &str) -> RunDetails {
        let p = &self.program;
        // The idle workgroups' options act inside the megakernel only.
        let mega_only = |v: u32| {
            if self.opts.dispatch == Dispatch::Mega {
                v
            } else {
                0
            }
        };
        RunDetails {
            schema_version: baro_telemetry::SCHEMA_VERSION,
            device: self.ctx.info.name.clone(),
            driver: self.ctx.info.driver.clone(),
            device_kind: self.ctx.info.kind,
            model: model.to_string(),
            dispatch: self.opts.dispatch,
            grid: self.grid,
            wg_size: self.wg_size,
            stages: p
                .stages
                .iter()
                .enumerate()
                .map(|(i, s)| StageDetails {
                    id: i as u32,
                    name: s.name.as_str().into(),
                    level: s.level,
                    kind: s.kind,
                    rows: s.rows,
                    units: s.units,
                    weight_bytes: p.stage_weight_bytes(i),
                })
                .collect(),
            levels: p
                .levels
                .iter()
                .enumerate()
                .map(|(i, l)| LevelDetails {
                    index: i as u32,
                    name: l.name.as_str().into(),
                    stages: (l.first..l.first + l.count).collect(),
                })
                .collect(),
            instrumented: self.opts.instrument,
            check: None,
            kv: self.opts.kv,
            kv_auto: self.opts.kv_auto,
            act: self.opts.act,
            act_auto: self.opts.act_auto,
            prefetch_mib: mega_only(self.prefetch_mib()),
            idle_wait_ns: mega_only(self.idle_wait_ns()),
            pass_loop: self.pass_loop(),
            robust_buffers_off: self.opts.robust_buffers == RobustBuffers::Off,
            device_clock_off: self.clock_off().map(str::to_string),
            pipelines: self.pipeline_stats.clone(),
        }
    }

    /// Build the telemetry frame of the pass just run (`p` is what [`Self::step`] returned).
    /// Stage timings come from the in-kernel ring when instrumentation is on; a torn ring
    /// frame is flagged, never read.
    pub fn frame(
        &self,
        details: &RunDetails,
        pass_no: u64,
        pos: usize,
        token: u32,
        next: u32,
        p: &Pass,
    ) -> Frame {
        self.frame_at(details, self.last_slot, pass_no, pos, token, next, p)
    }

    /// Build the telemetry frame of pass `slot` of the last submission
    /// ([`Self::step_chain`]); `p` is what it returned for that pass. A pass that did not
    /// write the ring (`ring_every`) has no spans and is not torn.
    #[allow(clippy::too_many_arguments)]
    pub fn frame_at(
        &self,
        details: &RunDetails,
        slot: usize,
        pass_no: u64,
        pos: usize,
        token: u32,
        next: u32,
        p: &Pass,
    ) -> Frame {
        let mut f = self.frame_head(details, pass_no, pos, token, next, p);
        if let Some(ring) = self.ring_bytes_at(slot) {
            // Decoded in place from the mapped readback (no copy into words first).
            f.read_ring(details, ring, self.ring_seq_at(slot), self.ring_barriers());
        }
        f
    }

    /// [`Self::frame`] without the ring: what the pass reported besides its stamps.
    pub fn frame_head(
        &self,
        details: &RunDetails,
        pass_no: u64,
        pos: usize,
        token: u32,
        next: u32,
        p: &Pass,
    ) -> Frame {
        Frame {
            pass: pass_no,
            pos: pos as u32,
            token,
            next,
            wall_ns: p.wall.as_nanos() as u64,
            gpu_ns: p.gpu_ns,
            fail: FailReport::new(p.fail, |l| details.level_name(l)),
            dispatch_ns: p.dispatch_ns.clone(),
            prefetched_bytes: p.prefetched,
            timestamp_start_ns: p.window.map(|(t0, _)| t0),
            ..Default::default()
        }
    }

    /// Copy the last pass's ring frame (its little-endian bytes) into `into` (cleared
    /// first), for [`Frame::read_ring`] with [`Self::ring_seq`] and [`Self::ring_barriers`]
    /// once the next pass has overwritten the readback. False, and `into` left empty, where
    /// [`Self::frame`] reads no ring (instrumentation off, a pass that did not write the ring,
    /// or no device clock: every stamp reads 0, nothing to decode, not torn).
    pub fn copy_ring(&self, into: &mut Vec<u8>) -> bool {
        self.copy_ring_at(self.last_slot, into)
    }

    /// [`Self::copy_ring`] for pass `slot` of the last submission.
    pub fn copy_ring_at(&self, slot: usize, into: &mut Vec<u8>) -> bool {
        into.clear();
        match self.ring_bytes_at(slot) {
            Some(r) => {
                into.extend_from_slice(r);
                true
            }
            None => false,
        }
    }

    /// The sequence word that marks the last pass's ring frame complete: its pass id + 1
    /// (`passes` was bumped by the pass).
    pub fn ring_seq(&self) -> u32 {
        self.ring_seq_at(self.last_slot)
    }

    /// [`Self::ring_seq`] for pass `slot` of the last submission (`passes` counts every
    /// pass of the submission already).
    pub fn ring_seq_at(&self, slot: usize) -> u32 {
        let later = self.last_count.max(1).saturating_sub(slot + 1) as u32;
        self.passes.wrapping_sub(later)
    }

    /// Whether the ring's barrier records are meaningful (the megakernel).
    pub fn ring_barriers(&self) -> bool {
        self.opts.dispatch == Dispatch::Mega
    }

    /// Logits of the last pass, mutable (samplers scale them in place).
    pub fn logits_mut(&mut self) -> &mut [f32] {
        let (v, i) = (self.vocab, self.last_slot);
        &mut self.logits[i * v..(i + 1) * v]
    }

    /// The raw telemetry frame of the last pass (instrumented decoders), as words.
    pub fn last_frame(&self) -> Option<Vec<u32>> {
        self.frame_words_at(self.last_slot)
    }

    /// The raw telemetry frame of pass `i` of the last submission (instrumented decoders;
    /// `None` for a pass that did not write the ring), as words.
    pub fn frame_words_at(&self, i: usize) -> Option<Vec<u32>> {
        Some(
            self.ring_mapped_at(i)?
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
        )
    }

    /// The ring frame [`Self::frame_at`] reads: [`Self::ring_mapped_at`] where the kernel
    /// reads the device clock (without it every stamp reads 0: nothing to decode, not torn).
    fn ring_bytes_at(&self, i: usize) -> Option<&[u8]> {
        self.ring_mapped_at(i).filter(|_| self.has_clock())
    }

    /// The raw telemetry frame of pass `i` of the last submission, as the little-endian
    /// bytes of the mapped readback buffer (instrumented decoders, passes that wrote it).
    fn ring_mapped_at(&self, i: usize) -> Option<&[u8]> {
        if !self.opts.instrument
            || i >= self.last_count.max(1)
            || !self.slot_stamped.get(i).copied().unwrap_or(false)
        {
            return None;
        }
        let map = self.readback.alloc.as_ref()?.mapped_slice()?;
        map.get(self.rb.ring_bytes(i))
    }
}
