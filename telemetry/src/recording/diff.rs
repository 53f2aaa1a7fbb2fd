//! Two recordings side by side: per stage kind, the median over passes of the pass's busy
//! and charged time on that kind (the sum over the kind's stages, e.g. every `q.l*`), Δ%,
//! and whether the two token streams agree.
//!
//! Medians are over all passes of each recording; compare recordings of like power modes
//! (the CSV export has the mode per row) before reading much into a few percent.

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Seek};

use super::{Reader, Result};
use crate::{StageKind, Telemetry};

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
    /// Where the recording was damaged or cut (it was read up to there).
    pub damage: Option<String>,
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

/// Whether the output tokens agree, pass by pass in file order.
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
    /// One stream is a prefix of the other.
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
    /// Per stage kind, in shader order (kinds neither side ran are left out).
    pub kinds: Vec<KindDiff>,
    /// Token agreement.
    pub tokens: Tokens,
}

struct Summary {
    side: Side,
    busy: BTreeMap<u32, Vec<u64>>,
    charged: BTreeMap<u32, Vec<u64>>,
    tokens: Vec<(u64, u32)>,
}

fn summarise<R: Read + Seek>(r: &mut Reader<R>) -> Summary {
    let mut run = r.header().run.clone();
    let mut s = Summary {
        side: Side {
            model: run.model.clone(),
            device: run.device.clone(),
            dispatch: run.dispatch.to_string(),
            passes: 0,
            damage: None,
        },
        busy: BTreeMap::new(),
        charged: BTreeMap::new(),
        tokens: vec![],
    };
    for msg in r.by_ref() {
        match msg {
            Ok(Telemetry::Start(d)) => run = d,
            Ok(Telemetry::Frame(f)) => {
                s.side.passes += 1;
                s.tokens.push((f.pass, f.next));
                let mut busy: BTreeMap<u32, u64> = BTreeMap::new();
                let mut charged: BTreeMap<u32, u64> = BTreeMap::new();
                for t in &f.stages {
                    let Some(d) = run.stages.get(t.stage as usize) else {
                        continue;
                    };
                    *busy.entry(d.kind.code()).or_default() += t.busy_ns;
                    *charged.entry(d.kind.code()).or_default() += t.charged_ns;
                }
                for (k, v) in busy {
                    s.busy.entry(k).or_default().push(v);
                }
                for (k, v) in charged {
                    s.charged.entry(k).or_default().push(v);
                }
            }
            Ok(_) => {}
            Err(e) => {
                s.side.damage = Some(e.to_string());
                break;
            }
        }
    }
    s
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
        (v[n / 2 - 1] + v[n / 2]) / 2
    })
}

/// Compare the remaining messages of `a` and `b`. Damage in either is reported in its
/// [`Side::damage`], and the comparison uses what was read before it.
pub fn compare<RA: Read + Seek, RB: Read + Seek>(
    a: &mut Reader<RA>,
    b: &mut Reader<RB>,
) -> Result<DiffReport> {
    let (sa, sb) = (summarise(a), summarise(b));
    let kinds = StageKind::ALL
        .into_iter()
        .filter_map(|k| {
            let c = k.code();
            let d = KindDiff {
                kind: k,
                a_busy_ns: median(sa.busy.get(&c)),
                b_busy_ns: median(sb.busy.get(&c)),
                a_charged_ns: median(sa.charged.get(&c)),
                b_charged_ns: median(sb.charged.get(&c)),
            };
            (d.a_busy_ns.is_some() || d.b_busy_ns.is_some()).then_some(d)
        })
        .collect();
    let mut tokens = None;
    for (&(pass, ta), &(_, tb)) in sa.tokens.iter().zip(&sb.tokens) {
        if ta != tb {
            tokens = Some(Tokens::Differ { pass, a: ta, b: tb });
            break;
        }
    }
    let (na, nb) = (sa.tokens.len() as u64, sb.tokens.len() as u64);
    let tokens = tokens.unwrap_or(if na == nb {
        Tokens::Agree { passes: na }
    } else {
        Tokens::Prefix {
            common: na.min(nb),
            a_passes: na,
            b_passes: nb,
        }
    });
    Ok(DiffReport {
        a: sa.side,
        b: sb.side,
        kinds,
        tokens,
    })
}

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
                "{tag}: {} on {} ({}), {} passes",
                s.model, s.device, s.dispatch, s.passes
            )?;
            if let Some(d) = &s.damage {
                writeln!(f, "   read up to damage: {d}")?;
            }
        }
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
                Pct(k.busy_delta_pct()),
                Ns(k.a_charged_ns),
                Ns(k.b_charged_ns),
                Pct(k.charged_delta_pct()),
            )?;
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
        }
    }
}
