//! `diff`'s attribution window ([`Window`]): taking a pass in costs its stage rows plus its
//! levels (not their product), and its warnings are those of the straightforward reading
//! (each level looks up its closing stage's first row in every pass), which
//! [`Reference`] keeps here as the oracle.

use std::time::{Duration, Instant};

use baro_telemetry::analysis::attribution::{last_arrivers, straggler, tails, StageCost};
use baro_telemetry::analysis::{AttributionWarning, Window};
use baro_telemetry::spans::StageTiming;
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{Frame, RunDetails, Spans};

/// The window as first written: per pass, every level's closing-stage row found by a scan of
/// the rows; medians and last arrivers per level over the selected passes.
struct Reference {
    run: RunDetails,
    passes: Vec<RefPass>,
}

/// One pass of [`Reference`]: per level, its closing stage's cost and its last arriver.
type RefPass = (Vec<Option<StageCost>>, Vec<Option<u32>>);

fn median(v: &mut [u64]) -> Option<u64> {
    v.sort_unstable();
    let n = v.len();
    (n > 0).then(|| v[((n - 1) as f64 * 0.5).round() as usize])
}

impl Reference {
    fn push(&mut self, f: &Frame) {
        let cost = (self.run.levels.iter())
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
        self.passes.push((cost, last_arrivers(&f.spans)));
    }

    fn warnings(&self, keep: impl Fn(usize) -> bool) -> Vec<AttributionWarning> {
        let sel: Vec<_> = (self.passes.iter().enumerate())
            .filter(|(i, _)| keep(*i))
            .map(|(_, p)| p)
            .collect();
        let mut cost = vec![None; self.run.stages.len()];
        let mut frequent = vec![None; self.run.levels.len()];
        let mut counts = vec![0u32; self.run.grid as usize];
        let mut seen = 0u32;
        for (l, lv) in self.run.levels.iter().enumerate() {
            let of = |f: fn(&StageCost) -> Option<u64>| {
                let mut v: Vec<u64> = (sel.iter())
                    .filter_map(|p| p.0.get(l).copied().flatten().as_ref().and_then(f))
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
            for w in sel.iter().filter_map(|p| p.1.get(l).copied().flatten()) {
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
            frequent[l] = (per_wg.into_iter())
                .max_by_key(|&(w, c)| (c, std::cmp::Reverse(w)))
                .map(|(w, _)| w);
        }
        let mut out: Vec<AttributionWarning> =
            (straggler(&counts, seen, self.run.grid, sel.len() as u64))
                .map(AttributionWarning::Straggler)
                .into_iter()
                .collect();
        let level_of = |l: u32| {
            (self.run.levels.iter())
                .position(|lv| lv.index == l)
                .and_then(|i| frequent[i])
        };
        let c = |s: u32| cost.get(s as usize).copied().flatten();
        out.extend((tails(&self.run, c, level_of).into_iter()).map(AttributionWarning::Tail));
        out
    }
}

/// splitmix64: the tests' own deterministic numbers.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// A stage row of `stage` costing `busy` with a tail of `tail`, ns.
fn row(stage: u32, busy: u64, tail: u64) -> StageTiming {
    StageTiming {
        stage,
        name: "s".into(),
        level: 0,
        busy_ns: busy,
        charged_ns: busy + tail,
        max_busy_ns: busy + tail / 2,
    }
}

#[test]
fn the_window_gives_the_reference_warnings_with_missing_duplicate_and_foreign_rows() {
    let mut rng = Rng(7);
    let (mut tails, mut stragglers) = (0, 0);
    for case in 0..60u64 {
        let grid = 1 + rng.below(5) as u32;
        let mut run = synthetic_run(grid, 2 + rng.below(14) as u32, 1 + rng.below(10) as u32);
        let ns = run.stages.len() as u32;
        // Crafted headers: an empty level, a closing stage shared by two levels or past the
        // run's stages, a repeated level index.
        for lv in &mut run.levels {
            match rng.below(8) {
                0 => lv.stages.clear(),
                1 => lv.stages.push(rng.below(u64::from(ns)) as u32),
                2 => lv.stages.push(ns + rng.below(3) as u32),
                3 => lv.index = rng.below(3) as u32,
                _ => {}
            }
        }
        let mut w = Window::new(run.clone());
        let mut r = Reference {
            run: run.clone(),
            passes: vec![],
        };
        let passes = rng.below(12);
        for p in 0..passes {
            let mut f = synthetic_frame(&run, p, case);
            // Rows of a random sample of stage ids (some twice, some past the run's), in a
            // random order, with few distinct values so that medians tie.
            f.stages = (0..rng.below(u64::from(ns) * 2 + 2))
                .map(|_| {
                    let s = rng.below(u64::from(ns) + 4) as u32;
                    row(s, 1_000 * (1 + rng.below(4)), 2_000 * rng.below(4))
                })
                .collect();
            // Barrier stamps on a grid one wider than the run's and over a level count of
            // its own.
            let levels = rng.below(run.levels.len() as u64 + 2) as u32;
            let mut s = Spans::new(grid + 1, ns, levels);
            for _ in 0..rng.below(20) {
                let (l, g) = (rng.below(u64::from(levels)), rng.below(u64::from(grid) + 1));
                let at = rng.below(4) as u32 * 100;
                s.set_barrier(l as u32, g as u32, at + 1, at + 500);
            }
            f.spans = s;
            w.push(&f);
            r.push(&f);
        }
        assert_eq!(w.len() as u64, passes);
        let keeps: [&dyn Fn(usize) -> bool; 4] =
            [&|_| true, &|_| false, &|i| i % 2 == 0, &|i| i % 3 != 1];
        for (k, keep) in keeps.iter().enumerate() {
            let got = w.warnings(keep);
            assert_eq!(got, r.warnings(keep), "case {case}, selection {k}");
            tails += got.iter().filter(|x| x.tail().is_some()).count();
            stragglers += got.iter().filter(|x| x.tail().is_none()).count();
        }
    }
    // The cases name both kinds of warning.
    assert!(
        tails > 50 && stragglers > 5,
        "{tails} tails, {stragglers} stragglers"
    );
}

#[test]
fn the_window_takes_the_median_of_the_first_closing_row_and_skips_passes_without_one() {
    // Levels 0 and 1 close with stages 1 and 3.
    let run = synthetic_run(2, 4, 2);
    assert_eq!(
        (run.levels.iter().map(|l| l.stages.last().copied())).collect::<Vec<_>>(),
        [Some(1), Some(3)]
    );
    let mut w = Window::new(run.clone());
    for (p, rows) in [
        // A second row of a stage is not read; a pass without a row of stage 3 gives no
        // value for level 1.
        vec![row(1, 1_000, 9_000), row(1, 50_000, 0), row(3, 2_000, 0)],
        vec![row(0, 1, 1), row(1, 1_000, 11_000)],
        vec![row(3, 2_000, 40_000), row(1, 1_000, 10_000)],
        vec![row(1, 1_000, 30_000), row(3, 2_000, 40_000)],
    ]
    .into_iter()
    .enumerate()
    {
        let mut f = synthetic_frame(&run, p as u64, 1);
        f.stages = rows;
        f.spans = Spans::new(2, 4, 2);
        w.push(&f);
    }
    let mut tail = |s: u32, keep: &dyn Fn(usize) -> bool| {
        (w.warnings(keep).iter().filter_map(|x| x.tail()))
            .find(|t| t.stage == s)
            .map(|t| (t.busy_ns, t.charged_ns, t.slowest_ns))
    };
    // Stage 1's charged: 10k, 12k, 11k, 31k → the upper middle, 12k; its slowest (busy +
    // tail / 2): 5.5k, 6.5k, 6k, 16k → 6.5k.
    assert_eq!(tail(1, &|_| true), Some((1_000, 12_000, Some(6_500))));
    // Stage 3's over the three passes with a row: 2k, 42k, 42k → 42k.
    assert_eq!(tail(3, &|_| true), Some((2_000, 42_000, Some(22_000))));
    // Over passes 0 and 1 only stage 3's row of pass 0, no tail.
    assert_eq!(tail(3, &|i| i < 2), None);
    assert_eq!(tail(1, &|i| i < 2), Some((1_000, 12_000, Some(6_500))));
}

#[test]
fn pushing_passes_of_20000_rows_over_20000_levels_costs_rows_plus_levels_not_their_product() {
    // 20,000 one-stage levels; each pass has a row of every stage, in reverse order (a scan
    // per level reads half the rows on average: 2·10⁸ comparisons a pass: over 10 s for 150 passes).
    let n = 20_000u32;
    let run = synthetic_run(1, n, n);
    let mut f = synthetic_frame(&run, 0, 1);
    f.stages = (0..n)
        .rev()
        .map(|s| row(s, 1_000, 9_000 * u64::from(s % 2)))
        .collect();
    f.spans = Spans::new(1, n, n);
    for l in 0..n {
        f.spans.set_barrier(l, 0, 10, 20);
    }
    let t0 = Instant::now();
    let mut w = Window::new(run);
    for p in 0..150 {
        f.pass = p;
        w.push(&f);
    }
    let got = w.warnings(|_| true);
    let took = t0.elapsed();
    // Every odd stage is a tail, all named after workgroup 0.
    assert_eq!(got.len(), n as usize / 2);
    assert!(got.iter().all(|x| x
        .tail()
        .is_some_and(|t| t.stage % 2 == 1 && t.last_arriver == Some(0))));
    assert!(took < Duration::from_secs(2), "150 passes took {took:?}");
}
