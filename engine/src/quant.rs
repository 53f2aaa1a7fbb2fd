//! ggml tensor types and their block layouts, exactly as ggml defines them, with the slow,
//! obvious reference quantize/dequantize every fast path is checked against.
//!
//! | type | ggml id | block | bytes/block | element j of a block |
//! |------|---------|-------|-------------|----------------------|
//! | F32  | 0 | 1  | 4  | the f32 |
//! | F16  | 1 | 1  | 2  | the IEEE half |
//! | Q4_0 | 2 | 32 | 18 | `d: f16`, `qs: [u8; 16]`; j < 16: `((qs[j] & 15) - 8) * d`, else `((qs[j-16] >> 4) - 8) * d` |
//! | Q8_0 | 8 | 32 | 34 | `d: f16`, `qs: [i8; 32]`; `qs[j] * d` |

use crate::{Error, Result};
use half::f16;

/// Elements per block of the quantised types.
pub const QK: usize = 32;

/// One Q4_0 block as ggml lays it out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Nibbles: low nibble of byte j is element j, high nibble is element j + 16.
    pub qs: [u8; QK / 2],
}

/// One Q8_0 block as ggml lays it out.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Signed 8-bit quants.
    pub qs: [i8; QK],
}

const _: () = assert!(std::mem::size_of::<BlockQ4_0>() == 18);
const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == 34);

/// The tensor types baro-top reads and writes (ggml's numbering).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GgmlType {
    /// 32-bit float.
    F32,
    /// 16-bit IEEE float.
    F16,
    /// 4-bit blocks of 32 with an f16 scale.
    Q4_0,
    /// 8-bit blocks of 32 with an f16 scale.
    Q8_0,
}

impl GgmlType {
    /// All supported types.
    pub const ALL: [GgmlType; 4] = [GgmlType::F32, GgmlType::F16, GgmlType::Q8_0, GgmlType::Q4_0];

    /// ggml's type id.
    pub fn id(self) -> u32 {
        match self {
            GgmlType::F32 => 0,
            GgmlType::F16 => 1,
            GgmlType::Q4_0 => 2,
            GgmlType::Q8_0 => 8,
        }
    }

    /// The type for a ggml id, if baro-top supports it.
    pub fn from_id(id: u32) -> Option<Self> {
        Some(match id {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            8 => GgmlType::Q8_0,
            _ => return None,
        })
    }

    /// Lower-case name as used on the command line (`f32`, `f16`, `q8_0`, `q4_0`).
    pub fn name(self) -> &'static str {
        match self {
            GgmlType::F32 => "f32",
            GgmlType::F16 => "f16",
            GgmlType::Q4_0 => "q4_0",
            GgmlType::Q8_0 => "q8_0",
        }
    }

    /// Parse a command-line name.
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                Error::Invalid(format!("unknown quantisation '{s}' (f32|f16|q8_0|q4_0)"))
            })
    }

    /// Elements per block.
    pub fn block_len(self) -> usize {
        match self {
            GgmlType::F32 | GgmlType::F16 => 1,
            GgmlType::Q4_0 | GgmlType::Q8_0 => QK,
        }
    }

    /// Bytes per block.
    pub fn block_bytes(self) -> usize {
        match self {
            GgmlType::F32 => 4,
            GgmlType::F16 => 2,
            GgmlType::Q4_0 => std::mem::size_of::<BlockQ4_0>(),
            GgmlType::Q8_0 => std::mem::size_of::<BlockQ8_0>(),
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
    match ty {
        GgmlType::F32 => {
            for (o, c) in dst.iter_mut().zip(src.chunks_exact(4)) {
                *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
            }
        }
        GgmlType::F16 => {
            for (o, c) in dst.iter_mut().zip(src.chunks_exact(2)) {
                *o = f16::from_le_bytes([c[0], c[1]]).to_f32();
            }
        }
        GgmlType::Q4_0 => {
            for (o, b) in dst.chunks_exact_mut(QK).zip(src.chunks_exact(18)) {
                let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
                for j in 0..QK / 2 {
                    let q = b[2 + j];
                    o[j] = ((q & 15) as i32 - 8) as f32 * d;
                    o[j + QK / 2] = ((q >> 4) as i32 - 8) as f32 * d;
                }
            }
        }
        GgmlType::Q8_0 => {
            for (o, b) in dst.chunks_exact_mut(QK).zip(src.chunks_exact(34)) {
                let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
                for j in 0..QK {
                    o[j] = (b[2 + j] as i8) as f32 * d;
                }
            }
        }
    }
    Ok(())
}

/// Quantise `src` to type `ty`, appending the encoded bytes to `out`. `src.len()` must be a
/// whole number of blocks. This is ggml's reference rounding (`quantize_row_*_ref`).
pub fn quantize(ty: GgmlType, src: &[f32], out: &mut Vec<u8>) -> Result<()> {
    if !src.len().is_multiple_of(ty.block_len()) {
        return Err(Error::Invalid(format!(
            "{} elements is not a whole number of {ty} blocks of {}",
            src.len(),
            ty.block_len()
        )));
    }
    out.reserve(src.len() / ty.block_len() * ty.block_bytes());
    match ty {
        GgmlType::F32 => src
            .iter()
            .for_each(|v| out.extend_from_slice(&v.to_le_bytes())),
        GgmlType::F16 => src
            .iter()
            .for_each(|v| out.extend_from_slice(&f16::from_f32(*v).to_le_bytes())),
        GgmlType::Q4_0 => {
            for x in src.chunks_exact(QK) {
                // The signed value of largest magnitude maps to -8.
                let mut amax = 0.0f32;
                let mut max = 0.0f32;
                for &v in x {
                    if amax < v.abs() {
                        amax = v.abs();
                        max = v;
                    }
                }
                let d = max / -8.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                for j in 0..QK / 2 {
                    let x0 = x[j] * id;
                    let x1 = x[QK / 2 + j] * id;
                    let q0 = ((x0 + 8.5) as i8).min(15) as u8;
                    let q1 = ((x1 + 8.5) as i8).min(15) as u8;
                    out.push(q0 | (q1 << 4));
                }
            }
        }
        GgmlType::Q8_0 => {
            for x in src.chunks_exact(QK) {
                let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                let d = amax / 127.0;
                let id = if d != 0.0 { 1.0 / d } else { 0.0 };
                out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
                out.extend(x.iter().map(|v| (v * id).round() as i8 as u8));
            }
        }
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
            assert_eq!(GgmlType::parse(t.name()).ok(), Some(t));
        }
        assert_eq!(GgmlType::from_id(3), None);
        assert!(GgmlType::parse("q5_k").is_err());
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
    fn quantisation_error_is_bounded_by_half_a_step() {
        let x = ramp(256);
        for ty in GgmlType::ALL {
            let mut q = Vec::new();
            quantize(ty, &x, &mut q).unwrap();
            assert_eq!(q.len() as u64, ty.bytes_for(256).unwrap());
            let mut y = vec![0.0; 256];
            dequantize(ty, &q, &mut y).unwrap();
            for (blk, (xs, ys)) in x.chunks(32).zip(y.chunks(32)).enumerate() {
                let amax = xs.iter().fold(0.0f32, |a, v| a.max(v.abs()));
                let step = match ty {
                    GgmlType::F32 => 0.0,
                    GgmlType::F16 => amax / 1024.0,
                    GgmlType::Q8_0 => amax / 127.0,
                    GgmlType::Q4_0 => amax / 8.0,
                };
                // Half a quantisation step, plus the f16 rounding of the scale (2^-11 relative).
                // Q4_0 maps the signed extreme to -8, so the opposite extreme clamps at +7:
                // up to a whole step there.
                let steps = if ty == GgmlType::Q4_0 { 1.0 } else { 0.5 };
                let tol = step * steps + amax / 2048.0 + 1e-7;
                for (a, b) in xs.iter().zip(ys) {
                    assert!((a - b).abs() <= tol, "{ty} block {blk}: {a} vs {b}");
                }
            }
        }
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
