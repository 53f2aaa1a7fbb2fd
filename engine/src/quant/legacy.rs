//! ggml's 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): the block structs, their
//! dequantisation and ggml's reference quantisers (`quantize_row_*_ref`), written from the
//! definitions in ggml-common.h / ggml-quants.c. Every float operation is the one ggml (and
//! gguf-py) performs, in the same order, so results agree bit for bit.

use half::f16;

/// Elements per block.
pub const QK: usize = 32;

/// One Q4_0 block: element j < 16 is `((qs[j] & 15) - 8) · d`, element j + 16 uses the high
/// nibble of `qs[j]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlockQ4_0 {
    /// Scale.
    pub d: f16,
    /// Nibbles: low nibble of byte j is element j, high nibble is element j + 16.
    pub qs: [u8; QK / 2],
}

/// One Q4_1 block: element j is `n_j · d + m` with the nibbles laid out as Q4_0's.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlockQ4_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (added).
    pub m: f16,
    /// Nibbles, as Q4_0.
    pub qs: [u8; QK / 2],
}

/// One Q5_0 block: element j is `((nibble_j | bit_j << 4) - 16) · d`; bit j of the
/// little-endian `qh` word is element j's fifth bit (nibbles laid out as Q4_0's).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlockQ5_0 {
    /// Scale.
    pub d: f16,
    /// Fifth bits, bit j for element j (a little-endian u32).
    pub qh: [u8; 4],
    /// Low four bits, as Q4_0's nibbles.
    pub qs: [u8; QK / 2],
}

/// One Q5_1 block: element j is `(nibble_j | bit_j << 4) · d + m` (bits as Q5_0's).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlockQ5_1 {
    /// Scale.
    pub d: f16,
    /// Minimum (added).
    pub m: f16,
    /// Fifth bits, as Q5_0's.
    pub qh: [u8; 4],
    /// Low four bits, as Q4_0's nibbles.
    pub qs: [u8; QK / 2],
}

/// One Q8_0 block: element j is `qs[j] · d`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlockQ8_0 {
    /// Scale.
    pub d: f16,
    /// Signed 8-bit quants.
    pub qs: [i8; QK],
}

const _: () = assert!(std::mem::size_of::<BlockQ4_0>() == 18);
const _: () = assert!(std::mem::size_of::<BlockQ4_1>() == 20);
const _: () = assert!(std::mem::size_of::<BlockQ5_0>() == 22);
const _: () = assert!(std::mem::size_of::<BlockQ5_1>() == 24);
const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == 34);

/// The f16 at byte `i` of `b`.
pub(crate) fn half_at(b: &[u8], i: usize) -> f16 {
    f16::from_le_bytes([b[i], b[i + 1]])
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

impl BlockQ4_0 {
    /// The block from its 18 bytes.
    pub fn read(b: &[u8]) -> Self {
        BlockQ4_0 {
            d: half_at(b, 0),
            qs: arr(&b[2..]),
        }
    }
    /// Its 32 elements.
    pub fn dequant(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (j, &q) in self.qs.iter().enumerate() {
            y[j] = ((q & 15) as i32 - 8) as f32 * d;
            y[j + QK / 2] = ((q >> 4) as i32 - 8) as f32 * d;
        }
    }
}

impl BlockQ4_1 {
    /// The block from its 20 bytes.
    pub fn read(b: &[u8]) -> Self {
        BlockQ4_1 {
            d: half_at(b, 0),
            m: half_at(b, 2),
            qs: arr(&b[4..]),
        }
    }
    /// Its 32 elements: `(d · n) + m`.
    pub fn dequant(&self, y: &mut [f32]) {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        for (j, &q) in self.qs.iter().enumerate() {
            y[j] = d * (q & 15) as f32 + m;
            y[j + QK / 2] = d * (q >> 4) as f32 + m;
        }
    }
}

/// Element j's five-bit quant of a Q5 block.
pub(crate) fn q5(qs: &[u8; 16], qh: u32, j: usize) -> u32 {
    let nib = if j < 16 { qs[j] & 15 } else { qs[j - 16] >> 4 };
    nib as u32 | ((qh >> j) & 1) << 4
}

impl BlockQ5_0 {
    /// The block from its 22 bytes.
    pub fn read(b: &[u8]) -> Self {
        BlockQ5_0 {
            d: half_at(b, 0),
            qh: arr(&b[2..]),
            qs: arr(&b[6..]),
        }
    }
    /// Its 32 elements.
    pub fn dequant(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        let qh = u32::from_le_bytes(self.qh);
        for (j, o) in y.iter_mut().enumerate().take(QK) {
            *o = d * (q5(&self.qs, qh, j) as i32 - 16) as f32;
        }
    }
}

impl BlockQ5_1 {
    /// The block from its 24 bytes.
    pub fn read(b: &[u8]) -> Self {
        BlockQ5_1 {
            d: half_at(b, 0),
            m: half_at(b, 2),
            qh: arr(&b[4..]),
            qs: arr(&b[8..]),
        }
    }
    /// Its 32 elements: `(d · q) + m`.
    pub fn dequant(&self, y: &mut [f32]) {
        let (d, m) = (self.d.to_f32(), self.m.to_f32());
        let qh = u32::from_le_bytes(self.qh);
        for (j, o) in y.iter_mut().enumerate().take(QK) {
            *o = d * q5(&self.qs, qh, j) as f32 + m;
        }
    }
}

impl BlockQ8_0 {
    /// The block from its 34 bytes.
    pub fn read(b: &[u8]) -> Self {
        let mut qs = [0i8; QK];
        for (q, &v) in qs.iter_mut().zip(&b[2..2 + QK]) {
            *q = v as i8;
        }
        BlockQ8_0 {
            d: half_at(b, 0),
            qs,
        }
    }
    /// Its 32 elements.
    pub fn dequant(&self, y: &mut [f32]) {
        let d = self.d.to_f32();
        for (o, &q) in y.iter_mut().zip(&self.qs) {
            *o = q as f32 * d;
        }
    }
}

/// `1 / d`, or 0 for a zero scale (ggml's `id`).
fn inv(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

/// The signed value of largest magnitude (the first of equal magnitudes), ggml's `max` of the
/// symmetric types.
fn signed_amax(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        min = min.min(v);
        max = max.max(v);
    }
    (min, max)
}

/// Pack 32 quants of at most four bits into Q4_0's nibble layout.
fn nibbles(q: &[u8; QK]) -> [u8; QK / 2] {
    let mut qs = [0u8; QK / 2];
    for j in 0..QK / 2 {
        qs[j] = (q[j] & 15) | (q[j + QK / 2] & 15) << 4;
    }
    qs
}

/// The fifth bits of 32 five-bit quants (bit j for element j), little-endian.
fn fifth_bits(q: &[u8; QK]) -> [u8; 4] {
    let mut h = 0u32;
    for (j, &v) in q.iter().enumerate() {
        h |= u32::from(v >> 4 & 1) << j;
    }
    h.to_le_bytes()
}

/// ggml's `quantize_row_q4_0_ref`, one block.
pub fn quantize_q4_0(x: &[f32], out: &mut Vec<u8>) {
    // The signed value of largest magnitude maps to -8.
    let d = signed_amax(x) / -8.0;
    let id = inv(d);
    let mut q = [0u8; QK];
    for (o, &v) in q.iter_mut().zip(x) {
        *o = ((v * id + 8.5) as i8).min(15) as u8;
    }
    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
    out.extend_from_slice(&nibbles(&q));
}

/// ggml's `quantize_row_q4_1_ref`, one block.
pub fn quantize_q4_1(x: &[f32], out: &mut Vec<u8>) {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = inv(d);
    let mut q = [0u8; QK];
    for (o, &v) in q.iter_mut().zip(x) {
        *o = (((v - min) * id + 0.5) as i8).min(15) as u8;
    }
    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
    out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
    out.extend_from_slice(&nibbles(&q));
}

/// ggml's `quantize_row_q5_0_ref`, one block.
pub fn quantize_q5_0(x: &[f32], out: &mut Vec<u8>) {
    let d = signed_amax(x) / -16.0;
    let id = inv(d);
    let mut q = [0u8; QK];
    for (o, &v) in q.iter_mut().zip(x) {
        *o = ((v * id + 16.5) as i8).min(31) as u8;
    }
    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
    out.extend_from_slice(&fifth_bits(&q));
    out.extend_from_slice(&nibbles(&q));
}

/// ggml's `quantize_row_q5_1_ref`, one block.
pub fn quantize_q5_1(x: &[f32], out: &mut Vec<u8>) {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = inv(d);
    let mut q = [0u8; QK];
    for (o, &v) in q.iter_mut().zip(x) {
        *o = (((v - min) * id + 0.5) as i8).min(31) as u8;
    }
    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
    out.extend_from_slice(&f16::from_f32(min).to_le_bytes());
    out.extend_from_slice(&fifth_bits(&q));
    out.extend_from_slice(&nibbles(&q));
}

/// ggml's `quantize_row_q8_0_ref`, one block.
pub fn quantize_q8_0(x: &[f32], out: &mut Vec<u8>) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inv(d);
    out.extend_from_slice(&f16::from_f32(d).to_le_bytes());
    out.extend(x.iter().map(|v| (v * id).round() as i8 as u8));
}
