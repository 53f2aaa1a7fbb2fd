//! AMD GPU clocks, power and temperature from sysfs (`/sys/class/drm/cardN/device`), for
//! cards whose PCI vendor is AMD (`0x1002`):
//!
//! ```text
//! power/runtime_status          "active" | "suspended" | …   read first: nothing else is
//!                                                            read unless it is "active"
//!                                                            (or absent: no runtime PM)
//! pp_dpm_sclk                   "0: 500Mhz\n1: 2100Mhz *\n"   current (*) and max shader clock
//! pp_dpm_mclk                   same for memory
//! hwmon/hwmon*/power1_average   µW (or power1_input)
//! hwmon/hwmon*/temp1_input      m°C (edge)
//! ```
//!
//! Reading `pp_dpm_*` or hwmon on a runtime-suspended card resumes it; checking
//! `runtime_status` first is what keeps the monitor from waking a sleeping GPU.
//! `gpu_metrics` (binary, versioned) is not parsed yet.

use std::path::{Path, PathBuf};

use baro_telemetry::SensorReading;

use super::runtime_active;

/// One AMD card's sysfs device directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmdSource {
    device: PathBuf,
}

/// What one sample read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AmdSample {
    /// Current shader clock, MHz.
    pub sclk_mhz: Option<u32>,
    /// Highest shader clock level, MHz.
    pub max_sclk_mhz: Option<u32>,
    /// Current memory clock, MHz.
    pub mclk_mhz: Option<u32>,
    /// Power, mW.
    pub power_mw: Option<u32>,
    /// Edge temperature, °C.
    pub temperature_c: Option<u32>,
}

impl AmdSample {
    /// The sample as telemetry readings.
    pub fn readings(&self) -> Vec<SensorReading> {
        let mut r = Vec::new();
        if let Some(sm) = self.sclk_mhz {
            r.push(SensorReading::GpuClocks {
                sm_mhz: sm,
                mem_mhz: self.mclk_mhz,
                max_sm_mhz: self.max_sclk_mhz,
                pstate: None,
            });
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

impl AmdSource {
    /// Every AMD card under `sys_root` (`/sys` in real use), by card name order.
    pub fn discover(sys_root: &Path) -> Vec<AmdSource> {
        let Ok(rd) = std::fs::read_dir(sys_root.join("class/drm")) else {
            return Vec::new();
        };
        let mut cards: Vec<PathBuf> = rd
            .flatten()
            .filter(|e| {
                let n = e.file_name();
                let n = n.to_string_lossy();
                n.strip_prefix("card")
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            })
            .map(|e| e.path().join("device"))
            .filter(|d| {
                std::fs::read_to_string(d.join("vendor")).is_ok_and(|v| v.trim() == "0x1002")
            })
            .collect();
        cards.sort();
        cards
            .into_iter()
            .map(|device| AmdSource { device })
            .collect()
    }

    /// The card's sysfs device directory.
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// Read everything once; `None` while the card is not runtime-active (not woken).
    pub fn sample(&self) -> Option<AmdSample> {
        if !runtime_active(&self.device.join("power/runtime_status")) {
            return None;
        }
        let dpm = |f: &str| {
            std::fs::read_to_string(self.device.join(f))
                .ok()
                .map(|t| parse_dpm(&t))
        };
        let (sclk_mhz, max_sclk_mhz) = dpm("pp_dpm_sclk").unwrap_or_default();
        let (mclk_mhz, _) = dpm("pp_dpm_mclk").unwrap_or_default();
        let hwmon = first_hwmon(&self.device);
        let read_u64 = |f: &str| -> Option<u64> {
            let p = hwmon.as_ref()?.join(f);
            std::fs::read_to_string(p).ok()?.trim().parse().ok()
        };
        let power_uw = read_u64("power1_average").or_else(|| read_u64("power1_input"));
        Some(AmdSample {
            sclk_mhz,
            max_sclk_mhz,
            mclk_mhz,
            power_mw: power_uw.map(|u| (u / 1000) as u32),
            temperature_c: read_u64("temp1_input").map(|m| (m / 1000) as u32),
        })
    }
}

fn first_hwmon(device: &Path) -> Option<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(device.join("hwmon"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    v.sort();
    v.into_iter().next()
}

/// (current, max) MHz from a `pp_dpm_*` table: the level marked `*`, and the highest level.
pub fn parse_dpm(text: &str) -> (Option<u32>, Option<u32>) {
    let mut cur = None;
    let mut max = None;
    for line in text.lines() {
        let Some((_, rest)) = line.split_once(':') else {
            continue;
        };
        let rest = rest.trim();
        let mhz: Option<u32> = rest
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|d| d.parse().ok());
        let Some(mhz) = mhz else { continue };
        max = max.max(Some(mhz));
        if rest.ends_with('*') {
            cur = Some(mhz);
        }
    }
    (cur, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dpm_table_gives_the_starred_level_and_the_highest() {
        assert_eq!(
            parse_dpm("0: 500Mhz\n1: 1800Mhz *\n2: 2100Mhz\n"),
            (Some(1800), Some(2100))
        );
        assert_eq!(parse_dpm("garbage\n"), (None, None));
    }

    fn fake_card(root: &Path, card: &str, vendor: &str, status: Option<&str>) -> PathBuf {
        let dev = root.join("class/drm").join(card).join("device");
        std::fs::create_dir_all(dev.join("power")).unwrap();
        std::fs::create_dir_all(dev.join("hwmon/hwmon3")).unwrap();
        std::fs::write(dev.join("vendor"), format!("{vendor}\n")).unwrap();
        if let Some(s) = status {
            std::fs::write(dev.join("power/runtime_status"), format!("{s}\n")).unwrap();
        }
        std::fs::write(dev.join("pp_dpm_sclk"), "0: 500Mhz\n1: 2100Mhz *\n").unwrap();
        std::fs::write(dev.join("hwmon/hwmon3/power1_average"), "45000000\n").unwrap();
        std::fs::write(dev.join("hwmon/hwmon3/temp1_input"), "51000\n").unwrap();
        dev
    }

    #[test]
    fn an_active_amd_card_is_sampled_from_a_fake_sys_tree() {
        let dir = tempfile::tempdir().unwrap();
        fake_card(dir.path(), "card0", "0x10de", Some("active"));
        fake_card(dir.path(), "card1", "0x1002", Some("active"));
        std::fs::create_dir_all(dir.path().join("class/drm/card1-DP-1")).unwrap();
        let cards = AmdSource::discover(dir.path());
        assert_eq!(cards.len(), 1, "only the AMD card: {cards:?}");
        let s = cards[0].sample().unwrap();
        assert_eq!(
            s,
            AmdSample {
                sclk_mhz: Some(2100),
                max_sclk_mhz: Some(2100),
                mclk_mhz: None,
                power_mw: Some(45_000),
                temperature_c: Some(51),
            }
        );
        assert_eq!(s.readings().len(), 2);
    }

    #[test]
    fn a_suspended_card_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let dev = fake_card(dir.path(), "card0", "0x1002", Some("suspended"));
        // Make every other file unreadable-as-data: if they were read, the sample would
        // still be Some. It must be None.
        let cards = AmdSource::discover(dir.path());
        assert_eq!(cards[0].sample(), None);
        std::fs::write(dev.join("power/runtime_status"), "active\n").unwrap();
        assert!(cards[0].sample().is_some());
    }
}
