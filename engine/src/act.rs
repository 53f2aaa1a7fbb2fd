//! The q8 activation path's op definition ([`ActType::Q8`]): how a matvec's input vector is
//! quantised and how a quantised weight row meets it. The GPU kernel (`quant_act` and the
//! `ACT_Q8` dot products in shaders/decode.comp) quantises exactly this way and computes the
//! same block terms bit for bit; it adds a row's terms in its own fixed order (lane-strided,
//! then the subgroup sum, as the f32 path does), which the gate's tolerance covers. The CPU
//! reference calls this module when asked, so a q8 run is checked against a q8 reference.
//!
//! Quantisation, per block of 32 consecutive elements of the input vector:
//! - a block with a non-finite element: every quant 0, scale NaN (its terms are NaN, so the
//!   pass's logits are not finite and it fails, as the f32 path's would);
//! - `amax = max |x|` below 2^-100 (zero included): every quant 0, scale 0;
//! - else the scale is `2^e` for the least integer `e` with `amax · 2^-e ≤ 127`, and each
//!   quant is `x · 2^-e` rounded to nearest, ties to even (|q| ≤ 127).
//!
//! Every step is exact (a power-of-two scaling of a normal float, a comparison, a rounding to
//! an integer), so no two implementations can quantise differently — unlike `amax / 127` and
//! a division, whose rounding a GPU is free to loosen.
//!
//! A weight block meets its input blocks (one per 32 weights) through exact integer sums of
//! its integer quants `w_j` and the input's `q_j`, then a few f32 steps, each rounded as
//! written (no fused multiply-add on either side), the input block's `2^e` last:
//! - Q4_0, Q8_0: `s = Σ w_j · q_j` (Q4_0's `w` its nibbles minus 8, taken as
//!   `Σ n_j · q_j − 8 · Σ q_j`); term `(f32(s) · d) · 2^e`.
//! - Q5_0: the same with `w = q5 − 16`: term `(d · f32(s) + 0 · 0) · 2^e` (the shape below).
//! - Q4_1, Q5_1 (`d · n + m`): `s = Σ n_j · q_j`; term `(d · f32(s) + m · f32(Σ q_j)) · 2^e`.
//! - Q4_K, Q5_K, per sub-block of 32 (scale `sc`, min `mn`, both 6-bit):
//!   `(d · f32(sc · s) + (−dmin) · f32(mn · Σ q_j)) · 2^e`, `s = Σ n_j · q_j` (llama.cpp's
//!   `vec_dot_q4_K_q8_1` arranges the same sums).
//! - Q6_K, per sub-block of 32 (two halves of 16 with signed scales `sc0`, `sc1`):
//!   `(d · f32(sc0 · s0 + sc1 · s1) + 0 · 0) · 2^e`, `s_i = Σ (q − 32) · q_j` over half i.
//! - IQ4_XS, per sub-block of 32: `(d · f32((ls − 32) · s) + 0 · 0) · 2^e`,
//!   `s = Σ kvalues[n_j] · q_j`.
//! - IQ4_NL, per block of 32 (IQ4_XS's sub-block with the block's own f16 `d` as its scale):
//!   `(d · f32(s) + 0 · 0) · 2^e`, `s = Σ kvalues[n_j] · q_j`.
//!
//! Every integer above stays below 2^24, so each `f32(·)` is exact. A row's value is its terms
//! added in ascending block order in f32. F32, F16 and BF16 matrices have no int8 dot product:
//! they keep the f32 matvec here, and the GPU's q8 path refuses them by name.

pub use baro_telemetry::ActType;

use crate::model::types::Tensor;
use crate::quant::kquants::{scale_min_k4, KVALUES_IQ4NL};
use crate::quant::legacy::q5;
use crate::quant::{
    BlockIq4Nl, BlockIq4Xs, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K, BlockQ5_0, BlockQ5_1,
    BlockQ6K, BlockQ8_0, GgmlType, QK,
};
use half::f16;

/// One 32-element block of an input vector, quantised.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ActBlock {
    /// The quants: element j of the block is `q[j] · scale`.
    pub q: [i8; QK],
    /// `2^e`, 0 for a (near-)zero block, NaN for a block with a non-finite element.
    pub scale: f32,
    /// `Σ q[j]` (what a Q4_0 block's −8 offset needs).
    pub sum: i32,
}

/// Blocks at or below this `max |x|` quantise to zero: 2^-100 (their true contribution is
/// far below an f32 logit's last bit, and it keeps `2^-e` a normal float).
pub const ACT_MIN_AMAX: f32 = 7.888_609_e-31;

/// Quantise one block (exactly [`QK`] elements).
pub fn quantize_block(x: &[f32]) -> ActBlock {
    assert_eq!(x.len(), QK, "an activation block is {QK} elements");
    let mut b = ActBlock {
        q: [0; QK],
        scale: 0.0,
        sum: 0,
    };
    if x.iter().any(|v| !v.is_finite()) {
        b.scale = f32::NAN;
        return b;
    }
    let amax = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
    if amax < ACT_MIN_AMAX {
        return b;
    }
    // amax is a normal float in [2^(E-1), 2^E) with E = biased exponent − 126; e = E − 7
    // puts amax · 2^-e in [64, 128), and one more when that exceeds 127.
    let biased = (amax.to_bits() >> 23) as i32;
    let mut e = biased - 126 - 7;
    if amax * pow2(-e) > 127.0 {
        e += 1;
    }
    let inv = pow2(-e);
    b.scale = pow2(e);
    for (q, &v) in b.q.iter_mut().zip(x) {
        *q = (v * inv).round_ties_even() as i8;
        b.sum += *q as i32;
    }
    b
}

/// `2^k` for `-126 ≤ k ≤ 127`, exactly.
fn pow2(k: i32) -> f32 {
    debug_assert!((-126..=127).contains(&k));
    f32::from_bits(((127 + k) as u32) << 23)
}

/// Quantise a whole vector (its length a multiple of [`QK`]).
pub fn quantize(x: &[f32]) -> Vec<ActBlock> {
    assert!(
        x.len().is_multiple_of(QK),
        "a q8 activation is whole blocks of {QK}"
    );
    x.chunks_exact(QK).map(quantize_block).collect()
}

/// Whether a matrix of type `ty` meets a q8 input: every quantised type (llama.cpp's MMVQ
/// types); F32, F16 and BF16 keep the f32 matvec.
pub fn takes_q8(ty: GgmlType) -> bool {
    !matches!(ty, GgmlType::F32 | GgmlType::F16 | GgmlType::BF16)
}

/// Whether a model can run with q8 activations: every matrix a matvec reads (the layers'
/// seven and the classifier) must be of a type [`takes_q8`] — the GPU's q8 path has no int8
/// dot product for F32, F16 or BF16, and the CPU reference must not claim a q8 run it would
/// compute in f32. The error names the first matrix that is not.
pub fn check_q8_matrices(w: &crate::model::Weights) -> crate::Result<()> {
    match w
        .layers
        .iter()
        .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down])
        .chain([w.classifier()])
        .find(|t| !takes_q8(t.ty))
    {
        Some(t) => Err(crate::Error::Invalid(format!(
            "activations q8: every matrix must be of a quantised type (they meet int8 activations; F32, F16 and BF16 have no int8 dot product); {} is {}",
            t.name,
            t.ty.ggml_name()
        ))),
        None => Ok(()),
    }
}

/// What `--act` asks for: a fixed [`ActType`], or `auto`, which [`resolve_act`] turns into
/// one once the model and the backend are known. Only the choice can be `auto`: a decoder,
/// its run details, bench rows and the gate's reference always see the resolved [`ActType`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ActChoice {
    /// q8 where the model and the backend can run it ([`resolve_act`]), else f32: the
    /// CLI's default (llama.cpp's MMVQ also quantises activations by default).
    #[default]
    Auto,
    /// Always f32 (the reference path).
    F32,
    /// Always q8 (refused by name where it cannot run).
    Q8,
}

impl ActChoice {
    /// Every choice, in the order the CLI lists them.
    pub const ALL: [ActChoice; 3] = [ActChoice::Auto, ActChoice::F32, ActChoice::Q8];

    /// The name the CLI uses (`auto`, `f32`, `q8`).
    pub fn name(self) -> &'static str {
        match self {
            ActChoice::Auto => "auto",
            ActChoice::F32 => ActType::F32.name(),
            ActChoice::Q8 => ActType::Q8.name(),
        }
    }

    /// Parse a name exactly as [`ActChoice::name`] writes it; anything else is refused with a
    /// message naming the accepted values.
    pub fn parse(s: &str) -> Result<ActChoice, String> {
        ActChoice::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                format!(
                    "activation type '{s}': expected one of {}",
                    ActChoice::ALL.map(|k| k.name()).join(", ")
                )
            })
    }

    /// The fixed type asked for; `None` for `auto`.
    pub fn fixed(self) -> Option<ActType> {
        match self {
            ActChoice::Auto => None,
            ActChoice::F32 => Some(ActType::F32),
            ActChoice::Q8 => Some(ActType::Q8),
        }
    }
}

impl From<ActType> for ActChoice {
    fn from(t: ActType) -> Self {
        match t {
            ActType::F32 => ActChoice::F32,
            ActType::Q8 => ActChoice::Q8,
        }
    }
}

impl std::fmt::Display for ActChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for ActChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        ActChoice::parse(s)
    }
}

/// What a backend can run, as far as the activation type and the KV cache's storage go: the
/// device's half of the q8 rule (the model's half is [`check_q8_matrices`]) and of
/// [`crate::kv::resolve_kv`]'s.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ActCaps {
    /// The backend runs the q8 path: the CPU reference always; a Vulkan device where
    /// [`crate::vulkan::decoder::check_q8_device`] passes (the check that refuses an explicit q8
    /// run there; `ActCaps::of` lives beside it, so this module does not depend on the decoder).
    pub q8: bool,
    /// The backend stores an f16 KV cache: the CPU reference always; a Vulkan device with
    /// `storageBuffer16BitAccess` (what refuses an explicit `--kv f16` there).
    pub kv16: bool,
}

impl ActCaps {
    /// The CPU reference ([`crate::reference::CpuDecoder`]): it computes q8 and rounds its cache
    /// to f16 on any host.
    pub const CPU_REFERENCE: ActCaps = ActCaps {
        q8: true,
        kv16: true,
    };
}

/// An activation type as runs report it: `q8`, or `q8 (auto)` where `--act auto` chose it.
pub fn act_words(act: ActType, auto: bool) -> String {
    baro_telemetry::run::auto_words(act, auto)
}

/// The activation type a run takes for `choice` on the model `w` and a backend that can do
/// `caps`: a fixed choice as asked (an explicit q8 that cannot run is refused where the
/// decoder is built, by name, not turned into f32 here); `auto` is q8 where every matrix the
/// decoder multiplies is quantised ([`check_q8_matrices`]) and the backend can run q8, else
/// f32 (stories260K, whose matrices are F32, stays on the reference path and its goldens).
pub fn resolve_act(choice: ActChoice, w: &crate::model::Weights, caps: ActCaps) -> ActType {
    match choice.fixed() {
        Some(t) => t,
        None if caps.q8 && check_q8_matrices(w).is_ok() => ActType::Q8,
        None => ActType::F32,
    }
}

/// `Σ w_j · q_j` over a run of integer weights and the input quants beside them.
fn idot(w: &[i32], q: &[i8]) -> i32 {
    w.iter().zip(q).map(|(&a, &b)| a * b as i32).sum()
}

/// A block's term from its integer sums: `(d · f32(a) + m · f32(b)) · 2^e` (the shader's
/// `q8_term`, every step rounded as written).
fn term(d: f32, a: i32, m: f32, b: i32, x: &ActBlock) -> f32 {
    (d * a as f32 + m * b as f32) * x.scale
}

/// The 32 nibbles of a Q4_0/Q4_1 block in element order (low nibbles first).
fn nibbles(qs: &[u8; QK / 2]) -> [i32; QK] {
    std::array::from_fn(|j| i32::from(if j < 16 { qs[j] & 15 } else { qs[j - 16] >> 4 }))
}

/// Weight block `wb` (`ty`'s bytes) against its input blocks `x` (one per 32 weights): its
/// terms added to `acc` in ascending order.
fn block_terms(ty: GgmlType, wb: &[u8], x: &[ActBlock], acc: &mut f32) {
    let d16 = |h: f16| h.to_f32();
    match ty {
        GgmlType::Q4_0 => {
            let b = BlockQ4_0::read(wb);
            let s = idot(&nibbles(&b.qs), &x[0].q) - 8 * x[0].sum;
            *acc += (s as f32 * d16(b.d)) * x[0].scale;
        }
        GgmlType::Q8_0 => {
            let b = BlockQ8_0::read(wb);
            let w: [i32; QK] = std::array::from_fn(|j| i32::from(b.qs[j]));
            *acc += (idot(&w, &x[0].q) as f32 * d16(b.d)) * x[0].scale;
        }
        GgmlType::Q4_1 => {
            let b = BlockQ4_1::read(wb);
            let s = idot(&nibbles(&b.qs), &x[0].q);
            *acc += term(d16(b.d), s, d16(b.m), x[0].sum, &x[0]);
        }
        GgmlType::Q5_0 => {
            let b = BlockQ5_0::read(wb);
            let qh = u32::from_le_bytes(b.qh);
            let w: [i32; QK] = std::array::from_fn(|j| q5(&b.qs, qh, j) as i32);
            let s = idot(&w, &x[0].q) - 16 * x[0].sum;
            *acc += term(d16(b.d), s, 0.0, 0, &x[0]);
        }
        GgmlType::Q5_1 => {
            let b = BlockQ5_1::read(wb);
            let qh = u32::from_le_bytes(b.qh);
            let w: [i32; QK] = std::array::from_fn(|j| q5(&b.qs, qh, j) as i32);
            *acc += term(d16(b.d), idot(&w, &x[0].q), d16(b.m), x[0].sum, &x[0]);
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            // Q4_K as a Q5_K without fifth bits.
            let b = if ty == GgmlType::Q4_K {
                let k = BlockQ4K::read(wb);
                BlockQ5K {
                    d: k.d,
                    dmin: k.dmin,
                    scales: k.scales,
                    qh: [0; 32],
                    qs: k.qs,
                }
            } else {
                BlockQ5K::read(wb)
            };
            for (s, xb) in x.iter().enumerate() {
                let (sc, mn) = scale_min_k4(s, &b.scales);
                let w: [i32; QK] = std::array::from_fn(|l| {
                    let n = b.qs[32 * (s / 2) + l] >> (4 * (s % 2)) & 15;
                    i32::from(n | ((b.qh[l] >> s) & 1) << 4)
                });
                let a = i32::from(sc) * idot(&w, &xb.q);
                *acc += term(d16(b.d), a, -d16(b.dmin), i32::from(mn) * xb.sum, xb);
            }
        }
        GgmlType::Q6_K => {
            let b = BlockQ6K::read(wb);
            for (j, xb) in x.iter().enumerate() {
                let (h, g) = (j / 4, j % 4);
                let w: [i32; QK] = std::array::from_fn(|l| {
                    let lo = b.ql[64 * h + l + 32 * (g & 1)] >> (4 * (g / 2)) & 15;
                    let hi = (b.qh[32 * h + l] >> (2 * g)) & 3;
                    i32::from(lo | hi << 4) - 32
                });
                let (s0, s1) = (idot(&w[..16], &xb.q[..16]), idot(&w[16..], &xb.q[16..]));
                let a = i32::from(b.scales[2 * j]) * s0 + i32::from(b.scales[2 * j + 1]) * s1;
                *acc += term(d16(b.d), a, 0.0, 0, xb);
            }
        }
        GgmlType::IQ4_XS => {
            let b = BlockIq4Xs::read(wb);
            for (s, xb) in x.iter().enumerate() {
                let w: [i32; QK] = std::array::from_fn(|j| {
                    let n = if j < 16 {
                        b.qs[16 * s + j] & 15
                    } else {
                        b.qs[16 * s + j - 16] >> 4
                    };
                    i32::from(KVALUES_IQ4NL[n as usize])
                });
                let a = (i32::from(b.ls(s)) - 32) * idot(&w, &xb.q);
                *acc += term(d16(b.d), a, 0.0, 0, xb);
            }
        }
        GgmlType::IQ4_NL => {
            let b = BlockIq4Nl::read(wb);
            let w: [i32; QK] =
                std::array::from_fn(|j| i32::from(KVALUES_IQ4NL[b.nibble(j) as usize]));
            *acc += term(d16(b.d), idot(&w, &x[0].q), 0.0, 0, &x[0]);
        }
        GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => {
            unreachable!("takes_q8 decides which matrices come here")
        }
    }
}

/// `out[r]` = row `first + r` of `w` (a type [`takes_q8`] accepts) against `x`: every
/// block's terms in ascending order ([`block_terms`]).
pub fn matvec_rows(out: &mut [f32], first: usize, w: &Tensor, x: &[ActBlock]) {
    let bb = w.ty.block_bytes();
    let rb = w.row_bytes();
    let per = w.ty.block_len() / QK;
    assert_eq!(x.len() * QK, w.cols, "{}: input length", w.name);
    for (r, o) in out.iter_mut().enumerate() {
        let row = &w.data[(first + r) * rb..(first + r + 1) * rb];
        let mut acc = 0.0f32;
        for (wb, xb) in row.chunks_exact(bb).zip(x.chunks_exact(per)) {
            block_terms(w.ty, wb, xb, &mut acc);
        }
        *o = acc;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::quantize as quantize_weights;

    fn block(f: impl Fn(usize) -> f32) -> Vec<f32> {
        (0..QK).map(f).collect()
    }

    #[test]
    fn the_block_scale_is_the_least_power_of_two_that_keeps_every_quant_within_127() {
        for amax in [
            1.0f32, 127.0, 127.5, 128.0, 0.3, 1e-20, 3.0e38, 63.9, 254.0, 254.1,
        ] {
            let x = block(|j| {
                if j == 7 {
                    -amax
                } else {
                    amax * (j as f32 / 64.0)
                }
            });
            let b = quantize_block(&x);
            let e = b.scale.log2();
            assert_eq!(e, e.round(), "scale {} is a power of two", b.scale);
            assert!(
                amax / b.scale <= 127.0,
                "amax {amax}: {} > 127",
                amax / b.scale
            );
            assert!(
                amax / (b.scale / 2.0) > 127.0,
                "amax {amax}: 2^(e-1) would do"
            );
            assert_eq!(
                b.q[7] as f32,
                -(amax / b.scale).round_ties_even(),
                "amax {amax}"
            );
            assert_eq!(b.sum, b.q.iter().map(|&q| q as i32).sum::<i32>());
        }
    }

    #[test]
    fn quants_round_half_to_even_and_zero_and_non_finite_blocks_are_marked() {
        // Scale 1 (amax 100): 2.5 → 2, 3.5 → 4, -2.5 → -2.
        let x = block(|j| [100.0, 2.5, 3.5, -2.5][j % 4]);
        let b = quantize_block(&x);
        assert_eq!(b.scale, 1.0);
        assert_eq!(&b.q[..4], &[100, 2, 4, -2]);
        let z = quantize_block(&[0.0; QK]);
        assert_eq!((z.scale, z.sum, z.q), (0.0, 0, [0; QK]));
        let tiny = quantize_block(&block(|_| 1e-31));
        assert_eq!((tiny.scale, tiny.q), (0.0, [0; QK]));
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            let b = quantize_block(&block(|j| if j == 3 { bad } else { 1.0 }));
            assert!(b.scale.is_nan() && b.q == [0; QK], "{bad}");
        }
    }

    #[test]
    fn a_q8_matvec_is_the_integer_dot_scaled_and_stays_within_a_percent_of_f32() {
        // Deterministic pseudo-random weights and input with a few outliers.
        let (rows, cols) = (48usize, 256usize);
        let mut s = 0x2545_f491_u32;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s as f32 / u32::MAX as f32) * 2.0 - 1.0
        };
        let w: Vec<f32> = (0..rows * cols).map(|_| rnd() * 0.05).collect();
        let x: Vec<f32> = (0..cols)
            .map(|j| rnd() * if j % 61 == 0 { 20.0 } else { 1.0 })
            .collect();
        let xq = quantize(&x);
        for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::IQ4_NL] {
            let mut bytes = Vec::new();
            quantize_weights(ty, &w, &mut bytes).unwrap();
            let t = Tensor::new("w", ty, rows, cols, crate::blob::Blob::owned(bytes)).unwrap();
            let mut q8 = vec![0.0; rows];
            matvec_rows(&mut q8, 0, &t, &xq);
            // The same sum written out from the dequantised values: f32 products of the
            // dequantised weight and activation, per block, differ from the integer form only
            // by rounding.
            let wf = t.to_f32();
            let (mut num, mut den) = (0.0f64, 0.0f64);
            for r in 0..rows {
                let mut exact = 0.0f64;
                let mut f32ref = 0.0f64;
                for j in 0..cols {
                    let b = &xq[j / QK];
                    exact += wf[r * cols + j] as f64 * (b.q[j % QK] as f64 * b.scale as f64);
                    f32ref += wf[r * cols + j] as f64 * x[j] as f64;
                }
                assert!(
                    (q8[r] as f64 - exact).abs() <= 1e-5 * (1.0 + exact.abs()),
                    "{ty} row {r}: {} vs {exact}",
                    q8[r]
                );
                num += (q8[r] as f64 - f32ref).powi(2);
                den += f32ref.powi(2);
            }
            let rel = (num / den).sqrt();
            assert!(rel > 0.0 && rel < 0.03, "{ty}: rel-L2 against f32 {rel}");
        }
    }

    /// A small model of the tiny shape (dims of whole 256-element super-blocks, so a K-quant
    /// mix keeps its K types), matrices as `quant`.
    fn model(quant: impl Into<crate::model::Quant>, tied: bool) -> crate::model::Model {
        let (mut cfg, _) = crate::synth::Shape::Tiny.config();
        cfg.dim = 256;
        cfg.hidden_dim = 512;
        cfg.n_layers = 2;
        crate::synth::generate(&cfg, tied, quant, 7, |_, _| {}).unwrap()
    }

    const Q8_DEVICE: ActCaps = ActCaps {
        q8: true,
        kv16: true,
    };
    const NO_INT_DOT: ActCaps = ActCaps {
        q8: false,
        kv16: true,
    };

    #[test]
    fn auto_resolves_to_q8_on_an_all_q4_0_model_and_a_q4_k_m_mix() {
        let q4 = model(GgmlType::Q4_0, true);
        assert_eq!(
            resolve_act(ActChoice::Auto, &q4.weights, Q8_DEVICE),
            ActType::Q8
        );
        let km = model(crate::model::Quant::Mix(crate::model::KMix::Q4KM), false);
        let tys: Vec<GgmlType> = km.weights.tensors().iter().map(|t| t.ty).collect();
        assert!(
            tys.contains(&GgmlType::Q4_K) && tys.contains(&GgmlType::Q6_K),
            "a K-quant mix: {tys:?}"
        );
        assert_eq!(
            resolve_act(ActChoice::Auto, &km.weights, Q8_DEVICE),
            ActType::Q8
        );
        // The CPU reference always runs q8.
        assert_eq!(
            resolve_act(ActChoice::Auto, &km.weights, ActCaps::CPU_REFERENCE),
            ActType::Q8
        );
    }

    #[test]
    fn auto_resolves_to_f32_where_any_multiplied_matrix_is_f32_f16_or_bf16() {
        for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
            let m = model(ty, true);
            assert_eq!(
                resolve_act(ActChoice::Auto, &m.weights, Q8_DEVICE),
                ActType::F32,
                "{ty}"
            );
            // One such matrix among quantised ones is enough (the rule check_q8_matrices
            // enforces for an explicit q8).
            let mut m = model(GgmlType::Q4_0, false);
            m.weights.layers[1].w_down = m.weights.layers[1].w_down.convert(ty).unwrap();
            assert!(check_q8_matrices(&m.weights).is_err());
            assert_eq!(
                resolve_act(ActChoice::Auto, &m.weights, Q8_DEVICE),
                ActType::F32,
                "w_down {ty}"
            );
            // An untied classifier counts too.
            let mut m = model(GgmlType::Q4_0, false);
            let out = m.weights.output.take().unwrap().convert(ty).unwrap();
            m.weights.output = Some(out);
            assert_eq!(
                resolve_act(ActChoice::Auto, &m.weights, Q8_DEVICE),
                ActType::F32,
                "classifier {ty}"
            );
        }
        // The embedding of an untied model is a lookup, not a matvec: it does not count.
        let mut m = model(GgmlType::Q4_0, false);
        m.weights.token_embd = m.weights.token_embd.convert(GgmlType::F16).unwrap();
        assert_eq!(
            resolve_act(ActChoice::Auto, &m.weights, Q8_DEVICE),
            ActType::Q8
        );
    }

    #[test]
    fn auto_resolves_to_f32_on_a_device_without_the_integer_dot_product() {
        let q4 = model(GgmlType::Q4_0, true);
        assert_eq!(
            resolve_act(ActChoice::Auto, &q4.weights, NO_INT_DOT),
            ActType::F32
        );
    }

    #[test]
    fn explicit_f32_and_q8_resolve_as_asked_whatever_the_model_and_device() {
        let (q4, f32m) = (model(GgmlType::Q4_0, true), model(GgmlType::F32, true));
        for caps in [Q8_DEVICE, NO_INT_DOT] {
            for w in [&q4.weights, &f32m.weights] {
                assert_eq!(resolve_act(ActChoice::F32, w, caps), ActType::F32);
                // Refused where the decoder is built, by name: never turned into f32 here.
                assert_eq!(resolve_act(ActChoice::Q8, w, caps), ActType::Q8);
            }
        }
    }

    #[test]
    fn act_choices_round_trip_and_anything_else_is_refused_listing_auto_f32_q8() {
        for c in ActChoice::ALL {
            assert_eq!(ActChoice::parse(c.name()), Ok(c));
            assert_eq!(c.to_string().parse::<ActChoice>(), Ok(c));
        }
        for t in ActType::ALL {
            assert_eq!(ActChoice::from(t).fixed(), Some(t));
        }
        assert_eq!(ActChoice::Auto.fixed(), None);
        assert_eq!(ActChoice::default(), ActChoice::Auto);
        for bad in ["bogus", "AUTO", "Q8", "", "f16"] {
            let e = ActChoice::parse(bad).unwrap_err();
            assert!(e.contains("auto, f32, q8"), "{e}");
        }
    }

    #[test]
    fn a_device_without_integer_dot_or_with_odd_subgroups_has_no_q8() {
        let mut info = crate::vulkan::DeviceInfo {
            index: 0,
            name: "test".into(),
            kind: crate::vulkan::DeviceKind::Discrete,
            vendor_id: 0,
            driver: String::new(),
            api: "1.3.0".into(),
            subgroup_size: 32,
            subgroup_arith: true,
            device_clock: true,
            memory_model: true,
            storage_array_indexing: true,
            storage_16bit: true,
            integer_dot: true,
            pipeline_stats: false,
            pipeline_robustness: false,
            storage_checked_by_default: None,
            sm_count: None,
            max_storage_range: 1 << 30,
            storage_align: 16,
            max_shared: 49152,
            max_wg: 1024,
            timestamp_period: 1.0,
            calibrated_timestamps: false,
            queue_family: 0,
            timestamp_bits: 64,
        };
        assert_eq!(ActCaps::of(&info), Q8_DEVICE);
        info.integer_dot = false;
        assert_eq!(ActCaps::of(&info), NO_INT_DOT);
        info.integer_dot = true;
        info.subgroup_size = 4;
        assert_eq!(ActCaps::of(&info), NO_INT_DOT);
    }
}
