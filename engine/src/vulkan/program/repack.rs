//! Tensors in their GPU layout ([`Packed`]): each type's quants (or values) row by row, then
//! its block headers as separate 16-byte-aligned streams, as the shader's dot products read
//! them.

use crate::model::Tensor;
use crate::quant::GgmlType;

/// Whether the GPU decoder has a layout and dot products for tensors of type `ty`: every type
/// baro-top reads ([`GgmlType::ALL`]); the decoder refuses a model with any other type by the
/// tensor's and the type's name (the GGUF reader names it first).
pub fn gpu_supports(ty: GgmlType) -> bool {
    GgmlType::ALL.contains(&ty)
}

/// A tensor in its GPU layout: `words`, of which row r's quants (or values) start at word
/// `r · row_words`; the per-block headers at word `sc` (and a second stream at `x`), indexed
/// by the row-major block index. Every stream starts 16-byte aligned.
#[derive(Clone, Debug, Default)]
pub struct Packed {
    /// All words.
    pub words: Vec<u32>,
    /// Quant (or value) words per row.
    pub row_words: u32,
    /// Word offset of the block headers.
    pub sc: u32,
    /// Word offset of the second header stream (0: none).
    pub x: u32,
}

fn le32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn le16(b: &[u8]) -> u32 {
    u32::from(u16::from_le_bytes([b[0], b[1]]))
}

/// Lay out `nblk` blocks (`bb` bytes each): `qw` quant words per block from `quants`, then
/// `hw` header words per block from `header`, then `xw` words per block from `extra`; a
/// block of halves (`xw == 0` and `halves`) stores one f16 per block, two per word. Each
/// stream is padded to 16 bytes.
struct Streams {
    qw: usize,
    hw: usize,
    xw: usize,
    half_x: bool,
}

type BlockFn<'a> = &'a dyn Fn(&[u8], &mut [u32], &mut [u32], &mut [u32]);

fn streams(t: &Tensor, l: Streams, f: BlockFn) -> Packed {
    let bb = t.ty.block_bytes();
    let nb = t.cols / t.ty.block_len();
    let nblk = t.rows * nb;
    let pad4 = |n: usize| n.div_ceil(4) * 4;
    let q_words = pad4(nblk * l.qw);
    let h_words = pad4(nblk * l.hw);
    let x_words = if l.half_x {
        pad4(nblk.div_ceil(2))
    } else {
        pad4(nblk * l.xw)
    };
    let mut out = vec![0u32; q_words + h_words + x_words];
    let (q, rest) = out.split_at_mut(q_words);
    let (h, x) = rest.split_at_mut(h_words);
    let mut hx = [0u32; 1];
    for (i, blk) in t.data.chunks_exact(bb).enumerate() {
        let xs: &mut [u32] = if l.half_x {
            &mut hx
        } else {
            &mut x[i * l.xw..(i + 1) * l.xw]
        };
        f(
            blk,
            &mut q[i * l.qw..(i + 1) * l.qw],
            &mut h[i * l.hw..(i + 1) * l.hw],
            xs,
        );
        if l.half_x {
            x[i / 2] |= (hx[0] & 0xFFFF) << (16 * (i % 2));
        }
    }
    Packed {
        words: out,
        row_words: (nb * l.qw) as u32,
        sc: q_words as u32,
        x: (q_words + h_words) as u32,
    }
}

/// GPU words of a tensor in its repacked layout (read by `shaders/decode.comp` and
/// `shaders/quant.glsl`): F32 as is; F16 and BF16 as half pairs per word with rows padded to
/// whole words; Q8_0/Q4_0/IQ4_NL as per-row quant words (8 resp. 4 per block; IQ4_NL's
/// nibbles laid out as Q4_0's) followed by all block scales as packed halves. The other types, 16-byte streams that hold each block losslessly:
/// - Q4_1, Q5_0, Q5_1: quants, the 16 nibble bytes (4 words per block, laid out as Q4_0's);
///   header, one word per block: `d | m << 16` (Q5_0: `d`); `x` (Q5 types): `qh`, one word.
/// - Q4_K: quants, the 128 bytes of `qs` as they are (32 words per block; pair p of
///   sub-blocks, elements 64p..64p+63, is words 8p..8p+7); header, 4 words per block:
///   `d | dmin << 16`, then the 12 bytes of `scales`.
/// - Q5_K: quants and header as Q4_K's; `x`: the 32 bytes of `qh`, 8 words per block.
/// - Q6_K: quants, 48 words per block as four units of two whole 32-element sub-blocks:
///   unit `2h + o` holds sub-blocks `4h + o` and `4h + 2 + o` (elements `128h + 32o + l` and
///   `128h + 64 + 32o + l`, l = 0..31) as the 32 bytes `ql[64h + 32o..]` (low nibbles the
///   first sub-block's, high the second's) and 16 bytes of their high bits, a nibble per l
///   (byte l % 16, the high nibble for l >= 16; bits 0-1 the first sub-block's two bits,
///   bits 2-3 the second's); header, 4 words: the 16 signed scales; `x`: `d` as packed halves.
/// - IQ4_XS: quants, the 128 bytes of `qs` (sub-block s is words 4s..4s+3, nibbles laid out
///   as Q4_0's); header, 2 words per block: `d | scales_h << 16`, then `scales_l`.
pub fn repack(t: &Tensor) -> Packed {
    let (rows, cols) = (t.rows, t.cols);
    let d = &t.data[..];
    match t.ty {
        GgmlType::F32 => Packed {
            words: d.chunks_exact(4).map(le32).collect(),
            row_words: cols as u32,
            ..Packed::default()
        },
        GgmlType::F16 | GgmlType::BF16 => {
            let rw = cols.div_ceil(2);
            let mut out = vec![0u32; rows * rw];
            for r in 0..rows {
                for j in 0..cols {
                    let hbits = le16(&d[(r * cols + j) * 2..]);
                    out[r * rw + j / 2] |= hbits << (16 * (j % 2));
                }
            }
            Packed {
                words: out,
                row_words: rw as u32,
                ..Packed::default()
            }
        }
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::IQ4_NL => {
            let qw = if t.ty == GgmlType::Q8_0 { 8 } else { 4 };
            let p = streams(
                t,
                Streams {
                    qw,
                    hw: 0,
                    xw: 0,
                    half_x: true,
                },
                &|b, q, _, x| {
                    x[0] = le16(b);
                    for (k, w) in q.iter_mut().enumerate() {
                        *w = le32(&b[2 + 4 * k..]);
                    }
                },
            );
            // The scales are the half stream: the shader reads them at `sc`.
            Packed { sc: p.x, x: 0, ..p }
        }
        GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 => {
            // Byte offsets of the header word's halves, the fifth bits and the nibbles.
            let (hdr, qh, qs) = match t.ty {
                GgmlType::Q4_1 => (4, None, 4),
                GgmlType::Q5_0 => (2, Some(2), 6),
                _ => (4, Some(4), 8),
            };
            streams(
                t,
                Streams {
                    qw: 4,
                    hw: 1,
                    xw: usize::from(qh.is_some()),
                    half_x: false,
                },
                &|b, q, h, x| {
                    h[0] = if hdr == 4 { le32(b) } else { le16(b) };
                    if let Some(o) = qh {
                        x[0] = le32(&b[o..]);
                    }
                    for (k, w) in q.iter_mut().enumerate() {
                        *w = le32(&b[qs + 4 * k..]);
                    }
                },
            )
        }
        GgmlType::Q4_K | GgmlType::Q5_K => {
            // Q5_K: the fifth bits sit between the scales and the nibbles.
            let five = t.ty == GgmlType::Q5_K;
            let qs = if five { 48 } else { 16 };
            streams(
                t,
                Streams {
                    qw: 32,
                    hw: 4,
                    xw: if five { 8 } else { 0 },
                    half_x: false,
                },
                &|b, q, h, x| {
                    for (k, w) in h.iter_mut().enumerate() {
                        *w = le32(&b[4 * k..]);
                    }
                    for (k, w) in q.iter_mut().enumerate() {
                        *w = le32(&b[qs + 4 * k..]);
                    }
                    for (k, w) in x.iter_mut().enumerate() {
                        *w = le32(&b[16 + 4 * k..]);
                    }
                },
            )
        }
        GgmlType::IQ4_XS => streams(
            t,
            Streams {
                qw: 32,
                hw: 2,
                xw: 0,
                half_x: false,
            },
            &|b, q, h, _| {
                h[0] = le32(b);
                h[1] = le32(&b[4..]);
                for (k, w) in q.iter_mut().enumerate() {
                    *w = le32(&b[8 + 4 * k..]);
                }
            },
        ),
        GgmlType::Q6_K => streams(
            t,
            Streams {
                qw: 48,
                hw: 4,
                xw: 0,
                half_x: true,
            },
            &|b, q, h, x| {
                let (ql, qh, sc) = (&b[..128], &b[128..192], &b[192..208]);
                for unit in 0..4 {
                    let (hh, o) = (unit / 2, unit % 2);
                    let u = &mut q[12 * unit..12 * unit + 12];
                    for w in 0..8 {
                        u[w] = le32(&ql[64 * hh + 32 * o + 4 * w..]);
                    }
                    let mut hb = [0u8; 16];
                    for l in 0..32 {
                        let v = qh[32 * hh + l];
                        let nib = ((v >> (2 * o)) & 3) | ((v >> (4 + 2 * o)) & 3) << 2;
                        hb[l % 16] |= nib << (4 * (l / 16));
                    }
                    for w in 0..4 {
                        u[8 + w] = le32(&hb[4 * w..]);
                    }
                }
                for (k, w) in h.iter_mut().enumerate() {
                    *w = le32(&sc[4 * k..]);
                }
                x[0] = le16(&b[208..]);
            },
        ),
    }
}
