//! NVIDIA clocks, power, temperature, clock-event (throttle) reasons and running processes,
//! through NVML loaded at run time (`nvml-wrapper`: `libnvidia-ml.so.1` is opened with
//! dlopen, nothing is linked). No library, no driver or no such device is not an error: the
//! source is off and [`NvmlSource::open`] says why, once. A query that fails later leaves
//! its field out of that sample; nothing here fails the run.
//!
//! Never waking a sleeping GPU: where the device's PCI function has a runtime-PM status in
//! sysfs, a sample is taken only while it reads `active` (NVML queries would resume it).

use std::path::{Path, PathBuf};

use baro_telemetry::{GpuClient, SensorReading};
use nvml_wrapper::enum_wrappers::device::{Clock, PerformanceState, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::Nvml;

use super::runtime_active;

/// One NVML device, opened.
pub struct NvmlSource {
    nvml: Nvml,
    index: u32,
    name: String,
    uuid: String,
    runtime_status: Option<PathBuf>,
    max_sm_mhz: Option<u32>,
}

impl std::fmt::Debug for NvmlSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSource")
            .field("index", &self.index)
            .field("name", &self.name)
            .field("uuid", &self.uuid)
            .finish()
    }
}

/// A process NVML lists on the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NvmlProcess {
    /// Its pid (the host's pid namespace).
    pub pid: u32,
    /// GPU memory it holds, bytes, where reported.
    pub memory_bytes: Option<u64>,
}

/// What one NVML sample read (each field `None` where its query failed).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvmlSample {
    /// SM clock, MHz.
    pub sm_mhz: Option<u32>,
    /// Memory clock, MHz.
    pub mem_mhz: Option<u32>,
    /// SM clock maximum, MHz.
    pub max_sm_mhz: Option<u32>,
    /// Performance state (0 = P0).
    pub pstate: Option<u32>,
    /// Power draw, mW.
    pub power_mw: Option<u32>,
    /// Temperature, °C.
    pub temperature_c: Option<u32>,
    /// Clock-event (throttle) reasons bit mask.
    pub throttle: Option<u64>,
    /// Compute and graphics processes, de-duplicated by pid.
    pub processes: Option<Vec<NvmlProcess>>,
}

impl NvmlSample {
    /// The sample as telemetry readings (clients are merged with `/proc` by the caller).
    pub fn readings(&self) -> Vec<SensorReading> {
        let mut r = Vec::new();
        if let Some(sm) = self.sm_mhz {
            r.push(SensorReading::GpuClocks {
                sm_mhz: sm,
                mem_mhz: self.mem_mhz,
                max_sm_mhz: self.max_sm_mhz,
                pstate: self.pstate,
            });
        }
        if let Some(t) = self.throttle {
            r.push(SensorReading::Throttle { reasons: t });
        }
        if self.power_mw.is_some() || self.temperature_c.is_some() {
            r.push(SensorReading::GpuPower {
                power_mw: self.power_mw,
                temperature_c: self.temperature_c,
            });
        }
        r
    }
}

impl NvmlSource {
    /// Open device `index` (NVML's order). `Err` says why the source is off.
    pub fn open(index: u32) -> Result<Self, String> {
        let nvml = Nvml::builder()
            .lib_path(std::ffi::OsStr::new("libnvidia-ml.so.1"))
            .init()
            .or_else(|_| Nvml::init())
            .map_err(|e| format!("NVML not available: {e}"))?;
        let dev = nvml
            .device_by_index(index)
            .map_err(|e| format!("NVML device {index}: {e}"))?;
        let name = dev.name().unwrap_or_default();
        let uuid = dev.uuid().unwrap_or_default();
        let runtime_status = dev
            .pci_info()
            .ok()
            .map(|p| runtime_status_path(Path::new("/sys"), &p.bus_id));
        let max_sm_mhz = dev.max_clock_info(Clock::SM).ok();
        Ok(NvmlSource {
            nvml,
            index,
            name,
            uuid,
            runtime_status,
            max_sm_mhz,
        })
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The device's UUID (`GPU-…`), empty where not reported.
    pub fn uuid(&self) -> &str {
        &self.uuid
    }

    /// Read everything once. `None` while the GPU is runtime-suspended (not woken).
    pub fn sample(&self) -> Option<NvmlSample> {
        if let Some(p) = &self.runtime_status {
            if !runtime_active(p) {
                return None;
            }
        }
        let dev = self.nvml.device_by_index(self.index).ok()?;
        let mut processes: Option<Vec<NvmlProcess>> = None;
        for list in [
            dev.running_compute_processes(),
            dev.running_graphics_processes(),
        ]
        .into_iter()
        .flatten()
        {
            let ps = processes.get_or_insert_with(Vec::new);
            for p in list {
                let memory_bytes = match p.used_gpu_memory {
                    UsedGpuMemory::Used(b) => Some(b),
                    UsedGpuMemory::Unavailable => None,
                };
                match ps.iter_mut().find(|q| q.pid == p.pid) {
                    Some(q) => q.memory_bytes = q.memory_bytes.max(memory_bytes),
                    None => ps.push(NvmlProcess {
                        pid: p.pid,
                        memory_bytes,
                    }),
                }
            }
        }
        Some(NvmlSample {
            sm_mhz: dev.clock_info(Clock::SM).ok(),
            mem_mhz: dev.clock_info(Clock::Memory).ok(),
            max_sm_mhz: self.max_sm_mhz,
            pstate: dev.performance_state().ok().and_then(pstate_number),
            power_mw: dev.power_usage().ok(),
            temperature_c: dev.temperature(TemperatureSensor::Gpu).ok(),
            throttle: dev.current_throttle_reasons().ok().map(|r| r.bits()),
            processes,
        })
    }
}

/// `/sys/bus/pci/devices/<bdf>/power/runtime_status` for NVML's bus id
/// (`00000000:65:00.0`: NVML pads the domain to 8 digits, sysfs to 4).
pub fn runtime_status_path(sys_root: &Path, bus_id: &str) -> PathBuf {
    let id = bus_id.to_ascii_lowercase();
    let id = match id.split_once(':') {
        Some((dom, rest)) if dom.len() > 4 => format!("{}:{rest}", &dom[dom.len() - 4..]),
        _ => id,
    };
    sys_root
        .join("bus/pci/devices")
        .join(id)
        .join("power/runtime_status")
}

fn pstate_number(p: PerformanceState) -> Option<u32> {
    use PerformanceState::*;
    Some(match p {
        Zero => 0,
        One => 1,
        Two => 2,
        Three => 3,
        Four => 4,
        Five => 5,
        Six => 6,
        Seven => 7,
        Eight => 8,
        Nine => 9,
        Ten => 10,
        Eleven => 11,
        Twelve => 12,
        Thirteen => 13,
        Fourteen => 14,
        Fifteen => 15,
        Unknown => return None,
    })
}

/// Merge NVML's process list into the `/proc` clients: memory is attached by pid, this
/// process is left out. NVML pids that `/proc` does not show live in another pid namespace
/// (a container sees host pids from NVML): they are counted but cannot be named, and where
/// this process holds the GPU without NVML listing its own pid, one of them is this
/// process and is not counted. Returns (count, clients).
pub fn merge_clients(
    proc_clients: &[GpuClient],
    nvml: &[NvmlProcess],
    self_pid: u32,
    self_holds_gpu: bool,
    visible: impl Fn(u32) -> bool,
) -> (u32, Vec<GpuClient>) {
    let mut clients: Vec<GpuClient> = proc_clients.to_vec();
    let mut invisible = 0u32;
    for p in nvml.iter().filter(|p| p.pid != self_pid) {
        if let Some(c) = clients.iter_mut().find(|c| c.pid == p.pid) {
            c.gpu_memory_bytes = p.memory_bytes;
        } else if visible(p.pid) {
            // Visible but not found holding a node by the /proc scan (e.g. unreadable fds).
            clients.push(GpuClient {
                pid: p.pid,
                name: String::new(),
                gpu_memory_bytes: p.memory_bytes,
            });
        } else {
            invisible += 1;
        }
    }
    let self_listed = nvml.iter().any(|p| p.pid == self_pid);
    if self_holds_gpu && !self_listed && invisible > 0 {
        invisible -= 1;
    }
    (clients.len() as u32 + invisible, clients)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(pid: u32, name: &str) -> GpuClient {
        GpuClient {
            pid,
            name: name.into(),
            gpu_memory_bytes: None,
        }
    }

    #[test]
    fn nvml_memory_is_attached_to_proc_clients_and_self_is_left_out() {
        let nv = [
            NvmlProcess {
                pid: 4242,
                memory_bytes: Some(1 << 30),
            },
            NvmlProcess {
                pid: 10,
                memory_bytes: Some(5),
            },
        ];
        let (n, c) = merge_clients(&[client(4242, "python")], &nv, 10, true, |_| true);
        assert_eq!(n, 1);
        assert_eq!(c[0].gpu_memory_bytes, Some(1 << 30));
    }

    #[test]
    fn pids_from_another_namespace_are_counted_but_one_is_us_when_we_hold_the_gpu() {
        let nv = [
            NvmlProcess {
                pid: 90001,
                memory_bytes: None,
            },
            NvmlProcess {
                pid: 90002,
                memory_bytes: None,
            },
        ];
        let (n, c) = merge_clients(&[], &nv, 10, true, |_| false);
        assert_eq!((n, c.len()), (1, 0));
        let (n, _) = merge_clients(&[], &nv, 10, false, |_| false);
        assert_eq!(n, 2);
    }

    #[test]
    fn runtime_status_path_uses_the_sysfs_bus_id() {
        assert_eq!(
            runtime_status_path(Path::new("/sys"), "00000000:65:00.0"),
            PathBuf::from("/sys/bus/pci/devices/0000:65:00.0/power/runtime_status")
        );
    }

    #[test]
    fn readings_leave_out_what_was_not_read() {
        let s = NvmlSample {
            sm_mhz: Some(345),
            max_sm_mhz: Some(1980),
            throttle: Some(1),
            ..Default::default()
        };
        let r = s.readings();
        assert_eq!(r.len(), 2);
        assert!(matches!(
            r[0],
            SensorReading::GpuClocks {
                sm_mhz: 345,
                max_sm_mhz: Some(1980),
                ..
            }
        ));
    }

    #[test]
    fn a_missing_library_turns_the_source_off_with_a_reason() {
        // On machines without the NVIDIA driver (CI, lavapipe) this is the path taken; on
        // a GPU machine the source opens and samples.
        match NvmlSource::open(0) {
            Err(why) => assert!(why.starts_with("NVML"), "{why}"),
            Ok(src) => assert!(src.sample().is_some_and(|s| s.sm_mhz.is_some())),
        }
    }
}
