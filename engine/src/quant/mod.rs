//! ggml tensor types and their block layouts, exactly as ggml defines them, with the slow,
//! obvious reference dequantisation every fast path (the GPU's) is checked against, and ggml's
//! reference quantisers where baro-top has one that is ggml's bit for bit.
//!
//! | type | ggml id | block | bytes | element of a block |
//! |------|---------|-------|-------|--------------------|
//! | F32  | 0  | 1   | 4   | the f32 |
//! | F16  | 1  | 1   | 2   | the IEEE half |
//! | BF16 | 30 | 1   | 2   | the top half of an f32 |
//! | Q4_0 | 2  | 32  | 18  | `(n - 8) · d` ([`legacy::BlockQ4_0`]) |
//! | Q4_1 | 3  | 32  | 20  | `d · n + m` |
//! | Q5_0 | 6  | 32  | 22  | `d · (q - 16)`, q five bits |
//! | Q5_1 | 7  | 32  | 24  | `d · q + m` |
//! | Q8_0 | 8  | 32  | 34  | `q · d` |
//! | Q4_K | 12 | 256 | 144 | `(d · sc) · n - dmin · m` per sub-block of 32 ([`kquants::BlockQ4K`]) |
//! | Q5_K | 13 | 256 | 176 | as Q4_K with a fifth bit |
//! | Q6_K | 14 | 256 | 210 | `(d · sc) · (q - 32)` per sub-block of 16 |
//! | IQ4_NL | 20 | 32  | 18  | `d · KVALUES[n]` ([`kquants::BlockIq4Nl`]) |
//! | IQ4_XS | 23 | 256 | 136 | `(d · (ls - 32)) · KVALUES[n]` per sub-block of 32 |
//!
//! Every other ggml type is named ([`ggml_type_name`]) so a file that uses one is refused by
//! name, never by number.

pub mod kquantize;
pub mod kquants;
pub mod legacy;

pub use kquants::{BlockIq4Nl, BlockIq4Xs, BlockQ4K, BlockQ5K, BlockQ6K, QK_K};
pub use legacy::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, QK};

use crate::{Error, Result};
use half::f16;

/// ggml's name of every type id it has ever defined (ggml.h's `enum ggml_type`, the removed
/// ids included), so an unsupported type is refused by name.
pub fn ggml_type_name(id: u32) -> Option<&'static str> {
    const NAMES: [&str; 43] = [
        "F32",
        "F16",
        "Q4_0",
        "Q4_1",
        "Q4_2",
        "Q4_3",
        "Q5_0",
        "Q5_1",
        "Q8_0",
        "Q8_1",
        "Q2_K",
        "Q3_K",
        "Q4_K",
        "Q5_K",
        "Q6_K",
        "Q8_K",
        "IQ2_XXS",
        "IQ2_XS",
        "IQ3_XXS",
        "IQ1_S",
        "IQ4_NL",
        "IQ3_S",
        "IQ2_S",
        "IQ4_XS",
        "I8",
        "I16",
        "I32",
        "I64",
        "F64",
        "IQ1_M",
        "BF16",
        "Q4_0_4_4",
        "Q4_0_4_8",
        "Q4_0_8_8",
        "TQ1_0",
        "TQ2_0",
        "IQ4_NL_4_4",
        "IQ4_NL_4_8",
        "IQ4_NL_8_8",
        "MXFP4",
        "NVFP4",
        "Q1_0",
        "Q2_0",
    ];
    NAMES.get(id as usize).copied()
}

/// The tensor types baro-top reads (ggml's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// bfloat16 (the top 16 bits of an f32).
    BF16,
    /// 4-bit blocks of 32 with an f16 scale.
    Q4_0,
    /// 4-bit blocks of 32 with an f16 scale and min.
    Q4_1,
    /// 5-bit blocks of 32 with an f16 scale.
    Q5_0,
    /// 5-bit blocks of 32 with an f16 scale and min.
    Q5_1,
    /// 8-bit blocks of 32 with an f16 scale.
    Q8_0,
    /// 4-bit super-blocks of 256: eight sub-blocks with 6-bit scales and mins.
    Q4_K,
    /// 5-bit super-blocks of 256, as Q4_K with a fifth bit.
    Q5_K,
    /// 6-bit super-blocks of 256: sixteen sub-blocks with 8-bit scales.
    Q6_K,
    /// 4-bit non-linear blocks of 32 with an f16 scale (the code book of IQ4_XS).
    IQ4_NL,
    /// 4-bit non-linear super-blocks of 256 with 6-bit sub-block scales.
    IQ4_XS,
}

impl GgmlType {
    /// All supported types.
    pub const ALL: [GgmlType; 13] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
    ];

    /// ggml's type id.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q4_1 => 3,
            GgmlType::Q5_0 => 6,
            GgmlType::Q5_1 => 7,
            GgmlType::Q8_0 => 8,
            GgmlType::Q4_K => 12,
            GgmlType::Q5_K => 13,
            GgmlType::Q6_K => 14,
            GgmlType::IQ4_NL => 20,
            GgmlType::IQ4_XS => 23,
            GgmlType::BF16 => 30,
        }
    }

    /// The type for a ggml id, if baro-top supports it.
    pub fn from_id(id: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.id() == id)
    }

    /// ggml's name (`Q4_K`).
    pub fn ggml_name(self) -> &'static str {
        ggml_type_name(self.id()).unwrap_or("?")
    }

    /// Lower-case name as used on the command line (`f32`, `q4_0`, `q4_k`).
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::BF16 => "bf16",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q4_1 => "q4_1",
            GgmlType::Q5_0 => "q5_0",
            GgmlType::Q5_1 => "q5_1",
            GgmlType::Q8_0 => "q8_0",
            GgmlType::Q4_K => "q4_k",
            GgmlType::Q5_K => "q5_k",
            GgmlType::Q6_K => "q6_k",
            GgmlType::IQ4_NL => "iq4_nl",
            GgmlType::IQ4_XS => "iq4_xs",
        }
    }

    /// Parse a type's command-line name (every type baro-top reads it also writes, with
    /// ggml's reference quantiser bit for bit).
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::Invalid(format!(
                    "unknown quantisation '{s}' ({})",
                    Self::ALL.map(GgmlType::name).join("|")
                ))
            })
    }

    /// Elements per block.
    pub fn block_len(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 | GgmlType::BF16 => 1,
            GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::IQ4_NL => QK,
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K | GgmlType::IQ4_XS => QK_K,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        use std::mem::size_of;
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 | GgmlType::BF16 => 2,
            GgmlType::Q4_0 => size_of::<BlockQ4_0>(),
            GgmlType::Q4_1 => size_of::<BlockQ4_1>(),
            GgmlType::Q5_0 => size_of::<BlockQ5_0>(),
            GgmlType::Q5_1 => size_of::<BlockQ5_1>(),
            GgmlType::Q8_0 => size_of::<BlockQ8_0>(),
            GgmlType::Q4_K => size_of::<BlockQ4K>(),
            GgmlType::Q5_K => size_of::<BlockQ5K>(),
            GgmlType::Q6_K => size_of::<BlockQ6K>(),
            GgmlType::IQ4_NL => size_of::<BlockIq4Nl>(),
            GgmlType::IQ4_XS => size_of::<BlockIq4Xs>(),
        }
    }

    /// Bytes needed for `n` elements, or `None` when `n` is not a whole number of blocks or the
    /// size overflows.
    pub fn bytes_for(self, n: u64) -> Option<u64> {
        let bl = self.block_len() as u64;
        if !n.is_multiple_of(bl) {
            return None;
        }
        (n / bl).checked_mul(self.block_bytes() as u64)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// bfloat16 bits to f32: exact (the bits become the top half).
pub fn bf16_to_f32(h: u16) -> f32 {
    f32::from_bits(u32::from(h) << 16)
}

/// f32 to bfloat16 as ggml rounds it (`ggml_compute_fp32_to_bf16`): a NaN stays a (quiet)
/// NaN, everything else rounds to nearest, ties to even.
pub fn f32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7fff_ffff) > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u64::from(u) + 0x7fff + u64::from((u >> 16) & 1)) >> 16) as u16
}

/// Dequantise `src` (a whole number of blocks of type `ty`) into `dst` (`dst.len()` elements).
pub fn dequantize(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    let need = ty.bytes_for(dst.len() as u64).ok_or_else(|| {
        Error::Invalid(format!(
            "{} elements is not a whole number of {ty} blocks",
            dst.len()
        ))
    })?;
    if src.len() as u64 != need {
        return Err(Error::Invalid(format!(
            "{ty}: {} elements need {need} bytes, got {}",
            dst.len(),
            src.len()
        )));
    }
    let (bl, bb) = (ty.block_len(), ty.block_bytes());
    let blocks = dst.chunks_exact_mut(bl).zip(src.chunks_exact(bb));
    match ty {
        GgmlType::F32 => {
            for (o, c) in blocks {
                o[0] = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in blocks {
                o[0] = f16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        GgmlType::BF16 => {
            for (o, c) in blocks {
                o[0] = bf16_to_f32(u16::from_le_bytes([c[0], c[1]]));
            }
        }
        GgmlType::Q4_0 => blocks.for_each(|(o, b)| BlockQ4_0::read(b).dequant(o)),
        GgmlType::Q4_1 => blocks.for_each(|(o, b)| BlockQ4_1::read(b).dequant(o)),
        GgmlType::Q5_0 => blocks.for_each(|(o, b)| BlockQ5_0::read(b).dequant(o)),
        GgmlType::Q5_1 => blocks.for_each(|(o, b)| BlockQ5_1::read(b).dequant(o)),
        GgmlType::Q8_0 => blocks.for_each(|(o, b)| BlockQ8_0::read(b).dequant(o)),
        GgmlType::Q4_K => blocks.for_each(|(o, b)| BlockQ4K::read(b).dequant(o)),
        GgmlType::Q5_K => blocks.for_each(|(o, b)| BlockQ5K::read(b).dequant(o)),
        GgmlType::Q6_K => blocks.for_each(|(o, b)| BlockQ6K::read(b).dequant(o)),
        GgmlType::IQ4_NL => blocks.for_each(|(o, b)| BlockIq4Nl::read(b).dequant(o)),
        GgmlType::IQ4_XS => blocks.for_each(|(o, b)| BlockIq4Xs::read(b).dequant(o)),
    }
    Ok(())
}

/// Quantise `src` to type `ty`, appending the encoded bytes to `out`. `src.len()` must be a
/// whole number of blocks. This is ggml's reference rounding (`quantize_row_*_ref`, and for
/// IQ4_NL and IQ4_XS `quantize_iq4_nl` and `quantize_iq4_xs` without weights, what
/// llama-quantize runs). What the type cannot hold is refused,
/// as llama-quantize refuses it (its `ggml_validate_row_data`): a value that is not finite,
/// and a block whose scale overflows half precision (nothing is appended then).
pub fn quantize(ty: GgmlType, src: &[f32], out: &mut Vec<u8>) -> Result<()> {
    if !src.len().is_multiple_of(ty.block_len()) {
        return Err(Error::Invalid(format!(
            "{} elements is not a whole number of {ty} blocks of {}",
            src.len(),
            ty.block_len()
        )));
    }
    if let Some(i) = src.iter().position(|v| !v.is_finite()) {
        return Err(Error::Invalid(format!(
            "element {i} is {}: only finite values can be encoded",
            src[i]
        )));
    }
    let start = out.len();
    encode(ty, src, out)?;
    if ty != GgmlType::F32 {
        let mut back = vec![0.0f32; src.len()];
        dequantize(ty, &out[start..], &mut back)?;
        if let Some(i) = back.iter().position(|v| !v.is_finite()) {
            out.truncate(start);
            let b = i / ty.block_len() * ty.block_len();
            let amax = src[b..b + ty.block_len()]
                .iter()
                .fold(0.0f32, |m, v| m.max(v.abs()));
            return Err(Error::Invalid(format!(
                "element {i} ({}) cannot be encoded as {ty}: it or its block's scale is past \
                 the 16-bit float's range (the block's largest magnitude is {amax:e})",
                src[i]
            )));
        }
    }
    Ok(())
}

/// `rows` rows of `cols` values encoded as `ty`, rows in parallel (up to 32 threads):
/// `fill(r, row)` writes row r's values, then [`quantize`] encodes it. `cols` must be a whole
/// number of blocks. The first failing row (the lowest index) is returned with its error.
pub fn quantize_rows(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    fill: impl Fn(usize, &mut [f32]) + Sync,
) -> std::result::Result<Vec<u8>, (usize, Error)> {
    let row_bytes = ty.bytes_for(cols as u64).ok_or_else(|| {
        (
            0,
            Error::Invalid(format!("{cols} columns is not whole {ty} blocks")),
        )
    })? as usize;
    let mut out = vec![0u8; rows * row_bytes];
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(32);
    let chunk_rows = rows.div_ceil(threads).max(1);
    let fill = &fill;
    let first_error = std::thread::scope(|s| {
        let jobs: Vec<_> = out
            .chunks_mut((chunk_rows * row_bytes).max(1))
            .enumerate()
            .map(|(ci, chunk)| {
                s.spawn(move || -> std::result::Result<(), (usize, Error)> {
                    let mut vals = vec![0.0f32; cols];
                    let mut enc = Vec::with_capacity(row_bytes);
                    for (ri, dst) in chunk.chunks_exact_mut(row_bytes).enumerate() {
                        let r = ci * chunk_rows + ri;
                        fill(r, &mut vals);
                        enc.clear();
                        quantize(ty, &vals, &mut enc).map_err(|e| (r, e))?;
                        dst.copy_from_slice(&enc);
                    }
                    Ok(())
                })
            })
            .collect();
        jobs.into_iter()
            .filter_map(|j| j.join().expect("a quantising thread panicked").err())
            .min_by_key(|(r, _)| *r)
    });
    match first_error {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// [`quantize`]'s encoding, unchecked.
fn encode(ty: GgmlType, src: &[f32], out: &mut Vec<u8>) -> Result<()> {
    out.reserve(src.len() / ty.block_len() * ty.block_bytes());
    let blocks = src.chunks_exact(ty.block_len());
    match ty {
        GgmlType::F32 => src
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        GgmlType::F16 => src
            .iter()
            .for_each(|v| out.extend_from_slice(&f16::from_f32(*v).to_le_bytes())),
        GgmlType::BF16 => src
            .iter()
            .for_each(|v| out.extend_from_slice(&f32_to_bf16(*v).to_le_bytes())),
        GgmlType::Q4_0 => blocks.for_each(|x| legacy::quantize_q4_0(x, out)),
        GgmlType::Q4_1 => blocks.for_each(|x| legacy::quantize_q4_1(x, out)),
        GgmlType::Q5_0 => blocks.for_each(|x| legacy::quantize_q5_0(x, out)),
        GgmlType::Q5_1 => blocks.for_each(|x| legacy::quantize_q5_1(x, out)),
        GgmlType::Q8_0 => blocks.for_each(|x| legacy::quantize_q8_0(x, out)),
        GgmlType::Q4_K => blocks.for_each(|x| kquantize::quantize_q4_k(x, out)),
        GgmlType::Q5_K => blocks.for_each(|x| kquantize::quantize_q5_k(x, out)),
        GgmlType::Q6_K => blocks.for_each(|x| kquantize::quantize_q6_k(x, out)),
        GgmlType::IQ4_NL => blocks.for_each(|x| kquantize::quantize_iq4_nl(x, out)),
        GgmlType::IQ4_XS => blocks.for_each(|x| kquantize::quantize_iq4_xs(x, out)),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect()
    }

    #[test]
    fn ids_round_trip_and_unknown_ids_are_none() {
        for t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            assert_eq!(ggml_type_name(t.id()), Some(t.ggml_name()));
            assert!(t.ggml_name().eq_ignore_ascii_case(t.name()), "{t}");
            assert_eq!(GgmlType::parse(t.name()).ok(), Some(t));
        }
        assert_eq!(GgmlType::from_id(16), None);
        assert_eq!(ggml_type_name(16), Some("IQ2_XXS"));
        assert_eq!(ggml_type_name(43), None);
        assert!(GgmlType::parse("q3_k")
            .unwrap_err()
            .to_string()
            .contains("unknown"));
    }

    #[test]
    fn q4_0_block_layout_matches_ggml() {
        // Largest-magnitude value -16 gives d = 2, so v maps to round(v/2) + 8.
        let mut x = [0.0f32; 32];
        x[0] = -16.0;
        x[1] = 2.0;
        x[16] = 14.0;
        x[17] = 6.0;
        let mut out = Vec::new();
        quantize(GgmlType::Q4_0, &x, &mut out).unwrap();
        assert_eq!(out.len(), 18);
        assert_eq!(f16::from_le_bytes([out[0], out[1]]).to_f32(), 2.0);
        assert_eq!(out[2], 15 << 4); // x0 = -16 -> 0, x16 = 14 -> 15
        assert_eq!(out[3], 9 | (11 << 4)); // x1 = 2 -> 9, x17 = 6 -> 11
        let mut back = [0.0f32; 32];
        dequantize(GgmlType::Q4_0, &out, &mut back).unwrap();
        assert_eq!(back[0], -16.0);
        assert_eq!(back[16], 14.0);
        assert_eq!(back[17], 6.0);
    }

    #[test]
    fn quantisation_error_is_bounded_by_each_types_step() {
        let x = ramp(256);
        for ty in GgmlType::ALL {
            let mut q = Vec::new();
            quantize(ty, &x, &mut q).unwrap();
            assert_eq!(q.len() as u64, ty.bytes_for(256).unwrap());
            let mut y = vec![0.0; 256];
            dequantize(ty, &q, &mut y).unwrap();
            for (blk, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
                let amax = xs.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                let (lo, hi) = xs
                    .iter()
                    .fold((f32::MAX, f32::MIN), |(a, b), &v| (a.min(v), b.max(v)));
                let step = match ty {
                    GgmlType::F32 => 0.0,
                    GgmlType::F16 => amax / 1024.0,
                    GgmlType::BF16 => amax / 128.0,
                    GgmlType::Q8_0 => amax / 127.0,
                    GgmlType::Q4_0 => amax / 8.0,
                    GgmlType::Q5_0 => amax / 16.0,
                    GgmlType::Q4_1 => (hi - lo) / 15.0,
                    GgmlType::Q5_1 => (hi - lo) / 31.0,
                    // A sub-block's fitted scale may exceed range / nmax (the search trades
                    // the extremes' error for the bulk's); a whole step bounds it here.
                    GgmlType::Q4_K => 2.0 * (hi - lo) / 15.0,
                    GgmlType::Q5_K => 2.0 * (hi - lo) / 31.0,
                    GgmlType::Q6_K => 2.0 * amax / 32.0,
                    // The code book's widest gap (24 of 127) at the block's scale.
                    GgmlType::IQ4_NL | GgmlType::IQ4_XS => 2.0 * amax * 24.0 / 127.0,
                };
                // Half a quantisation step, plus the f16 rounding of the scale (2^-11 relative).
                // Q4_0/Q5_0 map the signed extreme to the most negative quant, so the opposite
                // extreme clamps one short: up to a whole step there.
                let steps = if matches!(ty, GgmlType::Q4_0 | GgmlType::Q5_0) {
                    1.0
                } else {
                    0.5
                };
                let tol = step * steps + amax / 2048.0 + 1e-7;
                for (a, b) in xs.iter().zip(ys) {
                    assert!((a - b).abs() <= tol, "{ty} block {blk}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn what_a_type_cannot_hold_is_refused_and_nothing_appended() {
        let mut out = vec![7u8];
        let mut x = ramp(256);
        x[100] = f32::NAN;
        for ty in GgmlType::ALL {
            let e = quantize(ty, &x, &mut out).unwrap_err().to_string();
            assert!(
                e.contains("element 100") && e.contains("finite"),
                "{ty}: {e}"
            );
        }
        // A block whose scale (or, for F16, whose value) is past half precision's 65504:
        // ggml would write an infinite scale, llama-quantize refuses the row. BF16 holds 1e9
        // (and refuses only values that round past f32's range).
        let mut big = ramp(256);
        big[37] = 1e9;
        for ty in GgmlType::ALL
            .into_iter()
            .filter(|t| !matches!(t, GgmlType::F32 | GgmlType::BF16))
        {
            let e = quantize(ty, &big, &mut out).unwrap_err().to_string();
            assert!(e.contains("16-bit float's range"), "{ty}: {e}");
        }
        assert_eq!(out, [7], "a refused quantisation appends nothing");
        quantize(GgmlType::BF16, &big, &mut out).unwrap();
    }

    #[test]
    fn sizes_must_be_whole_blocks() {
        assert_eq!(GgmlType::Q4_0.bytes_for(33), None);
        assert_eq!(GgmlType::Q8_0.bytes_for(64), Some(68));
        let mut out = Vec::new();
        assert!(quantize(GgmlType::Q8_0, &[0.0; 31], &mut out).is_err());
        assert!(dequantize(GgmlType::Q4_0, &[0u8; 17], &mut [0.0; 32]).is_err());
    }
}
