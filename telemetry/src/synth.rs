//! Synthetic telemetry: runs and frames of any shape, deterministic from a seed, for tests,
//! benches and demos (the dashboard bench's 1,000 × 200, a 1B-shaped recording's 132 × 114).
//!
//! The frames are plausible, not measured: per level, every workgroup runs the level's
//! stages back to back (work times vary by kind, workgroup and pass), arrives at the grid
//! barrier, and leaves it once the last workgroup arrived plus a release latency and a small
//! exit spread; the next level starts at each workgroup's exit. A level's single-unit stages
//! (the final argmax) run on workgroup 0 only. Stage timings and barrier timings are
//! computed from the spans with [`Spans`]'s own functions. Never use these numbers as
//! measurements.

use crate::fail::{FailReport, FailWord};
use crate::frame::{Contention, Frame, PowerMode};
use crate::run::{DeviceKind, Dispatch, LevelDetails, RunDetails, StageDetails, StageKind};
use crate::spans::Spans;

/// The per-layer stage pattern (a llama layer as the megakernel runs it).
const LAYER: [StageKind; 7] = [
    StageKind::Q,
    StageKind::K,
    StageKind::V,
    StageKind::Attn,
    StageKind::Wo,
    StageKind::Ffn,
    StageKind::Down,
];

/// A megakernel run of `grid` workgroups with `stages` stages spread over `levels` levels
/// (at least one of each; `levels` is capped at `stages`). Stages follow the llama layer
/// pattern `q k v attn wo ffn_up ffn_down`, named `q.l3` etc.; with 9 stages or more the
/// last two are `head` and a one-workgroup `argmax`. Stage `i` is in level
/// `i · levels / stages`, so levels are contiguous and none is empty.
///
/// `synthetic_run(132, 114, 82)` is shaped like Llama-3.2-1B on an H200.
pub fn synthetic_run(grid: u32, stages: u32, levels: u32) -> RunDetails {
    let grid = grid.max(1);
    let stages = stages.max(1);
    let levels = levels.clamp(1, stages);
    let tail = stages >= 9;
    let st: Vec<StageDetails> = (0..stages)
        .map(|i| {
            let (kind, name) = if tail && i == stages - 2 {
                (StageKind::Head, "head".to_string())
            } else if tail && i == stages - 1 {
                (StageKind::Argmax, "argmax".to_string())
            } else {
                let k = LAYER[(i % 7) as usize];
                (k, format!("{k}.l{}", i / 7))
            };
            let units = match kind {
                StageKind::Argmax => 1,
                StageKind::Attn => 32,
                _ => 2048,
            };
            StageDetails {
                id: i,
                name: name.into(),
                level: (u64::from(i) * u64::from(levels) / u64::from(stages)) as u32,
                kind,
                rows: if matches!(kind, StageKind::Attn | StageKind::Argmax) {
                    0
                } else {
                    units
                },
                units,
                weight_bytes: 0,
            }
        })
        .collect();
    let lv = (0..levels)
        .map(|l| {
            let ids: Vec<u32> = st.iter().filter(|s| s.level == l).map(|s| s.id).collect();
            let name = ids
                .first()
                .and_then(|&i| st.get(i as usize))
                .map_or_else(|| format!("level{l}"), |s| format!("L{l}.{}", s.name));
            LevelDetails {
                index: l,
                name: name.into(),
                stages: ids,
            }
        })
        .collect();
    RunDetails {
        schema_version: crate::SCHEMA_VERSION,
        device: "synthetic".into(),
        driver: "synthetic 0".into(),
        device_kind: DeviceKind::Other,
        model: format!("synthetic {stages} stages / {levels} levels"),
        dispatch: Dispatch::Mega,
        grid,
        wg_size: 512,
        stages: st,
        levels: lv,
        instrumented: true,
        check: None,
        kv: Default::default(),
        kv_auto: false,
        act: Default::default(),
        act_auto: false,
        prefetch_mib: 0,
        idle_wait_ns: 0,
        pass_loop: false,
        robust_buffers_off: false,
        device_clock_off: None,
        pipelines: Vec::new(),
    }
}

/// splitmix64: a small, good, deterministic generator.
struct Rng(u64);

impl Rng {
    fn new(seed: u64, pass: u64) -> Self {
        Rng(seed ^ pass.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5851_f42d_4c95_7f2d)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Base work time of a stage kind on one workgroup, ns.
fn base_ns(kind: StageKind) -> u64 {
    match kind {
        StageKind::Q | StageKind::Wo => 1_800,
        StageKind::K | StageKind::V => 600,
        StageKind::Attn => 2_500,
        StageKind::Ffn => 5_500,
        StageKind::Down => 2_900,
        StageKind::Head => 9_000,
        StageKind::Argmax => 700,
    }
}

/// Pass `pass` of `run`, deterministic in `(run, pass, seed)`: spans for every workgroup
/// and stage (see the module doc), stage and barrier timings computed from them, a clean
/// fail word, tokens from the seed, every eighth pass in the slow mode (work ×1.8).
pub fn synthetic_frame(run: &RunDetails, pass: u64, seed: u64) -> Frame {
    let mut rng = Rng::new(seed, pass);
    let g = run.grid.max(1);
    let slow = pass % 8 == 7;
    let mut spans = Spans::new(g, run.stages.len() as u32, run.levels.len() as u32);
    let mut at = vec![0u64; g as usize]; // each workgroup's clock, ns from the pass start
    let mut arrive = vec![0u64; g as usize];
    for (li, lv) in run.levels.iter().enumerate() {
        let last_level = li + 1 == run.levels.len();
        for w in 0..g {
            let mut t = at[w as usize];
            for &sid in &lv.stages {
                let Some(st) = run.stages.get(sid as usize) else {
                    continue;
                };
                if st.units <= 1 && w != 0 {
                    continue;
                }
                let mut work = base_ns(st.kind) + rng.below(base_ns(st.kind) / 4 + 1);
                if rng.below(64) == 0 {
                    work += rng.below(8_000); // a straggler
                }
                if slow {
                    work = work * 9 / 5;
                }
                let gap = rng.below(40);
                spans.set_span(sid, w, (t + gap) as u32, (t + gap + work) as u32);
                t += gap + work;
            }
            arrive[w as usize] = t + 20 + rng.below(30);
        }
        if last_level {
            break;
        }
        let last = arrive.iter().copied().max().unwrap_or(0);
        let release = 900 + rng.below(500);
        for w in 0..g {
            let exit = last + release + rng.below(300);
            spans.set_barrier(li as u32, w, arrive[w as usize] as u32, exit as u32);
            at[w as usize] = exit;
        }
    }
    let extent = arrive.iter().copied().max().unwrap_or(0);
    let stages = spans.stage_timings(&run.stages, &run.levels, &[]);
    let barriers = spans.barrier_timings();
    let token = (seed.wrapping_add(pass).wrapping_mul(2_654_435_761) % 32_000) as u32;
    Frame {
        pass,
        pos: pass as u32,
        token,
        next: (u64::from(token) * 31 + 7) as u32 % 32_000,
        wall_ns: extent + 120_000 + rng.below(20_000),
        gpu_ns: Some(extent + 2_000),
        fail: FailReport::new(FailWord::clean(g), |l| run.level_name(l).into_owned()),
        torn: false,
        dropped: 0,
        host_start_ns: Some(1_000_000_000 + pass * (extent + 150_000)),
        timestamp_start_ns: Some(5_000_000_000 + pass * (extent + 150_000)),
        device_start_ns: Some(7_000_000_000 + pass * (extent + 150_000)),
        stages,
        barriers,
        dispatch_ns: vec![],
        prefetched_bytes: 0,
        correctness: None,
        check: Default::default(),
        check_lag: 0,
        mode: if slow {
            PowerMode::Slow
        } else {
            PowerMode::Fast
        },
        contention: Contention::default(),
        spans,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_b_shaped_run_has_its_stage_and_level_counts_and_contiguous_levels() {
        let r = synthetic_run(132, 114, 82);
        assert_eq!((r.grid, r.stages.len(), r.levels.len()), (132, 114, 82));
        assert!(r.levels.iter().all(|l| !l.stages.is_empty()));
        let flat: Vec<u32> = r.levels.iter().flat_map(|l| l.stages.clone()).collect();
        assert_eq!(flat, (0..114).collect::<Vec<_>>());
        assert_eq!(r.stages[113].kind, StageKind::Argmax);
        assert_eq!(&*r.stages[3].name, "attn.l0");
    }

    #[test]
    fn frames_are_deterministic_and_nest_within_levels() {
        let r = synthetic_run(8, 20, 9);
        let f = synthetic_frame(&r, 3, 42);
        assert_eq!(f, synthetic_frame(&r, 3, 42));
        assert_ne!(f.spans, synthetic_frame(&r, 4, 42).spans);
        assert_eq!(f.stages.len(), 20);
        assert_eq!(f.barriers.len(), 8);
        // argmax ran on one workgroup only.
        assert_eq!(f.spans.iter().filter(|s| s.stage == 19).count(), 1);
        for b in &f.barriers {
            assert!(b.release_ns >= 900, "{b:?}");
        }
        assert!(f.stages.iter().all(|s| s.charged_ns >= s.busy_ns));
    }

    #[test]
    fn tiny_shapes_do_not_panic() {
        for (g, s, l) in [(0, 0, 0), (1, 1, 5), (3, 2, 2)] {
            let r = synthetic_run(g, s, l);
            let f = synthetic_frame(&r, 0, 0);
            assert!(!f.stages.is_empty());
        }
    }
}
