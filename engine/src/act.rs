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
//! A weight block (Q4_0 or Q8_0, 32 elements, f16 scale `d`) against a quantised input block:
//! `s = Σ w_j · q_j` over the integer quants (Q4_0's are its nibbles minus 8, taken as
//! `Σ n_j · q_j − 8 · Σ q_j`), exact in 32-bit integers; its term is `(f32(s) · d) · 2^e`;
//! a row's value is its terms added in ascending block order in f32.

pub use baro_telemetry::ActType;

use crate::model::types::Tensor;
use crate::quant::{GgmlType, QK};
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

/// Whether a matrix of type `ty` meets a q8 input (the others keep the f32 matvec).
pub fn takes_q8(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q8_0)
}

/// The exact integer dot product of weight block `wb` (`ty`'s block bytes) with `xb`, and
/// the weight block's scale.
fn block_dot(ty: GgmlType, wb: &[u8], xb: &ActBlock) -> (i32, f32) {
    let d = f16::from_le_bytes([wb[0], wb[1]]).to_f32();
    let qs = &wb[2..];
    let mut s = 0i32;
    match ty {
        GgmlType::Q4_0 => {
            let (lo, hi) = xb.q.split_at(QK / 2);
            for ((&w, &a), &b) in qs[..QK / 2].iter().zip(lo).zip(hi) {
                s += (w & 15) as i32 * a as i32 + (w >> 4) as i32 * b as i32;
            }
            s -= 8 * xb.sum;
        }
        GgmlType::Q8_0 => {
            for (&w, &a) in qs[..QK].iter().zip(&xb.q) {
                s += w as i8 as i32 * a as i32;
            }
        }
        _ => unreachable!("takes_q8 decides which matrices come here"),
    }
    (s, d)
}

/// `out[r] = Σ_b (f32(s_rb) · d_rb) · scale_b` for rows `first..first + out.len()` of `w`
/// (Q4_0 or Q8_0), blocks in ascending order.
pub fn matvec_rows(out: &mut [f32], first: usize, w: &Tensor, x: &[ActBlock]) {
    let bb = w.ty.block_bytes();
    let rb = w.row_bytes();
    assert_eq!(x.len() * QK, w.cols, "{}: input length", w.name);
    for (r, o) in out.iter_mut().enumerate() {
        let row = &w.data[(first + r) * rb..(first + r + 1) * rb];
        let mut acc = 0.0f32;
        for (wb, xb) in row.chunks_exact(bb).zip(x) {
            let (s, d) = block_dot(w.ty, wb, xb);
            acc += (s as f32 * d) * xb.scale;
        }
        *o = acc;
    }
}

/// How far a q8 run may stand from its q8 reference at one pass: `(near_tie, max_rel_l2)`.
///
/// Quantisation is a step function: where the GPU's f32 arithmetic before a quantisation
/// (another summation order in a norm, another `exp`) differs from the reference's by an ulp
/// and the value sits near a rounding boundary, one quant moves by one step, and every later
/// quantisation sees the moved value — so once a run leaves its reference it differs by the
/// quantisation's own noise, not by f32 rounding (on lavapipe: bit-exact for 26 passes, then
/// rel-L2 ≈ 1.1–1.5e-2 against the q8 reference while the q8 and f32 references stood
/// 1.4–1.8e-2 apart). The bounds are therefore the definition's own distance at this pass,
/// doubled: `ref_q8` against `ref_f32` (the f32 path on the same tokens), as a largest logit
/// move for the near-tie and as a rel-L2, never below the f32 path's `near_tie` and
/// `max_rel_l2`. A real fault (a wrong row, a wrong scale, a stale read) stands far outside
/// (rel-L2 ≥ 1e-1). Where either reference is not finite there is no distance to go by: the
/// f32 bounds apply unwidened (a non-finite reference fails the pass on its own).
pub fn q8_bounds(ref_q8: &[f32], ref_f32: &[f32], near_tie: f32, max_rel_l2: f64) -> (f32, f64) {
    let mut moved = 0.0f32;
    for (a, b) in ref_q8.iter().zip(ref_f32) {
        let d = (a - b).abs();
        if !d.is_finite() {
            return (near_tie, max_rel_l2);
        }
        moved = moved.max(d);
    }
    let rel = crate::gate::rel_l2(ref_q8, ref_f32);
    (near_tie.max(2.0 * moved), max_rel_l2.max(2.0 * rel))
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
    fn q8_bounds_widen_with_the_references_distance_and_never_on_a_non_finite_reference() {
        let f = [1.0f32, 2.0, 3.0, 4.0];
        let q = [1.0f32, 2.1, 3.0, 3.8];
        let (nt, rl) = q8_bounds(&q, &f, 1e-3, 1e-3);
        assert!((nt - 0.4).abs() < 1e-5, "twice the largest move: {nt}");
        let want = 2.0 * crate::gate::rel_l2(&q, &f);
        assert!((rl - want).abs() < 1e-12 && rl > 1e-3, "{rl}");
        // Identical references: the f32 bounds, never less.
        assert_eq!(q8_bounds(&f, &f, 1e-3, 1e-3), (1e-3, 1e-3));
        for bad in [f32::INFINITY, f32::NAN] {
            let mut g = f;
            g[2] = bad;
            assert_eq!(q8_bounds(&q, &g, 1e-3, 2e-3), (1e-3, 2e-3), "{bad}");
            assert_eq!(q8_bounds(&g, &f, 1e-3, 2e-3), (1e-3, 2e-3), "{bad}");
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
        for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
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
}
