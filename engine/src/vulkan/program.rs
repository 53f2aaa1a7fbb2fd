//! The decode program: levels (separated by grid barriers in the megakernel, by pipeline
//! barriers in multi mode) of stages, and the tensor table, serialised into the words the
//! shader reads (`shaders/layout.glsl` documents the same indices).
//!
//! One transformer block is five levels:
//! ```text
//!  qkv.lN   : rmsnorm(x) prologue; q, k, v rows (q/k rows in RoPE pairs; k, v into the cache)
//!  attn.lN  : a (head group, position chunk) per workgroup; a head group's last chunk to
//!             finish combines the chunks into the attention output
//!  wo.lN    : x += Wo·att (layer 0: x = embedding + Wo·att)
//!  ffn.lN   : rmsnorm(x) prologue; h = silu(Wg·x) * (Wu·x)
//!  down.lN  : x += Wd·h
//! ```
//! then `head` (final rmsnorm prologue, logits, per-workgroup argmax partials) and `argmax`
//! (one workgroup: the tail).

use crate::model::{Config, Model, Tensor};

/// Stage kinds: the telemetry crate's, whose `code()` is the shader's `K_*` (held equal to
/// the interface table by a test).
pub use baro_telemetry::StageKind;

pub use super::interface::att::{
    CHUNKS as ATT_CHUNKS, CHUNK_MIN as ATT_CHUNK_MIN, HEADS as ATT_HEADS,
    PRO_CHUNKS as ATT_PRO_CHUNKS,
};

/// Position chunks of one head group's attention over `n` positions (the shader's
/// `att_chunks`): a function of `n` alone.
pub fn att_chunks(n: u32) -> u32 {
    n.div_ceil(ATT_CHUNK_MIN).clamp(1, ATT_CHUNKS)
}

/// Attention head groups of a model: up to [`ATT_HEADS`] query heads of one KV head each
/// (the attention stage's units, before the position chunks).
pub fn att_groups(c: &Config) -> u32 {
    groups(c.n_heads as u32, c.n_kv_heads as u32)
}

fn groups(n_heads: u32, n_kv_heads: u32) -> u32 {
    let n_kv_heads = n_kv_heads.max(1);
    n_kv_heads * (n_heads / n_kv_heads).div_ceil(ATT_HEADS)
}

/// Every head group has [`ATT_HEADS`] query heads: the query heads per KV head are a
/// (nonzero) multiple of it.
fn full_groups(n_heads: u32, n_kv_heads: u32) -> bool {
    let gq = n_heads / n_kv_heads.max(1);
    gq > 0 && gq.is_multiple_of(ATT_HEADS)
}

/// The workgroups `(first, count)` a row-granular stage runs on in the megakernel: a stage
/// of cost `cost` (the weight bytes it streams) at cost offset `off` in a level of total
/// cost `level` takes the same share of the `grid`, `[grid·off/level, grid·(off+cost)/level)`,
/// at least one workgroup. A workgroup then holds one stage's units (two at a share's edge)
/// and every workgroup has work: the level's
/// stages neither leave part of the grid idle at the barrier (units packed into the first
/// workgroups) nor all share every workgroup, where the instrumented build's per-stage
/// workgroup barrier would serialise them and its profile would no longer be the plain
/// build's schedule. The grid is at most 65535 (first and count are 16-bit fields).
pub fn stage_workgroups(grid: u32, off: u64, cost: u64, level: u64) -> (u32, u32) {
    let g = u128::from(grid.max(1));
    if level == 0 {
        return (0, g as u32);
    }
    let w0 = (g * u128::from(off) / u128::from(level)).min(g - 1);
    let w1 = (g * (u128::from(off) + u128::from(cost)) / u128::from(level)).clamp(w0 + 1, g);
    (w0 as u32, (w1 - w0) as u32)
}

/// A level's stage shares `(first, count)`, at least one round's worth each: stage s needs
/// `ceil(units[s] / teams)` workgroups so that each of its teams runs at most one unit
/// (decode.comp's `first_unit`: unit u on team u / count of workgroup first + u % count).
/// The grid goes to the stages in proportion to `cost`, except that a stage whose
/// proportional share is below its need gets its need and the others share the rest in
/// proportion (water-filling: the most cost a workgroup carries is as small as one round
/// allows). Integer counts by cumulative floors, so the shares tile the grid in stage order;
/// where no need binds they are the cost shares ([`stage_workgroups`]). Where the needs
/// exceed the grid, or the level has one stage, the shares follow `cost` alone. Cost shares
/// alone gave the 8B's value rows two rounds on some teams while query teams idled beside
/// them; these shares measured +0.1…+0.5 % on an H100, though the q/k/v level's end did not
/// move: the value rows' second round was not its critical path (bench/rounds/96.md).
pub fn round_shares(grid: u32, teams: u32, units: &[u32], cost: &[u64]) -> Vec<(u32, u32)> {
    let total: u64 = cost.iter().sum();
    let by_cost = || {
        let mut off = 0u64;
        cost.iter()
            .map(|&c| {
                let r = stage_workgroups(grid, off, c, total);
                off += c;
                r
            })
            .collect()
    };
    let teams = u64::from(teams.max(1));
    let need: Vec<u64> = units
        .iter()
        .map(|&u| u64::from(u).div_ceil(teams).max(1))
        .collect();
    let g = u64::from(grid);
    if units.len() < 2 || total == 0 || need.iter().sum::<u64>() > g || g > 0xFFFF {
        return by_cost();
    }
    // Fix every stage whose proportional share of what is left falls below its need, until
    // none does; the free stages' shares are then all at least their needs.
    let mut fixed = vec![false; need.len()];
    loop {
        let left = g
            - (0..need.len())
                .filter(|&i| fixed[i])
                .map(|i| need[i])
                .sum::<u64>();
        let free: u64 = (0..need.len())
            .filter(|&i| !fixed[i])
            .map(|i| cost[i])
            .sum();
        let short: Vec<usize> = (0..need.len())
            .filter(|&i| {
                !fixed[i]
                    && u128::from(left) * u128::from(cost[i])
                        < u128::from(need[i]) * u128::from(free)
            })
            .collect();
        if short.is_empty() {
            let (mut w0, mut cum) = (0u64, 0u64);
            let floor =
                |c: u64| (u128::from(left) * u128::from(c) / u128::from(free.max(1))) as u64;
            return (0..need.len())
                .map(|i| {
                    let nw = if fixed[i] {
                        need[i]
                    } else {
                        let before = floor(cum);
                        cum += cost[i];
                        floor(cum) - before
                    };
                    let r = (w0 as u32, nw as u32);
                    w0 += nw;
                    r
                })
                .collect();
        }
        for i in short {
            fixed[i] = true;
        }
    }
}

/// Sync words of one pass that are read back: the fixed words and one residency word per
/// workgroup (`interface::sy`).
pub fn sync_words(grid: u32) -> usize {
    super::interface::sy::RESIDENT + grid as usize
}

/// Sync words of one chain slot, reset before every submission: [`sync_words`], then one
/// attention arrival counter per head group (not read back).
pub fn sync_buffer_words(grid: u32, att_groups: u32) -> usize {
    sync_words(grid) + att_groups as usize
}

/// One stage of the program.
#[derive(Clone, Debug)]
pub struct Stage {
    /// Kind.
    pub kind: StageKind,
    /// Transformer block (0 for head/argmax).
    pub layer: u32,
    /// Level it belongs to.
    pub level: u32,
    /// Work units (rows, row pairs or heads).
    pub units: u32,
    /// Display name, e.g. `q.l3`.
    pub name: String,
    /// Weight rows it reads, for display.
    pub rows: u32,
}

/// One level.
#[derive(Clone, Debug)]
pub struct Level {
    /// Display name, e.g. `qkv.l3`.
    pub name: String,
    /// First stage index.
    pub first: u32,
    /// Stage count.
    pub count: u32,
    /// Prologue (shader `PRO_*`).
    pub prologue: u32,
    /// Prologue tensor (norm weight).
    pub prologue_tensor: u32,
    /// Flags: bit 0 input is the embedding, bit 1 single workgroup.
    pub flags: u32,
}

/// Where each tensor lives on the GPU.
#[derive(Clone, Debug)]
pub struct TensorPlace {
    /// Weight chunk (buffer) index.
    pub chunk: u32,
    /// Word offset of the quants / values in the chunk.
    pub qs: u32,
    /// Word offset of the packed f16 scales (Q types).
    pub sc: u32,
    /// Words per row of quants/values.
    pub row_words: u32,
    /// Word offset of a type's second header stream (see [`repack`]).
    pub x: u32,
    /// Total words.
    pub words: u64,
}

pub use super::interface::h;

/// "No tensor" in a stage's second tensor field (a Q/K/V stage without a bias).
pub const NONE: u32 = u32::MAX;
use super::interface::{l, s as srec, t as trec};

/// The whole program for one model.
#[derive(Clone, Debug)]
pub struct Program {
    /// Levels in order.
    pub levels: Vec<Level>,
    /// Stages in order.
    pub stages: Vec<Stage>,
    /// The model's tensors in table order.
    pub tensors: Vec<Tensor>,
    /// State buffer size in floats.
    pub state_floats: u64,
    /// Floats of the key cache; the value cache is the same size.
    pub cache_floats: u64,
    /// Positions.
    pub max_seq: u32,
    header: Vec<u32>,
}

mod repack;
pub use repack::{gpu_supports, repack, Packed};

impl Program {
    /// Bit `id` set where the program has a tensor of ggml type `id` (the shader's `TYPES`).
    pub fn type_mask(&self) -> u32 {
        self.tensors.iter().fold(0u32, |m, t| m | 1 << t.ty.id())
    }

    /// Build the program for `model` with `max_seq` positions.
    pub fn new(model: &Model, max_seq: usize) -> Program {
        let c: &Config = &model.config;
        let w = &model.weights;
        let mut tensors: Vec<Tensor> = vec![];
        let mut tid = |t: &Tensor| {
            tensors.push(t.clone());
            (tensors.len() - 1) as u32
        };
        let embed = tid(&w.token_embd);
        // Q/K units: RoPE pairs (two rows), or with per-head q/k norms (qwen3) whole heads:
        // a head's rows are normalised together before they are rotated.
        let qk_norm = w.layers.iter().any(|l| l.q_norm.is_some());
        let rows_per_qk_unit = if qk_norm { c.head_size() as u32 } else { 2 };
        let mut levels = vec![];
        let mut stages: Vec<Stage> = vec![];
        let mut stage_t: Vec<(u32, u32)> = vec![];
        let mut level = |name: String,
                         prologue: u32,
                         pt: u32,
                         flags: u32,
                         st: Vec<(StageKind, u32, u32, u32, u32)>,
                         stages: &mut Vec<Stage>,
                         stage_t: &mut Vec<(u32, u32)>| {
            let li = levels.len() as u32;
            let first = stages.len() as u32;
            for (kind, layer, units, t0, t1) in st {
                let rows = match kind {
                    StageKind::Q | StageKind::K => units * rows_per_qk_unit,
                    StageKind::Attn | StageKind::Argmax => 0,
                    _ => units,
                };
                let name = if matches!(kind, StageKind::Head | StageKind::Argmax) {
                    kind.name().to_string()
                } else {
                    format!("{}.l{layer}", kind.name())
                };
                stages.push(Stage {
                    kind,
                    layer,
                    level: li,
                    units,
                    name,
                    rows,
                });
                stage_t.push((t0, t1));
            }
            levels.push(Level {
                name,
                first,
                count: stages.len() as u32 - first,
                prologue,
                prologue_tensor: pt,
                flags,
            });
        };
        let (d, kv, hd) = (c.dim as u32, c.kv_dim() as u32, c.hidden_dim as u32);
        let qd = c.q_dim() as u32;
        let (q_units, k_units) = if qk_norm {
            (c.n_heads as u32, c.n_kv_heads as u32)
        } else {
            (qd / 2, kv / 2)
        };
        for (l, lw) in w.layers.iter().enumerate() {
            let l32 = l as u32;
            let an = tid(&lw.attn_norm);
            let (q, k, v) = (tid(&lw.wq), tid(&lw.wk), tid(&lw.wv));
            // A Q/K/V stage's second tensor is its bias (qwen2), or NONE.
            let mut bias = |t: &Option<Tensor>| t.as_ref().map_or(NONE, &mut tid);
            let (qb, kb, vb) = (bias(&lw.q_bias), bias(&lw.k_bias), bias(&lw.v_bias));
            let o = tid(&lw.wo);
            let fnorm = tid(&lw.ffn_norm);
            let (g, down, up) = (tid(&lw.w_gate), tid(&lw.w_down), tid(&lw.w_up));
            use StageKind::*;
            level(
                format!("qkv.l{l}"),
                1,
                an,
                (l == 0) as u32,
                vec![
                    (Q, l32, q_units, q, qb),
                    (K, l32, k_units, k, kb),
                    (V, l32, kv, v, vb),
                ],
                &mut stages,
                &mut stage_t,
            );
            level(
                format!("attn.l{l}"),
                0,
                0,
                0,
                vec![(Attn, l32, att_groups(c), 0, 0)],
                &mut stages,
                &mut stage_t,
            );
            level(
                format!("wo.l{l}"),
                2,
                0,
                0,
                vec![(Wo, l32, d, o, 0)],
                &mut stages,
                &mut stage_t,
            );
            level(
                format!("ffn.l{l}"),
                1,
                fnorm,
                0,
                vec![(Ffn, l32, hd, g, up)],
                &mut stages,
                &mut stage_t,
            );
            level(
                format!("down.l{l}"),
                3,
                0,
                0,
                vec![(Down, l32, d, down, 0)],
                &mut stages,
                &mut stage_t,
            );
        }
        // Per-head q/k norm weights (qwen3): layer l's q norm at tensor H_QK_NORM + 2l, its k
        // norm at + 2l + 1 (0: none; tensor 0 is the embedding).
        let mut qk_norm_base = 0u32;
        if qk_norm {
            for (l, lw) in w.layers.iter().enumerate() {
                // Weights::validate: a qwen3 block has both (and no other has either).
                if let (Some(qn), Some(kn)) = (&lw.q_norm, &lw.k_norm) {
                    let i = tid(qn);
                    tid(kn);
                    if l == 0 {
                        qk_norm_base = i;
                    }
                }
            }
        }
        let on = tid(&w.output_norm);
        let cls = match &w.output {
            Some(o) => tid(o),
            None => embed,
        };
        level(
            "head".into(),
            1,
            on,
            0,
            vec![(StageKind::Head, 0, c.vocab_size as u32, cls, 0)],
            &mut stages,
            &mut stage_t,
        );
        level(
            "argmax".into(),
            0,
            0,
            2,
            vec![(StageKind::Argmax, 0, 1, 0, 0)],
            &mut stages,
            &mut stage_t,
        );

        let ms = max_seq as u64;
        let hs = c.head_size() as u64;
        let off_x = 0u64;
        let off_q = off_x + d as u64;
        // q, then (qwen3) the keys' raw rows before their norm.
        let off_hb = off_q + qd as u64 + if qk_norm { kv as u64 } else { 0 };
        let off_att = off_hb + hd as u64;
        let off_rope = off_att + c.n_heads as u64 * ms;
        let off_acc = off_rope + ms * (hs / 2 * 2);
        // Both 16-byte aligned: the prologues read the attention output and the chunks'
        // records four floats at a time.
        let off_attp = (off_acc + d as u64).next_multiple_of(4);
        let off_atto =
            (off_attp + c.n_heads as u64 * ATT_CHUNKS as u64 * (hs + 2)).next_multiple_of(4);
        let state_floats = off_atto + qd as u64;
        let kv_layer = ms * kv as u64;
        let cache_floats = c.n_layers as u64 * kv_layer;

        let mut hdr = vec![0u32; h::WORDS];
        hdr[h::N_LEVELS] = levels.len() as u32;
        hdr[h::N_STAGES] = stages.len() as u32;
        hdr[h::N_TENSORS] = tensors.len() as u32;
        hdr[h::DIM] = d;
        hdr[h::HIDDEN] = hd;
        hdr[h::N_HEADS] = c.n_heads as u32;
        hdr[h::N_KV_HEADS] = c.n_kv_heads as u32;
        hdr[h::HEAD_SIZE] = hs as u32;
        hdr[h::VOCAB] = c.vocab_size as u32;
        hdr[h::MAX_SEQ] = max_seq as u32;
        hdr[h::OFF_X] = off_x as u32;
        hdr[h::OFF_Q] = off_q as u32;
        hdr[h::OFF_HB] = off_hb as u32;
        hdr[h::OFF_ATT] = off_att as u32;
        hdr[h::OFF_ROPE] = off_rope as u32;
        hdr[h::KV_LAYER] = kv_layer as u32;
        hdr[h::EMBED] = embed;
        hdr[h::EPS] = c.norm_eps.to_bits();
        hdr[h::ATT_SCALE] = (c.head_size() as f32).sqrt().to_bits();
        hdr[h::KV_DIM] = kv;
        hdr[h::OFF_ACC] = off_acc as u32;
        hdr[h::N_LAYERS] = c.n_layers as u32;
        hdr[h::OFF_ATTP] = off_attp as u32;
        hdr[h::OFF_ATTO] = off_atto as u32;
        hdr[h::Q_DIM] = qd;
        hdr[h::ROPE] = match c.rope_style() {
            crate::model::types::RopeStyle::Normal => 0,
            crate::model::types::RopeStyle::Neox => super::interface::rope::NEOX,
        };
        hdr[h::QK_NORM] = qk_norm_base;
        // Stage → tensors kept beside the stage list for serialisation.
        let mut p = Program {
            levels,
            stages,
            tensors,
            state_floats,
            cache_floats,
            max_seq: max_seq as u32,
            header: hdr,
        };
        p.header.extend(stage_t.iter().flat_map(|&(a, b)| [a, b]));
        p
    }

    /// The head size (the shader's spec constant HEAD_SIZE too).
    pub fn head_size(&self) -> u32 {
        self.header[h::HEAD_SIZE]
    }

    /// [`full_groups`] of this program's heads: the shader's spec constant ATT_FULL.
    pub fn att_full(&self) -> bool {
        full_groups(self.header[h::N_HEADS], self.header[h::N_KV_HEADS])
    }

    /// Attention head groups ([`att_groups`]): one arrival counter each in the sync buffer.
    pub fn att_groups(&self) -> u32 {
        groups(self.header[h::N_HEADS], self.header[h::N_KV_HEADS])
    }

    /// Bytes of weights stage `i` streams per pass (its matrices; 0 for attention/argmax).
    pub fn stage_weight_bytes(&self, i: usize) -> u64 {
        let (t0, t1) = self.stage_tensors(i);
        let bytes = |t: u32| {
            self.tensors
                .get(t as usize)
                .map_or(0, |t| t.data.len() as u64)
        };
        match self.stages.get(i).map(|s| s.kind) {
            Some(StageKind::Ffn) => bytes(t0) + bytes(t1),
            Some(StageKind::Attn | StageKind::Argmax) | None => 0,
            Some(_) => bytes(t0),
        }
    }

    /// Every stage's workgroups `(first, count)` in the megakernel, `teams` subgroups a
    /// workgroup: each level's stages by [`round_shares`] (in proportion to their costs, but
    /// at least the workgroups one round of a stage's units needs, where the level's needs
    /// fit the grid). A stage's cost is the weight bytes it streams (a Q/K unit is a row
    /// pair, a V unit one row), or its units where it streams none. Which team computes a
    /// unit never changes its value: the shares move time, never bits.
    pub fn stage_shares(&self, grid: u32, teams: u32) -> Vec<(u32, u32)> {
        let mut shares = Vec::with_capacity(self.stages.len());
        let mut first = 0;
        for level in self.stages.chunk_by(|a, b| a.level == b.level) {
            let units: Vec<u32> = level.iter().map(|s| s.units).collect();
            let cost: Vec<u64> = level
                .iter()
                .zip(first..)
                .map(|(s, i)| match self.stage_weight_bytes(i) {
                    0 => u64::from(s.units),
                    b => b,
                })
                .collect();
            shares.extend(round_shares(grid, teams, &units, &cost));
            first += level.len();
        }
        shares
    }

    /// Stage `i`'s (t0, t1) tensor indices.
    pub fn stage_tensors(&self, i: usize) -> (u32, u32) {
        (
            self.header[h::WORDS + 2 * i],
            self.header[h::WORDS + 2 * i + 1],
        )
    }

    /// The RoPE cos/sin table, `[max_seq][head_size/2]` pairs: the CPU reference's rotation
    /// factors ([`crate::reference::rope_factors`], llama3 factors and linear scaling
    /// included), so both decoders rotate by the same values.
    pub fn rope_table(model: &Model, max_seq: usize) -> Vec<f32> {
        let cfg = &model.config;
        let freqs = model.weights.rope_factors();
        let pairs = cfg.head_size() / 2;
        let mut t = vec![0.0; max_seq * pairs * 2];
        for (pos, row) in t.chunks_exact_mut(pairs * 2).enumerate() {
            crate::reference::rope_factors(cfg, freqs.as_deref(), pos, row);
        }
        t
    }

    /// Serialise: header, levels, stages, tensors. `places[i]` is tensor i's GPU placement;
    /// `ring` is (frame words, slots); `grid` and `teams` (subgroups a workgroup) set the
    /// stages' shares ([`Program::stage_shares`]).
    pub fn words(
        &self,
        places: &[TensorPlace],
        ring: (u32, u32),
        grid: u32,
        teams: u32,
    ) -> Vec<u32> {
        let mut w = self.header[..h::WORDS].to_vec();
        w[h::RING_FRAME_WORDS] = ring.0;
        w[h::RING_SLOTS] = ring.1;
        w[h::LEVELS] = w.len() as u32;
        for lv in &self.levels {
            let mut r = [0u32; l::WORDS];
            r[l::FIRST] = lv.first;
            r[l::COUNT] = lv.count;
            r[l::PRO] = lv.prologue;
            r[l::PRO_T] = lv.prologue_tensor;
            r[l::FLAGS] = lv.flags;
            w.extend(r);
        }
        w[h::STAGES] = w.len() as u32;
        let shares = self.stage_shares(grid, teams);
        let mut unit_off = 0u32;
        let mut cur_level = u32::MAX;
        for (i, s) in self.stages.iter().enumerate() {
            if s.level != cur_level {
                cur_level = s.level;
                unit_off = 0;
            }
            let (w0, nw) = shares[i];
            let (t0, t1) = self.stage_tensors(i);
            let mut r = [0u32; srec::WORDS];
            r[srec::KIND] = s.kind.code();
            r[srec::LAYER] = s.layer;
            r[srec::UNITS] = s.units;
            r[srec::OFF] = unit_off;
            r[srec::T0] = t0;
            r[srec::T1] = t1;
            r[srec::LEVEL] = s.level;
            r[srec::WGS] = w0 | nw << 16;
            w.extend(r);
            unit_off = unit_off.wrapping_add(s.units);
        }
        w[h::TENSORS] = w.len() as u32;
        for (t, p) in self.tensors.iter().zip(places) {
            let mut r = [0u32; trec::WORDS];
            r[trec::TYPE] = t.ty.id();
            r[trec::ROWS] = t.rows as u32;
            r[trec::COLS] = t.cols as u32;
            r[trec::CHUNK] = p.chunk;
            r[trec::QS] = p.qs;
            r[trec::SC] = p.sc;
            r[trec::ROWW] = p.row_words;
            r[trec::X] = p.x;
            w.extend(r);
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::{full_groups, groups, round_shares, stage_workgroups, ATT_HEADS};

    #[test]
    fn full_groups_holds_exactly_when_every_head_group_has_att_heads_query_heads() {
        // The shader's head group g of a KV head: nb = ceil(gq / ATT_HEADS) groups a KV
        // head, hb = min(ATT_HEADS, gq - (g % nb) * ATT_HEADS) query heads each.
        for n_kv in 1..=8u32 {
            for gq in 1..=20u32 {
                let n_heads = gq * n_kv;
                let nb = gq.div_ceil(ATT_HEADS);
                let sizes: Vec<u32> = (0..groups(n_heads, n_kv))
                    .map(|g| ATT_HEADS.min(gq - (g % nb) * ATT_HEADS))
                    .collect();
                assert_eq!(sizes.iter().sum::<u32>(), n_heads, "{n_heads}/{n_kv}");
                assert_eq!(
                    full_groups(n_heads, n_kv),
                    sizes.iter().all(|&hb| hb == ATT_HEADS),
                    "{n_heads} heads, {n_kv} KV heads: group sizes {sizes:?}"
                );
            }
        }
        // Llama 3 1B/8B (32 / 8) are full; stories260K (8 / 4) and multi-head attention are not.
        assert!(full_groups(32, 8));
        assert!(!full_groups(8, 4));
        assert!(!full_groups(32, 32));
    }

    /// A level's stages as the host lays them out: cost offsets and costs.
    fn shares(grid: u32, costs: &[u64]) -> Vec<(u32, u32)> {
        let total: u64 = costs.iter().sum();
        let mut off = 0u64;
        costs
            .iter()
            .map(|&c| {
                let r = stage_workgroups(grid, off, c, total);
                off += c;
                r
            })
            .collect()
    }

    #[test]
    fn a_levels_stages_split_the_grid_in_proportion_without_gaps_or_empty_shares() {
        // 1b q/k/v bytes, 8b q/k/v bytes, a lone stage, a tiny stage beside a huge one,
        // more stages than workgroups, a 70B-sized head in bytes.
        let levels: [&[u64]; 7] = [
            &[2_359_296, 589_824, 589_824],
            &[9_437_184, 2_359_296, 2_359_296],
            &[2048],
            &[1, 128_256],
            &[5, 5, 5, 5, 5],
            &[3, 900, 7],
            &[3_000_000_000, 1],
        ];
        for grid in [1u32, 2, 3, 7, 132, 264, 65535] {
            for units in levels {
                let s = shares(grid, units);
                let total: u64 = units.iter().sum();
                for (i, (&(w0, nw), &u)) in s.iter().zip(units).enumerate() {
                    assert!(nw >= 1, "grid {grid} {units:?}: stage {i} has no workgroup");
                    assert!(
                        w0 + nw <= grid,
                        "grid {grid} {units:?}: stage {i} past the grid"
                    );
                    assert!(nw <= 0xFFFF && w0 <= 0xFFFF, "16-bit fields");
                    // Its share, within one workgroup (plus the one every stage gets).
                    let ideal = f64::from(grid) * u as f64 / total as f64;
                    assert!(
                        (f64::from(nw) - ideal).abs() <= 1.0 + 1e-9 || nw == 1,
                        "grid {grid} {units:?}: stage {i} has {nw} workgroups for {ideal:.2}"
                    );
                }
                // Consecutive shares touch or overlap by at most the one forced workgroup:
                // no workgroup of the grid is left without a stage.
                let mut covered = vec![false; grid as usize];
                for &(w0, nw) in &s {
                    for w in w0..w0 + nw {
                        covered[w as usize] = true;
                    }
                }
                assert!(
                    covered.iter().all(|&c| c),
                    "grid {grid} {units:?}: a workgroup has no stage: {s:?}"
                );
            }
        }
    }

    #[test]
    fn a_level_that_fits_one_round_gives_every_team_at_most_one_unit_and_tiles_the_grid() {
        // The 8B's q/k/v level (Q4_0 bytes; Q/K units are row pairs), 32 teams a workgroup:
        // by bytes alone the value stage got 22 workgroups (704 teams) for 1,024 rows.
        let cost = [9_437_184u64, 2_359_296, 2_359_296];
        assert_eq!(shares(132, &cost)[2], (110, 22));
        assert_eq!(
            round_shares(132, 32, &[2048, 512, 1024], &cost),
            vec![(0, 80), (80, 20), (100, 32)]
        );
        // Every level shape and grid: where the units fit one round, each stage has the
        // workgroups its units need, the shares tile the grid in stage order; otherwise they
        // are the byte shares.
        let mut x = 12345u64;
        let mut rnd = |m: u64| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) % m
        };
        let mut fitted = 0;
        for _ in 0..5000 {
            let n = 1 + rnd(4) as usize;
            let teams = 1 + rnd(40) as u32;
            let grid = 1 + rnd(300) as u32;
            let units: Vec<u32> = (0..n).map(|_| 1 + rnd(3000) as u32).collect();
            let cost: Vec<u64> = (0..n).map(|_| rnd(20_000_000)).collect();
            let got = round_shares(grid, teams, &units, &cost);
            let need: u32 = units.iter().map(|u| u.div_ceil(teams)).sum();
            if n < 2 || need > grid || cost.iter().sum::<u64>() == 0 {
                assert_eq!(
                    got,
                    shares(grid, &cost),
                    "{grid} {teams} {units:?} {cost:?}"
                );
                continue;
            }
            fitted += 1;
            // Where every stage's proportional share covers its need, nothing is moved.
            let total: u64 = cost.iter().sum();
            if units.iter().zip(&cost).all(|(&u, &c)| {
                u128::from(grid) * u128::from(c)
                    >= u128::from(u.div_ceil(teams)) * u128::from(total)
            }) {
                assert_eq!(
                    got,
                    shares(grid, &cost),
                    "{grid} {teams} {units:?} {cost:?}"
                );
            }
            let mut w = 0;
            for (i, (&(w0, nw), &u)) in got.iter().zip(&units).enumerate() {
                assert_eq!(w0, w, "stage {i} of {got:?}: shares must tile in order");
                assert!(
                    nw * teams >= u,
                    "stage {i}: {nw} x {teams} teams for {u} units"
                );
                w += nw;
            }
            assert_eq!(w, grid, "{got:?} must cover the grid {grid}");
        }
        assert!(
            fitted > 500,
            "the sweep tried the one-round rule {fitted} times"
        );
    }

    #[test]
    fn stories260k_on_ten_workgroups_of_eight_teams_runs_its_value_rows_in_one_round() {
        // app/tests/cli.rs gates this shape on lavapipe (LP_NUM_THREADS=10, 64 lanes of
        // subgroups of 8): by bytes the value stage would get 3 workgroups for 32 rows.
        let model = crate::model::Model::embedded().expect("model");
        let p = super::Program::new(&model, 16);
        let (units, cost): (Vec<u32>, Vec<u64>) = (0..3)
            .map(|i| (p.stages[i].units, p.stage_weight_bytes(i)))
            .unzip();
        assert_eq!(units, [32, 16, 32], "q/k row pairs, v rows");
        assert_eq!(shares(10, &cost)[2].1, 3);
        assert_eq!(&p.stage_shares(10, 8)[..3], [(0, 4), (4, 2), (6, 4)]);
    }

    #[test]
    fn an_empty_level_or_zero_grid_falls_back_to_the_whole_grid() {
        assert_eq!(stage_workgroups(132, 0, 0, 0), (0, 132));
        assert_eq!(stage_workgroups(0, 0, 5, 5), (0, 1));
    }
}
