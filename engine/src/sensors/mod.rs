//! The sensor thread and its sources: a second, low-rate producer on the telemetry stream
//! (CPU busy, other GPU clients, clocks, power, throttle reasons, the host lock's holder),
//! and the host lock itself. The labels computed from these samples live in
//! `baro_telemetry::labels`; this module only reads the machine.
//!
//! - [`proc_stat`]: CPU busy from `/proc/stat`, this process excluded;
//! - [`gpu_clients`]: other processes holding a GPU node (`/proc/*/fd`, DRM fdinfo);
//! - [`nvml`]: NVIDIA clocks, pstate, power, temperature, throttle reasons, processes (NVML
//!   loaded at run time);
//! - [`amd`]: AMD clocks, power, temperature from sysfs;
//! - [`host_lock`]: the per-GPU `flock` two timing runs meet at.
//!
//! What it must never do: wake a sleeping GPU (runtime-PM status is read before any device
//! file, and no device node is ever opened), fail the run (a source that cannot be read is
//! off, said once in the stream as [`SensorReading::SourceOff`]), or sample fast enough to
//! matter (default 4 Hz, the `/proc` fd scan at 1 Hz; its own CPU time is this process's
//! and so is excluded from the CPU figure).

pub mod amd;
pub mod gpu_clients;
pub mod host_lock;
pub mod nvml;
pub mod proc_stat;

use std::path::{Path, PathBuf};
use std::thread::JoinHandle;
use std::time::Duration;

use baro_telemetry::{GpuClient, LockHolder, SensorReading, SensorSample};
use crossbeam_channel::{RecvTimeoutError, Sender};

use crate::vulkan::context::host_monotonic_ns;

pub use amd::AmdSource;
pub use gpu_clients::{ClientScan, GpuClientScanner};
pub use host_lock::{HostLock, LockError};
pub use nvml::NvmlSource;
pub use proc_stat::CpuSampler;

/// Whether a runtime-PM status file allows reading the device: `active`, or no such file
/// (no runtime PM: the device cannot be asleep). `suspended`, `suspending`, `resuming` or
/// an unreadable file: no.
pub fn runtime_active(status: &Path) -> bool {
    match std::fs::read_to_string(status) {
        Ok(s) => s.trim() == "active",
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    }
}

/// Which GPU's driver sensors to read (the session knows it from the Vulkan vendor id).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum GpuSensor {
    /// None (CPU devices, unknown vendors): CPU and `/proc` clients only.
    #[default]
    None,
    /// NVIDIA, by NVML device index.
    Nvidia {
        /// NVML index.
        index: u32,
    },
    /// AMD, by position among the AMD cards in `/sys/class/drm`.
    Amd {
        /// Index.
        index: usize,
    },
}

/// What the sensor thread reads and how often.
#[derive(Clone, Debug)]
pub struct SensorConfig {
    /// Time between samples (default 250 ms).
    pub interval: Duration,
    /// The first rounds' spacing (default 25 ms) and how many (default 20): a GPU's clocks
    /// ramp in its first few hundred ms of work (round 64 on the H200: 345 → 1980 MHz over
    /// ≈ 0.3 s), and a sample stands for the passes until the next one.
    pub start_interval: Duration,
    /// Rounds at `start_interval` before `interval`.
    pub start_rounds: u32,
    /// Scan `/proc` for GPU clients every this many samples (default 4).
    pub clients_every: u32,
    /// The `/proc` root (default `/proc`).
    pub proc_root: PathBuf,
    /// The `/sys` root (default `/sys`).
    pub sys_root: PathBuf,
    /// The driver sensor.
    pub gpu: GpuSensor,
    /// Count only clients of these nodes (see [`GpuClientScanner::only_nodes`]).
    pub gpu_nodes: Option<Vec<String>>,
    /// The host lock file to report the holder of.
    pub lock_path: Option<PathBuf>,
}

impl Default for SensorConfig {
    fn default() -> Self {
        SensorConfig {
            interval: Duration::from_millis(250),
            start_interval: Duration::from_millis(25),
            start_rounds: 20,
            clients_every: 4,
            proc_root: PathBuf::from("/proc"),
            sys_root: PathBuf::from("/sys"),
            gpu: GpuSensor::None,
            gpu_nodes: None,
            lock_path: None,
        }
    }
}

/// Every source, opened; [`Sensors::sample`] reads them once.
pub struct Sensors {
    cfg: SensorConfig,
    cpu: CpuSampler,
    clients: GpuClientScanner,
    nvml: Option<NvmlSource>,
    amd: Option<AmdSource>,
    tick: u64,
    said_off: Vec<&'static str>,
    last_lock: Option<Option<LockHolder>>,
    self_pid: u32,
}

impl Sensors {
    /// Open the sources `cfg` names. Returns them and the "source off" readings to send once.
    pub fn open(cfg: SensorConfig) -> (Self, Vec<SensorReading>) {
        let self_pid = std::process::id();
        let mut off = Vec::new();
        let nvml = match cfg.gpu {
            GpuSensor::Nvidia { index } => match NvmlSource::open(index) {
                Ok(s) => Some(s),
                Err(reason) => {
                    off.push(SensorReading::SourceOff {
                        source: "nvml".into(),
                        reason,
                    });
                    None
                }
            },
            _ => None,
        };
        let amd = match cfg.gpu {
            GpuSensor::Amd { index } => {
                let card = AmdSource::discover(&cfg.sys_root).into_iter().nth(index);
                if card.is_none() {
                    off.push(SensorReading::SourceOff {
                        source: "amd".into(),
                        reason: format!(
                            "no AMD card {index} in {}",
                            cfg.sys_root.join("class/drm").display()
                        ),
                    });
                }
                card
            }
            _ => None,
        };
        let mut clients = GpuClientScanner::rooted(&cfg.proc_root, self_pid);
        if let Some(n) = &cfg.gpu_nodes {
            clients = clients.only_nodes(n.clone());
        }
        let cpu = CpuSampler::rooted(&cfg.proc_root, self_pid.to_string());
        let s = Sensors {
            cfg,
            cpu,
            clients,
            nvml,
            amd,
            tick: 0,
            said_off: Vec::new(),
            last_lock: None,
            self_pid,
        };
        (s, off)
    }

    /// The NVML source, where it opened (its UUID names the host lock).
    pub fn nvml(&self) -> Option<&NvmlSource> {
        self.nvml.as_ref()
    }

    fn off_once(&mut self, source: &'static str, why: String, out: &mut Vec<SensorReading>) {
        if !self.said_off.contains(&source) {
            self.said_off.push(source);
            out.push(SensorReading::SourceOff {
                source: source.into(),
                reason: why,
            });
        }
    }

    /// Read every source once (the CPU figure needs two calls: the first gives none).
    pub fn sample(&mut self) -> Vec<SensorReading> {
        let mut out = Vec::new();
        match self.cpu.sample() {
            Ok(Some(c)) => out.push(SensorReading::CpuBusy { fraction: c.others }),
            Ok(None) => {}
            Err(e) => self.off_once("proc", format!("/proc/stat: {e}"), &mut out),
        }
        let nv = self.nvml.as_ref().and_then(|n| n.sample());
        if let Some(nv) = &nv {
            out.extend(nv.readings());
        }
        if let Some(a) = self.amd.as_ref().and_then(|a| a.sample()) {
            out.extend(a.readings());
        }
        if self
            .tick
            .is_multiple_of(u64::from(self.cfg.clients_every.max(1)))
        {
            match self.clients.scan() {
                Ok(scan) => {
                    let proc_clients: Vec<GpuClient> =
                        scan.clients.iter().map(GpuClient::from).collect();
                    let (count, clients) = match nv.as_ref().and_then(|n| n.processes.as_ref()) {
                        Some(ps) => {
                            let root = self.cfg.proc_root.clone();
                            nvml::merge_clients(
                                &proc_clients,
                                ps,
                                self.self_pid,
                                scan.self_holds_gpu,
                                |pid| root.join(pid.to_string()).exists(),
                            )
                        }
                        None => (proc_clients.len() as u32, proc_clients),
                    };
                    out.push(SensorReading::GpuClients { count, clients });
                }
                Err(e) => self.off_once("gpu_clients", format!("/proc: {e}"), &mut out),
            }
        }
        if let Some(p) = &self.cfg.lock_path {
            let h = host_lock::holder(p).ok().flatten();
            if self.last_lock.as_ref() != Some(&h) {
                let ours = h.as_ref().is_some_and(|h| h.pid == self.self_pid);
                self.last_lock = Some(h.clone());
                out.push(SensorReading::HostLock { holder: h, ours });
            }
        }
        self.tick += 1;
        out
    }
}

/// The sensor thread: samples every interval and hands each reading to the sink as a
/// [`SensorSample`] stamped with host `CLOCK_MONOTONIC`. Stopped by [`SensorThread::stop`]
/// or on drop, within one interval.
#[derive(Debug)]
pub struct SensorThread {
    stop: Option<Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl SensorThread {
    /// CPU and `/proc` GPU clients every `interval` (no driver sensor).
    pub fn spawn(
        interval: Duration,
        sink: impl Fn(SensorSample) + Send + 'static,
    ) -> std::io::Result<Self> {
        Self::spawn_with(
            SensorConfig {
                interval,
                ..Default::default()
            },
            sink,
        )
    }

    /// The sources `cfg` names, opened on the thread (NVML's start-up is not the caller's).
    pub fn spawn_with(
        cfg: SensorConfig,
        sink: impl Fn(SensorSample) + Send + 'static,
    ) -> std::io::Result<Self> {
        let (tx, rx) = crossbeam_channel::bounded::<()>(1);
        let handle = std::thread::Builder::new()
            .name("baro-sensors".into())
            .spawn(move || {
                let (interval, mut fast) = (cfg.interval, cfg.start_rounds);
                let start = cfg.start_interval.min(interval);
                let (mut sensors, off) = Sensors::open(cfg);
                let emit = |reading| {
                    sink(SensorSample {
                        host_ns: host_monotonic_ns(),
                        reading,
                    })
                };
                off.into_iter().for_each(emit);
                loop {
                    sensors.sample().into_iter().for_each(emit);
                    let wait = if fast > 0 { start } else { interval };
                    fast = fast.saturating_sub(1);
                    match rx.recv_timeout(wait) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
            })?;
        Ok(SensorThread {
            stop: Some(tx),
            handle: Some(handle),
        })
    }

    /// Stop and join (returns within one interval plus one sample's time).
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.try_send(());
        }
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for SensorThread {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests;
