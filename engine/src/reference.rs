//! The CPU reference decoder: plain f32, one thread, every op written once, in the exact
//! operation order of llama2.c's run.c, so its logits match run.c's bit for bit on f32 weights
//! and seeded sampling reproduces run.c's text.
//!
//! The architectures' optional parts are ops here too, each defined once: biases
//! ([`add_bias`]), per-head q/k RMSNorm ([`head_rmsnorm`]), RoPE by pairing style with
//! llama3 frequency factors and linear scaling ([`rope_factors`], [`rope`]), applied in
//! llama.cpp's order: projection, bias, norm, RoPE.
//!
//! Quantised weights are dequantised row by row to f32 (ggml's block definitions in
//! [`crate::quant`]) and then used exactly like f32 weights.
//!
//! This module must never be "optimised" in a way that changes a single rounding: it is the
//! definition every GPU path is checked against.

use crate::act::{self, ActType};
use crate::kv::KvType;
use crate::model::types::{Config, RopeStyle, Tensor, Weights};
use crate::sampler::softmax;

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

/// [`matvec`] with the activation type `act`: with [`ActType::Q8`] a quantised matrix
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

/// RoPE rotation factors of position `pos`: for pair i of a head (0 ≤ i < head_size/2),
/// `out[2i] = cos θ_i`, `out[2i+1] = sin θ_i` with
///
/// ```text
/// ω_i = 1 / theta^((2i) / head_size)          (f32 powf, then one division; run.c's order)
/// θ_i = (1 / rope_scale) · ((pos · ω_i) / f_i)  (ggml's freq_scale and freq_factors)
/// ```
///
/// `f_i` is `rope_freqs[i]` (llama3 rope scaling) or 1, `rope_scale` the linear scaling
/// factor (1 without scaling). Dividing by 1 and multiplying by 1 are exact, so without
/// factors and scaling the angle is run.c's `pos · ω_i` bit for bit. Computed once on the host
/// (the GPU reads the same values from its rope table), so the scaling costs the kernel
/// nothing and both decoders rotate by identical factors.
pub fn rope_factors(cfg: &Config, rope_freqs: Option<&[f32]>, pos: usize, out: &mut [f32]) {
    let hs = cfg.head_size();
    let inv_scale = 1.0 / cfg.rope_scale;
    for (i, cs) in out[..hs / 2 * 2].chunks_exact_mut(2).enumerate() {
        let freq = 1.0 / cfg.rope_theta.powf((2 * i) as f32 / hs as f32);
        let ff = rope_freqs.and_then(|f| f.get(i)).copied().unwrap_or(1.0);
        let val = inv_scale * ((pos as f32 * freq) / ff);
        cs[0] = val.cos();
        cs[1] = val.sin();
    }
}

/// RoPE of every head of `x` (heads of `head_size` elements, back to back): pair i of a head,
/// elements `(a, b) = style.pair(i)` ([`RopeStyle::Normal`]: `(2i, 2i+1)`; NEOX: `(i, i +
/// head_size/2)`), becomes `(a·c - b·s, a·s + b·c)` with `c, s = cs[2i], cs[2i+1]`
/// ([`rope_factors`]).
pub fn rope(x: &mut [f32], head_size: usize, style: RopeStyle, cs: &[f32]) {
    for head in x.chunks_exact_mut(head_size) {
        for i in 0..head_size / 2 {
            let (a, b) = style.pair(i, head_size);
            let (fcr, fci) = (cs[2 * i], cs[2 * i + 1]);
            let (v0, v1) = (head[a], head[b]);
            head[a] = v0 * fcr - v1 * fci;
            head[b] = v0 * fci + v1 * fcr;
        }
    }
}

/// Per-head RMSNorm (qwen3's q/k norm): every head of `x` (heads of `w.len()` elements)
/// becomes [`rmsnorm`] of itself with weight `w`.
pub fn head_rmsnorm(x: &mut [f32], w: &[f32], eps: f32, scratch: &mut Vec<f32>) {
    scratch.resize(w.len(), 0.0);
    for head in x.chunks_exact_mut(w.len()) {
        rmsnorm(scratch, head, w, eps);
        head.copy_from_slice(scratch);
    }
}

/// `x[i] += b[i]`: a projection's bias (qwen2's q/k/v).
pub fn add_bias(x: &mut [f32], b: &[f32]) {
    for (x, &b) in x.iter_mut().zip(b) {
        *x += b;
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
    /// Per layer: q, k, v biases and q, k norm weights as f32 (empty where absent).
    extras: Vec<[Vec<f32>; 5]>,
    rope_freqs: Option<Vec<f32>>,
    rope_cs: Vec<f32>,
    att_out: Vec<f32>,
    scratch: Vec<f32>,
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
    /// every quantised matvec ([`act::takes_q8`]) quantises its input as a q8 GPU run does
    /// ([`matvec_act`]); everything else stays f32.
    pub fn with_types(
        cfg: &Config,
        w: &'w Weights,
        max_seq: usize,
        kv_type: KvType,
        act: ActType,
    ) -> Self {
        let (d, h, kv, qd) = (cfg.dim, cfg.hidden_dim, cfg.kv_dim(), cfg.q_dim());
        let max_seq = max_seq.clamp(1, cfg.seq_len);
        let f32v = |t: &Option<Tensor>| t.as_ref().map(Tensor::to_f32).unwrap_or_default();
        CpuDecoder {
            cfg: cfg.clone(),
            w,
            attn_norm: w.layers.iter().map(|l| l.attn_norm.to_f32()).collect(),
            ffn_norm: w.layers.iter().map(|l| l.ffn_norm.to_f32()).collect(),
            out_norm: w.output_norm.to_f32(),
            extras: w
                .layers
                .iter()
                .map(|l| {
                    [
                        f32v(&l.q_bias),
                        f32v(&l.k_bias),
                        f32v(&l.v_bias),
                        f32v(&l.q_norm),
                        f32v(&l.k_norm),
                    ]
                })
                .collect(),
            rope_freqs: w.rope_factors(),
            rope_cs: vec![0.0; cfg.head_size()],
            att_out: vec![0.0; qd],
            scratch: Vec::new(),
            max_seq,
            x: vec![0.0; d],
            xb: vec![0.0; d],
            xb2: vec![0.0; d],
            hb: vec![0.0; h],
            hb2: vec![0.0; h],
            q: vec![0.0; qd],
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
        rope_factors(c, self.rope_freqs.as_deref(), pos, &mut self.rope_cs);
        self.w.token_embd.dequant_row(token as usize, &mut self.x);
        for (l, lw) in self.w.layers.iter().enumerate() {
            rmsnorm(&mut self.xb, &self.x, &self.attn_norm[l], c.norm_eps);
            matvec_act(&mut self.q, &lw.wq, &self.xb, &mut self.row, self.act);
            matvec_act(&mut self.k, &lw.wk, &self.xb, &mut self.row, self.act);
            matvec_act(&mut self.v, &lw.wv, &self.xb, &mut self.row, self.act);
            // The optional parts, in llama.cpp's order: biases, per-head q/k norms, RoPE.
            let [qb, kb, vb, qn, kn] = &self.extras[l];
            add_bias(&mut self.q, qb);
            add_bias(&mut self.k, kb);
            add_bias(&mut self.v, vb);
            if !qn.is_empty() {
                head_rmsnorm(&mut self.q, qn, c.norm_eps, &mut self.scratch);
            }
            if !kn.is_empty() {
                head_rmsnorm(&mut self.k, kn, c.norm_eps, &mut self.scratch);
            }
            rope(&mut self.q, hs, c.rope_style(), &self.rope_cs);
            rope(&mut self.k, hs, c.rope_style(), &self.rope_cs);
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
                let xb = &mut self.att_out[h * hs..(h + 1) * hs];
                xb.fill(0.0);
                for (t, &a) in att.iter().enumerate() {
                    let v = &self.value_cache[loff + t * kv + koff..][..hs];
                    for i in 0..hs {
                        xb[i] += a * v[i];
                    }
                }
            }
            matvec_act(
                &mut self.xb2,
                &lw.wo,
                &self.att_out,
                &mut self.row,
                self.act,
            );
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

    /// A one-head-of-4 shape (theta 10000): pair 0 has frequency 1, pair 1 1/100.
    fn four() -> Config {
        let (mut c, _) = crate::synth::Shape::Tiny.config();
        c.head_dim = Some(4);
        c
    }

    fn close(a: f32, b: f32) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn rope_at_position_zero_is_identity_and_rotates_adjacent_pairs() {
        let c = four();
        let mut cs = [0.0; 4];
        rope_factors(&c, None, 0, &mut cs);
        let mut q = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0];
        rope(&mut q, 4, RopeStyle::Normal, &cs);
        assert_eq!(q, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
        rope_factors(&c, None, 1, &mut cs);
        let mut q = [1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0];
        rope(&mut q, 4, RopeStyle::Normal, &cs);
        // Pair 0 has freq 1: rotated by 1 rad; pair 1 by 1/100 rad; the second head alike.
        assert!(close(q[0], 1f32.cos()) && close(q[1], 1f32.sin()));
        assert!(close(q[2], 0.01f32.cos()) && close(q[3], 0.01f32.sin()));
        assert!(close(q[4], -1f32.sin()) && close(q[5], 1f32.cos()));
    }

    #[test]
    fn neox_rope_rotates_element_i_with_element_i_plus_half_a_head() {
        let c = four();
        let mut cs = [0.0; 4];
        rope_factors(&c, None, 1, &mut cs);
        // Pair 0 is elements (0, 2) at 1 rad, pair 1 elements (1, 3) at 1/100 rad.
        let mut q = [1.0, 1.0, 0.0, 0.0];
        rope(&mut q, 4, RopeStyle::Neox, &cs);
        assert!(close(q[0], 1f32.cos()) && close(q[2], 1f32.sin()), "{q:?}");
        assert!(
            close(q[1], 0.01f32.cos()) && close(q[3], 0.01f32.sin()),
            "{q:?}"
        );
    }

    #[test]
    fn rope_factors_divide_each_pairs_angle_and_linear_scaling_divides_all() {
        let mut c = four();
        let mut cs = [0.0; 4];
        // llama3 factors: pair 0 divided by 1, pair 1 by 8.
        rope_factors(&c, Some(&[1.0, 8.0]), 3, &mut cs);
        assert!(close(cs[0], 3f32.cos()) && close(cs[1], 3f32.sin()));
        assert!(close(cs[2], 0.00375f32.cos()) && close(cs[3], 0.00375f32.sin()));
        // Linear factor 2: every angle halved.
        c.rope_scale = 2.0;
        rope_factors(&c, None, 3, &mut cs);
        assert!(close(cs[0], 1.5f32.cos()) && close(cs[1], 1.5f32.sin()));
        assert!(close(cs[2], 0.015f32.cos()) && close(cs[3], 0.015f32.sin()));
        // Factors of 1 and no scaling: the plain angles, bit for bit.
        c.rope_scale = 1.0;
        let (mut a, mut b) = ([0.0; 4], [0.0; 4]);
        rope_factors(&c, None, 77, &mut a);
        rope_factors(&c, Some(&[1.0, 1.0]), 77, &mut b);
        assert_eq!(a.map(f32::to_bits), b.map(f32::to_bits));
        let freq1 = 1.0 / 10000f32.powf(0.5);
        assert_eq!(a[2].to_bits(), (77.0 * freq1).cos().to_bits());
    }

    #[test]
    fn head_rmsnorm_normalises_each_head_on_its_own() {
        let mut x = [3.0, 3.0, 1.0, -1.0];
        let mut s = Vec::new();
        head_rmsnorm(&mut x, &[1.0, 2.0], 0.0, &mut s);
        assert_eq!(x, [1.0, 2.0, 1.0, -2.0]);
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
