//! Other processes holding a GPU open, from `/proc`: every `/proc/PID/fd/*` link to a GPU
//! node, the process name from `/proc/PID/comm`, and DRM fdinfo's `drm-client-id` to count a
//! DRM client once (a forked worker that inherited its parent's fd is the same client).
//!
//! GPU nodes: `/dev/nvidiaN` (every NVIDIA client opens its GPU's node; `nvidiactl`,
//! `nvidia-uvm` and `nvidia-modeset` alone are not a GPU context), `/dev/dri/renderDN`,
//! `/dev/kfd`. Processes that cannot be read (another user's, without privileges) are counted
//! as unreadable, not guessed at. This process, and processes that only share DRM clients
//! with it, are left out. `nvidia-persistenced` holds every NVIDIA node on servers and is
//! ignored by default.
//!
//! Reads only, rooted at a configurable `/proc` so tests run on a fake tree. It never opens
//! a device node, so it never wakes a sleeping GPU.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::path::{Path, PathBuf};

use baro_telemetry::GpuClient;

/// One other process using a GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcClient {
    /// Process id.
    pub pid: u32,
    /// Process name (`comm`), empty where unreadable.
    pub name: String,
    /// The GPU nodes it holds, sorted.
    pub nodes: Vec<String>,
    /// Its DRM client ids (from fdinfo), sorted.
    pub drm_client_ids: Vec<u64>,
}

impl From<&ProcClient> for GpuClient {
    fn from(c: &ProcClient) -> Self {
        GpuClient {
            pid: c.pid,
            name: c.name.clone(),
            gpu_memory_bytes: None,
        }
    }
}

/// The result of one scan.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientScan {
    /// Other processes using a GPU, by pid.
    pub clients: Vec<ProcClient>,
    /// Processes whose fds could not be read (permissions): they may hold a GPU too.
    pub unreadable: u32,
    /// Whether this process itself holds a GPU node.
    pub self_holds_gpu: bool,
}

/// Scans a `/proc` tree for GPU clients.
#[derive(Clone, Debug)]
pub struct GpuClientScanner {
    proc_root: PathBuf,
    self_pid: u32,
    ignore: Vec<String>,
    only_nodes: Option<Vec<String>>,
}

impl GpuClientScanner {
    /// A scanner of `/proc`, leaving this process out.
    pub fn new() -> Self {
        Self::rooted("/proc", std::process::id())
    }

    /// A scanner of the tree at `proc_root`, leaving process `self_pid` out.
    pub fn rooted(proc_root: impl Into<PathBuf>, self_pid: u32) -> Self {
        GpuClientScanner {
            proc_root: proc_root.into(),
            self_pid,
            ignore: vec!["nvidia-persistenced".into()],
            only_nodes: None,
        }
    }

    /// Count only processes holding one of these nodes (the run's own GPU on a multi-GPU
    /// host, e.g. `/dev/nvidia0`, `/dev/dri/renderD128`).
    pub fn only_nodes(mut self, nodes: Vec<String>) -> Self {
        self.only_nodes = Some(nodes);
        self
    }

    /// Process names to leave out (replaces the default `nvidia-persistenced`).
    pub fn ignore(mut self, names: Vec<String>) -> Self {
        self.ignore = names;
        self
    }

    fn wanted(&self, node: &str) -> bool {
        if !is_gpu_node(node) {
            return false;
        }
        self.only_nodes
            .as_ref()
            .is_none_or(|o| o.iter().any(|n| n == node))
    }

    /// Scan now. Fails only when the root itself cannot be listed.
    pub fn scan(&self) -> io::Result<ClientScan> {
        let mut found: BTreeMap<u32, ProcClient> = BTreeMap::new();
        let mut unreadable = 0;
        let mut own_ids = BTreeSet::new();
        let mut self_holds_gpu = false;
        for entry in std::fs::read_dir(&self.proc_root)? {
            let Ok(entry) = entry else { continue };
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let dir = entry.path();
            match self.scan_pid(&dir) {
                Ok(None) => {}
                Ok(Some((nodes, ids))) => {
                    if pid == self.self_pid {
                        self_holds_gpu = true;
                        own_ids = ids;
                        continue;
                    }
                    let name = read_comm(&dir);
                    if self.ignore.contains(&name) {
                        continue;
                    }
                    found.insert(
                        pid,
                        ProcClient {
                            pid,
                            name,
                            nodes: nodes.into_iter().collect(),
                            drm_client_ids: ids.into_iter().collect(),
                        },
                    );
                }
                // A process that exited mid-scan is simply gone.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(_) => unreadable += 1,
            }
        }
        // A process whose every DRM client is ours or an earlier (lower pid) process's, and
        // which holds no other GPU node, is the same client again: count it once.
        let mut seen = own_ids;
        let mut clients = Vec::new();
        for (_, c) in found {
            let non_drm = c.nodes.iter().any(|n| !n.starts_with("/dev/dri/"));
            let new_id = c.drm_client_ids.iter().any(|id| !seen.contains(id));
            let no_ids = c.drm_client_ids.is_empty();
            seen.extend(c.drm_client_ids.iter().copied());
            if non_drm || new_id || no_ids {
                clients.push(c);
            }
        }
        Ok(ClientScan {
            clients,
            unreadable,
            self_holds_gpu,
        })
    }

    /// The GPU nodes and DRM client ids one process holds (`None`: it holds none).
    #[allow(clippy::type_complexity)]
    fn scan_pid(&self, dir: &Path) -> io::Result<Option<(BTreeSet<String>, BTreeSet<u64>)>> {
        let mut nodes = BTreeSet::new();
        let mut ids = BTreeSet::new();
        for fd in std::fs::read_dir(dir.join("fd"))? {
            let Ok(fd) = fd else { continue };
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(target) = target.to_str() else {
                continue;
            };
            if !self.wanted(target) {
                continue;
            }
            nodes.insert(target.to_string());
            if target.starts_with("/dev/dri/") {
                let info = dir.join("fdinfo").join(fd.file_name());
                if let Some(id) = std::fs::read_to_string(info)
                    .ok()
                    .and_then(|t| drm_client_id(&t))
                {
                    ids.insert(id);
                }
            }
        }
        Ok((!nodes.is_empty()).then_some((nodes, ids)))
    }
}

impl Default for GpuClientScanner {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether a device path is a GPU node this scanner counts.
pub fn is_gpu_node(path: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    path == "/dev/kfd"
        || path.strip_prefix("/dev/nvidia").is_some_and(digits)
        || path.strip_prefix("/dev/dri/renderD").is_some_and(digits)
}

/// `drm-client-id` from a DRM fdinfo file (`drm-client-id:\t42`).
pub fn drm_client_id(fdinfo: &str) -> Option<u64> {
    fdinfo.lines().find_map(|l| {
        let v = l.strip_prefix("drm-client-id:")?;
        v.trim().parse().ok()
    })
}

fn read_comm(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_nodes_are_nvidia_n_render_nodes_and_kfd_only() {
        for yes in [
            "/dev/nvidia0",
            "/dev/nvidia12",
            "/dev/dri/renderD128",
            "/dev/kfd",
        ] {
            assert!(is_gpu_node(yes), "{yes}");
        }
        for no in [
            "/dev/nvidiactl",
            "/dev/nvidia-uvm",
            "/dev/nvidia",
            "/dev/dri/card0",
            "/dev/null",
            "/dev/dri/renderD",
        ] {
            assert!(!is_gpu_node(no), "{no}");
        }
    }

    #[test]
    fn drm_client_id_is_read_from_fdinfo() {
        let t = "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-client-id:\t42\n\
                 drm-engine-gfx:\t1234 ns\n";
        assert_eq!(drm_client_id(t), Some(42));
        assert_eq!(drm_client_id("pos:\t0\n"), None);
    }
}
