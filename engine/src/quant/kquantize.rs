//! ggml's reference quantisers of the 256-element super-blocks (`quantize_row_q4_K_ref`,
//! `quantize_row_q5_K_ref`, `quantize_row_q6_K_ref`, `quantize_iq4_xs` without weights) and
//! of IQ4_XS's 32-element sibling (`quantize_iq4_nl` without weights): what `llama-quantize`
//! runs on every tensor when it has no importance matrix, so a `Q4_K_M` file baro-top writes
//! is the file llama-quantize writes from the same F32 values, byte for byte.
//!
//! The algorithms are searches (a scale, and for Q4_K/Q5_K a min, fitted per sub-block by
//! trying a few candidate scales and keeping the one with the least weighted squared error),
//! so bit-exactness needs ggml's arithmetic exactly: every sum accumulated in f32 in index
//! order, every product evaluated left to right as written (`w · x · l` is `(w · x) · l`),
//! no fused multiply-add (Rust never contracts; ggml-base is compiled without FMA on x86-64),
//! ggml's `nearest_int` (round half to even through the 1.5 · 2^23 trick, which wraps for
//! |x| ≥ 2^22 as ggml's does) and the same integer truncations (a rounded scale is taken as a
//! `u8` or an `i8` before it is clamped, as ggml assigns it). `tests/it/quant_types.rs` checks
//! every bit against goldens ggml itself wrote (`scripts/fixtures/kquant_goldens.c`).

use super::kquants::{scale_min_k4, KVALUES_IQ4NL, QK_K};
use half::f16;

/// Sub-blocks of 32 in a Q4_K/Q5_K super-block.
const SUBS: usize = QK_K / 32;

/// ggml's `nearest_int`: `x` rounded to the nearest integer, ties to even (the f32 sum with
/// 1.5 · 2^23 leaves the integer in the low mantissa bits).
fn nearest_int(x: f32) -> i32 {
    let bits = (x + 12_582_912.0f32).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// ggml's `make_qkx2_quants` for one sub-block of 32: quants `l` in `0..=nmax` with
/// `x ≈ scale · l - min`, fitted by weighted least squares over `nstep + 1` candidate scales
/// `(nmax + rmin + rdelta · k) / (max - min)`. Returns `(scale, min)`, `min ≥ 0` (the negated
/// offset: a sub-block whose values are all positive gets min 0).
#[allow(clippy::too_many_arguments)]
fn fit_scale_min(
    x: &[f32],
    w: &[f32; 32],
    nmax: i32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    l: &mut [u8],
) -> (f32, f32) {
    let n = x.len();
    let (mut lo, mut hi) = (x[0], x[0]);
    let mut sum_w = w[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < lo {
            lo = x[i];
        }
        if x[i] > hi {
            hi = x[i];
        }
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if lo > 0.0 {
        lo = 0.0;
    }
    if hi == lo {
        l[..n].fill(0);
        return (0.0, -lo);
    }
    let quant = |iscale: f32, v: f32, lo: f32| nearest_int(iscale * (v - lo)).clamp(0, nmax);
    let mut iscale = nmax as f32 / (hi - lo);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let q = quant(iscale, x[i], lo);
        l[i] = q as u8;
        let diff = scale * q as f32 + lo - x[i];
        best_error += w[i] * (diff * diff);
    }
    let mut aux = [0u8; 32];
    for step in 0..=nstep {
        iscale = (rmin + rdelta * step as f32 + nmax as f32) / (hi - lo);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let q = quant(iscale, x[i], lo);
            aux[i] = q as u8;
            let qf = q as f32;
            sum_l += w[i] * qf;
            sum_l2 += w[i] * qf * qf;
            sum_xl += w[i] * qf * x[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut err = 0.0f32;
            for i in 0..n {
                let diff = this_scale * aux[i] as f32 + this_min - x[i];
                err += w[i] * (diff * diff);
            }
            if err < best_error {
                l[..n].copy_from_slice(&aux[..n]);
                best_error = err;
                scale = this_scale;
                lo = this_min;
            }
        }
    }
    (scale, -lo)
}

/// ggml's `make_qx_quants` with `rmse_type` 1 and no importance weights, as Q6_K calls it:
/// signed quants `l - nmax` in `-nmax..nmax` (stored as `l` in `0..2·nmax`) with
/// `x ≈ scale · (l - nmax)`, the scale chosen among 19 candidates `-(nmax + k/10) / max`
/// (`max` the value of largest magnitude) by the x²-weighted least-squares fit.
fn fit_scale_signed(x: &[f32], nmax: i32, l: &mut [i8]) -> f32 {
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let a = v.abs();
        if a > amax {
            amax = a;
            max = v;
        }
    }
    if amax < 1e-15 {
        l[..x.len()].fill(0);
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    // (Σ w·x·l, Σ w·l²) with w = x², the quants of `iscale`.
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for &v in x {
            let q = quant(iscale, v) as f32;
            let w = v * v;
            sumlx += w * v * q;
            suml2 += w * q * q;
        }
        (sumlx, suml2)
    };
    let store = |iscale: f32, l: &mut [i8]| {
        for (o, &v) in l.iter_mut().zip(x) {
            *o = (quant(iscale, v) + nmax) as i8;
        }
    };
    let iscale = -(nmax as f32) / max;
    store(iscale, l);
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for k in (-9..=9).filter(|&k| k != 0) {
        let iscale = -(nmax as f32 + 0.1f32 * k as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            store(iscale, l);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// The shared first half of Q4_K and Q5_K: per sub-block scale and min fitted with weights
/// `rms(x) + |x|`, both quantised to six bits against the super-block's largest, then every
/// element re-quantised against the rounded scale and min. Returns (d, dmin, packed scales,
/// quants in `0..=nmax`).
fn scale_min_block(
    x: &[f32],
    nmax: i32,
    rmin: f32,
    nstep: i32,
) -> (f16, f16, [u8; 12], [u8; QK_K]) {
    let mut l = [0u8; QK_K];
    let mut scales = [0.0f32; SUBS];
    let mut mins = [0.0f32; SUBS];
    let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
    for j in 0..SUBS {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        let mut w = [0.0f32; 32];
        for (wi, &v) in w.iter_mut().zip(xs) {
            *wi = av_x + v.abs();
        }
        let (s, m) = fit_scale_min(xs, &w, nmax, rmin, 0.1, nstep, &mut l[32 * j..32 * j + 32]);
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let mut packed = [0u8; 12];
    for j in 0..SUBS {
        // ggml stores the rounded value in a u8 before clamping it to 63.
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let d = f16::from_f32(max_scale / 63.0);
    let dmin = f16::from_f32(max_min / 63.0);
    for j in 0..SUBS {
        let (sc, m) = scale_min_k4(j, &packed);
        let dj = d.to_f32() * sc as f32;
        if dj == 0.0 {
            continue; // keeps the fit's quants, as ggml does
        }
        let dm = dmin.to_f32() * m as f32;
        for i in 32 * j..32 * j + 32 {
            l[i] = nearest_int((x[i] + dm) / dj).clamp(0, nmax) as u8;
        }
    }
    (d, dmin, packed, l)
}

/// ggml's `quantize_row_q4_K_ref`, one super-block of [`QK_K`] values (144 bytes appended).
pub fn quantize_q4_k(x: &[f32], out: &mut Vec<u8>) {
    let (d, dmin, scales, l) = scale_min_block(x, 15, -1.0, 20);
    out.extend_from_slice(&d.to_le_bytes());
    out.extend_from_slice(&dmin.to_le_bytes());
    out.extend_from_slice(&scales);
    // 64 elements per 32 bytes: the first 32 in the low nibbles, the next 32 in the high.
    for base in (0..QK_K).step_by(64) {
        out.extend((0..32).map(|i| l[base + i] | (l[base + i + 32] << 4)));
    }
}

/// ggml's `quantize_row_q5_K_ref`, one super-block of [`QK_K`] values (176 bytes appended).
pub fn quantize_q5_k(x: &[f32], out: &mut Vec<u8>) {
    let (d, dmin, scales, l) = scale_min_block(x, 31, -0.5, 15);
    let mut qh = [0u8; 32];
    let mut qs = [0u8; QK_K / 2];
    for (pair, base) in (0..QK_K).step_by(64).enumerate() {
        let (lo_bit, hi_bit) = (1u8 << (2 * pair), 2u8 << (2 * pair));
        for i in 0..32 {
            let (mut a, mut b) = (l[base + i], l[base + i + 32]);
            if a > 15 {
                a -= 16;
                qh[i] |= lo_bit;
            }
            if b > 15 {
                b -= 16;
                qh[i] |= hi_bit;
            }
            qs[base / 2 + i] = a | (b << 4);
        }
    }
    out.extend_from_slice(&d.to_le_bytes());
    out.extend_from_slice(&dmin.to_le_bytes());
    out.extend_from_slice(&scales);
    out.extend_from_slice(&qh);
    out.extend_from_slice(&qs);
}

/// ggml's `quantize_row_q6_K_ref`, one super-block of [`QK_K`] values (210 bytes appended).
pub fn quantize_q6_k(x: &[f32], out: &mut Vec<u8>) {
    let mut l = [0i8; QK_K];
    let mut scales = [0.0f32; QK_K / 16];
    let (mut max_scale, mut max_abs) = (0.0f32, 0.0f32);
    for (j, s) in scales.iter_mut().enumerate() {
        *s = fit_scale_signed(&x[16 * j..16 * j + 16], 32, &mut l[16 * j..16 * j + 16]);
        if s.abs() > max_abs {
            max_abs = s.abs();
            max_scale = *s;
        }
    }
    if max_abs < 1e-15 {
        // An all-zero block (its d is f16 zero, so every byte is 0).
        out.extend_from_slice(&[0u8; 210]);
        return;
    }
    let iscale = -128.0f32 / max_scale;
    let d = f16::from_f32(1.0 / iscale);
    let mut sc = [0i8; QK_K / 16];
    for (o, &s) in sc.iter_mut().zip(&scales) {
        // ggml clamps to 127, then stores into an int8 (truncating what is below -128).
        *o = nearest_int(iscale * s).min(127) as i8;
    }
    for (j, &s) in sc.iter().enumerate() {
        let dj = d.to_f32() * s as f32;
        if dj == 0.0 {
            continue;
        }
        for i in 16 * j..16 * j + 16 {
            l[i] = (nearest_int(x[i] / dj).clamp(-32, 31) + 32) as i8;
        }
    }
    let mut ql = [0u8; QK_K / 2];
    let mut qh = [0u8; QK_K / 4];
    for half in 0..2 {
        let (lb, qlb, qhb) = (128 * half, 64 * half, 32 * half);
        for i in 0..32 {
            let q = |g: usize| l[lb + i + 32 * g] as u8;
            ql[qlb + i] = (q(0) & 0xF) | ((q(2) & 0xF) << 4);
            ql[qlb + i + 32] = (q(1) & 0xF) | ((q(3) & 0xF) << 4);
            qh[qhb + i] =
                (q(0) >> 4) | ((q(1) >> 4) << 2) | ((q(2) >> 4) << 4) | ((q(3) >> 4) << 6);
        }
    }
    out.extend_from_slice(&ql);
    out.extend_from_slice(&qh);
    out.extend(sc.iter().map(|&s| s as u8));
    out.extend_from_slice(&d.to_le_bytes());
}

/// ggml's `best_index_int8`: the index of the code book value nearest `x` (the upper one where
/// `x` is exactly between two), as ggml compares. ggml bisects for the least `hi` with
/// `x < v[hi]`; with the code book increasing that is one plus the count of `v[1..15]` at or
/// below `x`, counted here without the bisection's branches (≈ 10 % off a 1B IQ4_XS
/// `model gen`: the writer's hot loop runs this for 16 candidate scales a value). A NaN
/// compares false everywhere: the bisection ends at 15, and so does this.
fn nearest_code(x: f32) -> u8 {
    let v = |i: usize| KVALUES_IQ4NL[i] as f32;
    if x <= v(0) {
        return 0;
    }
    if x >= v(15) || x.is_nan() {
        return 15;
    }
    let hi = 1 + KVALUES_IQ4NL[1..15]
        .iter()
        .map(|&k| usize::from(x >= k as f32))
        .sum::<usize>();
    if x - v(hi - 1) < v(hi) - x {
        (hi - 1) as u8
    } else {
        hi as u8
    }
}

/// The x²-weighted code-book fit of one block of 32 (`quantize_row_iq4_nl_impl`'s per-block
/// search without an importance matrix, 7 tries each side): the scale `d` with
/// `x ≈ d · KVALUES[n]`: the least-squares scale of the codes of `x · 127 / max`, replaced by
/// that of the codes of `x · id` for each of the 15 candidates `id = (k - 127) / max`
/// (k = -7..=7) whose fit is better (a larger `(Σ w·q·x)² / Σ w·q²`); 0 for a block whose
/// largest magnitude is below 1e-15. (ggml also records the first candidate's codes here;
/// both callers re-code every element afterwards, so they are not kept.)
fn fit_iq4_scale(xb: &[f32]) -> f32 {
    const NTRY: i32 = 7;
    // The first scale's codes, then the 15 tries'.
    const N: usize = 2 * NTRY as usize + 2;
    let v0 = KVALUES_IQ4NL[0] as f32;
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in xb {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < 1e-15 {
        return 0.0;
    }
    let mut ids = [0.0f32; N];
    ids[0] = 1.0 / (-max / v0);
    for (id, itry) in ids[1..].iter_mut().zip(-NTRY..=NTRY) {
        *id = (itry as f32 + v0) / max;
    }
    // (Σ w·q·x, Σ w·q²) with w = x² for the codes of each id: every sum in element order, as
    // ggml adds them, but the 16 sums side by side (one pass over the block; 16 independent
    // chains of additions instead of one at a time: the file writer's hot loop).
    let (mut sumqx, mut sumq2) = ([0.0f32; N], [0.0f32; N]);
    for &v in xb {
        let w = v * v;
        for c in 0..N {
            let q = KVALUES_IQ4NL[nearest_code(ids[c] * v) as usize] as f32;
            sumqx[c] += w * q * v;
            sumq2[c] += w * q * q;
        }
    }
    let mut d = if sumq2[0] > 0.0 {
        sumqx[0] / sumq2[0]
    } else {
        0.0
    };
    let mut best = d * sumqx[0];
    for c in 1..N {
        if sumq2[c] > 0.0 && sumqx[c] * sumqx[c] > best * sumq2[c] {
            d = sumqx[c] / sumq2[c];
            best = d * sumqx[c];
        }
    }
    d
}

/// ggml's `quantize_iq4_xs` of one super-block without an importance matrix
/// (`quantize_row_iq4_nl_impl` with weights x², 7 tries each side): per sub-block of 32 a
/// code-book scale chosen among 15 candidates `(k - 127) / max` by the x²-weighted fit, the
/// eight scales then quantised to six bits against the largest, every element re-coded
/// against its rounded scale (136 bytes appended).
pub fn quantize_iq4_xs(x: &[f32], out: &mut Vec<u8>) {
    let mut scales = [0.0f32; SUBS];
    let (mut max_scale, mut amax_scale) = (0.0f32, 0.0f32);
    for (ib, scale) in scales.iter_mut().enumerate() {
        let d = fit_iq4_scale(&x[32 * ib..32 * ib + 32]);
        *scale = d;
        if d.abs() > amax_scale {
            amax_scale = d.abs();
            max_scale = d;
        }
    }
    let d = -max_scale / 32.0;
    let dh = f16::from_f32(d);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut l = [0u8; QK_K];
    let mut scales_h = 0u16;
    let mut scales_l = [0u8; SUBS / 2];
    for (ib, &s) in scales.iter().enumerate() {
        let ls = nearest_int(id * s).clamp(-32, 31);
        let dl = d * ls as f32;
        let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
        for j in 32 * ib..32 * ib + 32 {
            l[j] = nearest_code(idl * x[j]);
        }
        let u = (ls + 32) as u8;
        scales_l[ib / 2] |= (u & 0xF) << (4 * (ib % 2));
        scales_h |= u16::from(u >> 4) << (2 * ib);
    }
    out.extend_from_slice(&dh.to_le_bytes());
    out.extend_from_slice(&scales_h.to_le_bytes());
    out.extend_from_slice(&scales_l);
    for i in 0..QK_K / 32 {
        out.extend((0..16).map(|j| l[32 * i + j] | (l[32 * i + 16 + j] << 4)));
    }
}

/// ggml's `quantize_iq4_nl` of one block of 32 without an importance matrix (what
/// llama-quantize runs: `quantize_row_iq4_nl_impl` with the block its own super-block,
/// weights x², 7 tries each side): the block's fitted code-book scale ([`fit_iq4_scale`])
/// rounded to the f16 `d`, every element coded against the unrounded scale (18 bytes
/// appended). A block below 1e-15 gets d = 0 and every code 8 (ggml codes 0 · x, and the
/// code book's value nearest 0 is its 1).
pub fn quantize_iq4_nl(x: &[f32], out: &mut Vec<u8>) {
    let d = fit_iq4_scale(&x[..32]);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let l: [u8; 32] = std::array::from_fn(|j| nearest_code(id * x[j]));
    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
    out.extend((0..16).map(|j| l[j] | (l[16 + j] << 4)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_code_answers_as_ggmls_bisection_at_every_code_midpoint_and_edge() {
        // ggml's best_index_int8 as written there: the bisection this replaces.
        fn bisect(x: f32) -> u8 {
            let v = |i: usize| KVALUES_IQ4NL[i] as f32;
            if x <= v(0) {
                return 0;
            }
            if x >= v(15) || x.is_nan() {
                return 15;
            }
            let (mut ml, mut mu) = (0usize, 15usize);
            while mu - ml > 1 {
                let mav = (ml + mu) / 2;
                if x < v(mav) {
                    mu = mav;
                } else {
                    ml = mav;
                }
            }
            if x - v(mu - 1) < v(mu) - x {
                (mu - 1) as u8
            } else {
                mu as u8
            }
        }
        let mut xs = vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e-30];
        for w in KVALUES_IQ4NL.windows(2) {
            let (a, b) = (w[0] as f32, w[1] as f32);
            let mid = (a + b) / 2.0;
            for x in [a, b, mid] {
                xs.extend([x, x.next_up(), x.next_down()]);
            }
        }
        let mut r = 0x9E37_79B9u32;
        for _ in 0..100_000 {
            r ^= r << 13;
            r ^= r >> 17;
            r ^= r << 5;
            xs.push((r as f32 / u32::MAX as f32) * 300.0 - 150.0);
        }
        for x in xs {
            assert_eq!(nearest_code(x), bisect(x), "x = {x:?}");
        }
    }

    #[test]
    fn nearest_int_rounds_half_to_even_like_ggml() {
        for (x, want) in [
            (0.5f32, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (3.49, 3),
            (-7.51, -8),
            (4_194_303.0, 4_194_303),
        ] {
            assert_eq!(nearest_int(x), want, "{x}");
        }
    }

    #[test]
    fn an_all_zero_super_block_encodes_as_zero_bytes() {
        let x = [0.0f32; QK_K];
        for (f, len) in [
            (quantize_q4_k as fn(&[f32], &mut Vec<u8>), 144),
            (quantize_q5_k, 176),
            (quantize_q6_k, 210),
        ] {
            let mut out = vec![];
            f(&x, &mut out);
            assert_eq!(out, vec![0u8; len]);
        }
    }

    #[test]
    fn code_book_ties_go_to_the_upper_value_as_ggml_compares() {
        // -10 and 1 are neighbours: -4.5 is between them, 0 nearer 1, -5 nearer -10.
        assert_eq!(nearest_code(-4.5), 8);
        assert_eq!(nearest_code(0.0), 8);
        assert_eq!(nearest_code(-5.0), 7);
        assert_eq!((nearest_code(-1e9), nearest_code(1e9)), (0, 15));
    }

    #[test]
    fn an_iq4_nl_block_below_1e_15_is_scale_0_with_every_code_8() {
        // ggml codes 0 · x: the code book's value nearest 0 is 1 (index 8).
        for v in [0.0f32, 9e-16, -9e-16] {
            let mut out = vec![];
            quantize_iq4_nl(&[v; 32], &mut out);
            let mut want = vec![0u8, 0];
            want.extend([0x88u8; 16]);
            assert_eq!(out, want, "{v}");
        }
    }

    #[test]
    fn an_iq4_nl_block_of_code_book_values_encodes_exactly() {
        // x = 0.5 · KVALUES[j % 16] for every j: some scale fits it exactly; the fit and the
        // re-coding must find it (d = 0.5, codes j % 16).
        let x: Vec<f32> = (0..32)
            .map(|j| 0.5 * KVALUES_IQ4NL[j % 16] as f32)
            .collect();
        let mut out = vec![];
        quantize_iq4_nl(&x, &mut out);
        assert_eq!(f16::from_le_bytes([out[0], out[1]]).to_f32(), 0.5);
        let codes: Vec<u8> = (0..16)
            .map(|j| (j as u8 % 16) | ((j as u8 % 16) << 4))
            .collect();
        assert_eq!(&out[2..], &codes[..]);
    }
}
