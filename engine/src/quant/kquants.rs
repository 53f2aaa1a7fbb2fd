//! ggml's 256-element "K" super-blocks (Q4_K, Q5_K, Q6_K), IQ4_XS and its 32-element sibling
//! IQ4_NL: the block structs and their dequantisation, written from the definitions in ggml-common.h / ggml-quants.c. Every
//! float operation is the one ggml (and gguf-py) performs, in the same order (a sub-block's
//! scale `d · sc` first, then times the quant, minus `dmin · m`), so results agree bit for
//! bit. The quantisers of Q4_K, Q5_K and Q6_K (ggml's reference searches, bit for bit) are in
//! [`super::kquantize`], and IQ4_XS's and IQ4_NL's too.

use super::legacy::half_at;
use half::f16;

/// Elements per super-block.
pub const QK_K: usize = 256;

/// One Q4_K super-block: eight sub-blocks of 32; sub-block s has a 6-bit scale and 6-bit min
/// (packed in `scales`, see [`scale_min_k4`]); element l of sub-block s is
/// `(d · sc_s) · n - (dmin · m_s)`, with n the low nibble of `qs[32·(s/2) + l]` for even s and
/// its high nibble for odd s.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ4K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins.
    pub scales: [u8; 12],
    /// Nibbles.
    pub qs: [u8; QK_K / 2],
}

/// One Q5_K super-block: Q4_K plus a fifth bit per element: bit s of `qh[l]` is element l of
/// sub-block s's fifth bit (+16).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ5K {
    /// Super-block scale of the sub-block scales.
    pub d: f16,
    /// Super-block scale of the sub-block mins.
    pub dmin: f16,
    /// Eight 6-bit scales and eight 6-bit mins, as Q4_K's.
    pub scales: [u8; 12],
    /// Fifth bits.
    pub qh: [u8; QK_K / 8],
    /// Low nibbles, as Q4_K's.
    pub qs: [u8; QK_K / 2],
}

/// One Q6_K super-block: sixteen sub-blocks of 16 with signed 8-bit scales; element
/// `128·h + 32·g + l` (h half, g = 0..3, l = 0..31) is `(d · scales[8h + 2g + l/16]) · (q - 32)`
/// with q's low four bits the low (g < 2) or high (g ≥ 2) nibble of `ql[64h + l + 32·(g&1)]`
/// and its two high bits bits `2g..2g+1` of `qh[32h + l]`. 210 bytes: only 2-byte aligned.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockQ6K {
    /// Low four bits.
    pub ql: [u8; QK_K / 2],
    /// High two bits.
    pub qh: [u8; QK_K / 4],
    /// Sub-block scales.
    pub scales: [i8; QK_K / 16],
    /// Super-block scale.
    pub d: f16,
}

/// One IQ4_XS super-block: eight sub-blocks of 32 with 6-bit scales `ls` (low four bits in
/// `scales_l`, high two in `scales_h`); element j of sub-block s is
/// `(d · (ls_s - 32)) · KVALUES[n]`, n the nibble laid out as Q4_0's within the sub-block's
/// 16 bytes of `qs`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockIq4Xs {
    /// Super-block scale.
    pub d: f16,
    /// High two bits of the sub-block scales, two per sub-block.
    pub scales_h: u16,
    /// Low four bits of the sub-block scales, a nibble per sub-block.
    pub scales_l: [u8; QK_K / 64],
    /// Nibbles: indices into [`KVALUES_IQ4NL`].
    pub qs: [u8; QK_K / 2],
}

/// One IQ4_NL block of 32: element j is `d · KVALUES[n]`, n the nibble laid out as Q4_0's
/// (the low nibble of `qs[j]` for j < 16, the high nibble of `qs[j - 16]` after). Q4_0's 18
/// bytes with the code book in place of `n - 8`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BlockIq4Nl {
    /// Scale.
    pub d: f16,
    /// Nibbles: indices into [`KVALUES_IQ4NL`].
    pub qs: [u8; 16],
}

const _: () = assert!(std::mem::size_of::<BlockIq4Nl>() == 18);
const _: () = assert!(std::mem::size_of::<BlockQ4K>() == 144);
const _: () = assert!(std::mem::size_of::<BlockQ5K>() == 176);
const _: () = assert!(std::mem::size_of::<BlockQ6K>() == 210);
const _: () = assert!(std::mem::size_of::<BlockIq4Xs>() == 136);

/// The non-linear 4-bit code book of IQ4_NL / IQ4_XS.
pub const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

/// Sub-block `j`'s (scale, min) of a Q4_K/Q5_K `scales` array (ggml's `get_scale_min_k4`):
/// j < 4: the low six bits of bytes j and j + 4; else the nibbles of byte j + 4 with the top
/// two bits of bytes j - 4 and j above them.
pub fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

impl BlockQ4K {
    /// The block from its 144 bytes.
    pub fn read(b: &[u8]) -> Self {
        BlockQ4K {
            d: half_at(b, 0),
            dmin: half_at(b, 2),
            scales: arr(&b[4..]),
            qs: arr(&b[16..]),
        }
    }
    /// Its 256 elements.
    pub fn dequant(&self, y: &mut [f32]) {
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for s in 0..8 {
            let (sc, m) = scale_min_k4(s, &self.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            let q = &self.qs[32 * (s / 2)..32 * (s / 2) + 32];
            for (l, &b) in q.iter().enumerate() {
                let n = if s % 2 == 0 { b & 15 } else { b >> 4 };
                y[32 * s + l] = d1 * n as f32 - m1;
            }
        }
    }
}

impl BlockQ5K {
    /// The block from its 176 bytes.
    pub fn read(b: &[u8]) -> Self {
        BlockQ5K {
            d: half_at(b, 0),
            dmin: half_at(b, 2),
            scales: arr(&b[4..]),
            qh: arr(&b[16..]),
            qs: arr(&b[48..]),
        }
    }
    /// Its 256 elements.
    pub fn dequant(&self, y: &mut [f32]) {
        let (d, min) = (self.d.to_f32(), self.dmin.to_f32());
        for s in 0..8 {
            let (sc, m) = scale_min_k4(s, &self.scales);
            let (d1, m1) = (d * sc as f32, min * m as f32);
            for l in 0..32 {
                let b = self.qs[32 * (s / 2) + l];
                let n = if s % 2 == 0 { b & 15 } else { b >> 4 };
                let q = n | ((self.qh[l] >> s) & 1) << 4;
                y[32 * s + l] = d1 * q as f32 - m1;
            }
        }
    }
}

impl BlockQ6K {
    /// The block from its 210 bytes.
    pub fn read(b: &[u8]) -> Self {
        let mut scales = [0i8; 16];
        for (s, &v) in scales.iter_mut().zip(&b[192..208]) {
            *s = v as i8;
        }
        BlockQ6K {
            ql: arr(b),
            qh: arr(&b[128..]),
            scales,
            d: half_at(b, 208),
        }
    }
    /// Its 256 elements.
    pub fn dequant(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for h in 0..2 {
            for g in 0..4 {
                for l in 0..32 {
                    let b = self.ql[64 * h + l + 32 * (g & 1)];
                    let lo = if g < 2 { b & 15 } else { b >> 4 };
                    let hi = (self.qh[32 * h + l] >> (2 * g)) & 3;
                    let q = (lo | hi << 4) as i32 - 32;
                    let sc = self.scales[8 * h + 2 * g + l / 16] as f32;
                    y[128 * h + 32 * g + l] = d * sc * q as f32;
                }
            }
        }
    }
}

impl BlockIq4Xs {
    /// The block from its 136 bytes.
    pub fn read(b: &[u8]) -> Self {
        BlockIq4Xs {
            d: half_at(b, 0),
            scales_h: u16::from_le_bytes([b[2], b[3]]),
            scales_l: arr(&b[4..]),
            qs: arr(&b[8..]),
        }
    }
    /// Sub-block `s`'s 6-bit scale (before the −32).
    pub fn ls(&self, s: usize) -> u8 {
        ((self.scales_l[s / 2] >> (4 * (s % 2))) & 15)
            | (((self.scales_h >> (2 * s)) & 3) as u8) << 4
    }
    /// Its 256 elements.
    pub fn dequant(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for s in 0..8 {
            let dl = d * (self.ls(s) as i32 - 32) as f32;
            for j in 0..16 {
                let b = self.qs[16 * s + j];
                y[32 * s + j] = dl * KVALUES_IQ4NL[(b & 15) as usize] as f32;
                y[32 * s + j + 16] = dl * KVALUES_IQ4NL[(b >> 4) as usize] as f32;
            }
        }
    }
}

impl BlockIq4Nl {
    /// The block from its 18 bytes.
    pub fn read(b: &[u8]) -> Self {
        BlockIq4Nl {
            d: half_at(b, 0),
            qs: arr(&b[2..]),
        }
    }
    /// Nibble `j` (element j's code book index).
    pub fn nibble(&self, j: usize) -> u8 {
        if j < 16 {
            self.qs[j] & 15
        } else {
            self.qs[j - 16] >> 4
        }
    }
    /// Its 32 elements.
    pub fn dequant(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (j, o) in y[..32].iter_mut().enumerate() {
            *o = d * KVALUES_IQ4NL[self.nibble(j) as usize] as f32;
        }
    }
}
