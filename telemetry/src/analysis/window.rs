//! Attribution warnings over many passes (a recording's, for `diff`): per pass, the few
//! numbers the rule reads (each level's closing stage: busy, charged, slowest; each level's
//! last arriver), never the frames; then the rule of [`super::attribution`] on their medians,
//! the most frequent last arriver per level, and the straggler over all counted barriers.
//! The dashboard does the same over its sliding window from its own statistics.

use super::attribution::{last_arrivers, straggler, tails, AttributionWarning, StageCost};
use crate::{Frame, RunDetails};

/// One pass's closing-stage costs and last arrivers, by level.
#[derive(Clone, Debug)]
struct PassLevels {
    cost: Vec<Option<StageCost>>,
    last: Vec<Option<u32>>,
}

/// Passes of one run, kept for [`Window::warnings`].
#[derive(Clone, Debug)]
pub struct Window {
    run: RunDetails,
    passes: Vec<PassLevels>,
}

/// The dashboard's median: the middle value, the upper one of an even count.
fn median(v: &mut [u64]) -> Option<u64> {
    v.sort_unstable();
    let n = v.len();
    (n > 0).then(|| v[((n - 1) as f64 * 0.5).round() as usize])
}

impl Window {
    /// For passes of `run`.
    pub fn new(run: RunDetails) -> Window {
        Window {
            run,
            passes: vec![],
        }
    }

    /// Passes taken in.
    pub fn len(&self) -> usize {
        self.passes.len()
    }

    /// Whether no pass was taken in.
    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }

    /// Take one pass in (its index is [`Self::len`] before the call).
    pub fn push(&mut self, f: &Frame) {
        let cost = self
            .run
            .levels
            .iter()
            .map(|lv| {
                let sid = *lv.stages.last()?;
                let t = f.stages.iter().find(|t| t.stage == sid)?;
                Some(StageCost {
                    busy_ns: t.busy_ns,
                    charged_ns: t.charged_ns,
                    slowest_ns: Some(t.max_busy_ns),
                })
            })
            .collect();
        self.passes.push(PassLevels {
            cost,
            last: last_arrivers(&f.spans),
        });
    }

    /// The warnings over the passes `keep(index)` selects: the straggler first, then the
    /// tails of the median costs, largest first.
    pub fn warnings(&self, keep: impl Fn(usize) -> bool) -> Vec<AttributionWarning> {
        let sel: Vec<&PassLevels> = (self.passes.iter().enumerate())
            .filter(|(i, _)| keep(*i))
            .map(|(_, p)| p)
            .collect();
        let nl = self.run.levels.len();
        let mut cost = vec![None; self.run.stages.len()];
        let mut frequent = vec![None; nl];
        let mut counts = vec![0u32; self.run.grid as usize];
        let mut seen = 0u32;
        for (l, lv) in self.run.levels.iter().enumerate() {
            let of = |f: fn(&StageCost) -> Option<u64>| {
                let mut v: Vec<u64> = sel
                    .iter()
                    .filter_map(|p| p.cost.get(l).copied().flatten().as_ref().and_then(f))
                    .collect();
                median(&mut v)
            };
            if let (Some(&sid), Some(busy_ns), Some(charged_ns)) = (
                lv.stages.last(),
                of(|c| Some(c.busy_ns)),
                of(|c| Some(c.charged_ns)),
            ) {
                if let Some(c) = cost.get_mut(sid as usize) {
                    *c = Some(StageCost {
                        busy_ns,
                        charged_ns,
                        slowest_ns: of(|c| c.slowest_ns),
                    });
                }
            }
            let mut per_wg: Vec<(u32, u32)> = vec![];
            for w in sel.iter().filter_map(|p| p.last.get(l).copied().flatten()) {
                let Some(c) = counts.get_mut(w as usize) else {
                    continue;
                };
                *c += 1;
                seen += 1;
                match per_wg.iter_mut().find(|(x, _)| *x == w) {
                    Some((_, c)) => *c += 1,
                    None => per_wg.push((w, 1)),
                }
            }
            frequent[l] = per_wg
                .into_iter()
                .max_by_key(|&(w, c)| (c, std::cmp::Reverse(w)))
                .map(|(w, _)| w);
        }
        let mut out: Vec<AttributionWarning> =
            straggler(&counts, seen, self.run.grid, sel.len() as u64)
                .map(AttributionWarning::Straggler)
                .into_iter()
                .collect();
        let level_of = |l: u32| {
            (self.run.levels.iter())
                .position(|lv| lv.index == l)
                .and_then(|i| frequent[i])
        };
        out.extend(
            tails(
                &self.run,
                |s| cost.get(s as usize).copied().flatten(),
                level_of,
            )
            .into_iter()
            .map(AttributionWarning::Tail),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{synthetic_frame, synthetic_run};

    #[test]
    fn the_window_names_the_median_tail_and_the_most_frequent_last_arriver() {
        let run = synthetic_run(4, 4, 2);
        let mut w = Window::new(run.clone());
        for p in 0..5u64 {
            let mut f = synthetic_frame(&run, p, 1);
            let mut s = crate::Spans::new(4, 4, 2);
            for wg in 0..4 {
                // Workgroup 3 is last at level 0 in 4 of the 5 passes.
                let late = if (wg == 3) == (p != 2) { 900 } else { 100 + wg };
                s.set_barrier(0, wg, late, 1_000);
            }
            f.spans = s;
            for t in f.stages.iter_mut().filter(|t| t.stage == 1) {
                (t.busy_ns, t.max_busy_ns, t.charged_ns) = (10_000, 11_000, 20_000 + p * 1_000);
            }
            w.push(&f);
        }
        let got = w.warnings(|_| true);
        let tail = (got.iter().filter_map(|w| w.tail()))
            .find(|t| t.stage == 1)
            .expect("k.l0 closes level 0 with a tail");
        assert_eq!(
            (tail.stage, tail.charged_ns, tail.last_arriver),
            (1, 22_000, Some(3))
        );
        // Passes left out are not counted.
        assert_eq!(w.warnings(|_| false), vec![]);
    }
}
