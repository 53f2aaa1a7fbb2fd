//! The fail word: what went wrong in a pass, structured, and the one line printed for every
//! pass (pass or fail).
//!
//! The kernel raises the low byte (bounded spins, back-edge budget, late start) and records
//! where it first failed; the host raises the next byte after its own checks (residency
//! stamps, poisoned outputs, non-finite values, the fence watchdog). A pass is clean only when
//! every bit is zero. This module never decides whether a pass failed: it only carries and
//! names what the engine found.
//!
//! On the wire a [`FailWord`] is an object whose `bits` is the hex string `"0x00000201"` (the
//! same spelling as the printed line, so a grep finds both).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Fail-word bits. The low byte is raised by the kernel, the next by the host's checks.
pub mod bits {
    /// Kernel: a grid-barrier spin timed out (device clock, default 1 s).
    pub const TIMEOUT: u32 = 0x001;
    /// Kernel: the back-edge budget ran out (CPU devices end loops silently past 65,535
    /// iterations, so the kernel counts its own and stops first).
    pub const BUDGET: u32 = 0x002;
    /// Kernel: a workgroup started after the first barrier had released (not co-resident).
    pub const LATE: u32 = 0x004;
    /// Kernel: a logit came out NaN or infinite (a non-finite weight or hidden state at the
    /// head; a NaN would otherwise lose every argmax comparison and look clean).
    pub const NON_FINITE: u32 = 0x008;
    /// Kernel: a chained pass's input token (the previous pass's argmax, read on the GPU) was
    /// outside the vocabulary — the previous pass failed; nothing was computed from it.
    pub const BAD_TOKEN: u32 = 0x010;
    /// Host: a workgroup never stamped its residency.
    pub const MISSING_WG: u32 = 0x100;
    /// Host: the argmax or a logit was still poisoned after the pass.
    pub const POISONED: u32 = 0x200;
    /// Host: the pass's fence did not signal within the watchdog (the decoder then refuses
    /// work).
    pub const WATCHDOG: u32 = 0x400;
    /// The bits the kernel raises.
    pub const KERNEL: u32 = 0x0000_00ff;
    /// The bits the host raises.
    pub const HOST: u32 = 0x0000_ff00;

    /// Every known bit with its name in the printed line, in printing order.
    pub const NAMES: [(u32, &str); 8] = [
        (TIMEOUT, "barrier-timeout"),
        (BUDGET, "backedge-budget"),
        (LATE, "late-start"),
        (NON_FINITE, "non-finite-logits"),
        (BAD_TOKEN, "bad-chained-token"),
        (MISSING_WG, "missing-workgroup"),
        (POISONED, "output-poisoned"),
        (WATCHDOG, "watchdog"),
    ];
}

/// The fail word of one pass, with where the kernel first failed and the residency counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailWord {
    /// Bits of [`bits`]; 0 = clean. Serialised as the hex string `"0x00000000"`.
    #[serde(with = "hex32")]
    pub bits: u32,
    /// The kernel bit raised first; `level`, `seen` and `wg` describe that failure (0 when
    /// the kernel raised none).
    #[serde(default)]
    pub first: u32,
    /// First failing level index (kernel failures only; `None` for host-only failures).
    pub level: Option<u32>,
    /// What the first kernel failure saw; its meaning depends on `first`: barrier arrivals
    /// (cumulative over the pass's levels) for [`bits::TIMEOUT`], back-edges spent for
    /// [`bits::BUDGET`], the barrier counter when the workgroup started for [`bits::LATE`],
    /// the logit row for [`bits::NON_FINITE`].
    pub seen: u32,
    /// The first failing workgroup.
    pub wg: u32,
    /// Workgroups that stamped residency this pass.
    pub resident: u32,
    /// Workgroups that started (megakernel; counted atomically at kernel entry).
    pub started: u32,
    /// Barrier arrivals counted this pass (megakernel; cumulative over levels).
    pub arrivals: u32,
    /// Workgroups in the grid (G).
    pub grid: u32,
}

impl FailWord {
    /// A clean word for a grid of `grid` workgroups, all resident and started.
    pub fn clean(grid: u32) -> Self {
        FailWord {
            grid,
            resident: grid,
            started: grid,
            ..Default::default()
        }
    }

    /// No failure.
    pub fn ok(&self) -> bool {
        self.bits == 0
    }

    /// Whether `bit` (one of [`bits`]) is set.
    pub fn has(&self, bit: u32) -> bool {
        self.bits & bit != 0
    }

    /// Names of the known bits that are set, in printing order (unknown bits have no name;
    /// the hex word still shows them).
    pub fn names(&self) -> impl Iterator<Item = &'static str> + '_ {
        bits::NAMES
            .iter()
            .filter(|(b, _)| self.bits & b != 0)
            .map(|(_, n)| *n)
    }

    /// A hint for a failure that looks like a grid larger than the device keeps resident
    /// at once: the first failure is a barrier timeout at level 0 with fewer arrivals than
    /// workgroups (the missing ones may not have started: a workgroup that is not resident
    /// can only start after the resident ones give up), or a workgroup that started after
    /// the first barrier released. `None` for every other word (a workgroup hung later, a
    /// budget, a bad token, a clean pass).
    pub fn residency_hint(&self) -> Option<String> {
        let probe = "`baro-top devices --probe` finds the largest grid that fits";
        match (self.first, self.level) {
            (bits::TIMEOUT, Some(0)) if self.grid > 1 && self.seen < self.grid => Some(format!(
                "only {} of {} workgroups reached the first grid barrier: a grid larger than \
                 the device keeps resident at once fails this way ({probe})",
                self.seen, self.grid
            )),
            (bits::LATE, _) => Some(format!(
                "a workgroup started after the first grid barrier released: the grid of {} is \
                 larger than the device keeps resident at once ({probe})",
                self.grid
            )),
            _ => None,
        }
    }

    /// The one-line form printed for every pass: `fail-word 0x00000000 PASS`, or e.g.
    /// `fail-word 0x00000201 FAIL barrier-timeout+output-poisoned at level 0 (qkv.l0)
    /// arrivals 131/132 seen by wg 8 resident 132/132 started 132 arrivals 131` (one line).
    /// `level_name` names a level index (the run's [`crate::LevelDetails::name`]). The
    /// expected arrivals at level `l` are `grid * (l + 1)`: the counter is cumulative.
    pub fn line<D: fmt::Display>(&self, level_name: impl Fn(u32) -> D) -> String {
        if self.ok() {
            return format!("fail-word 0x{:08x} PASS", self.bits);
        }
        let what: Vec<&str> = self.names().collect();
        let mut s = format!("fail-word 0x{:08x} FAIL {}", self.bits, what.join("+"));
        if let Some(l) = self.level {
            s += &format!(" at level {l} ({})", level_name(l));
            s += &match self.first {
                bits::BUDGET => format!(" wg {} after {} back-edges", self.wg, self.seen),
                bits::LATE => format!(
                    " wg {} started after the first barrier released (counter {})",
                    self.wg, self.seen
                ),
                bits::NON_FINITE => format!(" logit row {} by wg {}", self.seen, self.wg),
                // TIMEOUT, and words from before `first` was recorded.
                _ => format!(
                    " arrivals {}/{} seen by wg {}",
                    self.seen,
                    self.grid.wrapping_mul(l.wrapping_add(1)),
                    self.wg
                ),
            };
        }
        if !self.has(bits::WATCHDOG) {
            // After a watchdog nothing was read back: no counts to show.
            s += &format!(
                " resident {}/{} started {} arrivals {}",
                self.resident, self.grid, self.started, self.arrivals
            );
        }
        s
    }
}

/// A pass's fail word together with its printed line (the line needs the level names, which
/// only the run's details have, so the producer renders it once).
///
/// Inside a frame it is flattened into three keys: `fail_word` (hex string), `fail` (the
/// line) and `fail_detail` (the structured [`FailWord`]). Reading checks that `fail_word`
/// and `fail_detail.bits` agree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FailReport {
    /// The structured word.
    pub word: FailWord,
    /// [`FailWord::line`] of it.
    pub line: String,
}

impl FailReport {
    /// Render `word`'s line with `level_name`.
    pub fn new<D: fmt::Display>(word: FailWord, level_name: impl Fn(u32) -> D) -> Self {
        FailReport {
            line: word.line(level_name),
            word,
        }
    }
}

#[derive(Serialize)]
struct FailReportOut<'a> {
    #[serde(with = "hex32")]
    fail_word: u32,
    fail: &'a str,
    fail_detail: &'a FailWord,
}

#[derive(Deserialize)]
struct FailReportIn {
    #[serde(with = "hex32")]
    fail_word: u32,
    fail: String,
    fail_detail: FailWord,
}

impl Serialize for FailReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        FailReportOut {
            fail_word: self.word.bits,
            fail: &self.line,
            fail_detail: &self.word,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for FailReport {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let r = FailReportIn::deserialize(d)?;
        if r.fail_word != r.fail_detail.bits {
            return Err(serde::de::Error::custom(format!(
                "fail_word 0x{:08x} disagrees with fail_detail.bits 0x{:08x}",
                r.fail_word, r.fail_detail.bits
            )));
        }
        Ok(FailReport {
            word: r.fail_detail,
            line: r.fail,
        })
    }
}

/// Serde for a `u32` written as the hex string `"0x%08x"` (what the fail-word line prints).
pub(crate) mod hex32 {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("0x{v:08x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let s = String::deserialize(d)?;
        let hex = s.strip_prefix("0x").ok_or_else(|| {
            serde::de::Error::custom(format!("{s:?}: expected 0x followed by hex"))
        })?;
        u32::from_str_radix(hex, 16)
            .map_err(|e| serde::de::Error::custom(format!("{s:?}: not a 32-bit hex word: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn qkv(l: u32) -> String {
        format!("qkv.l{l}")
    }

    #[test]
    fn clean_word_prints_pass_with_the_hex_word() {
        assert_eq!(FailWord::clean(132).line(qkv), "fail-word 0x00000000 PASS");
    }

    #[test]
    fn kernel_failure_prints_level_arrivals_and_residency_in_the_readme_format() {
        let w = FailWord {
            bits: bits::TIMEOUT | bits::POISONED,
            first: bits::TIMEOUT,
            level: Some(0),
            seen: 131,
            wg: 8,
            resident: 132,
            started: 132,
            arrivals: 131,
            grid: 132,
        };
        assert_eq!(
            w.line(qkv),
            "fail-word 0x00000201 FAIL barrier-timeout+output-poisoned at level 0 (qkv.l0) \
             arrivals 131/132 seen by wg 8 resident 132/132 started 132 arrivals 131"
        );
    }

    #[test]
    fn a_first_barrier_timeout_short_of_the_grid_or_a_late_start_hints_at_residency() {
        let timeout = |level, seen| FailWord {
            bits: bits::TIMEOUT | bits::POISONED,
            first: bits::TIMEOUT,
            level: Some(level),
            seen,
            grid: 264,
            ..Default::default()
        };
        let h = timeout(0, 132).residency_hint().expect("hint");
        assert!(
            h.contains("only 132 of 264") && h.contains("devices --probe"),
            "{h}"
        );
        // A timeout at a later level is a workgroup that hung, not residency; a full first
        // barrier is not short of the grid.
        assert_eq!(timeout(3, 132 * 4).residency_hint(), None);
        assert_eq!(timeout(0, 264).residency_hint(), None);
        let late = FailWord {
            bits: bits::LATE,
            first: bits::LATE,
            level: Some(0),
            seen: 264,
            grid: 264,
            ..Default::default()
        };
        assert!(late.residency_hint().expect("hint").contains("grid of 264"));
        let budget = FailWord {
            bits: bits::BUDGET,
            first: bits::BUDGET,
            level: Some(0),
            seen: 5,
            grid: 264,
            ..Default::default()
        };
        assert_eq!(budget.residency_hint(), None);
        assert_eq!(FailWord::clean(264).residency_hint(), None);
    }

    #[test]
    fn expected_arrivals_are_cumulative_over_levels() {
        let w = FailWord {
            bits: bits::TIMEOUT,
            level: Some(2),
            seen: 7,
            grid: 4,
            ..Default::default()
        };
        assert!(w.line(|_| "x").contains("at level 2 (x) arrivals 7/12 "));
    }

    #[test]
    fn a_watchdog_word_has_no_level_clause_and_no_counts() {
        let w = FailWord {
            bits: bits::WATCHDOG,
            grid: 2,
            ..Default::default()
        };
        assert_eq!(w.line(qkv), "fail-word 0x00000400 FAIL watchdog");
    }

    #[test]
    fn a_host_only_failure_has_counts_but_no_level_clause() {
        let w = FailWord {
            bits: bits::MISSING_WG,
            grid: 2,
            resident: 1,
            ..Default::default()
        };
        assert_eq!(
            w.line(qkv),
            "fail-word 0x00000100 FAIL missing-workgroup resident 1/2 started 0 arrivals 0"
        );
    }

    #[test]
    fn the_first_failure_is_described_by_its_kind_not_as_arrivals() {
        let budget = FailWord {
            bits: bits::BUDGET,
            first: bits::BUDGET,
            level: Some(3),
            seen: 64_550,
            wg: 1,
            grid: 10,
            ..Default::default()
        };
        let line = budget.line(qkv);
        assert!(
            line.contains("at level 3 (qkv.l3) wg 1 after 64550 back-edges"),
            "{line}"
        );
        assert!(!line.contains("64550/"), "{line}");
        let nan = FailWord {
            bits: bits::NON_FINITE,
            first: bits::NON_FINITE,
            level: Some(26),
            seen: 511,
            wg: 0,
            grid: 2,
            ..Default::default()
        };
        assert!(nan
            .line(qkv)
            .contains("non-finite-logits at level 26 (qkv.l26) logit row 511 by wg 0"));
        let late = FailWord {
            bits: bits::LATE,
            first: bits::LATE,
            level: Some(0),
            seen: 4,
            wg: 3,
            grid: 2,
            ..Default::default()
        };
        assert!(late
            .line(qkv)
            .contains("wg 3 started after the first barrier released (counter 4)"));
    }

    #[test]
    fn every_bit_has_its_name_in_order_including_non_finite() {
        let w = FailWord {
            bits: 0x71f,
            ..Default::default()
        };
        let names: Vec<_> = w.names().collect();
        assert_eq!(
            names,
            [
                "barrier-timeout",
                "backedge-budget",
                "late-start",
                "non-finite-logits",
                "bad-chained-token",
                "missing-workgroup",
                "output-poisoned",
                "watchdog"
            ]
        );
        assert!(w.has(bits::NON_FINITE) && !w.has(0x1000));
        assert_eq!(
            bits::NAMES.iter().map(|(b, _)| b).fold(0, |a, b| a | b) & !0x71f,
            0
        );
    }

    #[test]
    fn fail_word_round_trips_with_bits_as_hex_string() {
        let w = FailWord {
            bits: bits::MISSING_WG | bits::NON_FINITE,
            first: bits::NON_FINITE,
            level: None,
            seen: 1,
            wg: 2,
            resident: 3,
            started: 4,
            arrivals: 5,
            grid: 6,
        };
        let j = serde_json::to_string(&w).unwrap();
        assert!(
            j.starts_with(r#"{"bits":"0x00000108","first":8,"level":null,"#),
            "{j}"
        );
        assert_eq!(serde_json::from_str::<FailWord>(&j).unwrap(), w);
    }

    #[test]
    fn fail_report_round_trips_as_three_keys() {
        let r = FailReport::new(FailWord::clean(2), qkv);
        let j = serde_json::to_string(&r).unwrap();
        assert!(
            j.starts_with(
                r#"{"fail_word":"0x00000000","fail":"fail-word 0x00000000 PASS","fail_detail":{"#
            ),
            "{j}"
        );
        assert_eq!(serde_json::from_str::<FailReport>(&j).unwrap(), r);
    }

    #[test]
    fn fail_report_whose_hex_and_detail_disagree_is_refused() {
        let j = r#"{"fail_word":"0x00000001","fail":"x","fail_detail":{"bits":"0x00000000",
            "level":null,"seen":0,"wg":0,"resident":0,"started":0,"arrivals":0,"grid":0}}"#;
        let e = serde_json::from_str::<FailReport>(j)
            .unwrap_err()
            .to_string();
        assert!(e.contains("disagrees"), "{e}");
    }

    #[test]
    fn hex_word_without_prefix_is_refused() {
        let e = serde_json::from_str::<FailWord>(
            r#"{"bits":"201","level":null,"seen":0,"wg":0,"resident":0,"started":0,"arrivals":0,"grid":0}"#,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("expected 0x"), "{e}");
    }
}
