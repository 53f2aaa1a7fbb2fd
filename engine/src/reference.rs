//! The CPU reference decoder: plain f32, one thread, every op written once, in the exact
//! operation order of llama2.c's run.c, so its logits match run.c's bit for bit on f32 weights
//! and seeded sampling reproduces run.c's text.
//!
//! Quantised weights are dequantised row by row to f32 (ggml's block definitions in
//! [`crate::quant`]) and then used exactly like f32 weights.
//!
//! This module must never be "optimised" in a way that changes a single rounding: it is the
//! definition every GPU path is checked against.

use crate::act::{self, ActType};
use crate::kv::KvType;
use crate::model::types::{Config, Tensor, Weights};

/// RMSNorm: `o[j] = w[j] * (x[j] / sqrt(mean(x²) + eps))`, computed as run.c does
/// (`ss = Σ x²` sequentially, `ss = 1/sqrtf(ss/n + eps)`, `o = w * (ss * x)`).
pub fn rmsnorm(o: &mut [f32], x: &[f32], w: &[f32], eps: f32) {
    let mut ss = 0.0f32;
    for &v in x {
        ss += v * v;
    }
    ss /= x.len() as f32;
    ss += eps;
    let ss = 1.0 / ss.sqrt();
    for ((o, &x), &w) in o.iter_mut().zip(x).zip(w) {
        *o = w * (ss * x);
    }
}

/// Matrix-vector product `out[r] = Σ_j W[r][j] · x[j]`, `j` ascending, f32 accumulation.
/// `row` is scratch of `w.cols` floats for dequantised rows. Large matrices are split by rows
/// across threads: every row is still summed by one thread in the same order, so the result
/// is bit-identical to the single-threaded loop.
pub fn matvec(out: &mut [f32], w: &Tensor, x: &[f32], row: &mut Vec<f32>) {
    let rows = out.len().min(w.rows);
    let threads = row_threads(rows, w.cols);
    if threads <= 1 {
        row.resize(w.cols, 0.0);
        matvec_rows(&mut out[..rows], 0, w, x, row);
        return;
    }
    by_row_chunks(&mut out[..rows], threads, |part, first| {
        let mut scratch = vec![0.0; w.cols];
        matvec_rows(part, first, w, x, &mut scratch);
    });
}

/// Threads for a `rows × cols` matvec: one below 4M elements, else the cores (at most 32).
fn row_threads(rows: usize, cols: usize) -> usize {
    if rows * cols >= 1 << 22 {
        std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(32)
    } else {
        1
    }
}

/// `f(part, first_row)` over `out` split into `threads` contiguous row ranges, one thread each.
fn by_row_chunks(out: &mut [f32], threads: usize, f: impl Fn(&mut [f32], usize) + Sync) {
    let chunk = out.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        for (i, part) in out.chunks_mut(chunk).enumerate() {
            let f = &f;
            s.spawn(move || f(part, i * chunk));
        }
    });
}

/// [`matvec`] with the activation type `act`: with [`ActType::Q8`] a Q4_0 or Q8_0 matrix
/// meets `x` quantised ([`crate::act`]: per 32-block int8, exact integer dot products),
/// split across threads by rows as [`matvec`] is; every other matrix, and [`ActType::F32`],
/// takes [`matvec`].
pub fn matvec_act(out: &mut [f32], w: &Tensor, x: &[f32], row: &mut Vec<f32>, a: ActType) {
    if a == ActType::F32 || !act::takes_q8(w.ty) {
        return matvec(out, w, x, row);
    }
    let xq = act::quantize(&x[..w.cols]);
    let rows = out.len().min(w.rows);
    match row_threads(rows, w.cols) {
        1 => act::matvec_rows(&mut out[..rows], 0, w, &xq),
        t => by_row_chunks(&mut out[..rows], t, |part, first| {
            act::matvec_rows(part, first, w, &xq)
        }),
    }
}

fn matvec_rows(out: &mut [f32], first: usize, w: &Tensor, x: &[f32], row: &mut [f32]) {
    for (r, o) in out.iter_mut().enumerate() {
        w.dequant_row(first + r, row);
        let mut acc = 0.0f32;
        for (a, b) in row.iter().zip(x) {
            acc += a * b;
        }
        *o = acc;
    }
}

/// Softmax in place: max, `exp(x - max)`, sum, divide (run.c's order).
pub fn softmax(x: &mut [f32]) {
    let Some(&first) = x.first() else { return };
    let mut max = first;
    for &v in &x[1..] {
        if v > max {
            max = v;
        }
    }
    let mut sum = 0.0f32;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in x.iter_mut() {
        *v /= sum;
    }
}

/// RoPE on adjacent pairs `(i, i+1)` of `q` (all of it) and `k` (its first `kv_dim`):
/// `freq = 1 / theta^((i mod head_size) / head_size)`, angle `pos · freq`.
pub fn rope(q: &mut [f32], k: &mut [f32], pos: usize, head_size: usize, theta: f32) {
    let kv_dim = k.len();
    for i in (0..q.len()).step_by(2) {
        let head_dim = i % head_size;
        let freq = 1.0 / theta.powf(head_dim as f32 / head_size as f32);
        let val = pos as f32 * freq;
        let (fcr, fci) = (val.cos(), val.sin());
        let rot = |v: &mut [f32]| {
            let (v0, v1) = (v[i], v[i + 1]);
            v[i] = v0 * fcr - v1 * fci;
            v[i + 1] = v0 * fci + v1 * fcr;
        };
        rot(q);
        if i < kv_dim {
            rot(k);
        }
    }
}

/// SiLU-gated product `h[i] = silu(g[i]) · u[i]`, `silu(v) = v · (1 / (1 + exp(-v)))`.
pub fn swiglu(h: &mut [f32], up: &[f32]) {
    for (g, &u) in h.iter_mut().zip(up) {
        let mut v = *g;
        v *= 1.0 / (1.0 + (-v).exp());
        v *= u;
        *g = v;
    }
}

/// Top-1 and top-2 of `logits` and their margin: the near-tie rule needs it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Margin {
    /// Argmax (lowest index on ties).
    pub top1: u32,
    /// Runner-up index (the lowest index among the rest on ties).
    pub top2: u32,
    /// `logit[top1] - logit[top2]` (0 on an exact tie).
    pub margin: f32,
}

/// Compute [`Margin`] of a non-empty logit vector (with one entry, top2 = top1, margin 0).
pub fn margin(logits: &[f32]) -> Margin {
    let mut t1 = 0usize;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[t1] {
            t1 = i;
        }
    }
    let mut t2: Option<usize> = None;
    for (i, &v) in logits.iter().enumerate() {
        if i != t1 && t2.is_none_or(|t| v > logits[t]) {
            t2 = Some(i);
        }
    }
    let t2 = t2.unwrap_or(t1);
    Margin {
        top1: t1 as u32,
        top2: t2 as u32,
        margin: logits[t1] - logits[t2],
    }
}

/// The CPU decoder state: weights (norm vectors dequantised once), KV cache and scratch.
pub struct CpuDecoder<'w> {
    cfg: Config,
    w: &'w Weights,
    attn_norm: Vec<Vec<f32>>,
    ffn_norm: Vec<Vec<f32>>,
    out_norm: Vec<f32>,
    max_seq: usize,
    x: Vec<f32>,
    xb: Vec<f32>,
    xb2: Vec<f32>,
    hb: Vec<f32>,
    hb2: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    att: Vec<f32>,
    row: Vec<f32>,
    key_cache: Vec<f32>,
    value_cache: Vec<f32>,
    kv: KvType,
    act: ActType,
    logits: Vec<f32>,
}

impl<'w> CpuDecoder<'w> {
    /// A decoder for `cfg`/`w` that can run up to `max_seq` positions, with an f32 KV cache
    /// (the reference path).
    pub fn new(cfg: &Config, w: &'w Weights, max_seq: usize) -> Self {
        Self::with_kv(cfg, w, max_seq, KvType::F32)
    }

    /// [`CpuDecoder::new`] with the KV cache stored as `kv_type`: with [`KvType::F16`] each key
    /// and value is rounded to f16 as it is stored ([`KvType::store`]), as an f16-KV GPU run
    /// stores it; everything else stays f32.
    pub fn with_kv(cfg: &Config, w: &'w Weights, max_seq: usize, kv_type: KvType) -> Self {
        Self::with_types(cfg, w, max_seq, kv_type, ActType::F32)
    }

    /// [`CpuDecoder::with_kv`] with the matvecs' activation type `act`: with [`ActType::Q8`]
    /// every Q4_0 and Q8_0 matvec quantises its input as a q8 GPU run does
    /// ([`matvec_act`]); everything else stays f32.
    pub fn with_types(
        cfg: &Config,
        w: &'w Weights,
        max_seq: usize,
        kv_type: KvType,
        act: ActType,
    ) -> Self {
        let (d, h, kv) = (cfg.dim, cfg.hidden_dim, cfg.kv_dim());
        let max_seq = max_seq.clamp(1, cfg.seq_len);
        CpuDecoder {
            cfg: cfg.clone(),
            w,
            attn_norm: w.layers.iter().map(|l| l.attn_norm.to_f32()).collect(),
            ffn_norm: w.layers.iter().map(|l| l.ffn_norm.to_f32()).collect(),
            out_norm: w.output_norm.to_f32(),
            max_seq,
            x: vec![0.0; d],
            xb: vec![0.0; d],
            xb2: vec![0.0; d],
            hb: vec![0.0; h],
            hb2: vec![0.0; h],
            q: vec![0.0; d],
            k: vec![0.0; kv],
            v: vec![0.0; kv],
            att: vec![0.0; cfg.n_heads * max_seq],
            row: Vec::new(),
            key_cache: vec![0.0; cfg.n_layers * max_seq * kv],
            value_cache: vec![0.0; cfg.n_layers * max_seq * kv],
            kv: kv_type,
            act,
            logits: vec![0.0; cfg.vocab_size],
        }
    }

    /// Positions this decoder can hold.
    pub fn max_seq(&self) -> usize {
        self.max_seq
    }

    /// How its KV cache stores keys and values.
    pub fn kv(&self) -> KvType {
        self.kv
    }

    /// What its quantised matvecs multiply against.
    pub fn act(&self) -> ActType {
        self.act
    }

    /// Run one token at `pos` (0-based, `< max_seq`) and return the logits.
    /// Panics if `token` or `pos` is out of range (callers validate user input first).
    pub fn forward(&mut self, token: u32, pos: usize) -> &mut [f32] {
        assert!(pos < self.max_seq && (token as usize) < self.cfg.vocab_size);
        let c = &self.cfg;
        let (d, kv, hs) = (c.dim, c.kv_dim(), c.head_size());
        let kv_mul = c.n_heads / c.n_kv_heads;
        self.w.token_embd.dequant_row(token as usize, &mut self.x);
        for (l, lw) in self.w.layers.iter().enumerate() {
            rmsnorm(&mut self.xb, &self.x, &self.attn_norm[l], c.norm_eps);
            matvec_act(&mut self.q, &lw.wq, &self.xb, &mut self.row, self.act);
            matvec_act(&mut self.k, &lw.wk, &self.xb, &mut self.row, self.act);
            matvec_act(&mut self.v, &lw.wv, &self.xb, &mut self.row, self.act);
            rope(&mut self.q, &mut self.k, pos, hs, c.rope_theta);
            let loff = l * self.max_seq * kv;
            let (kc, vc) = (
                &mut self.key_cache[loff + pos * kv..loff + (pos + 1) * kv],
                &mut self.value_cache[loff + pos * kv..loff + (pos + 1) * kv],
            );
            match self.kv {
                KvType::F32 => {
                    kc.copy_from_slice(&self.k);
                    vc.copy_from_slice(&self.v);
                }
                t => {
                    for (c, &x) in kc.iter_mut().zip(&self.k) {
                        *c = t.store(x);
                    }
                    for (c, &x) in vc.iter_mut().zip(&self.v) {
                        *c = t.store(x);
                    }
                }
            }
            let scale = (hs as f32).sqrt();
            for h in 0..c.n_heads {
                let q = &self.q[h * hs..(h + 1) * hs];
                let att = &mut self.att[h * self.max_seq..h * self.max_seq + pos + 1];
                let koff = (h / kv_mul) * hs;
                for (t, a) in att.iter_mut().enumerate() {
                    let k = &self.key_cache[loff + t * kv + koff..][..hs];
                    let mut score = 0.0f32;
                    for i in 0..hs {
                        score += q[i] * k[i];
                    }
                    *a = score / scale;
                }
                softmax(att);
                let xb = &mut self.xb[h * hs..(h + 1) * hs];
                xb.fill(0.0);
                for (t, &a) in att.iter().enumerate() {
                    let v = &self.value_cache[loff + t * kv + koff..][..hs];
                    for i in 0..hs {
                        xb[i] += a * v[i];
                    }
                }
            }
            matvec_act(&mut self.xb2, &lw.wo, &self.xb, &mut self.row, self.act);
            for i in 0..d {
                self.x[i] += self.xb2[i];
            }
            rmsnorm(&mut self.xb, &self.x, &self.ffn_norm[l], c.norm_eps);
            matvec_act(&mut self.hb, &lw.w_gate, &self.xb, &mut self.row, self.act);
            matvec_act(&mut self.hb2, &lw.w_up, &self.xb, &mut self.row, self.act);
            swiglu(&mut self.hb, &self.hb2);
            matvec_act(&mut self.xb, &lw.w_down, &self.hb, &mut self.row, self.act);
            for i in 0..d {
                self.x[i] += self.xb[i];
            }
        }
        rmsnorm(&mut self.xb, &self.x, &self.out_norm, c.norm_eps);
        matvec_act(
            &mut self.logits,
            self.w.classifier(),
            &self.xb,
            &mut self.row,
            self.act,
        );
        &mut self.logits
    }
}

impl crate::generate::Decode for CpuDecoder<'_> {
    fn max_seq(&self) -> usize {
        self.max_seq
    }

    fn forward(&mut self, token: u32, pos: usize) -> crate::Result<&mut [f32]> {
        if pos >= self.max_seq || token as usize >= self.cfg.vocab_size {
            return Err(crate::Error::Invalid(format!(
                "token {token} at position {pos} is outside vocab {} / context {}",
                self.cfg.vocab_size, self.max_seq
            )));
        }
        Ok(CpuDecoder::forward(self, token, pos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rmsnorm_of_constant_vector_is_the_weight() {
        let mut o = [0.0; 4];
        rmsnorm(&mut o, &[3.0; 4], &[1.0, 2.0, 3.0, 4.0], 0.0);
        assert_eq!(o, [1.0, 2.0, 3.0, 4.0]);
    }

    #[test]
    fn rope_at_position_zero_is_identity_and_rotates_adjacent_pairs() {
        let mut q = [1.0, 2.0, 3.0, 4.0];
        let mut k = [5.0, 6.0];
        rope(&mut q, &mut k, 0, 4, 10000.0);
        assert_eq!((q, k), ([1.0, 2.0, 3.0, 4.0], [5.0, 6.0]));
        let mut q = [1.0, 0.0, 1.0, 0.0];
        let mut k = [0.0, 1.0];
        rope(&mut q, &mut k, 1, 4, 10000.0);
        // Pair 0 has freq 1: rotated by 1 rad; pair 1 by 1/100 rad.
        assert!((q[0] - 1f32.cos()).abs() < 1e-6 && (q[1] - 1f32.sin()).abs() < 1e-6);
        assert!((q[2] - 0.01f32.cos()).abs() < 1e-6 && (q[3] - 0.01f32.sin()).abs() < 1e-6);
        assert!((k[0] + 1f32.sin()).abs() < 1e-6 && (k[1] - 1f32.cos()).abs() < 1e-6);
    }

    #[test]
    fn softmax_sums_to_one_and_keeps_order() {
        let mut x = [1.0, 3.0, 2.0];
        softmax(&mut x);
        assert!((x.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!(x[1] > x[2] && x[2] > x[0]);
    }

    #[test]
    fn margin_takes_lowest_index_on_ties() {
        let m = margin(&[1.0, 5.0, 5.0, 2.0]);
        assert_eq!((m.top1, m.top2, m.margin), (1, 2, 0.0));
        let m = margin(&[7.0, 1.0, 6.5]);
        assert_eq!((m.top1, m.top2, m.margin), (0, 2, 0.5));
        let m = margin(&[0.0, 9.0]);
        assert_eq!((m.top1, m.top2), (1, 0));
    }

    #[test]
    fn an_f16_kv_cache_stores_each_key_and_value_rounded_to_f16_and_moves_the_logits() {
        use crate::quant::GgmlType;
        use crate::synth::{self, Shape};
        let (mut cfg, tied) = Shape::Tiny.config();
        cfg.n_layers = 2;
        let model = synth::generate(&cfg, tied, GgmlType::F32, 3, |_, _| {}).unwrap();
        let (c, w) = (&model.config, &model.weights);
        let mut f32kv = CpuDecoder::new(c, w, 8);
        let mut f16kv = CpuDecoder::with_kv(c, w, 8, KvType::F16);
        assert_eq!((f32kv.kv(), f16kv.kv()), (KvType::F32, KvType::F16));
        let (a, b) = (f32kv.forward(1, 0).to_vec(), f16kv.forward(1, 0).to_vec());
        // Layer 0 at position 0 sees the same input in both: its cached keys and values are
        // the f32 ones rounded to f16, by hand (and not all of them were f16 already).
        let kv = c.kv_dim();
        for (i, (x, y)) in [
            (&f32kv.key_cache[..kv], &f16kv.key_cache[..kv]),
            (&f32kv.value_cache[..kv], &f16kv.value_cache[..kv]),
        ]
        .into_iter()
        .enumerate()
        {
            assert!(x.iter().any(|&v| v != 0.0));
            for (&x, &y) in x.iter().zip(y) {
                assert_eq!(
                    y.to_bits(),
                    half::f16::from_f32(x).to_f32().to_bits(),
                    "{i}"
                );
            }
            assert!(x.iter().zip(y).any(|(x, y)| x != y), "{i}: nothing rounded");
        }
        // The rounding reaches the logits (already at position 0 through layer 1's input).
        assert_ne!(a, b, "f16 KV gave the f32 logits");
        let (a, b) = (f32kv.forward(7, 1).to_vec(), f16kv.forward(7, 1).to_vec());
        let d2: f64 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| ((x - y) as f64).powi(2))
            .sum();
        let n2: f64 = a.iter().map(|x| (*x as f64).powi(2)).sum();
        let rel = (d2 / n2).sqrt();
        assert!(rel > 0.0 && rel < 1e-2, "rel-L2 {rel}");
    }

    #[test]
    fn swiglu_matches_definition() {
        let mut h = [0.0, 1.0, -2.0];
        swiglu(&mut h, &[1.0, 2.0, 3.0]);
        assert_eq!(h[0], 0.0);
        assert!((h[1] - 2.0 / (1.0 + (-1f32).exp())).abs() < 1e-6);
        assert!((h[2] - 3.0 * -2.0 / (1.0 + 2f32.exp())).abs() < 1e-6);
    }
}
