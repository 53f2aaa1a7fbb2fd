//! How close a pass comes to the memory roofline: the weight bytes a pass streams (the sum of
//! its stages' [`crate::StageDetails::weight_bytes`]) over its GPU time, and that rate's share
//! of the device's nominal memory bandwidth where the device is one this table knows. A
//! decode pass reads every weight once, so this share is the ceiling the schedule is judged
//! against (issue 23: a persistent kernel should keep HBM busy).

use serde::{Deserialize, Serialize};

use crate::{Frame, RunDetails};

/// Nominal memory bandwidth (the vendor's spec sheet), bytes/s, of the devices this table
/// knows by their Vulkan name; `None` for any other (then no share is claimed). Spec values,
/// not measurements: a device reaches 85–95 % of them at best.
pub fn nominal_peak_bytes_per_s(device: &str) -> Option<f64> {
    let d = device.to_ascii_uppercase();
    let has = |s: &str| d.contains(s);
    // GB/s as the spec sheets give them, exact in f64.
    let gb = |v: u32| Some(f64::from(v) * 1e9);
    if has("H200") {
        gb(4800)
    } else if has("H100") {
        if has("PCIE") {
            gb(2000)
        } else if has("NVL") {
            gb(3900)
        } else {
            // SXM5 (HBM3, 80 GB): "NVIDIA H100 80GB HBM3".
            gb(3350)
        }
    } else if has("A100") {
        match (has("80GB"), has("PCIE")) {
            (true, false) => gb(2039),
            (true, true) => gb(1935),
            // The 40 GB parts, SXM4 and PCIe.
            (false, _) => gb(1555),
        }
    } else if has("MI300X") {
        gb(5300)
    } else if has("RTX 4090") {
        gb(1008)
    } else {
        None
    }
}

/// A pass's weight stream against the roofline.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PassBandwidth {
    /// Weight bytes the pass streams (every stage's, once).
    pub weight_bytes: u64,
    /// Those bytes over the pass's GPU time, bytes/s.
    pub bytes_per_s: f64,
    /// The device's nominal memory bandwidth, bytes/s, where known.
    pub peak_bytes_per_s: Option<f64>,
    /// `bytes_per_s` over the nominal bandwidth (0–1), where known.
    pub roofline: Option<f64>,
}

/// What a run's passes are measured against: its weight bytes per pass and the device's
/// nominal peak (both fixed by the run's start, so a consumer derives them once).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RunBandwidth {
    /// Every stage's weight bytes, once.
    pub weight_bytes: u64,
    /// [`nominal_peak_bytes_per_s`] of the run's device.
    pub peak_bytes_per_s: Option<f64>,
}

impl RunBandwidth {
    /// The run's weight bytes and its device's nominal peak.
    pub fn of(run: &RunDetails) -> RunBandwidth {
        RunBandwidth {
            weight_bytes: (run.stages.iter())
                .map(|s| s.weight_bytes)
                .fold(0, u64::saturating_add),
            peak_bytes_per_s: nominal_peak_bytes_per_s(&run.device),
        }
    }

    /// Pass `f`'s weight stream over its GPU time: `None` without a GPU time (no
    /// timestamps) or without weight bytes (streams from before the engine reported them).
    pub fn pass(&self, f: &Frame) -> Option<PassBandwidth> {
        let ns = f.gpu_ns.filter(|&n| n > 0)?;
        if self.weight_bytes == 0 {
            return None;
        }
        let bytes_per_s = self.weight_bytes as f64 * 1e9 / ns as f64;
        Some(PassBandwidth {
            weight_bytes: self.weight_bytes,
            bytes_per_s,
            peak_bytes_per_s: self.peak_bytes_per_s,
            roofline: self.peak_bytes_per_s.map(|p| bytes_per_s / p),
        })
    }
}

/// [`RunBandwidth::pass`] of `run` for one frame.
pub fn pass_bandwidth(run: &RunDetails, f: &Frame) -> Option<PassBandwidth> {
    RunBandwidth::of(run).pass(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nominal_table_knows_the_h200_by_its_vulkan_name_and_nothing_it_was_not_told() {
        assert_eq!(nominal_peak_bytes_per_s("NVIDIA H200"), Some(4.8e12));
        assert_eq!(
            nominal_peak_bytes_per_s("NVIDIA H100 80GB HBM3"),
            Some(3.35e12)
        );
        assert_eq!(nominal_peak_bytes_per_s("NVIDIA H100 PCIe"), Some(2.0e12));
        assert_eq!(
            nominal_peak_bytes_per_s("NVIDIA A100-SXM4-80GB"),
            Some(2.039e12)
        );
        assert_eq!(
            nominal_peak_bytes_per_s("NVIDIA A100 80GB PCIe"),
            Some(1.935e12)
        );
        assert_eq!(
            nominal_peak_bytes_per_s("NVIDIA A100-PCIE-40GB"),
            Some(1.555e12)
        );
        assert_eq!(
            nominal_peak_bytes_per_s("NVIDIA GeForce RTX 4090"),
            Some(1.008e12)
        );
        assert_eq!(
            nominal_peak_bytes_per_s("llvmpipe (LLVM 15.0.6, 256 bits)"),
            None
        );
        assert_eq!(nominal_peak_bytes_per_s("NVIDIA GeForce RTX 4080"), None);
    }

    #[test]
    fn a_pass_streams_its_stages_weight_bytes_over_its_gpu_time() {
        let mut run = crate::synth::synthetic_run(4, 4, 2);
        run.device = "NVIDIA H200".into();
        for (i, s) in run.stages.iter_mut().enumerate() {
            s.weight_bytes = 1_000_000 * (i as u64 + 1);
        }
        let total: u64 = run.stages.iter().map(|s| s.weight_bytes).sum();
        let mut f = crate::synth::synthetic_frame(&run, 0, 1);
        f.gpu_ns = Some(5_000);
        let b = pass_bandwidth(&run, &f).expect("a GPU time and weights");
        assert_eq!(b.weight_bytes, total);
        assert!((b.bytes_per_s - total as f64 / 5e-6).abs() < 1.0);
        assert_eq!(b.peak_bytes_per_s, Some(4.8e12));
        assert!((b.roofline.unwrap() - b.bytes_per_s / 4.8e12).abs() < 1e-12);
        f.gpu_ns = None;
        assert_eq!(pass_bandwidth(&run, &f), None, "no GPU time, no rate");
        f.gpu_ns = Some(5_000);
        run.device = "llvmpipe".into();
        let cpu = pass_bandwidth(&run, &f).expect("a rate without a peak");
        assert_eq!((cpu.peak_bytes_per_s, cpu.roofline), (None, None));
        run.stages.iter_mut().for_each(|s| s.weight_bytes = 0);
        assert_eq!(pass_bandwidth(&run, &f), None, "no weight bytes, no rate");
    }
}
