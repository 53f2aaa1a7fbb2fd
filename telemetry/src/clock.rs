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

/// The shader device clock's rate against the timestamp queries. VK_KHR_shader_clock leaves the
/// device clock's unit to the driver: NVIDIA's and lavapipe's count ns; others may count a
/// reference clock's ticks (AMD's shader realtime counter is a fixed-rate reference clock).
/// Every stage span, barrier time, spin timeout and idle wait here is read as ns, so a clock
/// that does not count ns must not be used.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClockRate {
    /// Device clock ticks per timestamp-domain ns.
    pub ticks_per_ns: f64,
    /// Its relative uncertainty: the two calibration windows' half-widths over the time
    /// between them.
    pub uncertainty: f64,
}

impl ClockRate {
    /// The rate between two calibrations, each `(timestamp ns, device clock, window
    /// half-width ns)`, `b` after `a`. Clock differences as [`pass_loop_split`] takes them:
    /// modulo 2^32 where the high words are zero. `None` where no time passed between them,
    /// or where such a clock could have wrapped between them (2^31 ns or more apart, windows
    /// included: a thread descheduled for seconds).
    pub fn between(a: (u64, u64, u64), b: (u64, u64, u64)) -> Option<ClockRate> {
        let dt = b.0.checked_sub(a.0).filter(|&d| d > 0)?;
        let wide = (a.1 | b.1) >> 32 != 0;
        if !wide && dt.saturating_add(a.2).saturating_add(b.2) >= 1 << 31 {
            return None;
        }
        let dt = dt as f64;
        let dc = if wide {
            b.1.wrapping_sub(a.1)
        } else {
            rel_ns(b.1, a.1)
        };
        Some(ClockRate {
            ticks_per_ns: dc as f64 / dt,
            uncertainty: (a.2 + b.2) as f64 / dt,
        })
    }

    /// Whether the clock counts ns: the rate within 2 % of one tick a ns, or within three
    /// times its uncertainty of it (a measurement too loose to tell keeps the clock).
    pub fn counts_ns(&self) -> bool {
        (self.ticks_per_ns - 1.0).abs() <= (3.0 * self.uncertainty).max(0.02)
    }

    /// The rate in MHz (ticks per µs).
    pub fn mhz(&self) -> f64 {
        self.ticks_per_ns * 1000.0
    }

    /// The rate's uncertainty in MHz.
    pub fn mhz_uncertainty(&self) -> f64 {
        self.mhz() * self.uncertainty
    }
}

/// The GPU time of each pass of a pass loop whose dispatch took `total_ns` (timestamps), from
/// `ends`, the device clock (ns) when workgroup 0 was done with each pass (its argmax, then
/// the grid barrier that ends every pass but the last): pass `k > 0` took
/// `ends[k] − ends[k − 1]` (its levels and its barrier); pass 0 the rest of the dispatch (its
/// start, its levels and barrier, the dispatch's end after the last pass), so the times add
/// up to the dispatch's.
///
/// A clock whose high words are all zero is taken as one of which only the low 32 bits move
/// (lavapipe): its differences are taken modulo 2^32 ([`rel_ns`]), since its low word wraps
/// every ≈ 4.3 s wherever a loop happens to run. A wrapped difference is the true one only if
/// no pass hid a whole period, which holds when what is left for pass 0 is under 2^32 ns.
/// `None` where the stamps are out of order, exceed the dispatch, or are ambiguous (nothing
/// to trust).
pub fn pass_loop_split(total_ns: u64, ends: &[u64]) -> Option<Vec<u64>> {
    if ends.is_empty() {
        return None;
    }
    let wide = ends.iter().any(|&e| e >> 32 != 0);
    let mut each = vec![0; ends.len()];
    for k in 1..ends.len() {
        each[k] = if wide {
            ends[k].checked_sub(ends[k - 1])?
        } else {
            rel_ns(ends[k], ends[k - 1])
        };
    }
    let later = each[1..].iter().try_fold(0u64, |a, &b| a.checked_add(b))?;
    each[0] = total_ns.checked_sub(later)?;
    if !wide && each[0] > u64::from(u32::MAX) {
        return None;
    }
    Some(each)
}

/// A moment in UTC on the proleptic Gregorian calendar, to the second (what a recording's file
/// name, a log line or a banner shows; see [`civil_utc`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    /// The year, 1970 or later.
    pub year: u64,
    /// 1..=12.
    pub month: u8,
    /// 1..=31.
    pub day: u8,
    /// 0..=23.
    pub hour: u8,
    /// 0..=59.
    pub minute: u8,
    /// 0..=59 (Unix time has no leap seconds).
    pub second: u8,
}

/// The UTC calendar date and time of `unix_s` seconds since 1970-01-01T00:00:00Z.
///
/// Counting years from 1 March puts each leap day at the end of its year, so a year's days
/// map to months by one formula; 400 Gregorian years are exactly 146 097 days, so the date
/// repeats every such era.
pub fn civil_utc(unix_s: u64) -> Civil {
    const DAY_S: u64 = 86_400;
    /// Days in 400 Gregorian years (97 of them leap years).
    const ERA_DAYS: u64 = 146_097;
    /// Days from 0000-03-01 (the first day of era 0) to 1970-01-01.
    const EPOCH_DAY: u64 = 719_468;
    let (days, time) = (unix_s / DAY_S, unix_s % DAY_S);
    let z = days + EPOCH_DAY;
    let (era, day_of_era) = (z / ERA_DAYS, z % ERA_DAYS);
    // Whole years of the era before this day: 365 days each, plus a leap day every 4 years
    // but not every 100 (the era's last year, 399, is one: hence the 146 096 term).
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    // 0 = 1 March .. 365 = 29 February.
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    // Months from March run 31 30 31 30 31 | 31 30 31 30 31 | 31 28/29: 153 days per five
    // months, so month m (0 = March) starts on day (153 m + 2) / 5.
    let m = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * m + 2) / 5 + 1;
    let month = if m < 10 { m + 3 } else { m - 9 };
    // January and February belong to the next calendar year.
    let year = era * 400 + year_of_era + u64::from(month <= 2);
    Civil {
        year,
        month: month as u8,
        day: day as u8,
        hour: (time / 3600) as u8,
        minute: (time / 60 % 60) as u8,
        second: (time % 60) as u8,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn civil(year: u64, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> Civil {
        Civil {
            year,
            month,
            day,
            hour,
            minute,
            second,
        }
    }

    #[test]
    fn civil_utc_of_known_moments() {
        assert_eq!(civil_utc(0), civil(1970, 1, 1, 0, 0, 0));
        assert_eq!(civil_utc(946_684_799), civil(1999, 12, 31, 23, 59, 59));
        // 2000 is a leap year (divisible by 400).
        assert_eq!(civil_utc(951_782_400), civil(2000, 2, 29, 0, 0, 0));
        assert_eq!(civil_utc(951_868_799), civil(2000, 2, 29, 23, 59, 59));
        assert_eq!(civil_utc(951_868_800), civil(2000, 3, 1, 0, 0, 0));
        assert_eq!(civil_utc(1_709_210_096), civil(2024, 2, 29, 12, 34, 56));
        // 2100 is not (divisible by 100, not by 400): February ends on the 28th.
        assert_eq!(civil_utc(4_107_542_399), civil(2100, 2, 28, 23, 59, 59));
        assert_eq!(civil_utc(4_107_542_400), civil(2100, 3, 1, 0, 0, 0));
        assert_eq!(civil_utc(13_574_563_200), civil(2400, 2, 29, 0, 0, 0));
    }

    #[test]
    fn civil_utc_agrees_with_counting_days_one_by_one() {
        let leap =
            |y: u64| (y.is_multiple_of(4) && !y.is_multiple_of(100)) || y.is_multiple_of(400);
        let (mut y, mut m, mut d) = (1970u64, 1u8, 1u8);
        // Every day from 1970 to past 2500, at a time of day that moves with it.
        for days in 0..200_000u64 {
            let time = days * 7_919 % 86_400;
            let want = civil(
                y,
                m,
                d,
                (time / 3600) as u8,
                (time / 60 % 60) as u8,
                (time % 60) as u8,
            );
            assert_eq!(civil_utc(days * 86_400 + time), want, "day {days}");
            let len = match m {
                2 if leap(y) => 29,
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            d += 1;
            if d > len {
                (d, m) = (1, m + 1);
                if m > 12 {
                    (m, y) = (1, y + 1);
                }
            }
        }
    }

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
    fn a_ns_clock_counts_ns_and_a_100_mhz_one_does_not() {
        let base = 9u64 << 32;
        // 20 ms apart, 2 µs windows: a ns clock 300 ns off, and AMD's 100 MHz reference.
        let ns = ClockRate::between(
            (1_000_000, base, 1_000),
            (21_000_000, base + 20_000_300, 1_000),
        )
        .unwrap();
        assert!(ns.counts_ns(), "{ns:?}");
        assert!((ns.uncertainty - 1e-4).abs() < 1e-12, "{ns:?}");
        let amd = ClockRate::between(
            (1_000_000, base, 1_000),
            (21_000_000, base + 2_000_000, 1_000),
        )
        .unwrap();
        assert!(!amd.counts_ns(), "{amd:?}");
        assert!((amd.mhz() - 100.0).abs() < 1e-9, "{}", amd.mhz());
        assert!((amd.mhz_uncertainty() - 0.01).abs() < 1e-12, "{amd:?}");
        // 3 % fast is not ns either.
        let fast =
            ClockRate::between((0, base, 100), (10_000_000, base + 10_300_000, 100)).unwrap();
        assert!(!fast.counts_ns(), "{fast:?}");
    }

    #[test]
    fn a_clock_rate_unwraps_a_32_bit_clock_and_keeps_a_clock_it_cannot_judge() {
        // lavapipe: the low word wrapped between the two samples.
        let r = ClockRate::between(
            (5_000, u32::MAX as u64 - 999, 50),
            (25_005_000, 24_999_000, 50),
        )
        .unwrap();
        assert!((r.ticks_per_ns - 1.0).abs() < 1e-12, "{r:?}");
        assert!(r.counts_ns());
        // Windows as wide as the gap: too loose to refuse the clock on.
        let loose = ClockRate::between((0, 0, 400_000), (1_000_000, 100_000, 400_000)).unwrap();
        assert!(loose.counts_ns(), "{loose:?}");
        // No time between the samples: no rate.
        assert_eq!(ClockRate::between((7, 1, 1), (7, 2, 1)), None);
        assert_eq!(ClockRate::between((8, 1, 1), (7, 2, 1)), None);
        // A 32-bit clock sampled 2^31 ns apart may have wrapped unseen: no rate; a 64-bit
        // one is read across any gap.
        let gap = 1u64 << 31;
        assert_eq!(ClockRate::between((0, 5, 0), (gap, 5, 0)), None);
        assert_eq!(ClockRate::between((0, 5, 10), (gap - 20, 5, 10)), None);
        assert!(ClockRate::between((0, 5, 10), (gap - 21, 5, 10)).is_some());
        let base = 1u64 << 40;
        let wide = ClockRate::between((0, base, 0), (4 * gap, base + 4 * gap, 0)).unwrap();
        assert!(wide.counts_ns() && wide.ticks_per_ns == 1.0, "{wide:?}");
    }

    #[test]
    fn a_pass_loop_split_takes_later_passes_from_the_clock_and_gives_pass_0_the_rest() {
        let base = 7u64 << 32;
        let ends = [base + 1_000, base + 1_400, base + 1_900];
        assert_eq!(pass_loop_split(2_000, &ends), Some(vec![1_100, 400, 500]));
        // One pass: the whole dispatch.
        assert_eq!(pass_loop_split(2_000, &ends[..1]), Some(vec![2_000]));
        assert_eq!(pass_loop_split(2_000, &[]), None);
    }

    #[test]
    fn a_pass_loop_split_unwraps_a_32_bit_clock_whose_low_word_wrapped_mid_loop() {
        // lavapipe: the high word reads 0 and the low word wraps every ≈ 4.3 s.
        let ends = [u32::MAX as u64 - 99, 300, 900];
        assert_eq!(pass_loop_split(5_000, &ends), Some(vec![4_000, 400, 600]));
    }

    #[test]
    fn a_pass_loop_split_refuses_stamps_out_of_order_or_past_the_dispatch() {
        let base = 3u64 << 32;
        // A 64-bit clock that ran backwards.
        assert_eq!(pass_loop_split(5_000, &[base + 900, base + 300]), None);
        // Later passes longer than the whole dispatch.
        assert_eq!(pass_loop_split(500, &[base, base + 400, base + 800]), None);
        assert_eq!(pass_loop_split(500, &[100, 500, 900]), None);
    }

    #[test]
    fn a_pass_loop_split_of_a_32_bit_clock_is_refused_where_a_pass_could_hide_a_wrap() {
        let period = 1u64 << 32;
        // 2^32 ns left for pass 0: a later pass may have taken a whole period more.
        assert_eq!(pass_loop_split(period + 400, &[100, 500]), None);
        assert_eq!(
            pass_loop_split(period + 399, &[100, 500]),
            Some(vec![period - 1, 400])
        );
        // A 64-bit clock resolves long passes.
        let base = 5u64 << 32;
        assert_eq!(
            pass_loop_split(2 * period, &[base, base + period]),
            Some(vec![period, period])
        );
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
