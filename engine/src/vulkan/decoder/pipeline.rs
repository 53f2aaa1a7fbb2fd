//! The decode pipeline: the embedded SPIR-V variant for the device and KV type, its
//! specialisation (the interface table's constants), the plain second pipeline of a sampled
//! instrumented run, the descriptor set, and the driver compiler's statistics.

use super::*;

impl VulkanDecoder {
    pub(super) fn build_pipeline(&mut self, sx_cap: u32, cpu: bool) -> Result<()> {
        let ctx = self.ctx.clone();
        let d = &ctx.device;
        let kv16 = self.opts.kv == KvType::F16;
        let q8 = self.opts.act == ActType::Q8;
        let spv = module(cpu, self.has_clock(), kv16, q8, self.pass_loop());
        let code = ash::util::read_spv(&mut std::io::Cursor::new(spv))
            .map_err(|e| Error::Vulkan(format!("embedded SPIR-V: {e}")))?;
        let n_chunks = self.chunks.len();
        // SAFETY: all create infos reference live locals; handles are stored for Drop.
        unsafe {
            let mut bindings = vec![vk::DescriptorSetLayoutBinding::default()
                .binding(0)
                .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                .descriptor_count(NCHUNK as u32)
                .stage_flags(vk::ShaderStageFlags::COMPUTE)];
            for b in 1..=super::super::interface::binding::KV_V {
                bindings.push(
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE),
                );
            }
            self.dsl = vkr(
                "vkCreateDescriptorSetLayout",
                d.create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                ),
            )?;
            let pcr = [vk::PushConstantRange {
                stage_flags: vk::ShaderStageFlags::COMPUTE,
                offset: 0,
                size: PUSH_WORDS as u32 * 4,
            }];
            let dsls = [self.dsl];
            self.layout = vkr(
                "vkCreatePipelineLayout",
                d.create_pipeline_layout(
                    &vk::PipelineLayoutCreateInfo::default()
                        .set_layouts(&dsls)
                        .push_constant_ranges(&pcr),
                    None,
                ),
            )?;
            let mega = self.opts.dispatch == Dispatch::Mega;
            // Back-edge budget: lavapipe ends loops silently at 65,535; a GPU without a
            // device clock bounds its spins by count (~1 s at ~50 ns per poll). Counted
            // conservatively (quantised blocks' inner loops included), so the budget can sit
            // just under the limit.
            let budget = if cpu {
                self.opts
                    .test_iter_budget
                    .unwrap_or(budget::CPU_BUDGET as u32)
            } else if !self.has_clock() {
                20_000_000
            } else {
                0
            };
            // Indexed by the interface table's ids, so no value can land on another's id.
            let spec_for = |instr: bool| {
                let mut spec = [0u32; spec::COUNT as usize];
                for (id, value) in [
                    (spec::WG_SIZE, self.wg_size),
                    (spec::MEGA, mega as u32),
                    (spec::GRID, self.grid),
                    (spec::SX_CAP, sx_cap),
                    (spec::INSTR, instr as u32),
                    (spec::HAS_CLOCK, self.has_clock() as u32),
                    (spec::ITER_BUDGET, budget),
                    (spec::CPU_PAUSE, cpu as u32),
                    (
                        spec::TEST_SLOW_KIND,
                        self.opts.test_slow_kind.map_or(0xFFFF, |k| k.code()),
                    ),
                    (
                        spec::TEST_STALL_WG,
                        self.opts.test_stall_wg.unwrap_or(u32::MAX),
                    ),
                    (spec::NCHUNK_USED, n_chunks as u32),
                    (spec::MAX_WG, 1024),
                    (spec::MAT_TY, self.mat_type),
                    (spec::ROWS, self.rows),
                    (spec::KV_F16, kv16 as u32),
                    (spec::HEAD_SIZE, self.program.head_size()),
                    (spec::SQ_CAP, self.sq_cap),
                    (spec::PREFETCH_MIB, self.prefetch_mib()),
                    (spec::PREFETCH_SKEW, self.opts.prefetch_skew),
                    (spec::SYNC_STRIDE, self.sync_slot_words() as u32),
                    (spec::OUT_STRIDE, self.out_slot_words() as u32),
                    (spec::ATT_FULL, self.program.att_full() as u32),
                    (spec::ATT_PRO, self.att_prologue_combine() as u32),
                    (spec::TYPES, self.program.type_mask()),
                ] {
                    spec[id as usize] = value;
                }
                spec
            };
            // An instrumented run that stamps only every N-th pass runs the others on a
            // second, plain pipeline (INSTR off): those passes then pay nothing for the ring,
            // not even the registers its code holds. The two differ in no arithmetic.
            let instrs: &[bool] = if self.opts.instrument && self.opts.ring_every > 1 {
                &[true, false]
            } else {
                &[self.opts.instrument]
            };
            let specs: Vec<[u32; spec::COUNT as usize]> =
                instrs.iter().map(|&i| spec_for(i)).collect();
            let entries: Vec<vk::SpecializationMapEntry> = (0..spec::COUNT)
                .map(|i| vk::SpecializationMapEntry {
                    constant_id: i,
                    offset: i * 4,
                    size: 4,
                })
                .collect();
            let sis: Vec<vk::SpecializationInfo> = specs
                .iter()
                .map(|spec| {
                    vk::SpecializationInfo::default()
                        .map_entries(&entries)
                        .data(unsafe_words_as_bytes(spec))
                })
                .collect();
            // Created last, so no error path above leaks it; destroyed right after use.
            let module = vkr(
                "vkCreateShaderModule",
                d.create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None),
            )?;
            let stats = ctx.info.pipeline_stats;
            let flags = if stats {
                vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
            } else {
                vk::PipelineCreateFlags::empty()
            };
            // RobustBuffers::Off: storage and uniform buffer accesses without the driver's
            // bounds checks (the decoder checked the device has VK_EXT_pipeline_robustness).
            // One chained struct per pipeline; they outlive vkCreateComputePipelines below.
            let mut robust: Vec<vk::PipelineRobustnessCreateInfoEXT> = sis
                .iter()
                .map(|_| {
                    vk::PipelineRobustnessCreateInfoEXT::default()
                        .storage_buffers(vk::PipelineRobustnessBufferBehaviorEXT::DISABLED)
                        .uniform_buffers(vk::PipelineRobustnessBufferBehaviorEXT::DISABLED)
                        .vertex_inputs(vk::PipelineRobustnessBufferBehaviorEXT::DEVICE_DEFAULT)
                        .images(vk::PipelineRobustnessImageBehaviorEXT::DEVICE_DEFAULT)
                })
                .collect();
            let unchecked = self.opts.robust_buffers == RobustBuffers::Off;
            let pci: Vec<vk::ComputePipelineCreateInfo> = sis
                .iter()
                .zip(robust.iter_mut())
                .map(|(si, rb)| {
                    let ci = vk::ComputePipelineCreateInfo::default();
                    let ci = if unchecked { ci.push_next(rb) } else { ci };
                    ci.flags(flags)
                        .stage(
                            vk::PipelineShaderStageCreateInfo::default()
                                .stage(vk::ShaderStageFlags::COMPUTE)
                                .module(module)
                                .name(c"main")
                                .specialization_info(si),
                        )
                        .layout(self.layout)
                })
                .collect();
            // A pipeline cache only when its data is wanted (`pipeline_cache_out`).
            let cache = match &self.opts.pipeline_cache_out {
                Some(_) => {
                    match d.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None) {
                        Ok(c) => c,
                        Err(e) => {
                            d.destroy_shader_module(module, None);
                            return Err(Error::Vulkan(format!("vkCreatePipelineCache: {e:?}")));
                        }
                    }
                }
                None => vk::PipelineCache::null(),
            };
            let p = d.create_compute_pipelines(cache, &pci, None);
            d.destroy_shader_module(module, None);
            let cache_data = if cache != vk::PipelineCache::null() {
                let data = d.get_pipeline_cache_data(cache);
                d.destroy_pipeline_cache(cache, None);
                Some(data)
            } else {
                None
            };
            let made = match p {
                Ok(v) => v,
                Err((v, e)) => {
                    for p in v {
                        if p != vk::Pipeline::null() {
                            d.destroy_pipeline(p, None);
                        }
                    }
                    return Err(Error::Vulkan(format!(
                        "creating the decode pipeline: {e:?}"
                    )));
                }
            };
            // Stored before anything can fail, so Drop destroys them on every path.
            self.pipeline = made[0];
            self.pipeline_plain = made.get(1).copied().unwrap_or(vk::Pipeline::null());
            if let (Some(path), Some(data)) = (&self.opts.pipeline_cache_out, cache_data) {
                let data =
                    data.map_err(|e| Error::Vulkan(format!("vkGetPipelineCacheData: {e:?}")))?;
                std::fs::write(path, &data).map_err(|cause| Error::Io {
                    path: path.clone(),
                    cause,
                })?;
            }
            if stats {
                let names = if made.len() == 2 {
                    ["decode", "decode (unstamped)"]
                } else {
                    ["decode", ""]
                };
                self.pipeline_stats = made
                    .iter()
                    .zip(names)
                    .filter_map(|(&p, name)| read_pipeline_stats(&ctx, p, name))
                    .collect();
            }
            // One set per chain slot (see `sets`): every binding the same but the sync and
            // output buffers, which set `s` binds at slot `s`'s words (its sync binding on
            // over the next slot's token word). The pass loop's modules offset by slot
            // themselves: one set, binding both buffers whole.
            let looped = self.pass_loop();
            let n_sets = if looped { 1 } else { self.opts.chain.max(1) };
            let sizes = [vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                descriptor_count: (NCHUNK as u32 + super::super::interface::binding::KV_V) * n_sets,
            }];
            self.dpool = vkr(
                "vkCreateDescriptorPool",
                d.create_descriptor_pool(
                    &vk::DescriptorPoolCreateInfo::default()
                        .max_sets(n_sets)
                        .pool_sizes(&sizes),
                    None,
                ),
            )?;
            let layouts = vec![self.dsl; n_sets as usize];
            self.sets = vkr(
                "vkAllocateDescriptorSets",
                d.allocate_descriptor_sets(
                    &vk::DescriptorSetAllocateInfo::default()
                        .descriptor_pool(self.dpool)
                        .set_layouts(&layouts),
                ),
            )?;
            let chunk_infos: Vec<vk::DescriptorBufferInfo> = (0..NCHUNK)
                .map(|i| {
                    let b = &self.chunks[i.min(n_chunks - 1)];
                    vk::DescriptorBufferInfo {
                        buffer: b.buffer,
                        offset: 0,
                        range: vk::WHOLE_SIZE,
                    }
                })
                .collect();
            let at = |b: &Buffer, offset: u64, range: u64| {
                [vk::DescriptorBufferInfo {
                    buffer: b.buffer,
                    offset,
                    range,
                }]
            };
            let whole = |b: &Buffer| at(b, 0, vk::WHOLE_SIZE);
            let (out_range, sync_range) = if looped {
                (vk::WHOLE_SIZE, vk::WHOLE_SIZE)
            } else {
                (
                    self.out_slot_words() as u64 * 4,
                    (self.sync_slot_words() + sy::TOKEN + 1) as u64 * 4,
                )
            };
            for (s, &set) in self.sets.iter().enumerate() {
                let infos = [
                    whole(&self.state),
                    whole(&self.kv),
                    at(&self.out, self.out_slot_bytes(s), out_range),
                    at(&self.sync, self.sync_slot_bytes(s), sync_range),
                    whole(&self.prog),
                    whole(&self.ring),
                    whole(&self.kv_v),
                ];
                let mut writes = vec![vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(0)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(&chunk_infos)];
                for (i, inf) in infos.iter().enumerate() {
                    writes.push(
                        vk::WriteDescriptorSet::default()
                            .dst_set(set)
                            .dst_binding(i as u32 + 1)
                            .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                            .buffer_info(inf),
                    );
                }
                d.update_descriptor_sets(&writes, &[]);
            }
            self.queries_per_pass = 2 + self.program.stages.len() as u32 * 2;
            self.n_queries = self.queries_per_pass * self.opts.chain.max(1);
            let qci = vk::QueryPoolCreateInfo::default()
                .query_type(vk::QueryType::TIMESTAMP)
                .query_count(self.n_queries);
            self.qpool = vkr("vkCreateQueryPool", d.create_query_pool(&qci, None))?;
        }
        Ok(())
    }
}

/// The driver compiler's statistics for `pipeline`'s first executable (a compute pipeline has
/// one), named `name`. `None` when the driver reports nothing (the statistics are a
/// diagnostic: a driver that fails to report them does not stop a decode).
fn read_pipeline_stats(
    ctx: &GpuContext,
    pipeline: vk::Pipeline,
    name: &str,
) -> Option<PipelineStats> {
    let ext = ash::khr::pipeline_executable_properties::Device::new(&ctx.instance, &ctx.device);
    let info = vk::PipelineInfoKHR::default().pipeline(pipeline);
    // SAFETY: the pipeline was created on this device with CAPTURE_STATISTICS_KHR and the
    // extension and its feature are enabled (DeviceInfo::pipeline_stats).
    let execs = unsafe { ext.get_pipeline_executable_properties(&info) }.ok()?;
    let first = execs.first()?;
    let exec = vk::PipelineExecutableInfoKHR::default()
        .pipeline(pipeline)
        .executable_index(0);
    // SAFETY: as above; executable 0 exists (listed just now).
    let raw = unsafe { ext.get_pipeline_executable_statistics(&exec) }.ok()?;
    let stats = raw
        .iter()
        .map(|s| {
            // SAFETY: the union member read is the one `format` names.
            let value = unsafe {
                match s.format {
                    vk::PipelineExecutableStatisticFormatKHR::BOOL32 => {
                        StatValue::Bool(s.value.b32 == vk::TRUE)
                    }
                    vk::PipelineExecutableStatisticFormatKHR::INT64 => StatValue::I64(s.value.i64),
                    vk::PipelineExecutableStatisticFormatKHR::UINT64 => StatValue::U64(s.value.u64),
                    _ => StatValue::F64(s.value.f64),
                }
            };
            PipelineStat {
                name: s
                    .name_as_c_str()
                    .map_or_else(|_| "?".into(), |c| c.to_string_lossy().trim().to_string()),
                value,
            }
        })
        .collect();
    Some(PipelineStats {
        pipeline: name.to_string(),
        executable: first
            .name_as_c_str()
            .map_or_else(|_| "?".into(), |c| c.to_string_lossy().trim().to_string()),
        subgroup_size: first.subgroup_size,
        stats,
    })
}
