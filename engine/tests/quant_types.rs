//! Every tensor type baro-top reads, against gguf-py: `tests/data/quant/goldens.bin`
//! (written by `scripts/quant_goldens.py` with `gguf.quants`) holds random-but-valid blocks of
//! each type with gguf-py's dequantisation, and f32 inputs with gguf-py's quantisation for the
//! types baro-top quantises. baro-top must reproduce every bit.

use baro_engine::quant::{self, GgmlType};

const GOLDENS: &[u8] = include_bytes!("data/quant/goldens.bin");

/// One golden record.
struct Record {
    /// 0: `bytes` dequantise to `floats`; 1: `floats` quantise to `bytes`.
    kind: u32,
    ty: u32,
    bytes: Vec<u8>,
    floats: Vec<f32>,
}

fn u32_at(b: &[u8], at: &mut usize) -> u32 {
    let v = u32::from_le_bytes(b[*at..*at + 4].try_into().expect("4 bytes"));
    *at += 4;
    v
}

fn records() -> Vec<Record> {
    assert_eq!(&GOLDENS[..4], b"BTQG", "golden magic");
    let mut at = 4;
    assert_eq!(u32_at(GOLDENS, &mut at), 1, "golden version");
    let n = u32_at(GOLDENS, &mut at);
    let mut out = vec![];
    for _ in 0..n {
        let kind = u32_at(GOLDENS, &mut at);
        let ty = u32_at(GOLDENS, &mut at);
        let elems = u32_at(GOLDENS, &mut at) as usize;
        let nbytes = u32_at(GOLDENS, &mut at) as usize;
        let bytes = GOLDENS[at..at + nbytes].to_vec();
        at += nbytes;
        let floats = GOLDENS[at..at + 4 * elems]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        at += 4 * elems;
        out.push(Record {
            kind,
            ty,
            bytes,
            floats,
        });
    }
    assert_eq!(at, GOLDENS.len(), "trailing bytes in the goldens");
    out
}

fn record(kind: u32, ty: GgmlType) -> Record {
    records()
        .into_iter()
        .find(|r| r.kind == kind && r.ty == ty.id())
        .unwrap_or_else(|| panic!("no golden of kind {kind} for {}", ty.ggml_name()))
}

/// baro-top's dequantisation of the golden blocks equals gguf-py's in every element's bits.
fn dequantises_bit_exactly(ty: GgmlType) {
    let r = record(0, ty);
    let mut got = vec![0.0f32; r.floats.len()];
    quant::dequantize(ty, &r.bytes, &mut got).expect("whole blocks");
    let bl = ty.block_len();
    let mut bad = 0usize;
    for (i, (g, w)) in got.iter().zip(&r.floats).enumerate() {
        if g.to_bits() != w.to_bits() {
            if bad < 5 {
                eprintln!(
                    "{} block {} element {}: {g:e} ({:#010x}) vs gguf-py {w:e} ({:#010x})",
                    ty.ggml_name(),
                    i / bl,
                    i % bl,
                    g.to_bits(),
                    w.to_bits()
                );
            }
            bad += 1;
        }
    }
    assert_eq!(
        bad,
        0,
        "{}: {bad} of {} elements differ from gguf-py",
        ty.ggml_name(),
        got.len()
    );
    // The goldens hold more than one value per element position: the test could fail.
    assert!(r.floats.iter().any(|v| *v != 0.0));
}

/// baro-top's quantisation of the golden inputs equals gguf-py's byte for byte.
fn quantises_bit_exactly(ty: GgmlType) {
    let r = record(1, ty);
    let mut got = vec![];
    quant::quantize(ty, &r.floats, &mut got).expect("whole blocks");
    assert_eq!(got.len(), r.bytes.len(), "{}: encoded size", ty.ggml_name());
    let bb = ty.block_bytes();
    let first = got.iter().zip(&r.bytes).position(|(a, b)| a != b);
    if let Some(i) = first {
        panic!(
            "{}: block {} differs from gguf-py: {:02x?} vs {:02x?}",
            ty.ggml_name(),
            i / bb,
            &got[i / bb * bb..(i / bb + 1) * bb],
            &r.bytes[i / bb * bb..(i / bb + 1) * bb]
        );
    }
}

#[test]
fn q4_0_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q4_0);
}
#[test]
fn q4_1_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q4_1);
}
#[test]
fn q5_0_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q5_0);
}
#[test]
fn q5_1_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q5_1);
}
#[test]
fn q8_0_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q8_0);
}
#[test]
fn q4_k_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q4_K);
}
#[test]
fn q5_k_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q5_K);
}
#[test]
fn q6_k_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::Q6_K);
}
#[test]
fn iq4_xs_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::IQ4_XS);
}
#[test]
fn f16_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::F16);
}
#[test]
fn bf16_dequantises_as_gguf_py() {
    dequantises_bit_exactly(GgmlType::BF16);
}

#[test]
fn f16_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::F16);
}
#[test]
fn bf16_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::BF16);
}
#[test]
fn q4_0_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q4_0);
}
#[test]
fn q4_1_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q4_1);
}
#[test]
fn q5_0_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q5_0);
}
#[test]
fn q5_1_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q5_1);
}
#[test]
fn q8_0_quantises_as_gguf_py() {
    quantises_bit_exactly(GgmlType::Q8_0);
}

#[test]
fn every_type_baro_top_reads_has_a_dequantisation_golden_and_every_quantiser_one_too() {
    let rs = records();
    for ty in GgmlType::ALL {
        if ty == GgmlType::F32 {
            continue;
        }
        assert!(
            rs.iter().any(|r| r.kind == 0 && r.ty == ty.id()),
            "{}: no dequantisation golden",
            ty.ggml_name()
        );
        assert_eq!(
            rs.iter().any(|r| r.kind == 1 && r.ty == ty.id()),
            ty.has_quantizer(),
            "{}: a quantisation golden exactly when baro-top quantises it",
            ty.ggml_name()
        );
    }
}
