//! Clock domains and their calibration.
//!
//! Three clocks meet in a pass:
//! - the **device clock** the shader reads (`VK_KHR_shader_clock`, `clockRealtime2x32EXT`,
//!   ≈ 1 ns ticks; lavapipe moves only the low 32 bits): every ring stamp and the frame's
//!   [`crate::Frame::device_start_ns`];
//! - the **timestamp-query domain** (`vkCmdWriteTimestamp` × `timestampPeriod`, in ns): the
//!   pass's [`crate::Frame::gpu_ns`] and [`crate::Frame::timestamp_start_ns`];
//! - the **host's `CLOCK_MONOTONIC`** (ns): [`crate::Frame::host_start_ns`], sensor samples.
//!
//! [`ShaderCalibration`] ties the device clock to the timestamp domain (a one-workgroup
//! dispatch reads the clock between two timestamps; the tightest window wins). Calibrated
//! timestamps (`VK_KHR_calibrated_timestamps`) tie the timestamp domain to the host; the two
//! latest such correlations feed [`HostClock`], which corrects for drift. A [`ClockSync`]
//! carries both, at the start of a run and then periodically. Drift is tracked, never assumed
//! away.

use serde::{Deserialize, Serialize};

/// One device clock ↔ timestamp-domain calibration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShaderCalibration {
    /// `timestamp_ns − device_clock_ns` at the sample. Where only the low 32 bits of the
    /// device clock move (lavapipe), apply it with [`ShaderCalibration::to_timestamp_ns`].
    pub offset_ns: i64,
    /// Half the width of the timestamp window around the clock sample, ns.
    pub uncertainty_ns: u64,
    /// Timestamp-domain ns at which it was taken (the window's middle).
    pub at_ts_ns: u64,
}

impl ShaderCalibration {
    /// The timestamp-domain ns of device clock value `device_ns`. With a 32-bit device clock
    /// the result is taken as the timestamp within ±2^31 ns of the calibration point, so a
    /// value read within ≈ 2.1 s of the calibration maps correctly.
    pub fn to_timestamp_ns(&self, device_ns: u64, clock_bits: u32) -> u64 {
        let direct = (device_ns as i64).wrapping_add(self.offset_ns) as u64;
        if clock_bits >= 64 {
            return direct;
        }
        // Where the device clock wraps, only the low bits of `direct` mean anything: place
        // them nearest to the calibration point.
        let low = rel_ns(direct, self.at_ts_ns) as u32 as i32 as i64;
        (self.at_ts_ns as i64).wrapping_add(low) as u64
    }
}

/// A clock calibration record, as streamed ([`crate::Telemetry::Clock`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockSync {
    /// Passes completed when it was taken.
    pub at_pass: u64,
    /// `timestamp_ns − device_clock_ns` ([`ShaderCalibration::offset_ns`]); `None` without a
    /// device clock or timestamps.
    pub shader_offset_ns: Option<i64>,
    /// Half-width of the window the shader sample was taken in, ns.
    pub shader_uncertainty_ns: Option<u64>,
    /// `host_ns − timestamp_ns` (calibrated timestamps); `None` where the device has none.
    pub host_offset_ns: Option<i64>,
    /// The driver's maximum deviation of the host correlation, ns.
    pub host_deviation_ns: Option<u64>,
    /// Drift of the timestamp domain against the host since the previous sync, parts per
    /// million (positive: the device clock runs slow); `None` on the first.
    pub drift_ppm: Option<f64>,
}

/// Maps the timestamp domain to host `CLOCK_MONOTONIC` ns from the two latest correlations:
/// offset at the latest, slope from the drift between them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostClock {
    last: Option<(u64, u64)>,
    prev: Option<(u64, u64)>,
}

impl HostClock {
    /// Add a correlation `(timestamp_ns, host_ns)`; returns the drift in ppm against the
    /// previous one (`None` on the first, or if the timestamp did not advance).
    pub fn add(&mut self, ts_ns: u64, host_ns: u64) -> Option<f64> {
        self.prev = self.last;
        self.last = Some((ts_ns, host_ns));
        let (p, l) = (self.prev?, self.last?);
        let dts = l.0 as f64 - p.0 as f64;
        (dts > 0.0).then(|| ((l.1 as f64 - p.1 as f64) - dts) / dts * 1e6)
    }

    /// Host ns of a timestamp-domain ns, drift-corrected; `None` before any correlation.
    pub fn host_ns(&self, ts_ns: u64) -> Option<u64> {
        let (t1, h1) = self.last?;
        let slope = match self.prev {
            Some((t0, h0)) if t1 > t0 => (h1 as f64 - h0 as f64) / (t1 as f64 - t0 as f64),
            _ => 1.0,
        };
        Some((h1 as f64 + (ts_ns as f64 - t1 as f64) * slope) as u64)
    }
}

/// ns from `base` to `t` on a clock of which only the low 32 bits are trusted (lavapipe moves
/// only the low word; a pass lasts far less than 2^32 ns ≈ 4.3 s), so a wrap of the low word
/// between the two is unwrapped.
pub fn rel_ns(t: u64, base: u64) -> u64 {
    (t as u32).wrapping_sub(base as u32) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_clock_corrects_for_drift() {
        let mut c = HostClock::default();
        assert_eq!(c.host_ns(5), None);
        assert_eq!(c.add(1_000_000, 5_000_000), None);
        assert_eq!(c.host_ns(1_000_100), Some(5_000_100));
        // The device clock runs 100 ppm slow against the host.
        let d = c.add(11_000_000, 15_001_000).unwrap();
        assert!((d - 100.0).abs() < 1e-6, "{d}");
        assert_eq!(c.host_ns(21_000_000), Some(25_002_000));
    }

    #[test]
    fn host_clock_reports_no_drift_when_the_timestamp_did_not_advance() {
        let mut c = HostClock::default();
        c.add(10, 20);
        assert_eq!(c.add(10, 30), None);
        assert_eq!(c.host_ns(10), Some(30));
    }

    #[test]
    fn low_word_wrap_is_unwrapped() {
        assert_eq!(rel_ns(5, u32::MAX as u64 - 4), 10);
        assert_eq!(rel_ns((7u64 << 32) | 100, (7u64 << 32) | 40), 60);
        // Only the low word counts: a high word that did not move (lavapipe) is ignored.
        assert_eq!(rel_ns(3, (9u64 << 32) | 1), 2);
    }

    #[test]
    fn shader_calibration_maps_a_64_bit_clock_by_its_offset() {
        let c = ShaderCalibration {
            offset_ns: -1_000,
            uncertainty_ns: 50,
            at_ts_ns: 9_000,
        };
        assert_eq!(c.to_timestamp_ns(10_000, 64), 9_000);
        assert_eq!(c.to_timestamp_ns(12_500, 64), 11_500);
    }

    #[test]
    fn shader_calibration_maps_a_wrapped_32_bit_clock_near_the_calibration_point() {
        // Timestamps around 10 s; the device clock's low word is about to wrap.
        let ts0 = 10_000_000_000u64;
        let clock0 = u32::MAX as u64 - 100;
        let c = ShaderCalibration {
            offset_ns: ts0 as i64 - clock0 as i64,
            uncertainty_ns: 10,
            at_ts_ns: ts0,
        };
        // 300 ns later the low word has wrapped to 199.
        assert_eq!(c.to_timestamp_ns(199, 32), ts0 + 300);
        // And 50 ns before the calibration point.
        assert_eq!(c.to_timestamp_ns(clock0 - 50, 32), ts0 - 50);
    }

    #[test]
    fn clock_sync_and_calibration_round_trip() {
        let s = ClockSync {
            at_pass: 256,
            shader_offset_ns: Some(-123_456_789),
            shader_uncertainty_ns: Some(640),
            host_offset_ns: Some(98_765),
            host_deviation_ns: Some(1_000),
            drift_ppm: Some(-3.25),
        };
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<ClockSync>(&j).unwrap(), s);
        let c = ShaderCalibration {
            offset_ns: -5,
            uncertainty_ns: 6,
            at_ts_ns: 7,
        };
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<ShaderCalibration>(&j).unwrap(), c);
    }
}
