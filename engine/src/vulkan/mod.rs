//! The Vulkan decoder: context, program layout and the megakernel / multi-dispatch runner.

pub mod context;
pub mod decoder;
pub mod interface;
pub mod program;

pub use context::{any_device_hung, kind_words, list_devices, DeviceInfo, DeviceKind, GpuContext};
/// The back-edges an invocation of the kernel may spend in one dispatch on a CPU device.
pub use decoder::CPU_LOOP_BUDGET;
pub use decoder::{
    check_robust_buffers, default_grid, fail, max_wg_size, ActType, DecoderOptions, Dispatch,
    FailWord, Feed, KvType, Pass, RobustBuffers, VulkanDecoder, DEFAULT_IDLE_WAIT_NS,
    DEFAULT_PREFETCH_MIB, MAX_CHAIN, MAX_IDLE_WAIT_NS, MAX_PREFETCH_MIB, MAX_PREFETCH_SKEW,
};
pub use decoder::{default_att_prologue_combine, default_idle_wait_ns, default_prefetch_mib};
