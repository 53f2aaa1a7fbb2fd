//! Attribution warnings over many passes (a recording's, for `diff`): per pass, the few
//! numbers the rule reads (each level's closing stage: busy, charged, slowest; each level's
//! last arriver), never the frames; then the rule of [`super::attribution`] on their medians,
//! the most frequent last arriver per level, and the straggler over all counted barriers.
//! The dashboard does the same over its sliding window from its own statistics.

use std::collections::HashMap;

use super::attribution::{last_arrivers, straggler, tails, AttributionWarning, StageCost};
use crate::{Frame, RunDetails, StageId};

/// One pass's row of a level's closing stage: `slot` names the closing stage (see
/// [`Window::slot`]); `slowest_ns` is the row's `max_busy_ns`.
#[derive(Clone, Copy, Debug)]
struct Row {
    slot: u32,
    pass: u32,
    busy_ns: u64,
    charged_ns: u64,
    slowest_ns: u64,
}

/// One pass's last arriver at a level (the level's position in the run).
#[derive(Clone, Copy, Debug)]
struct Last {
    level: u32,
    pass: u32,
    workgroup: u32,
}

/// Passes of one run, kept for [`Window::warnings`]: per pass only the rows of stages that
/// close a level (the first row of each) and the levels' stamped last arrivers, so that
/// taking a pass in costs its rows plus its levels, and memory grows with what the frames
/// hold of those, never with levels × passes.
#[derive(Clone, Debug)]
pub struct Window {
    run: RunDetails,
    /// Per level (its position in the run), the slot of its closing stage.
    level_slot: Vec<Option<u32>>,
    /// Slot of each stage that closes a level (`u32::MAX`: it closes none). A closing stage
    /// whose id lies past the run's stages (a crafted header's) gets none: its cost could not
    /// be placed anyway.
    dense: Vec<u32>,
    /// Per slot, 1 + the last pass that took a row of it (a pass's first row counts).
    taken: Vec<u32>,
    /// Every pass's closing-stage rows.
    rows: Vec<Row>,
    /// Every pass's stamped last arrivers.
    last: Vec<Last>,
    /// Passes taken in.
    passes: u32,
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
        let mut dense = vec![u32::MAX; run.stages.len()];
        let mut slots = 0u32;
        let mut level_slot = Vec::with_capacity(run.levels.len());
        for lv in &run.levels {
            let Some(slot) = (lv.stages.last()).and_then(|&sid| dense.get_mut(sid as usize)) else {
                level_slot.push(None);
                continue;
            };
            if *slot == u32::MAX {
                *slot = slots;
                slots += 1;
            }
            level_slot.push(Some(*slot));
        }
        Window {
            run,
            level_slot,
            dense,
            taken: vec![0; slots as usize],
            rows: vec![],
            last: vec![],
            passes: 0,
        }
    }

    /// Passes taken in.
    pub fn len(&self) -> usize {
        self.passes as usize
    }

    /// Whether no pass was taken in.
    pub fn is_empty(&self) -> bool {
        self.passes == 0
    }

    /// The slot of stage `sid` where it closes a level.
    fn slot(&self, sid: StageId) -> Option<u32> {
        self.dense
            .get(sid as usize)
            .copied()
            .filter(|&s| s != u32::MAX)
    }

    /// Take one pass in (its index is [`Self::len`] before the call): one look at each of
    /// its stage rows and each of its levels.
    pub fn push(&mut self, f: &Frame) {
        let pass = self.passes;
        self.passes += 1;
        for t in &f.stages {
            let Some(slot) = self.slot(t.stage) else {
                continue;
            };
            let taken = &mut self.taken[slot as usize];
            if *taken == self.passes {
                continue; // a level reads its closing stage's first row
            }
            *taken = self.passes;
            self.rows.push(Row {
                slot,
                pass,
                busy_ns: t.busy_ns,
                charged_ns: t.charged_ns,
                slowest_ns: t.max_busy_ns,
            });
        }
        let nl = self.run.levels.len();
        let last = last_arrivers(&f.spans).into_iter().take(nl).enumerate();
        self.last.extend(last.filter_map(|(l, w)| {
            Some(Last {
                level: l as u32,
                pass,
                workgroup: w?,
            })
        }));
    }

    /// The warnings over the passes `keep(index)` selects: the straggler first, then the
    /// tails of the median costs, largest first. (Orders what it keeps in place: no copy.)
    pub fn warnings(&mut self, keep: impl Fn(usize) -> bool) -> Vec<AttributionWarning> {
        let sel: Vec<bool> = (0..self.len()).map(keep).collect();
        let passes = sel.iter().filter(|&&k| k).count();
        let nl = self.run.levels.len();
        // Per closing stage, the medians of its selected rows.
        self.rows.sort_unstable_by_key(|r| r.slot);
        let mut slot_cost = vec![None; self.taken.len()];
        let (mut busy, mut charged, mut slowest) = (vec![], vec![], vec![]);
        for g in self.rows.chunk_by(|a, b| a.slot == b.slot) {
            busy.clear();
            charged.clear();
            slowest.clear();
            for r in g.iter().filter(|r| sel[r.pass as usize]) {
                busy.push(r.busy_ns);
                charged.push(r.charged_ns);
                slowest.push(r.slowest_ns);
            }
            if let (Some(busy_ns), Some(charged_ns)) = (median(&mut busy), median(&mut charged)) {
                slot_cost[g[0].slot as usize] = Some(StageCost {
                    busy_ns,
                    charged_ns,
                    slowest_ns: median(&mut slowest),
                });
            }
        }
        let mut cost = vec![None; self.run.stages.len()];
        for (lv, slot) in self.run.levels.iter().zip(&self.level_slot) {
            let c = slot.and_then(|s| slot_cost[s as usize]);
            if let (Some(&sid), Some(c)) = (lv.stages.last(), c) {
                if let Some(x) = cost.get_mut(sid as usize) {
                    *x = Some(c);
                }
            }
        }
        // Per level, its most frequent last arriver (the lowest among equals); the straggler
        // counts every last arrival of a workgroup of the grid.
        let mut counts = vec![0u32; self.run.grid as usize];
        let mut seen = 0u32;
        let mut frequent = vec![None; nl];
        self.last.sort_unstable_by_key(|x| (x.level, x.workgroup));
        let mut ws: Vec<u32> = vec![];
        for g in self.last.chunk_by(|a, b| a.level == b.level) {
            ws.clear();
            ws.extend(
                (g.iter())
                    .filter(|x| sel[x.pass as usize] && (x.workgroup as usize) < counts.len())
                    .map(|x| x.workgroup),
            );
            let mut best: Option<(u32, u32)> = None; // (count, workgroup)
            for run in ws.chunk_by(|a, b| a == b) {
                let (w, c) = (run[0], run.len() as u32);
                counts[w as usize] += c;
                seen += c;
                if best.is_none_or(|(bc, _)| c > bc) {
                    best = Some((c, w));
                }
            }
            frequent[g[0].level as usize] = best.map(|(_, w)| w);
        }
        let mut out: Vec<AttributionWarning> =
            straggler(&counts, seen, self.run.grid, passes as u64)
                .map(AttributionWarning::Straggler)
                .into_iter()
                .collect();
        let mut position: HashMap<u32, usize> = HashMap::with_capacity(nl);
        for (i, lv) in self.run.levels.iter().enumerate() {
            position.entry(lv.index).or_insert(i);
        }
        let level_of = |l: u32| position.get(&l).and_then(|&i| frequent[i]);
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
