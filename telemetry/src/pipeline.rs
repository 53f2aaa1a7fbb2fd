//! What the driver's compiler says about the decode pipeline it built
//! (VK_KHR_pipeline_executable_properties): registers per lane, spills, shared memory —
//! whatever statistics the driver names, as it names them.
//!
//! A megakernel's occupancy is set by its register count: at 1024 lanes per workgroup a
//! workgroup that needs more than 64 registers per lane cannot be resident on an NVIDIA SM, and
//! the compiler spills to local memory instead. These numbers say which side of that line a
//! build sits on, per build (instrumented or plain, f32 or f16 KV), on the device it ran on.
//!
//! Drivers name their statistics freely (NVIDIA, RADV, lavapipe and ANV all differ), so the
//! statistics are kept verbatim; [`PipelineStats::registers`] and [`PipelineStats::spills`]
//! find the common ones by name.

use serde::{Deserialize, Serialize};

/// One statistic's value, in the type the driver reported it. Equality is bitwise for
/// [`StatValue::F64`] (a recording read back equals what was written, NaN included).
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum StatValue {
    /// A flag.
    Bool(bool),
    /// An unsigned count.
    U64(u64),
    /// A signed count.
    I64(i64),
    /// A ratio or measure.
    F64(f64),
}

impl PartialEq for StatValue {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (StatValue::Bool(a), StatValue::Bool(b)) => a == b,
            (StatValue::U64(a), StatValue::U64(b)) => a == b,
            (StatValue::I64(a), StatValue::I64(b)) => a == b,
            (StatValue::F64(a), StatValue::F64(b)) => a.to_bits() == b.to_bits(),
            _ => false,
        }
    }
}

impl Eq for StatValue {}

impl StatValue {
    /// The value as an unsigned count, where it is one (a non-negative integer).
    pub fn as_u64(self) -> Option<u64> {
        match self {
            StatValue::U64(v) => Some(v),
            StatValue::I64(v) => u64::try_from(v).ok(),
            StatValue::Bool(_) | StatValue::F64(_) => None,
        }
    }
}

impl std::fmt::Display for StatValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatValue::Bool(v) => write!(f, "{v}"),
            StatValue::U64(v) => write!(f, "{v}"),
            StatValue::I64(v) => write!(f, "{v}"),
            StatValue::F64(v) => write!(f, "{v}"),
        }
    }
}

/// One statistic of one executable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineStat {
    /// The driver's name for it ("Register Count", "Spill count", ...).
    pub name: String,
    /// Its value.
    pub value: StatValue,
}

/// The statistics of the decode pipeline's compute executable.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PipelineStats {
    /// Which of the run's pipelines: `"decode"`, or `"decode (unstamped)"` for the plain
    /// pipeline an instrumented run uses on the passes that write no ring.
    pub pipeline: String,
    /// The executable's name as the driver gives it (a compute pipeline has one).
    pub executable: String,
    /// The driver's subgroup size for it, when reported (0: not reported).
    #[serde(default)]
    pub subgroup_size: u32,
    /// Every statistic, in the driver's order.
    pub stats: Vec<PipelineStat>,
}

impl PipelineStats {
    /// The first unsigned statistic whose lower-cased name contains every one of `words`.
    fn find(&self, words: &[&str]) -> Option<u64> {
        self.stats.iter().find_map(|s| {
            let n = s.name.to_ascii_lowercase();
            if words.iter().all(|w| n.contains(w)) {
                s.value.as_u64()
            } else {
                None
            }
        })
    }

    /// Registers per lane, where the driver names such a statistic ("Register Count" on
    /// NVIDIA; "VGPRs" on AMD). `None`: the driver does not report one.
    pub fn registers(&self) -> Option<u64> {
        self.find(&["register"]).or_else(|| self.find(&["vgpr"]))
    }

    /// Spills, in the driver's unit (bytes, registers or instructions: drivers differ), where
    /// it names such a statistic: the sum of every statistic with "spill" in its name (drivers
    /// split it by kind). `None`: not reported. Only zero vs non-zero compares across drivers.
    pub fn spills(&self) -> Option<u64> {
        let v: Vec<u64> = self
            .stats
            .iter()
            .filter(|s| s.name.to_ascii_lowercase().contains("spill"))
            .filter_map(|s| s.value.as_u64())
            .collect();
        (!v.is_empty()).then(|| v.iter().sum())
    }

    /// One short line: registers and spills where reported, else the statistics' count.
    pub fn summary(&self) -> String {
        match (self.registers(), self.spills()) {
            (Some(r), Some(s)) => format!("{r} registers/lane, spills {s}"),
            (Some(r), None) => format!("{r} registers/lane"),
            (None, Some(s)) => format!("spills {s}"),
            (None, None) => format!("{} driver statistics", self.stats.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(list: &[(&str, StatValue)]) -> PipelineStats {
        PipelineStats {
            pipeline: "decode".into(),
            executable: "compute".into(),
            subgroup_size: 32,
            stats: list
                .iter()
                .map(|(n, v)| PipelineStat {
                    name: (*n).into(),
                    value: *v,
                })
                .collect(),
        }
    }

    #[test]
    fn registers_and_spills_are_found_by_name_whatever_the_case() {
        let s = stats(&[
            ("Binary Size", StatValue::U64(9000)),
            ("Register Count", StatValue::U64(64)),
            ("Local Memory Spill Stores", StatValue::U64(12)),
            ("local memory spill loads", StatValue::I64(4)),
        ]);
        assert_eq!(s.registers(), Some(64));
        assert_eq!(s.spills(), Some(16));
        assert_eq!(s.summary(), "64 registers/lane, spills 16");
    }

    #[test]
    fn a_driver_without_those_names_reports_none_and_counts_its_statistics() {
        let s = stats(&[
            ("Instructions", StatValue::U64(1234)),
            ("Uses subgroups", StatValue::Bool(true)),
            ("Ratio", StatValue::F64(0.5)),
        ]);
        assert_eq!(s.registers(), None);
        assert_eq!(s.spills(), None);
        assert_eq!(s.summary(), "3 driver statistics");
    }

    #[test]
    fn a_negative_or_fractional_register_statistic_is_not_a_count() {
        let s = stats(&[
            ("Register pressure", StatValue::F64(63.5)),
            ("VGPRs", StatValue::I64(-1)),
        ]);
        assert_eq!(s.registers(), None);
    }

    #[test]
    fn stats_round_trip_through_json_keeping_each_value_type() {
        let s = stats(&[
            ("a", StatValue::Bool(false)),
            ("b", StatValue::U64(7)),
            ("c", StatValue::I64(-3)),
            ("d", StatValue::F64(1.25)),
        ]);
        let j = serde_json::to_string(&s).unwrap();
        let back: PipelineStats = serde_json::from_str(&j).unwrap();
        assert_eq!(back, s);
    }
}
