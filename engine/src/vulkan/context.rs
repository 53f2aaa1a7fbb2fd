//! `GpuContext`: one Vulkan instance, the chosen physical device, a logical device with one
//! compute queue (behind a lock, so decoders on several threads may share the context) and
//! the allocator (behind a lock too). Command pools belong to the decoders. `Drop` waits for the device to go idle and
//! destroys everything in reverse order of creation.

use std::ffi::{c_char, CStr};
use std::mem::ManuallyDrop;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};

use crate::{Error, Result};

/// Map any Vulkan result to an engine error naming the call.
pub(crate) fn vkr<T>(what: &str, r: std::result::Result<T, vk::Result>) -> Result<T> {
    r.map_err(|e| {
        if e == vk::Result::ERROR_DEVICE_LOST {
            Error::DeviceLost(format!(
                "{what}: device lost (the GPU was reset or the driver gave up on this context)"
            ))
        } else {
            Error::Vulkan(format!("{what}: {e:?}"))
        }
    })
}

/// What kind of device it is, as Vulkan reports it (the telemetry crate's type).
pub use baro_telemetry::DeviceKind;

/// A device kind in words ("discrete GPU", "CPU device").
pub fn kind_words(k: DeviceKind) -> &'static str {
    match k {
        DeviceKind::Discrete => "discrete GPU",
        DeviceKind::Integrated => "integrated GPU",
        DeviceKind::Virtual => "virtual GPU",
        DeviceKind::Cpu => "CPU device",
        DeviceKind::Other => "other device",
    }
}

/// Capabilities of a physical device that baro-top cares about.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// Index in enumeration order (what `--device N` takes).
    pub index: usize,
    /// Device name.
    pub name: String,
    /// Kind.
    pub kind: DeviceKind,
    /// PCI vendor id.
    pub vendor_id: u32,
    /// Driver name and info (VkPhysicalDeviceDriverProperties).
    pub driver: String,
    /// Vulkan API version supported, "major.minor.patch".
    pub api: String,
    /// Subgroup size.
    pub subgroup_size: u32,
    /// Subgroup arithmetic and shuffles in compute shaders.
    pub subgroup_arith: bool,
    /// VK_KHR_shader_clock with a device-scope clock.
    pub device_clock: bool,
    /// Vulkan memory model with device scope.
    pub memory_model: bool,
    /// Dynamic indexing of storage buffer arrays.
    pub storage_array_indexing: bool,
    /// 16-bit loads and stores in storage buffers (`storageBuffer16BitAccess`): what an f16
    /// KV cache needs ([`crate::kv::KvType::F16`]); enabled at device creation when present.
    pub storage_16bit: bool,
    /// VK_KHR_shader_integer_dot_product with `shaderIntegerDotProduct` (core in Vulkan 1.3):
    /// packed 4×int8 dot products, what the q8 activation path needs
    /// ([`crate::act::ActType::Q8`]); enabled at device creation when present.
    pub integer_dot: bool,
    /// VK_KHR_pipeline_executable_properties with `pipelineExecutableInfo`: the driver reports
    /// its compiler's statistics (registers per lane, spills) for each pipeline; enabled at
    /// device creation when present.
    pub pipeline_stats: bool,
    /// VK_EXT_pipeline_robustness with `pipelineRobustness`: a pipeline may ask for its
    /// buffer accesses without the driver's bounds checks ([`RobustBuffers::Off`]); enabled at
    /// device creation when present.
    ///
    /// [`RobustBuffers::Off`]: crate::vulkan::RobustBuffers::Off
    pub pipeline_robustness: bool,
    /// Whether the driver bounds-checks storage-buffer accesses when no robustness feature
    /// is enabled (`defaultRobustnessStorageBuffers` is robust buffer access 1 or 2); `None`
    /// where the device does not report it.
    pub storage_checked_by_default: Option<bool>,
    /// Streaming multiprocessors / compute units, when the driver reports them.
    pub sm_count: Option<u32>,
    /// Largest storage buffer range.
    pub max_storage_range: u64,
    /// Alignment of a storage buffer descriptor's offset, bytes
    /// (`minStorageBufferOffsetAlignment`).
    pub storage_align: u64,
    /// Shared memory per workgroup, bytes.
    pub max_shared: u32,
    /// Largest workgroup size (x).
    pub max_wg: u32,
    /// Nanoseconds per timestamp tick.
    pub timestamp_period: f32,
    /// Calibrated timestamps extension present.
    pub calibrated_timestamps: bool,
    /// Compute queue family index.
    pub queue_family: u32,
    /// Timestamp valid bits of that queue.
    pub timestamp_bits: u32,
}

impl DeviceInfo {
    /// One line naming the device and its driver, the kind in words (printed by every
    /// command that runs on it: a CPU fallback must never be mistaken for the GPU).
    pub fn describe(&self) -> String {
        format!(
            "device {}: {} ({}, vendor {:#06x}, Vulkan {}, driver {}, subgroup {}, {})",
            self.index,
            self.name,
            kind_words(self.kind),
            self.vendor_id,
            self.api,
            self.driver,
            self.subgroup_size,
            match self.sm_count {
                Some(n) => format!("{n} SMs"),
                None => "SM count unknown".into(),
            }
        )
    }

    /// Whether baro-top's decoder can run here, and if not, why.
    pub fn missing(&self) -> Vec<&'static str> {
        let mut m = vec![];
        if !self.subgroup_arith {
            m.push("subgroup arithmetic and shuffle in compute");
        }
        if !self.memory_model {
            m.push("vulkanMemoryModel + device scope");
        }
        if !self.storage_array_indexing {
            m.push("shaderStorageBufferArrayDynamicIndexing");
        }
        m
    }
}

/// The Vulkan context: instance, device, queue, pool, allocator.
pub struct GpuContext {
    pub(crate) entry: ash::Entry,
    pub(crate) instance: ash::Instance,
    pub(crate) device: ash::Device,
    /// The one compute queue, behind a lock: decoders on several threads submit to it.
    /// (Command pools are per decoder: a pool and its buffers need no lock that way.)
    queue: Mutex<vk::Queue>,
    pub(crate) allocator: ManuallyDrop<Mutex<Allocator>>,
    calibrated: Option<Calibrated>,
    /// A submission missed its watchdog: the device may never idle again, so nothing may wait
    /// for it (see [`GpuContext::mark_hung`]).
    hung: AtomicBool,
    /// The shader device clock's rate, measured by the first decoder that runs with the clock
    /// (`VulkanDecoder::new`); `None` inside where it could not be measured.
    pub(crate) clock_rate: OnceLock<Option<baro_telemetry::clock::ClockRate>>,
    /// The chosen device.
    pub info: DeviceInfo,
}

/// Set once any device of this process missed a watchdog (see [`any_device_hung`]).
static ANY_HUNG: AtomicBool = AtomicBool::new(false);

/// Whether a device of this process missed a watchdog. The process should then end with
/// `_exit` after flushing its output: the driver's exit handlers may wait for the device (or,
/// on lavapipe, join pool threads still running the hung dispatch).
pub fn any_device_hung() -> bool {
    ANY_HUNG.load(Ordering::SeqCst)
}

/// VK_KHR_calibrated_timestamps or its EXT twin, whichever the device has.
enum Calibrated {
    Khr(ash::khr::calibrated_timestamps::Device),
    Ext(ash::ext::calibrated_timestamps::Device),
}

/// One correlation of the timestamp-query domain with the host's CLOCK_MONOTONIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostCorrelation {
    /// Device timestamp, ns (ticks × timestampPeriod).
    pub device_ns: u64,
    /// Host CLOCK_MONOTONIC, ns.
    pub host_ns: u64,
    /// The driver's bound on how far apart the two samples may be, ns.
    pub max_deviation_ns: u64,
}

/// Host CLOCK_MONOTONIC in ns (the domain calibrated timestamps correlate with).
pub fn host_monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the struct we pass; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn kind_of(t: vk::PhysicalDeviceType) -> DeviceKind {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => DeviceKind::Discrete,
        vk::PhysicalDeviceType::INTEGRATED_GPU => DeviceKind::Integrated,
        vk::PhysicalDeviceType::VIRTUAL_GPU => DeviceKind::Virtual,
        vk::PhysicalDeviceType::CPU => DeviceKind::Cpu,
        _ => DeviceKind::Other,
    }
}

fn cstr_field(bytes: &[c_char]) -> String {
    // SAFETY: Vulkan guarantees these fixed arrays are NUL-terminated.
    unsafe { CStr::from_ptr(bytes.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn load_entry() -> Result<ash::Entry> {
    // SAFETY: loading the system Vulkan loader library; no other invariants.
    unsafe { ash::Entry::load() }.map_err(|e| {
        Error::Vulkan(format!(
            "no Vulkan loader ({e}). Install one, e.g. `apt-get install libvulkan1 mesa-vulkan-drivers` for the lavapipe CPU device"
        ))
    })
}

fn create_instance(entry: &ash::Entry) -> Result<ash::Instance> {
    let app = vk::ApplicationInfo::default()
        .application_name(c"baro-top")
        .api_version(vk::make_api_version(0, 1, 2, 0));
    let mut layers: Vec<*const c_char> = vec![];
    let validation = c"VK_LAYER_KHRONOS_validation";
    // Debug builds turn the Khronos validation layer on when it is installed (BARO_NO_VALIDATION
    // turns it off); release builds never load it.
    if cfg!(debug_assertions) && std::env::var_os("BARO_NO_VALIDATION").is_none() {
        // SAFETY: plain enumeration call.
        let avail = unsafe { entry.enumerate_instance_layer_properties() }.unwrap_or_default();
        if avail
            .iter()
            .any(|l| cstr_field(&l.layer_name) == "VK_LAYER_KHRONOS_validation")
        {
            layers.push(validation.as_ptr());
        }
    }
    let ci = vk::InstanceCreateInfo::default()
        .application_info(&app)
        .enabled_layer_names(&layers);
    // SAFETY: valid create info with static strings.
    match unsafe { entry.create_instance(&ci, None) } {
        Err(vk::Result::ERROR_INCOMPATIBLE_DRIVER) => Err(Error::Vulkan(
            "the Vulkan loader found no driver (ICD). For the lavapipe CPU device: apt-get install mesa-vulkan-drivers; on NVIDIA set VK_DRIVER_FILES to the NVIDIA ICD json".into(),
        )),
        r => vkr("vkCreateInstance", r),
    }
}

fn has_ext(exts: &[vk::ExtensionProperties], name: &CStr) -> bool {
    exts.iter()
        .any(|e| e.extension_name_as_c_str().ok() == Some(name))
}

fn query(instance: &ash::Instance, index: usize, pd: vk::PhysicalDevice) -> DeviceInfo {
    // SAFETY: pd comes from this instance's enumeration.
    unsafe {
        let exts = instance
            .enumerate_device_extension_properties(pd)
            .unwrap_or_default();
        let clock_ext = has_ext(&exts, ash::khr::shader_clock::NAME);
        let sm_ext = has_ext(&exts, ash::nv::shader_sm_builtins::NAME);
        let amd_ext = has_ext(&exts, ash::amd::shader_core_properties::NAME);
        let rob_ext = has_ext(&exts, ash::ext::pipeline_robustness::NAME);
        let mut rob_props = vk::PhysicalDevicePipelineRobustnessPropertiesEXT::default();
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut sm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
        let mut amd = vk::PhysicalDeviceShaderCorePropertiesAMD::default();
        let mut props2 = vk::PhysicalDeviceProperties2::default()
            .push_next(&mut driver)
            .push_next(&mut subgroup);
        if sm_ext {
            props2 = props2.push_next(&mut sm);
        }
        if amd_ext {
            props2 = props2.push_next(&mut amd);
        }
        if rob_ext {
            props2 = props2.push_next(&mut rob_props);
        }
        instance.get_physical_device_properties2(pd, &mut props2);
        let p = props2.properties;
        let mut clock = vk::PhysicalDeviceShaderClockFeaturesKHR::default();
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default();
        let pex_ext = has_ext(&exts, ash::khr::pipeline_executable_properties::NAME);
        let mut pex = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
        let idp_ext = has_ext(&exts, ash::khr::shader_integer_dot_product::NAME);
        let mut idp = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default();
        let mut rob = vk::PhysicalDevicePipelineRobustnessFeaturesEXT::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut v11)
            .push_next(&mut v12);
        if clock_ext {
            f2 = f2.push_next(&mut clock);
        }
        if pex_ext {
            f2 = f2.push_next(&mut pex);
        }
        if idp_ext {
            f2 = f2.push_next(&mut idp);
        }
        if rob_ext {
            f2 = f2.push_next(&mut rob);
        }
        instance.get_physical_device_features2(pd, &mut f2);
        let feats = f2.features;
        let qf = instance.get_physical_device_queue_family_properties(pd);
        let (queue_family, timestamp_bits) = qf
            .iter()
            .enumerate()
            .find(|(_, q)| q.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .map(|(i, q)| (i as u32, q.timestamp_valid_bits))
            .unwrap_or((u32::MAX, 0));
        let v = p.api_version;
        DeviceInfo {
            index,
            name: cstr_field(&p.device_name),
            kind: kind_of(p.device_type),
            vendor_id: p.vendor_id,
            driver: format!(
                "{} {}",
                cstr_field(&driver.driver_name),
                cstr_field(&driver.driver_info)
            )
            .trim()
            .to_string(),
            api: format!(
                "{}.{}.{}",
                vk::api_version_major(v),
                vk::api_version_minor(v),
                vk::api_version_patch(v)
            ),
            subgroup_size: subgroup.subgroup_size,
            subgroup_arith: subgroup
                .supported_operations
                .contains(vk::SubgroupFeatureFlags::ARITHMETIC | vk::SubgroupFeatureFlags::SHUFFLE)
                && subgroup
                    .supported_stages
                    .contains(vk::ShaderStageFlags::COMPUTE),
            device_clock: clock_ext && clock.shader_device_clock == vk::TRUE,
            memory_model: v12.vulkan_memory_model == vk::TRUE
                && v12.vulkan_memory_model_device_scope == vk::TRUE,
            storage_array_indexing: feats.shader_storage_buffer_array_dynamic_indexing == vk::TRUE,
            storage_16bit: v11.storage_buffer16_bit_access == vk::TRUE,
            integer_dot: idp_ext && idp.shader_integer_dot_product == vk::TRUE,
            pipeline_stats: pex_ext && pex.pipeline_executable_info == vk::TRUE,
            pipeline_robustness: rob_ext && rob.pipeline_robustness == vk::TRUE,
            storage_checked_by_default: match rob_props.default_robustness_storage_buffers {
                _ if !rob_ext => None,
                vk::PipelineRobustnessBufferBehaviorEXT::ROBUST_BUFFER_ACCESS
                | vk::PipelineRobustnessBufferBehaviorEXT::ROBUST_BUFFER_ACCESS_2 => Some(true),
                vk::PipelineRobustnessBufferBehaviorEXT::DISABLED => Some(false),
                _ => None,
            },
            sm_count: if sm_ext && sm.shader_sm_count > 0 {
                Some(sm.shader_sm_count)
            } else if amd_ext {
                // AMD: compute units = engines x arrays per engine x CUs per array.
                Some(
                    amd.shader_engine_count
                        * amd.shader_arrays_per_engine_count
                        * amd.compute_units_per_shader_array,
                )
                .filter(|&n| n > 0)
            } else {
                None
            },
            max_storage_range: p.limits.max_storage_buffer_range as u64,
            storage_align: p.limits.min_storage_buffer_offset_alignment.max(4),
            max_shared: p.limits.max_compute_shared_memory_size,
            max_wg: p.limits.max_compute_work_group_size[0]
                .min(p.limits.max_compute_work_group_invocations),
            timestamp_period: p.limits.timestamp_period,
            calibrated_timestamps: has_ext(&exts, ash::khr::calibrated_timestamps::NAME)
                || has_ext(&exts, ash::ext::calibrated_timestamps::NAME),
            queue_family,
            timestamp_bits,
        }
    }
}

/// List every Vulkan device with its capabilities.
pub fn list_devices() -> Result<Vec<DeviceInfo>> {
    let entry = load_entry()?;
    let instance = create_instance(&entry)?;
    // SAFETY: instance is valid and destroyed below.
    let pds = unsafe { instance.enumerate_physical_devices() };
    let out = pds.map(|pds| {
        pds.iter()
            .enumerate()
            .map(|(i, &pd)| query(&instance, i, pd))
            .collect()
    });
    // SAFETY: nothing else uses the instance.
    unsafe { instance.destroy_instance(None) };
    vkr("vkEnumeratePhysicalDevices", out)
}

impl GpuContext {
    /// Open a device: `selector` is an index or a case-insensitive name substring; `None`
    /// prefers a discrete GPU, then integrated, virtual, and CPU last.
    pub fn new(selector: Option<&str>) -> Result<GpuContext> {
        let entry = load_entry()?;
        let instance = create_instance(&entry)?;
        match Self::open(entry.clone(), instance.clone(), selector) {
            Ok(c) => Ok(c),
            Err(e) => {
                // SAFETY: open failed before creating a device; only the instance exists.
                unsafe { instance.destroy_instance(None) };
                Err(e)
            }
        }
    }

    fn open(
        entry: ash::Entry,
        instance: ash::Instance,
        selector: Option<&str>,
    ) -> Result<GpuContext> {
        // SAFETY: valid instance.
        let pds = vkr("vkEnumeratePhysicalDevices", unsafe {
            instance.enumerate_physical_devices()
        })?;
        if pds.is_empty() {
            return Err(Error::Vulkan(
                "no Vulkan device found (for a CPU device: apt-get install mesa-vulkan-drivers; on NVIDIA set VK_DRIVER_FILES to the NVIDIA ICD json)".into(),
            ));
        }
        let infos: Vec<DeviceInfo> = pds
            .iter()
            .enumerate()
            .map(|(i, &pd)| query(&instance, i, pd))
            .collect();
        let names = || {
            infos
                .iter()
                .map(|d| format!("{}: {}", d.index, d.name))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let chosen = match selector {
            Some(s) => match s.parse::<usize>() {
                Ok(i) => infos.get(i).ok_or_else(|| {
                    Error::Invalid(format!("--device {i}: no such device (have {})", names()))
                })?,
                Err(_) => infos
                    .iter()
                    .find(|d| d.name.to_lowercase().contains(&s.to_lowercase()))
                    .ok_or_else(|| {
                        Error::Invalid(format!(
                            "--device '{s}': no device name contains it (have {})",
                            names()
                        ))
                    })?,
            },
            None => {
                let rank = |k: DeviceKind| match k {
                    DeviceKind::Discrete => 0,
                    DeviceKind::Integrated => 1,
                    DeviceKind::Virtual => 2,
                    DeviceKind::Other => 3,
                    DeviceKind::Cpu => 4,
                };
                infos
                    .iter()
                    .filter(|d| d.missing().is_empty() && d.queue_family != u32::MAX)
                    .min_by_key(|d| (rank(d.kind), d.index))
                    .or(infos.first())
                    .ok_or_else(|| Error::Vulkan("no device".into()))?
            }
        }
        .clone();
        let missing = chosen.missing();
        if !missing.is_empty() || chosen.queue_family == u32::MAX {
            return Err(Error::Vulkan(format!(
                "device {} ({}) lacks what the decoder needs: {}",
                chosen.index,
                chosen.name,
                if missing.is_empty() {
                    "a compute queue".to_string()
                } else {
                    missing.join(", ")
                }
            )));
        }
        let pd = pds[chosen.index];
        let prio = [1.0f32];
        let qci = [vk::DeviceQueueCreateInfo::default()
            .queue_family_index(chosen.queue_family)
            .queue_priorities(&prio)];
        let mut ext_names: Vec<*const c_char> = vec![];
        let mut clock = vk::PhysicalDeviceShaderClockFeaturesKHR::default()
            .shader_device_clock(true)
            .shader_subgroup_clock(true);
        if chosen.device_clock {
            ext_names.push(ash::khr::shader_clock::NAME.as_ptr());
        }
        // SAFETY: plain enumeration on a valid physical device.
        let dev_exts =
            unsafe { instance.enumerate_device_extension_properties(pd) }.unwrap_or_default();
        let cal_khr = has_ext(&dev_exts, ash::khr::calibrated_timestamps::NAME);
        let cal_ext = !cal_khr && has_ext(&dev_exts, ash::ext::calibrated_timestamps::NAME);
        if cal_khr {
            ext_names.push(ash::khr::calibrated_timestamps::NAME.as_ptr());
        } else if cal_ext {
            ext_names.push(ash::ext::calibrated_timestamps::NAME.as_ptr());
        }
        let mut v12 = vk::PhysicalDeviceVulkan12Features::default()
            .vulkan_memory_model(true)
            .vulkan_memory_model_device_scope(true)
            .host_query_reset(true);
        // 16-bit storage only where the device has it (the f16 KV cache's modules need it;
        // a decoder asked for f16 KV on a device without it refuses, naming the feature).
        let mut v11 = vk::PhysicalDeviceVulkan11Features::default()
            .storage_buffer16_bit_access(chosen.storage_16bit);
        let feats = vk::PhysicalDeviceFeatures::default()
            .shader_storage_buffer_array_dynamic_indexing(true);
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .features(feats)
            .push_next(&mut v11)
            .push_next(&mut v12);
        if chosen.device_clock {
            f2 = f2.push_next(&mut clock);
        }
        // The compiler's statistics (registers, spills) where the driver offers them: asked
        // for at pipeline creation, read once, carried in the run's details.
        let mut pex = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default()
            .pipeline_executable_info(true);
        if chosen.pipeline_stats {
            ext_names.push(ash::khr::pipeline_executable_properties::NAME.as_ptr());
            f2 = f2.push_next(&mut pex);
        }
        // Packed int8 dot products where the device has them (the q8 activation path's
        // modules need them; a decoder asked for q8 on a device without them refuses).
        let mut idp = vk::PhysicalDeviceShaderIntegerDotProductFeatures::default()
            .shader_integer_dot_product(true);
        if chosen.integer_dot {
            ext_names.push(ash::khr::shader_integer_dot_product::NAME.as_ptr());
            f2 = f2.push_next(&mut idp);
        }
        // Per-pipeline buffer robustness where the device has it (`RobustBuffers::Off` asks a
        // pipeline for its loads without the driver's bounds checks).
        let mut rob =
            vk::PhysicalDevicePipelineRobustnessFeaturesEXT::default().pipeline_robustness(true);
        if chosen.pipeline_robustness {
            ext_names.push(ash::ext::pipeline_robustness::NAME.as_ptr());
            f2 = f2.push_next(&mut rob);
        }
        let dci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qci)
            .enabled_extension_names(&ext_names)
            .push_next(&mut f2);
        // SAFETY: create info references live locals.
        let device = vkr("vkCreateDevice", unsafe {
            instance.create_device(pd, &dci, None)
        })?;
        // SAFETY: queue family/index were requested above.
        let queue = unsafe { device.get_device_queue(chosen.queue_family, 0) };
        let allocator = Allocator::new(&AllocatorCreateDesc {
            instance: instance.clone(),
            device: device.clone(),
            physical_device: pd,
            debug_settings: {
                let mut s = gpu_allocator::AllocatorDebugSettings::default();
                s.log_leaks_on_shutdown = cfg!(debug_assertions);
                s
            },
            buffer_device_address: false,
            allocation_sizes: Default::default(),
        });
        let allocator = match allocator {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: only the device was created on it; nothing uses it yet.
                unsafe { device.destroy_device(None) };
                return Err(Error::Vulkan(format!("gpu-allocator: {e}")));
            }
        };
        let calibrated = if cal_khr {
            Some(Calibrated::Khr(
                ash::khr::calibrated_timestamps::Device::new(&instance, &device),
            ))
        } else if cal_ext {
            Some(Calibrated::Ext(
                ash::ext::calibrated_timestamps::Device::new(&instance, &device),
            ))
        } else {
            None
        };
        Ok(GpuContext {
            calibrated,
            entry,
            instance,
            device,
            queue: Mutex::new(queue),
            allocator: ManuallyDrop::new(Mutex::new(allocator)),
            hung: AtomicBool::new(false),
            clock_rate: OnceLock::new(),
            info: chosen,
        })
    }

    /// The shader device clock's rate against the timestamp queries, as the device's first
    /// decoder with the clock measured it (`VulkanDecoder::new`); `None` before that, or
    /// where it could not be measured.
    pub fn clock_rate(&self) -> Option<baro_telemetry::clock::ClockRate> {
        self.clock_rate.get().copied().flatten()
    }

    /// Test only: the clock rate decoders on this context take instead of measuring it (as
    /// if measured); false where a rate is already kept.
    #[doc(hidden)]
    pub fn test_set_clock_rate(&self, rate: baro_telemetry::clock::ClockRate) -> bool {
        self.clock_rate.set(Some(rate)).is_ok()
    }

    /// Record that work on this device missed its watchdog. From then on nothing waits for
    /// the device: decoders and the context leak their handles on drop instead of waiting
    /// for an idle that may never come (a process exit reclaims them).
    pub fn mark_hung(&self) {
        self.hung.store(true, Ordering::SeqCst);
        ANY_HUNG.store(true, Ordering::SeqCst);
    }

    /// Whether work on this device missed its watchdog ([`GpuContext::mark_hung`]).
    pub fn is_hung(&self) -> bool {
        self.hung.load(Ordering::SeqCst)
    }

    /// Correlate the timestamp domain with host CLOCK_MONOTONIC (calibrated timestamps), or
    /// `None` where the device has no such extension or domain.
    pub fn host_correlation(&self) -> Option<HostCorrelation> {
        let infos = [
            vk::CalibratedTimestampInfoKHR::default().time_domain(vk::TimeDomainKHR::DEVICE),
            vk::CalibratedTimestampInfoKHR::default()
                .time_domain(vk::TimeDomainKHR::CLOCK_MONOTONIC),
        ];
        // SAFETY: valid device; the info structs are plain data (the EXT type is an alias).
        let r = unsafe {
            match self.calibrated.as_ref()? {
                Calibrated::Khr(d) => d.get_calibrated_timestamps(&infos),
                Calibrated::Ext(d) => d.get_calibrated_timestamps(&infos),
            }
        };
        let (ts, dev) = r.ok()?;
        Some(HostCorrelation {
            device_ns: (ts[0] as f64 * self.info.timestamp_period as f64) as u64,
            host_ns: ts[1],
            max_deviation_ns: dev,
        })
    }

    /// One line naming the device and driver (printed by every command that runs on it).
    pub fn describe(&self) -> String {
        self.info.describe()
    }

    /// Submit to the queue. The queue is shared by every decoder on this context, possibly on
    /// several threads; Vulkan requires submissions to one queue to be externally
    /// synchronized, hence the lock (held only for the submit call itself).
    pub(crate) fn submit(&self, si: &[vk::SubmitInfo<'_>], fence: vk::Fence) -> Result<()> {
        let q = self
            .queue
            .lock()
            .map_err(|_| Error::Vulkan("queue lock poisoned".into()))?;
        // SAFETY: the queue is externally synchronized by the lock held above; the caller's
        // submit infos reference live, fully recorded command buffers and an unsignalled fence.
        vkr("vkQueueSubmit", unsafe {
            self.device.queue_submit(*q, si, fence)
        })
    }

    /// Wait for the device to go idle, holding the queue lock (vkDeviceWaitIdle requires every
    /// queue of the device to be externally synchronized). Never call it on a hung device.
    pub(crate) fn wait_idle(&self) {
        let q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: every queue of this device (there is one) is locked for the call.
        let _ = unsafe { self.device.device_wait_idle() };
        drop(q);
    }
}

impl Drop for GpuContext {
    fn drop(&mut self) {
        if self.is_hung() {
            // The device may be running the hung work forever: waiting for it, or destroying
            // the device under it, could block this thread for minutes. Leak it all.
            return;
        }
        // SAFETY: all resources created from this context are owned by objects that borrow it,
        // so they are gone by now; destroy in reverse order of creation.
        unsafe {
            let _ = self.device.device_wait_idle();
            ManuallyDrop::drop(&mut self.allocator);
            self.device.destroy_device(None);
            self.instance.destroy_instance(None);
        }
        let _ = &self.entry;
    }
}
