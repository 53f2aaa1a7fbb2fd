//! The loop budget of CPU devices, before anything is decoded.
//!
//! lavapipe ends an invocation's loops after 65,535 back-edges in one dispatch, silently (the
//! logits' poison then fails the pass); the kernel counts its own back-edges against
//! ITER_BUDGET (64,000 on a CPU device) and fails the pass by name first. Both count per
//! invocation, so what fits depends on how many lanes share the work: a vocabulary of 150,000
//! rows over the 16 teams of a 2-workgroup, 64-lane grid is 9,500 rows a team, some 400,000
//! back-edges (`FAIL backedge-budget at level N (head)` on every pass).
//!
//! [`pass_loops`] counts, from the program, the back-edges one invocation spends on a pass's
//! deterministic work — the matvec rows (the quantised types' inner loops as the shader's TICK_N
//! counts them), the attention at the run's last position, the prologues, the argmax — per
//! dispatch: the whole pass in the megakernel, each stage in the multi-dispatch path. The
//! decoder picks a CPU device's default workgroup size (mega) or grid (multi) so that a pass
//! fits with room left for the barriers' polls, and refuses a run that cannot fit before it
//! decodes, naming the stage. The kernel's own count stays the guard: this is its model.

use super::super::program::{att_chunks, Program, StageKind, ATT_CHUNKS, ATT_HEADS};
use super::{DecoderOptions, Dispatch};
use crate::model::Config;
use crate::quant::GgmlType;
use crate::{Error, Result};

/// The kernel's back-edge budget per invocation on a CPU device (ITER_BUDGET; lavapipe's own
/// limit is 65,535).
pub const CPU_BUDGET: u64 = 64_000;
/// What a default configuration may spend of [`CPU_BUDGET`] on counted work: the rest is for
/// the barriers' polls (a descheduled pool thread keeps the others polling) and the loops this
/// model leaves out (reductions, one-off setup).
pub const CPU_FIT: u64 = CPU_BUDGET * 3 / 4;

/// Back-edges the shader counts for one unit of a quantised type's inner work (TICK_N: the
/// block's unrolled loops, in case a CPU device keeps them as loops) besides the loop's own.
const BLOCK_TICKS: u64 = 40;
/// The attention's key quads per lane in flight and value positions per lane (decode.comp's
/// ATT_KQ and ATT_VP).
const ATT_KQ: u64 = 4;
const ATT_VP: u64 = 2;

/// What the estimate needs of the launch.
#[derive(Clone, Copy, Debug)]
pub struct Launch {
    /// Workgroups.
    pub grid: u32,
    /// Lanes per workgroup.
    pub wg: u32,
    /// Lanes per subgroup (a team).
    pub sg: u32,
    /// One dispatch per pass (else one per stage).
    pub mega: bool,
    /// The q8 activation path (its prologues quantise the input).
    pub q8: bool,
    /// Floats of the shared vector (SX_CAP): the attention's scratch.
    pub sx_cap: u32,
    /// Elements of a matvec's input held at once (IN_CAP: SX_CAP, or the q8 path's SQ_CAP):
    /// the FFN input beyond it is chunked.
    pub in_cap: u32,
}

/// The heaviest dispatch of a pass: its back-edges per invocation and the stage that costs
/// most of them.
#[derive(Clone, Debug, PartialEq)]
pub struct PassLoops {
    /// Back-edges of the busiest invocation of the heaviest dispatch.
    pub loops: u64,
    /// The stage that costs that invocation most (its name, e.g. `head` or `ffn.l3`).
    pub stage: String,
    /// That stage's back-edges in it.
    pub stage_loops: u64,
}

/// Back-edges one lane of a team spends on one row of tensor type `ty` over `cols` columns
/// (decode.comp's DEFINE_DOT, quant.glsl's and act_q8.glsl's FOR_LANE_UNITS loops): a trip
/// per `step` elements of the team's lanes, and a quantised type's TICK_N per active trip.
fn row_loops(ty: GgmlType, cols: u64, sg: u64) -> u64 {
    let trips = |units: u64| units.div_ceil(sg);
    match ty {
        GgmlType::F32 => trips(cols),
        GgmlType::F16 | GgmlType::BF16 => trips(cols.div_ceil(2)),
        // Two blocks a lane a trip.
        GgmlType::Q4_0 => (cols / 32).div_ceil(2 * sg) * (1 + BLOCK_TICKS),
        GgmlType::Q8_0
        | GgmlType::Q4_1
        | GgmlType::Q5_0
        | GgmlType::Q5_1
        | GgmlType::IQ4_NL
        | GgmlType::IQ4_XS => trips(cols / 32) * (1 + BLOCK_TICKS),
        // 64-element units (a sub-block pair).
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => trips(cols / 64) * (1 + BLOCK_TICKS),
    }
}

/// A vector of `n` elements loaded (or quantised) by every lane of a `wg`-lane workgroup.
fn sweep(n: u64, wg: u64) -> u64 {
    n.div_ceil(wg)
}

/// Back-edges of one invocation of one attention unit (decode.comp's unit_attn: one head
/// group and one position chunk, a whole workgroup) at position `pos`, its loops as the shader
/// sizes them (the scores' rounds, the tiles, the value clusters, the partials' rounds).
fn attn_unit_loops(c: &Config, pos: u64, nch: u64, l: &Launch) -> u64 {
    let (wg, sg) = (u64::from(l.wg), u64::from(l.sg));
    let hs = c.head_size() as u64;
    let hb = ((c.n_heads / c.n_kv_heads.max(1)) as u64).clamp(1, u64::from(ATT_HEADS));
    let q = hs.div_ceil(4);
    let nt = (wg / sg).max(1);
    let cl = (pos + 1).div_ceil(nch);
    // Scores: S / R positions a subgroup a round, R the least power of two with R·ATT_KQ >= Q
    // (at most the subgroup).
    let r = q.div_ceil(ATT_KQ).next_power_of_two().clamp(1, 128).min(sg);
    let ps = (sg / r).max(1);
    let scores = cl.div_ceil(nt * ps) * (1 + q.div_ceil(r).div_ceil(ATT_KQ));
    // The shared vector's 16-byte slots; the scores stay there (one tile) when they fit.
    let sxv = u64::from(l.sx_cap) / 4 + u64::from(l.sx_cap) / 32 + 1;
    let pw4 = hb * q + 1;
    let fit = (sxv / pw4).max(1);
    let more = if fit >= 2 { cl.div_ceil(4 * ATT_VP) } else { 0 };
    let pg = (wg / q).min(sxv).min(fit.max(more)).max(1);
    let tt = if hb * q + nt + cl <= sxv {
        cl
    } else {
        (sxv / pg * pg).max(1)
    };
    let tiles = cl.div_ceil(tt).max(1);
    let values = tiles * (1 + tt.min(cl).div_ceil(wg) + tt.min(cl).div_ceil(ATT_VP * pg));
    // The partials: fit at a time, the running sum in slot 0.
    let mut partials = 0;
    let mut k0 = 0;
    while k0 < pg {
        let s0 = u64::from(k0 != 0);
        let kn = pg.min(k0 + fit - s0).max(k0 + 1);
        let ns = kn - k0 + s0;
        partials += 1 + pw4.div_ceil(wg) * (1 + 2 * ns.saturating_sub(1));
        k0 = kn;
    }
    let combine = if nch > 1 {
        nch * (hb * hs).div_ceil(wg)
    } else {
        0
    };
    (hb * hs).div_ceil(wg) + scores + values + partials + combine
}

/// The back-edges per invocation of the heaviest dispatch of a pass at position `pos`.
pub fn pass_loops(p: &Program, c: &Config, pos: u32, l: &Launch) -> PassLoops {
    let (wg, sg) = (u64::from(l.wg), u64::from(l.sg.max(1)));
    let nteams = (wg / sg).max(1);
    let grid = l.grid.max(1);
    let shares = p.stage_shares(grid, nteams as u32);
    let (d, hidden, qd) = (c.dim as u64, c.hidden_dim as u64, c.q_dim() as u64);
    let nch = u64::from(att_chunks(pos + 1).min(ATT_CHUNKS));
    let tensor = |i: u32| p.tensors.get(i as usize);
    let rows = |i: u32, cols: u64| tensor(i).map_or(0, |t| row_loops(t.ty, cols, sg));
    // A whole tensor row (its own columns).
    let row = |i: u32| tensor(i).map_or(0, |t| row_loops(t.ty, t.cols as u64, sg));
    let prologue = |pro: u32| -> u64 {
        // decode.comp's PRO_NORM (load and normalise; q8: normalise and quantise), PRO_ATT,
        // PRO_HB, with wg_sum's reduction.
        let quant = |n: u64| sweep(n / 32 * 8, wg);
        match pro {
            1 => sweep(d, wg) + if l.q8 { quant(d) } else { sweep(d, wg) } + 2 * sweep(nteams, sg),
            2 => {
                if l.q8 {
                    quant(qd)
                } else {
                    sweep(qd, wg)
                }
            }
            3 => {
                if l.q8 {
                    quant(hidden)
                } else {
                    sweep(hidden, wg)
                }
            }
            _ => 0,
        }
    };
    // One invocation's back-edges for a stage's units on `nw` workgroups.
    let stage = |i: usize, nw: u32| -> u64 {
        let s = &p.stages[i];
        let (t0, t1) = p.stage_tensors(i);
        let units = u64::from(s.units);
        let per_team = units.div_ceil(u64::from(nw.max(1)) * nteams);
        // Rows a unit reads: a rope pair, or (per-head q/k norms) a whole head's, one after
        // another, then its pairs rotated.
        let unit_rows = u64::from(s.rows / s.units.max(1)).max(1);
        let unit = match s.kind {
            StageKind::Q | StageKind::K if unit_rows > 2 => {
                unit_rows * (1 + row(t0)) + unit_rows / 2
            }
            StageKind::Q | StageKind::K => 2 * (1 + row(t0)),
            StageKind::Ffn => 2 + row(t0) + row(t1),
            StageKind::Down if hidden > u64::from(l.in_cap) => {
                // The wide FFN input in chunks: each chunk loaded once (its trip and sweep),
                // then every unit once a chunk.
                let cap = (u64::from(l.in_cap) / 32 * 32).max(32);
                let chunks = hidden.div_ceil(cap);
                let loads = chunks * (1 + sweep(cap, wg));
                return loads + per_team * (1 + chunks * (1 + rows(t0, cap)));
            }
            StageKind::V | StageKind::Wo | StageKind::Down | StageKind::Head => 1 + row(t0),
            StageKind::Attn => {
                // Whole-workgroup units: a workgroup's share of groups × chunks.
                let att_units = units * nch;
                return att_units.div_ceil(u64::from(nw.max(1)))
                    * (1 + attn_unit_loops(c, u64::from(pos), nch, l));
            }
            StageKind::Argmax => return sweep(u64::from(grid), wg) + 4,
        };
        per_team * (1 + unit)
    };
    let mut best = PassLoops {
        loops: 0,
        stage: String::new(),
        stage_loops: 0,
    };
    if l.mega {
        // Every workgroup's sum over the levels (a workgroup at a share's edge runs two
        // stages' units); the busiest one.
        let mut total = vec![0u64; grid as usize];
        let mut worst = vec![(0u64, 0usize); grid as usize];
        for lv in &p.levels {
            let pro = prologue(lv.prologue);
            let single = lv.flags & 2 != 0;
            let mut here = vec![0u64; grid as usize];
            for i in lv.first..lv.first + lv.count {
                let i = i as usize;
                let (w0, nw) = if single { (0, 1) } else { shares[i] };
                let v = stage(i, nw);
                for w in w0..(w0 + nw).min(grid) {
                    here[w as usize] += v;
                    if v > worst[w as usize].0 {
                        worst[w as usize] = (v, i);
                    }
                }
            }
            for (t, h) in total.iter_mut().zip(&here) {
                // Every workgroup runs the prologue and the barrier (a single-workgroup
                // level's others only arrive).
                *t += h + if single { 0 } else { pro } + 1;
            }
        }
        let (w, &loops) = total
            .iter()
            .enumerate()
            .max_by_key(|&(_, t)| *t)
            .unwrap_or((0, &0));
        let (stage_loops, i) = worst.get(w).copied().unwrap_or((0, 0));
        best = PassLoops {
            loops,
            stage: p.stages.get(i).map_or(String::new(), |s| s.name.clone()),
            stage_loops,
        };
    } else {
        for lv in &p.levels {
            let pro = prologue(lv.prologue);
            for i in lv.first..lv.first + lv.count {
                let i = i as usize;
                let single = lv.flags & 2 != 0;
                let v = stage(i, if single { 1 } else { grid });
                if pro + v > best.loops {
                    best = PassLoops {
                        loops: pro + v,
                        stage: p.stages[i].name.clone(),
                        stage_loops: v,
                    };
                }
            }
        }
    }
    best
}

/// What [`fit_cpu`] decides from.
pub(super) struct CpuFit<'a> {
    pub program: &'a Program,
    pub config: &'a Config,
    pub opts: &'a DecoderOptions,
    pub device: &'a str,
    /// The workgroup size and grid chosen so far (the caller's or the defaults).
    pub wg_size: u32,
    pub grid: u32,
    /// The largest workgroup size the decoder runs on the device.
    pub limit: u32,
    /// The device's resident grid (the megakernel's default).
    pub resident: u32,
    pub sg: u32,
    pub q8: bool,
    /// (SX_CAP, SQ_CAP) at a workgroup size, or why it does not fit.
    pub caps: &'a dyn Fn(u32) -> Result<(usize, usize)>,
}

/// A CPU device's workgroup size and grid, and the pass's estimated back-edges per
/// invocation: the caller's where given; else, where the default would spend more than
/// [`CPU_FIT`], the workgroup grows until the megakernel's pass on the resident grid fits
/// (for both dispatches: one size keeps mega and multi bitwise equal), and the multi path's
/// grid doubles until its heaviest stage fits. A pass estimated past [`CPU_BUDGET`] is
/// refused, saying what would fit.
pub(super) fn fit_cpu(f: &CpuFit) -> Result<(u32, u32, u64)> {
    let mega = f.opts.dispatch == Dispatch::Mega;
    // The run's last position (its attention's chunks are at their longest there, give or
    // take a chunk boundary's few positions).
    let pos = f.program.max_seq.saturating_sub(1);
    let launch = |wg: u32, grid: u32, mega: bool| -> Option<PassLoops> {
        // A size the shared memory refuses is no candidate (the caller reports the size it
        // runs).
        let (sx, sq) = (f.caps)(wg).ok()?;
        let launch = Launch {
            grid,
            wg,
            sg: f.sg,
            mega,
            q8: f.q8,
            sx_cap: sx as u32,
            in_cap: (if f.q8 { sq } else { sx }) as u32,
        };
        Some(pass_loops(f.program, f.config, pos, &launch))
    };
    let est = |wg: u32, grid: u32| launch(wg, grid, mega);
    // Workgroup sizes past `w`: doubling, then the device's largest.
    let larger = |w: u32| {
        let mut v: Vec<u32> =
            std::iter::successors(Some(w.saturating_mul(2)), |x| x.checked_mul(2))
                .take_while(|&x| x < f.limit)
                .filter(|x| x.is_multiple_of(f.sg))
                .collect();
        if f.limit > w {
            v.push(f.limit);
        }
        v
    };
    // Grids past `g`: doubling up to 65,535.
    let wider = |g: u32| {
        std::iter::successors(Some(g.saturating_mul(2).min(65_535)), |&x| {
            (x < 65_535).then(|| x.saturating_mul(2).min(65_535))
        })
        .take_while(move |&x| x > g)
    };
    // The multi path's grid from `g`, at `from` (its estimate there): doubled until the
    // heaviest stage leaves the quarter, or until a wider grid no longer lowers it (one unit
    // alone past the line), then the narrowest grid at the least.
    let widen = |wg: u32, g: u32, from: PassLoops| {
        let (mut grid, mut cur) = (g, from);
        for g in wider(grid) {
            let Some(x) = launch(wg, g, false) else { break };
            if x.loops >= cur.loops {
                break;
            }
            (grid, cur) = (g, x);
            if cur.loops <= CPU_FIT {
                break;
            }
        }
        (grid, cur)
    };
    let (mut wg, mut grid) = (f.wg_size, f.grid);
    // The default workgroup size is the megakernel's on the resident grid whichever the
    // dispatch, so that mega and multi keep their bits (the norms' sums are over the
    // workgroup's lanes): the first size whose pass fits, else the largest.
    if f.opts.wg_size.is_none() {
        let fits_mega = |w: u32| launch(w, f.resident, true).is_some_and(|x| x.loops <= CPU_FIT);
        if !fits_mega(wg) {
            let sizes = larger(wg);
            if let Some(w) = sizes
                .iter()
                .copied()
                .find(|&w| fits_mega(w))
                .or_else(|| sizes.iter().copied().rev().find(|&w| (f.caps)(w).is_ok()))
            {
                wg = w;
            }
        }
    }
    let Some(mut cur) = est(wg, grid) else {
        return Ok((wg, grid, 0));
    };
    if cur.loops > CPU_FIT && !mega && f.opts.grid.is_none() {
        (grid, cur) = widen(wg, grid, cur);
    }
    // A megakernel's default must leave the barriers' waits their quarter: a waiting
    // workgroup spends back-edges while the OS runs another thread (a gate's CPU reference
    // beside a pass at 58,000 of 64,000 ran out, 1 in 5 runs). A stage dispatch has no grid
    // barrier, and what the caller sets runs up to the budget itself.
    let default_mega = mega && f.opts.wg_size.is_none();
    let bound = if default_mega { CPU_FIT } else { CPU_BUDGET };
    if cur.loops <= bound {
        return Ok((wg, grid, cur.loops));
    }
    // What would fit, for the message: a larger workgroup (mega) or a wider grid (multi).
    let fits = |x: &Option<PassLoops>| x.as_ref().is_some_and(|x| x.loops <= CPU_BUDGET);
    let roomy = |x: &Option<PassLoops>| x.as_ref().is_some_and(|x| x.loops <= CPU_FIT);
    // Whether the multi path's default launch fits (its grid widened as above).
    let multi_fits = || {
        launch(wg, f.resident, false)
            .is_some_and(|m| widen(wg, f.resident, m).1.loops <= CPU_BUDGET)
    };
    let multi = mega && multi_fits();
    let or_multi = if multi {
        ", or --dispatch multi (its default grid on a CPU device is sized to fit)"
    } else {
        ""
    };
    let remedy = if default_mega && cur.loops <= CPU_BUDGET {
        format!(
            "{}--wg-size {wg} runs the megakernel, leaving the barriers' waits {} back-edges: a busy CPU runs out",
            if multi {
                "run it with --dispatch multi, whose default grid on a CPU device is sized to fit; "
            } else {
                ""
            },
            CPU_BUDGET - cur.loops
        )
    } else if mega {
        // A size that leaves the waits their quarter, else one within the budget.
        let sizes = larger(wg);
        match sizes
            .iter()
            .find(|&&w| roomy(&est(w, grid)))
            .or_else(|| sizes.iter().find(|&&w| fits(&est(w, grid))))
        {
            Some(&w) => format!("--wg-size {w} fits{or_multi}"),
            None if multi => "no workgroup size fits: run it with --dispatch multi, whose default grid on a CPU device is sized to fit".into(),
            None => "no launch fits this many positions on this device (fewer positions shorten the attention's)".into(),
        }
    } else {
        match wider(grid).find(|&g| fits(&est(wg, g))) {
            Some(g) if f.opts.grid.is_some() => format!("--grid {g} fits"),
            _ => "no grid fits: one unit of that stage alone is past it (fewer positions shorten the attention's)".into(),
        }
    };
    Err(Error::Invalid(format!(
        "{} on {}: {} at position {pos} (the run's last) needs about {} loop iterations per invocation at a grid of {grid} x {wg} lanes ({} of them in {}); this CPU device ends an invocation's loops after 65,535 a dispatch and the kernel fails the pass at {CPU_BUDGET}{}: {remedy}",
        if mega { "mega" } else { "multi" },
        f.device,
        if mega { "a pass" } else { "a stage's dispatch" },
        cur.loops,
        cur.stage_loops,
        cur.stage,
        if default_mega {
            ", of which a default megakernel leaves a quarter to its barriers' waits"
        } else {
            ""
        },
    )))
}

impl super::VulkanDecoder {
    /// A CPU device's estimated back-edges per invocation of a pass's heaviest dispatch
    /// ([`pass_loops`] at the run's last position), `None` on a GPU.
    pub fn cpu_pass_loops(&self) -> Option<u64> {
        (self.ctx.info.kind == super::DeviceKind::Cpu).then_some(self.cpu_pass_loops)
    }
}
