//! The Vulkan decoder: context, program layout and the megakernel / multi-dispatch runner.

pub mod context;
pub mod decoder;
pub mod interface;
pub mod program;

pub use context::{any_device_hung, list_devices, DeviceInfo, DeviceKind, GpuContext};
pub use decoder::{default_grid, fail, DecoderOptions, FailWord, Mode, Pass, VulkanDecoder};
