//! Two recordings side by side: per stage kind, the median over passes of the pass's busy
//! and charged time on that kind (the sum over the kind's stages, e.g. every `q.l*`), Δ%,
//! and whether the two token streams agree.
//!
//! Medians are taken within one power mode: a slow-mode pass costs ≈ 2× on latency-bound
//! stages, so a mix would show a "regression" that is only a clock. Each pass's mode is the
//! offline classification ([`crate::labels::classify_offline`], clock hints from the recorded
//! sensor samples), except that a pass the live labeler recorded as slow stays slow (it saw the
//! clocks and the run's history, which an all-slow recording cannot show offline). The
//! compared mode is fast where both recordings have fast passes, else slow where both have
//! slow ones; the other passes are excluded and counted. Where no mode is common, the medians
//! are over all passes and no Δ is given ([`Compared::Incomparable`]).
//!
//! The headline ([`Headline`]) is the total pass time (the sum of the passes' wall times)
//! and tokens per second over the compared passes, with Δ%. Token streams with no pass in
//! common are not comparable ([`Tokens::Empty`]), never "agree". [`DiffReport::mismatch`]
//! names what differs between the two runs (model, device, weights) so that a caller can
//! refuse a comparison that would only show that; [`DiffReport::to_json`] is the report as
//! one JSON object.
//!
//! Each side's attribution warnings ([`crate::analysis`]: a stage charged with its level's
//! tail, the workgroup that arrived last) are taken over its compared passes, so a Δ in a
//! charged column can be read as a tail moving, not a stage's cost.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Seek};

use super::{Reader, Result};
use crate::analysis::{AttributionWarning, Window};
use crate::labels::{
    classify_offline_indicators, mode_name, Indicator, ModeConfig, ModeTally, PowerModeClassifier,
    SensorState,
};
use crate::{PowerMode, StageKind, Telemetry};

/// One side of a comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Side {
    /// Model.
    pub model: String,
    /// Device.
    pub device: String,
    /// Dispatch style (`mega` / `multi`).
    pub dispatch: String,
    /// Frames read.
    pub passes: u64,
    /// Passes in each power mode.
    pub modes: ModeTally,
    /// The weights' format (`q4_0`, …), where the header says.
    pub quant: Option<String>,
    /// What damage the reading met and read past ([`super::damage_note`]); `None` for a
    /// sound file.
    pub damage: Option<String>,
}

/// Which passes the medians are over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compared {
    /// The passes of one mode on both sides; the rest excluded.
    Mode {
        /// The mode.
        mode: PowerMode,
        /// A's passes excluded (another mode).
        a_excluded: u64,
        /// B's passes excluded.
        b_excluded: u64,
    },
    /// No mode is common to both: medians over all passes, no Δ.
    Incomparable,
}

/// One stage kind's medians, ns per pass (`None`: the kind never ran on that side).
#[derive(Clone, Debug, PartialEq)]
pub struct KindDiff {
    /// The kind.
    pub kind: StageKind,
    /// A's median busy.
    pub a_busy_ns: Option<u64>,
    /// B's median busy.
    pub b_busy_ns: Option<u64>,
    /// A's median charged.
    pub a_charged_ns: Option<u64>,
    /// B's median charged.
    pub b_charged_ns: Option<u64>,
}

impl KindDiff {
    /// (B − A) / A of busy, %.
    pub fn busy_delta_pct(&self) -> Option<f64> {
        delta_pct(self.a_busy_ns, self.b_busy_ns)
    }

    /// (B − A) / A of charged, %.
    pub fn charged_delta_pct(&self) -> Option<f64> {
        delta_pct(self.a_charged_ns, self.b_charged_ns)
    }
}

fn delta_pct(a: Option<u64>, b: Option<u64>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (a > 0).then(|| (b as f64 - a as f64) / a as f64 * 100.0)
}

/// Whether the output tokens agree, pass by pass: paired by pass number where each side's
/// passes increase (a pass lost to damage on one side leaves the others paired), else in
/// file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tokens {
    /// Same tokens over the same number of passes.
    Agree {
        /// Passes compared.
        passes: u64,
    },
    /// The first pass whose output token differs.
    Differ {
        /// Its pass number (A's).
        pass: u64,
        /// A's token.
        a: u32,
        /// B's token.
        b: u32,
    },
    /// No pass in common (one side or both have none): nothing to compare.
    Empty {
        /// A's frames.
        a_passes: u64,
        /// B's frames.
        b_passes: u64,
    },
    /// Every pass common to both agrees, and one side has passes the other has not (a
    /// longer run, or passes lost to damage).
    Prefix {
        /// Passes compared (all agree).
        common: u64,
        /// A's frames.
        a_passes: u64,
        /// B's frames.
        b_passes: u64,
    },
}

/// The comparison ([`compare`]); its `Display` is a table.
#[derive(Clone, Debug, PartialEq)]
pub struct DiffReport {
    /// Recording A.
    pub a: Side,
    /// Recording B.
    pub b: Side,
    /// Which passes the medians are over.
    pub compared: Compared,
    /// Per stage kind, in shader order (kinds neither side ran are left out).
    pub kinds: Vec<KindDiff>,
    /// Token agreement.
    pub tokens: Tokens,
    /// Total pass time and tokens per second.
    pub headline: Headline,
    /// A's attribution warnings over its compared passes (medians: [`Window`]).
    pub a_attribution: Vec<AttributionWarning>,
    /// B's.
    pub b_attribution: Vec<AttributionWarning>,
}

/// Total pass time and throughput over the compared passes of each side.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Headline {
    /// A's compared passes.
    pub a_passes: u64,
    /// B's compared passes.
    pub b_passes: u64,
    /// The sum of A's compared passes' wall times, ns.
    pub a_wall_ns: u64,
    /// The same for B.
    pub b_wall_ns: u64,
}

impl Headline {
    /// Tokens (passes) per second of A, `None` with no time.
    pub fn a_tok_s(&self) -> Option<f64> {
        tok_s(self.a_passes, self.a_wall_ns)
    }

    /// Tokens per second of B.
    pub fn b_tok_s(&self) -> Option<f64> {
        tok_s(self.b_passes, self.b_wall_ns)
    }

    /// (B − A) / A of tokens per second, %.
    pub fn tok_s_delta_pct(&self) -> Option<f64> {
        let (a, b) = (self.a_tok_s()?, self.b_tok_s()?);
        (a > 0.0).then(|| (b - a) / a * 100.0)
    }
}

fn tok_s(passes: u64, wall_ns: u64) -> Option<f64> {
    (wall_ns > 0).then(|| passes as f64 / (wall_ns as f64 / 1e9))
}

impl DiffReport {
    /// Busy Δ% of a kind, `None` where the modes are not comparable.
    pub fn busy_delta_pct(&self, k: &KindDiff) -> Option<f64> {
        (self.compared != Compared::Incomparable)
            .then(|| k.busy_delta_pct())
            .flatten()
    }

    /// Charged Δ% of a kind, `None` where the modes are not comparable.
    pub fn charged_delta_pct(&self, k: &KindDiff) -> Option<f64> {
        (self.compared != Compared::Incomparable)
            .then(|| k.charged_delta_pct())
            .flatten()
    }

    /// Total pass time Δ%, `None` where the modes are not comparable.
    pub fn wall_delta_pct(&self) -> Option<f64> {
        let h = &self.headline;
        (self.compared != Compared::Incomparable)
            .then(|| delta_pct(Some(h.a_wall_ns), Some(h.b_wall_ns)))
            .flatten()
    }

    /// Tokens per second Δ%, `None` where the modes are not comparable.
    pub fn tok_s_delta_pct(&self) -> Option<f64> {
        (self.compared != Compared::Incomparable)
            .then(|| self.headline.tok_s_delta_pct())
            .flatten()
    }

    /// What differs between the two runs beyond what a comparison is for: the model, the
    /// device, the weights' format. Empty where the two are the same run setup.
    pub fn mismatch(&self) -> Vec<String> {
        let (a, b) = (&self.a, &self.b);
        let mut v = vec![];
        if a.model != b.model {
            v.push(format!("models differ (A {:?}, B {:?})", a.model, b.model));
        }
        if a.device != b.device {
            v.push(format!(
                "devices differ (A {:?}, B {:?})",
                a.device, b.device
            ));
        }
        if let (Some(qa), Some(qb)) = (&a.quant, &b.quant) {
            if qa != qb {
                let mut m = format!("weights differ (A {qa}, B {qb})");
                // The label is the layer matrices' types joined by `+`; `record` before
                // 7404f72 (2026-12-06) wrote the classifier's type alone (`q6_k` for most
                // llama-quantize files). One side a single type the other's set holds may be
                // that older label of the same weights: say so, still refuse.
                let (sa, sb) = (
                    qa.split('+').collect::<Vec<_>>(),
                    qb.split('+').collect::<Vec<_>>(),
                );
                if (sa.len() == 1 && sb.contains(&sa[0])) || (sb.len() == 1 && sa.contains(&sb[0]))
                {
                    m.push_str(
                        " — a lone type may be an older recording's label (its classifier's type only, before 2026-12-06): the same file may have made both",
                    );
                }
                v.push(m);
            }
        }
        v
    }

    /// Whether either recording was damaged or cut.
    pub fn damaged(&self) -> bool {
        self.a.damage.is_some() || self.b.damage.is_some()
    }

    /// The report as one JSON object (the table's numbers, ns; Δ% `null` where none).
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let side = |s: &Side| {
            json!({
                "model": s.model,
                "device": s.device,
                "dispatch": s.dispatch,
                "quant": s.quant,
                "passes": s.passes,
                "modes": {"fast": s.modes.fast, "slow": s.modes.slow, "unknown": s.modes.unknown},
                "damage": s.damage,
            })
        };
        let compared = match self.compared {
            Compared::Mode {
                mode,
                a_excluded,
                b_excluded,
            } => {
                json!({"mode": mode_name(mode), "a_excluded": a_excluded, "b_excluded": b_excluded})
            }
            Compared::Incomparable => json!({"mode": null, "comparable": false}),
        };
        let tokens = match &self.tokens {
            Tokens::Agree { passes } => json!({"verdict": "agree", "passes": passes}),
            Tokens::Differ { pass, a, b } => {
                json!({"verdict": "differ", "pass": pass, "a": a, "b": b})
            }
            Tokens::Prefix {
                common,
                a_passes,
                b_passes,
            } => {
                json!({"verdict": "prefix", "common": common, "a_passes": a_passes, "b_passes": b_passes})
            }
            Tokens::Empty { a_passes, b_passes } => {
                json!({"verdict": "not_comparable", "a_passes": a_passes, "b_passes": b_passes})
            }
        };
        let h = &self.headline;
        let kinds: Vec<_> = self
            .kinds
            .iter()
            .map(|k| {
                json!({
                    "kind": k.kind.name(),
                    "a_busy_ns": k.a_busy_ns,
                    "b_busy_ns": k.b_busy_ns,
                    "busy_delta_pct": self.busy_delta_pct(k),
                    "a_charged_ns": k.a_charged_ns,
                    "b_charged_ns": k.b_charged_ns,
                    "charged_delta_pct": self.charged_delta_pct(k),
                })
            })
            .collect();
        json!({
            "a": side(&self.a),
            "b": side(&self.b),
            "mismatch": self.mismatch(),
            "compared": compared,
            "headline": {
                "a_passes": h.a_passes,
                "b_passes": h.b_passes,
                "a_wall_ns": h.a_wall_ns,
                "b_wall_ns": h.b_wall_ns,
                "wall_delta_pct": self.wall_delta_pct(),
                "a_tok_s": h.a_tok_s(),
                "b_tok_s": h.b_tok_s(),
                "tok_s_delta_pct": self.tok_s_delta_pct(),
            },
            "kinds": kinds,
            "tokens": tokens,
            "attribution": {"a": self.a_attribution, "b": self.b_attribution},
        })
    }
}

/// One pass's sums per stage kind code.
struct PassKinds {
    busy: BTreeMap<u32, u64>,
    charged: BTreeMap<u32, u64>,
}

/// What the comparison needs of one pass.
struct PassNumbers {
    /// The mode the live labeler recorded.
    recorded_mode: PowerMode,
    wall_ns: u64,
    /// The pass's latency indicator (all the offline classifier reads of a frame).
    indicator: Option<(Indicator, u64)>,
}

struct Summary {
    side: Side,
    run: Option<crate::RunDetails>,
    /// A few numbers per pass, never the frames: memory stays linear in the pass count
    /// whatever each frame holds.
    passes: Vec<PassNumbers>,
    clocks: Vec<Option<crate::labels::ClockHint>>,
    kinds: Vec<PassKinds>,
    tokens: Vec<(u64, u32)>,
    /// What the attribution warnings read of each pass.
    window: Window,
}

impl Summary {
    /// Each pass's mode (see the module doc).
    fn modes(&self) -> Vec<PowerMode> {
        let inds: Vec<_> = self.passes.iter().map(|p| p.indicator).collect();
        let offline = classify_offline_indicators(
            &ModeConfig::default(),
            self.run.as_ref(),
            &inds,
            &self.clocks,
        );
        self.passes
            .iter()
            .zip(offline)
            .map(|(p, m)| {
                if p.recorded_mode == PowerMode::Slow {
                    PowerMode::Slow
                } else {
                    m
                }
            })
            .collect()
    }

    /// Per kind code, the values of the passes in `mode` (all passes: `None`).
    fn values(
        &self,
        modes: &[PowerMode],
        mode: Option<PowerMode>,
    ) -> (BTreeMap<u32, Vec<u64>>, BTreeMap<u32, Vec<u64>>) {
        let (mut busy, mut charged) = (BTreeMap::new(), BTreeMap::new());
        for (p, m) in self.kinds.iter().zip(modes) {
            if mode.is_some_and(|want| want != *m) {
                continue;
            }
            for (k, v) in &p.busy {
                busy.entry(*k).or_insert_with(Vec::new).push(*v);
            }
            for (k, v) in &p.charged {
                charged.entry(*k).or_insert_with(Vec::new).push(*v);
            }
        }
        (busy, charged)
    }
}

/// Clock samples older than this are no hint for a pass, ns.
const MAX_CLOCK_AGE_NS: u64 = 1_000_000_000;

fn summarise<R: Read + Seek>(r: &mut Reader<R>) -> Summary {
    let mut run = r.header().run.clone();
    let mut s = Summary {
        side: Side {
            model: run.model.clone(),
            device: run.device.clone(),
            dispatch: run.dispatch.to_string(),
            quant: r.header().quant.clone(),
            passes: 0,
            modes: ModeTally::default(),
            damage: None,
        },
        run: None,
        passes: vec![],
        clocks: vec![],
        kinds: vec![],
        tokens: vec![],
        window: Window::new(run.clone()),
    };
    let mut sensors = SensorState::default();
    let mut probe = PowerModeClassifier::for_run(ModeConfig::default(), &run);
    let mut first_damage = None;
    for msg in r.by_ref() {
        match msg {
            Ok(Telemetry::Start(d)) => {
                probe = PowerModeClassifier::for_run(ModeConfig::default(), &d);
                if s.window.is_empty() {
                    s.window = Window::new(d.clone());
                }
                run = d;
            }
            Ok(Telemetry::Sensor(smp)) => sensors.observe(&smp),
            Ok(Telemetry::Frame(f)) => {
                s.side.passes += 1;
                s.tokens.push((f.pass, f.next));
                let mut p = PassKinds {
                    busy: BTreeMap::new(),
                    charged: BTreeMap::new(),
                };
                for t in &f.stages {
                    let Some(d) = run.stages.get(t.stage as usize) else {
                        continue;
                    };
                    // Saturating: a damaged or crafted recording's times near u64::MAX
                    // must not wrap to a small (plausible, wrong) sum.
                    let b = p.busy.entry(d.kind.code()).or_default();
                    *b = b.saturating_add(t.busy_ns);
                    let c = p.charged.entry(d.kind.code()).or_default();
                    *c = c.saturating_add(t.charged_ns);
                }
                s.kinds.push(p);
                s.window.push(&f);
                s.clocks
                    .push(sensors.clock_hint(f.host_start_ns, MAX_CLOCK_AGE_NS));
                s.passes.push(PassNumbers {
                    recorded_mode: f.mode,
                    wall_ns: f.wall_ns,
                    indicator: probe.indicator(&f),
                });
            }
            Ok(_) => {}
            // Reading goes on past it: the first is named, the reader counts the rest.
            Err(e) => {
                first_damage.get_or_insert(e);
            }
        }
    }
    s.side.damage = first_damage.map(|e| super::damage_note(&e, r.skips(), "compared"));
    s.run = Some(run);
    s
}

/// Pair the two token streams (`(pass, token)` in file order): by pass number where each
/// side's passes increase, else by position. The pairs compared, and the first that differs.
fn pair_tokens(a: &[(u64, u32)], b: &[(u64, u32)]) -> (u64, Option<Tokens>) {
    let rising = |v: &[(u64, u32)]| v.windows(2).all(|w| w[0].0 < w[1].0);
    let mut pairs = 0;
    let mut check = |pass: u64, ta: u32, tb: u32| {
        pairs += 1;
        (ta != tb).then_some(Tokens::Differ { pass, a: ta, b: tb })
    };
    if rising(a) && rising(b) {
        let (mut i, mut j) = (0, 0);
        while let (Some(&(pa, ta)), Some(&(pb, tb))) = (a.get(i), b.get(j)) {
            match pa.cmp(&pb) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    if let Some(d) = check(pa, ta, tb) {
                        return (pairs, Some(d));
                    }
                    (i, j) = (i + 1, j + 1);
                }
            }
        }
    } else {
        for (&(pass, ta), &(_, tb)) in a.iter().zip(b) {
            if let Some(d) = check(pass, ta, tb) {
                return (pairs, Some(d));
            }
        }
    }
    (pairs, None)
}

fn median(v: Option<&Vec<u64>>) -> Option<u64> {
    let mut v = v?.clone();
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        // The mean of the two middle values, without overflowing near u64::MAX.
        let (lo, hi) = (v[n / 2 - 1], v[n / 2]);
        lo + (hi - lo) / 2
    })
}

/// Compare the remaining messages of `a` and `b`. Damage in either is reported in its
/// [`Side::damage`], and the comparison uses every sound record around it.
pub fn compare<RA: Read + Seek, RB: Read + Seek>(
    a: &mut Reader<RA>,
    b: &mut Reader<RB>,
) -> Result<DiffReport> {
    let (mut sa, mut sb) = (summarise(a), summarise(b));
    let (ma, mb) = (sa.modes(), sb.modes());
    sa.side.modes = ModeTally::of(ma.iter().copied());
    sb.side.modes = ModeTally::of(mb.iter().copied());
    let (ta, tb) = (sa.side.modes, sb.side.modes);
    let common = if ta.fast > 0 && tb.fast > 0 {
        Some(PowerMode::Fast)
    } else if ta.slow > 0 && tb.slow > 0 {
        Some(PowerMode::Slow)
    } else {
        None
    };
    let compared = match common {
        Some(mode) => {
            let n = |t: ModeTally| match mode {
                PowerMode::Fast => t.fast,
                _ => t.slow,
            };
            Compared::Mode {
                mode,
                a_excluded: sa.side.passes - n(ta),
                b_excluded: sb.side.passes - n(tb),
            }
        }
        None => Compared::Incomparable,
    };
    let (a_busy, a_charged) = sa.values(&ma, common);
    let (b_busy, b_charged) = sb.values(&mb, common);
    let kinds = StageKind::ALL
        .into_iter()
        .filter_map(|k| {
            let c = k.code();
            let d = KindDiff {
                kind: k,
                a_busy_ns: median(a_busy.get(&c)),
                b_busy_ns: median(b_busy.get(&c)),
                a_charged_ns: median(a_charged.get(&c)),
                b_charged_ns: median(b_charged.get(&c)),
            };
            (d.a_busy_ns.is_some() || d.b_busy_ns.is_some()).then_some(d)
        })
        .collect();
    let total = |s: &Summary, modes: &[PowerMode]| {
        s.passes
            .iter()
            .zip(modes)
            .filter(|(_, m)| common.is_none_or(|want| want == **m))
            .fold((0u64, 0u64), |(n, t), (p, _)| {
                (n + 1, t.saturating_add(p.wall_ns))
            })
    };
    let ((a_passes, a_wall_ns), (b_passes, b_wall_ns)) = (total(&sa, &ma), total(&sb, &mb));
    let headline = Headline {
        a_passes,
        b_passes,
        a_wall_ns,
        b_wall_ns,
    };
    let (pairs, differ) = pair_tokens(&sa.tokens, &sb.tokens);
    let (na, nb) = (sa.tokens.len() as u64, sb.tokens.len() as u64);
    let tokens = differ.unwrap_or(if pairs == 0 {
        Tokens::Empty {
            a_passes: na,
            b_passes: nb,
        }
    } else if na == nb && pairs == na {
        Tokens::Agree { passes: na }
    } else {
        Tokens::Prefix {
            common: pairs,
            a_passes: na,
            b_passes: nb,
        }
    });
    let in_mode = |modes: &[PowerMode], i: usize| {
        common.is_none_or(|want| modes.get(i).is_some_and(|m| *m == want))
    };
    Ok(DiffReport {
        a_attribution: sa.window.warnings(|i| in_mode(&ma, i)),
        b_attribution: sb.window.warnings(|i| in_mode(&mb, i)),
        a: sa.side,
        b: sb.side,
        compared,
        kinds,
        tokens,
        headline,
    })
}

/// Attribution warnings the table lists per side (the largest tails first).
const ATTRIBUTION_LINES: usize = 8;

struct Ns(Option<u64>);

impl fmt::Display for Ns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.pad("-"),
            Some(ns) => f.pad(&format!("{:.2}", ns as f64 / 1000.0)),
        }
    }
}

struct Pct(Option<f64>);

impl fmt::Display for Pct {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            None => f.pad("-"),
            Some(p) => f.pad(&format!("{p:+.1}%")),
        }
    }
}

impl fmt::Display for DiffReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (tag, s) in [("A", &self.a), ("B", &self.b)] {
            writeln!(
                f,
                "{tag}: {} on {} ({}{}), {} passes: {}",
                s.model,
                s.device,
                s.dispatch,
                s.quant
                    .as_deref()
                    .map(|q| format!(", {q}"))
                    .unwrap_or_default(),
                s.passes,
                s.modes
            )?;
            if let Some(d) = &s.damage {
                writeln!(f, "   {d}")?;
            }
        }
        match self.compared {
            Compared::Mode {
                mode,
                a_excluded,
                b_excluded,
            } => writeln!(
                f,
                "compared: {} passes only ({a_excluded} of A and {b_excluded} of B in other modes excluded)",
                mode_name(mode)
            )?,
            Compared::Incomparable => writeln!(
                f,
                "compared: NOT COMPARABLE: no power mode is common to A ({}) and B ({}); \
                 medians over all passes, no Δ",
                self.a.modes, self.b.modes
            )?,
        }
        for m in self.mismatch() {
            writeln!(f, "warning: {m}: the Δ compares the setups, not a change")?;
        }
        let h = &self.headline;
        writeln!(
            f,
            "{:<9} {:>11} {:>11} {:>8}   {:>11} {:>11} {:>8}",
            "total", "A pass ms", "B pass ms", "Δ%", "A tok/s", "B tok/s", "Δ%"
        )?;
        writeln!(
            f,
            "{:<9} {:>11} {:>11} {:>8}   {:>11} {:>11} {:>8}",
            format!("{}/{}", h.a_passes, h.b_passes),
            format!("{:.3}", h.a_wall_ns as f64 / 1e6),
            format!("{:.3}", h.b_wall_ns as f64 / 1e6),
            Pct(self.wall_delta_pct()),
            h.a_tok_s().map_or("-".into(), |t| format!("{t:.1}")),
            h.b_tok_s().map_or("-".into(), |t| format!("{t:.1}")),
            Pct(self.tok_s_delta_pct()),
        )?;
        writeln!(
            f,
            "{:<9} {:>11} {:>11} {:>8}   {:>11} {:>11} {:>8}",
            "kind", "A busy µs", "B busy µs", "Δ%", "A charged", "B charged", "Δ%"
        )?;
        for k in &self.kinds {
            writeln!(
                f,
                "{:<9} {:>11} {:>11} {:>8}   {:>11} {:>11} {:>8}",
                k.kind.name(),
                Ns(k.a_busy_ns),
                Ns(k.b_busy_ns),
                Pct(self.busy_delta_pct(k)),
                Ns(k.a_charged_ns),
                Ns(k.b_charged_ns),
                Pct(self.charged_delta_pct(k)),
            )?;
        }
        // Over the compared passes, as the dashboard's window: a stage charged with its
        // level's tail on one side only changes that side's charged column.
        for (tag, w) in [("A", &self.a_attribution), ("B", &self.b_attribution)] {
            match w.len() {
                0 => writeln!(f, "attribution {tag}: none")?,
                n => writeln!(
                    f,
                    "attribution {tag}: {n} warning{}",
                    if n == 1 { "" } else { "s" }
                )?,
            }
            for x in w.iter().take(ATTRIBUTION_LINES) {
                writeln!(f, "  {tag}: {x}")?;
            }
            if w.len() > ATTRIBUTION_LINES {
                writeln!(
                    f,
                    "  {tag}: … {} more (--json lists every one)",
                    w.len() - ATTRIBUTION_LINES
                )?;
            }
        }
        match &self.tokens {
            Tokens::Agree { passes } => write!(f, "tokens: agree over {passes} passes"),
            Tokens::Differ { pass, a, b } => {
                write!(f, "tokens: DIFFER first at pass {pass} (A {a}, B {b})")
            }
            Tokens::Prefix {
                common,
                a_passes,
                b_passes,
            } => write!(
                f,
                "tokens: agree over the {common} common passes (A has {a_passes}, B {b_passes})"
            ),
            Tokens::Empty { a_passes, b_passes } => write!(
                f,
                "tokens: NOT COMPARABLE: no pass in common (A has {a_passes}, B {b_passes})"
            ),
        }
    }
}
