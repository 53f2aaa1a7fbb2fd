//! Hand-built GGUF files, valid and malformed.

use super::*;
use crate::blob::Storage;
use crate::quant::GgmlType;
use crate::Result;
use std::path::Path;
use std::sync::Arc;

fn parse(bytes: Vec<u8>) -> Result<GgufFile> {
    GgufFile::from_storage(Arc::new(Storage::Owned(bytes)))
}

/// The error message of a parse that must fail.
fn parse_err(bytes: Vec<u8>) -> String {
    match parse(bytes) {
        Ok(f) => panic!("expected an error, parsed {}", describe(&f)),
        Err(e @ Error::Gguf { .. }) => e.to_string(),
        Err(e) => panic!("expected Error::Gguf, got {e:?}"),
    }
}

fn assert_contains(msg: &str, want: &str) {
    assert!(
        msg.contains(want),
        "error {msg:?} does not mention {want:?}"
    );
}

/// Hand-assembled GGUF bytes.
#[derive(Clone)]
struct Hand(Vec<u8>);

impl Hand {
    fn new(version: u32, n_tensors: u64, n_kv: u64) -> Self {
        Hand(Vec::new())
            .raw(b"GGUF")
            .u32(version)
            .u64(n_tensors)
            .u64(n_kv)
    }
    fn raw(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
    fn u8(self, v: u8) -> Self {
        self.raw(&[v])
    }
    fn u32(self, v: u32) -> Self {
        self.raw(&v.to_le_bytes())
    }
    fn u64(self, v: u64) -> Self {
        self.raw(&v.to_le_bytes())
    }
    fn str(self, s: &str) -> Self {
        self.u64(s.len() as u64).raw(s.as_bytes())
    }
    fn kv_u32(self, key: &str, v: u32) -> Self {
        self.str(key).u32(T_U32).u32(v)
    }
    fn tensor(self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Self {
        let mut h = self.str(name).u32(dims.len() as u32);
        for &d in dims {
            h = h.u64(d);
        }
        h.u32(ty).u64(offset)
    }
    /// Pad to `align` and append `n` data bytes.
    fn data(mut self, align: usize, n: usize) -> Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self.0.extend((0..n).map(|i| i as u8));
        self
    }
    fn err(self) -> String {
        parse_err(self.0)
    }
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn every_value_type() -> Vec<(String, Value)> {
    vec![
        ("t.u8".into(), Value::U8(200)),
        ("t.i8".into(), Value::I8(-100)),
        ("t.u16".into(), Value::U16(60000)),
        ("t.i16".into(), Value::I16(-30000)),
        ("t.u32".into(), Value::U32(4_000_000_000)),
        ("t.i32".into(), Value::I32(-2_000_000_000)),
        ("t.f32".into(), Value::F32(1.5e-5)),
        ("t.bool.true".into(), Value::Bool(true)),
        ("t.bool.false".into(), Value::Bool(false)),
        ("t.string".into(), Value::from("héllo ▁wörld")),
        ("t.empty_string".into(), Value::from("")),
        ("t.u64".into(), Value::U64(u64::MAX)),
        ("t.i64".into(), Value::I64(i64::MIN)),
        ("t.f64".into(), Value::F64(-2.5e300)),
        (
            "t.array.strings".into(),
            Value::Array(vec!["<s>".into(), "</s>".into(), "▁a".into()]),
        ),
        (
            "t.array.f32".into(),
            Value::Array(vec![Value::F32(0.0), Value::F32(-1.25)]),
        ),
        (
            "t.array.i32".into(),
            Value::Array(vec![Value::I32(1), Value::I32(-2), Value::I32(3)]),
        ),
        (
            "t.array.bool".into(),
            Value::Array(vec![Value::Bool(true), Value::Bool(false)]),
        ),
        ("t.array.empty".into(), Value::Array(vec![])),
        (
            "t.array.nested".into(),
            Value::Array(vec![
                Value::Array(vec![Value::U16(1), Value::U16(2)]),
                Value::Array(vec![]),
                Value::Array(vec![Value::from("x")]),
                Value::Array(vec![Value::Array(vec![Value::F64(9.0)])]),
            ]),
        ),
    ]
}

/// Four tensors, one of each type, with distinct data. Returns (name, dims, type, data).
fn four_tensors() -> Vec<(String, Vec<u64>, GgmlType, Vec<u8>)> {
    let mk = |name: &str, dims: Vec<u64>, ty: GgmlType, seed: u8| {
        let n = ty
            .bytes_for(dims.iter().product())
            .expect("test shapes are whole blocks");
        let data = (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect();
        (name.to_owned(), dims, ty, data)
    };
    vec![
        mk("a.f32", vec![3], GgmlType::F32, 1),
        mk("b.f16", vec![5, 3], GgmlType::F16, 2),
        mk("c.q4_0", vec![64, 2, 1], GgmlType::Q4_0, 3),
        mk("d.q8_0", vec![32, 3, 2, 1], GgmlType::Q8_0, 4),
    ]
}

fn write_to_vec(
    metadata: &[(String, Value)],
    tensors: &[(String, Vec<u64>, GgmlType, Vec<u8>)],
) -> Vec<u8> {
    let shapes: Vec<_> = tensors
        .iter()
        .map(|(n, d, t, _)| (n.clone(), d.clone(), *t))
        .collect();
    let mut w = GgufWriter::new(Vec::new(), metadata, &shapes).expect("valid header");
    for (_, _, _, data) in tensors {
        w.write_tensor(data).expect("right size");
    }
    w.finish().expect("all tensors written")
}

/// A small valid file: two metadata pairs and two tensors, ending exactly at the last
/// tensor's last byte (its size is a multiple of the alignment, so no trailing padding).
fn small_valid_file() -> Vec<u8> {
    let md = vec![
        ("general.architecture".to_owned(), Value::from("llama")),
        (
            "tokenizer.ggml.tokens".to_owned(),
            Value::Array(vec!["a".into(), "bc".into()]),
        ),
    ];
    let t = vec![
        ("x".to_owned(), vec![4], GgmlType::F16, vec![7u8; 8]),
        ("y".to_owned(), vec![8], GgmlType::F32, f32_bytes(&[1.0; 8])),
    ];
    write_to_vec(&md, &t)
}

#[test]
fn round_trip_preserves_every_value_type_and_all_four_tensor_types() {
    let md = every_value_type();
    let tensors = four_tensors();
    let bytes = write_to_vec(&md, &tensors);
    let f = parse(bytes).expect("writer output parses");
    assert_eq!(f.version, 3);
    assert_eq!(f.alignment, 32);
    assert_eq!(f.metadata, md);
    assert_eq!(f.data_offset() % 32, 0);
    assert_eq!(f.tensors.len(), tensors.len());
    for (info, (name, dims, ty, data)) in f.tensors.iter().zip(&tensors) {
        assert_eq!(&info.name, name);
        assert_eq!(&info.dims, dims);
        assert_eq!(info.ty, *ty);
        assert_eq!(info.offset % 32, 0, "{name} offset aligned");
        assert_eq!(info.n_bytes(), data.len() as u64);
        assert_eq!(&f.tensor_blob(info)[..], &data[..], "{name} data");
        assert_eq!(f.tensor(name), Some(info));
    }
    let d = f.tensor("d.q8_0").expect("present");
    assert_eq!((d.cols(), d.rows(), d.n_elements()), (32, 6, 192));
}

#[test]
fn round_trip_honours_a_custom_alignment_for_header_and_every_tensor() {
    let md = vec![(ALIGNMENT_KEY.to_owned(), Value::U32(256))];
    let bytes = write_to_vec(&md, &four_tensors());
    let f = parse(bytes).expect("parses");
    assert_eq!(f.alignment, 256);
    assert_eq!(f.data_offset() % 256, 0);
    for t in &f.tensors {
        assert_eq!(t.offset % 256, 0, "{}", t.name);
    }
}

#[test]
fn write_file_then_open_maps_the_same_bytes() {
    let path = std::env::temp_dir().join(format!("baro-gguf-test-{}.gguf", std::process::id()));
    let tensors = four_tensors();
    let refs: Vec<_> = tensors
        .iter()
        .map(|(n, d, t, b)| (n.clone(), d.clone(), *t, &b[..]))
        .collect();
    write_file(&path, &every_value_type(), &refs).expect("written");
    let f = GgufFile::open(&path).expect("opens");
    let _ = std::fs::remove_file(&path);
    assert_eq!(f.metadata, every_value_type());
    for (info, (_, _, _, data)) in f.tensors.iter().zip(&tensors) {
        assert_eq!(&f.tensor_blob(info)[..], &data[..]);
    }
}

#[test]
fn open_of_a_missing_file_is_an_io_error_naming_the_path() {
    let path = Path::new("/nonexistent/dir/model.gguf");
    let e = GgufFile::open(path).expect_err("missing");
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
    assert_contains(&e.to_string(), "/nonexistent/dir/model.gguf");
}

#[test]
fn version_2_file_is_read() {
    let mut bytes = write_to_vec(&every_value_type(), &four_tensors());
    bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
    let f = parse(bytes).expect("v2 parses");
    assert_eq!(f.version, 2);
    assert_eq!(f.metadata, every_value_type());
    assert_eq!(f.tensors.len(), 4);
}

#[test]
fn file_without_tensors_or_metadata_is_valid() {
    let f = parse(Hand::new(3, 0, 0).0).expect("empty file parses");
    assert!(f.metadata.is_empty() && f.tensors.is_empty());
    assert_eq!(f.data_offset(), 32);
}

#[test]
fn bad_magic_is_rejected() {
    let mut bytes = small_valid_file();
    bytes[0..4].copy_from_slice(b"GGML");
    assert_contains(&parse_err(bytes), "bad magic");
    assert_contains(
        &parse_err(b"\x7fELF\x02\x01\x01\x00".to_vec()),
        "not a GGUF file",
    );
}

#[test]
fn version_1_and_unknown_versions_are_unsupported() {
    assert_contains(&Hand::new(1, 0, 0).err(), "unsupported GGUF version 1");
    assert_contains(&Hand::new(4, 0, 0).err(), "unsupported GGUF version 4");
    assert_contains(&Hand::new(0, 0, 0).err(), "unsupported GGUF version 0");
    assert_contains(&Hand::new(3u32.swap_bytes(), 0, 0).err(), "big-endian");
}

#[test]
fn truncating_a_valid_file_at_every_length_is_an_error_never_a_panic() {
    let bytes = small_valid_file();
    parse(bytes.clone()).expect("the full file parses");
    for len in 0..bytes.len() {
        let r = parse(bytes[..len].to_vec());
        assert!(
            r.is_err(),
            "file cut to {len} of {} bytes parsed",
            bytes.len()
        );
    }
}

#[test]
fn corrupting_any_single_byte_gives_ok_or_err_never_a_panic() {
    let bytes = write_to_vec(&every_value_type(), &four_tensors());
    for i in 0..bytes.len() {
        for v in [0x00, 0x01, 0x09, 0x7f, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[i] = v;
            if let Ok(f) = parse(b) {
                for t in &f.tensors {
                    assert_eq!(f.tensor_blob(t).len() as u64, t.n_bytes());
                }
            }
        }
    }
}

#[test]
fn truncated_header_errors_name_the_field_cut_short() {
    let full = Hand::new(3, 1, 1)
        .kv_u32("general.alignment", 32)
        .tensor("w", &[8], 0, 0)
        .data(32, 32)
        .0;
    parse(full.clone()).expect("full file parses");
    let cases: &[(usize, &str)] = &[
        (0, "truncated magic"),
        (3, "truncated magic"),
        (6, "truncated version"),
        (12, "truncated tensor_count"),
        (20, "truncated metadata_kv_count"),
        // Cuts in the middle of the metadata trip the up-front size bound first.
        (24, "metadata_kv_count 1 needs at least 13 bytes"),
        (45, "tensor_count 1 needs at least 32 bytes"),
    ];
    for &(len, want) in cases {
        assert_contains(&parse_err(full[..len].to_vec()), want);
    }
    // A cut inside the tensor info, with the counts' lower bounds still met.
    let long_name = Hand::new(3, 1, 0)
        .tensor("a_rather_long_tensor_name", &[8], 0, 0)
        .0;
    assert_contains(
        &parse_err(long_name[..60].to_vec()),
        "truncated tensor 'a_rather_long_tensor_name' n_dims",
    );
    // A cut inside a string's bytes.
    let s = Hand::new(3, 0, 1)
        .str("k")
        .u32(T_STRING)
        .str("a long string value")
        .0;
    assert_contains(
        &parse_err(s[..s.len() - 3].to_vec()),
        "runs past end of file",
    );
    // A cut inside the tensor data.
    assert_contains(
        &parse_err(full[..full.len() - 1].to_vec()),
        "past end of file",
    );
}

#[test]
fn huge_metadata_kv_count_is_rejected_before_allocating() {
    let e = Hand::new(3, 0, 1 << 60).kv_u32("a", 1).err();
    assert_contains(&e, "metadata_kv_count 1152921504606846976 needs at least");
    let e = Hand::new(3, 0, u64::MAX).err();
    assert_contains(&e, "metadata_kv_count");
}

#[test]
fn huge_tensor_count_is_rejected_before_allocating() {
    assert_contains(
        &Hand::new(3, 1 << 60, 0).err(),
        "tensor_count 1152921504606846976",
    );
    assert_contains(
        &Hand::new(3, u64::MAX, 0).raw(&[0; 64]).err(),
        "tensor_count",
    );
}

#[test]
fn huge_string_length_is_rejected_before_allocating() {
    let key = Hand::new(3, 0, 1).u64(1 << 62).raw(&[b'a'; 16]).err();
    assert_contains(
        &key,
        "metadata key #0: string length 4611686018427387904 runs past end",
    );
    let val = Hand::new(3, 0, 1)
        .str("general.name")
        .u32(T_STRING)
        .u64(1 << 62)
        .raw(b"abc")
        .err();
    assert_contains(
        &val,
        "metadata 'general.name': string length 4611686018427387904",
    );
    let name = Hand::new(3, 1, 0).u64(1 << 62).raw(&[0; 40]).err();
    assert_contains(&name, "tensor #0 name: string length");
}

#[test]
fn huge_array_count_is_rejected_before_allocating() {
    let e = Hand::new(3, 0, 1)
        .str("tokenizer.ggml.scores")
        .u32(T_ARRAY)
        .u32(T_F32)
        .u64(1 << 61)
        .raw(&[0; 16])
        .err();
    assert_contains(
        &e,
        "metadata 'tokenizer.ggml.scores': array count 2305843009213693952 of f32",
    );
    // count × element size overflowing u64 is caught too.
    let e = Hand::new(3, 0, 1)
        .str("k")
        .u32(T_ARRAY)
        .u32(T_U64)
        .u64(1 << 62)
        .err();
    assert_contains(&e, "array count 4611686018427387904 of u64");
    // Nested arrays count at least 12 bytes each even when empty.
    let e = Hand::new(3, 0, 1)
        .str("k")
        .u32(T_ARRAY)
        .u32(T_ARRAY)
        .u64(3)
        .raw(&[0; 24])
        .err();
    assert_contains(&e, "array count 3 of array needs at least 36 bytes");
}

#[test]
fn unknown_value_type_is_rejected() {
    let e = Hand::new(3, 0, 1).str("k").u32(13).u32(0).err();
    assert_contains(&e, "metadata 'k': unknown value type 13");
    let e = Hand::new(3, 0, 1)
        .str("k")
        .u32(T_ARRAY)
        .u32(99)
        .u64(0)
        .err();
    assert_contains(&e, "metadata 'k': unknown array element type 99");
}

#[test]
fn unsupported_tensor_type_is_rejected_naming_the_tensor() {
    // 3 is ggml's Q4_1, which baro-top does not read.
    let e = Hand::new(3, 1, 0)
        .tensor("blk.0.ffn_up.weight", &[32], 3, 0)
        .data(32, 64)
        .err();
    assert_contains(
        &e,
        "tensor 'blk.0.ffn_up.weight': unsupported tensor type 3",
    );
    let e = Hand::new(3, 1, 0)
        .tensor("t", &[32], 1000, 0)
        .data(32, 64)
        .err();
    assert_contains(&e, "unsupported tensor type 1000");
}

#[test]
fn n_dims_must_be_between_1_and_4() {
    let zero = Hand::new(3, 1, 0)
        .str("t")
        .u32(0)
        .u32(0)
        .u64(0)
        .raw(&[0; 40])
        .err();
    assert_contains(&zero, "tensor 't': n_dims is 0, must be 1..=4");
    let five = Hand::new(3, 1, 0)
        .tensor("t", &[1, 1, 1, 1, 1], 0, 0)
        .data(32, 4)
        .err();
    assert_contains(&five, "tensor 't': n_dims is 5");
    let huge = Hand::new(3, 1, 0)
        .str("t")
        .u32(u32::MAX)
        .raw(&[0; 40])
        .err();
    assert_contains(&huge, "n_dims is 4294967295");
}

#[test]
fn zero_dimension_is_rejected() {
    let e = Hand::new(3, 1, 0)
        .tensor("t", &[4, 0], 0, 0)
        .data(32, 16)
        .err();
    assert_contains(&e, "tensor 't': dimension 1 is 0");
}

#[test]
fn element_count_overflow_is_rejected() {
    let e = Hand::new(3, 1, 0)
        .tensor("t", &[1 << 32, 1 << 32], 0, 0)
        .data(32, 16)
        .err();
    assert_contains(
        &e,
        "tensor 't': element count of dims [4294967296, 4294967296] overflows",
    );
    // The element count fits but the byte size does not.
    let e = Hand::new(3, 1, 0)
        .tensor("t", &[1 << 62, 2], 0, 0)
        .data(32, 16)
        .err();
    assert_contains(&e, "byte size");
}

#[test]
fn tensor_data_past_end_of_file_is_rejected() {
    let e = Hand::new(3, 1, 0)
        .tensor("blk.3.attn_q.weight", &[512, 640], 0, 0x1000)
        .data(32, 64)
        .err();
    assert_contains(
        &e,
        "tensor 'blk.3.attn_q.weight': data [0x1060, +1.2 MiB) runs past end of file (size 0xa0)",
    );
    // An offset so large that start + size overflows.
    let e = Hand::new(3, 1, 0)
        .tensor("t", &[8], 0, u64::MAX - 31)
        .data(32, 32)
        .err();
    assert_contains(&e, "past end of file");
}

#[test]
fn misaligned_tensor_offset_is_rejected() {
    let e = Hand::new(3, 1, 0)
        .tensor("t", &[4], 0, 16)
        .data(32, 64)
        .err();
    assert_contains(
        &e,
        "tensor 't': data offset 0x10 is not a multiple of the alignment 32",
    );
    let e = Hand::new(3, 1, 1)
        .kv_u32(ALIGNMENT_KEY, 64)
        .tensor("t", &[4], 0, 32)
        .data(64, 128)
        .err();
    assert_contains(&e, "not a multiple of the alignment 64");
}

#[test]
fn overlapping_tensors_are_rejected() {
    let e = Hand::new(3, 2, 0)
        .tensor("a", &[16], 0, 32)
        .tensor("b", &[8], 0, 64)
        .data(32, 160)
        .err();
    assert_contains(&e, "tensors 'a' [0x20, 0x60) and 'b' [0x40, 0x60) overlap");
    let same = Hand::new(3, 2, 0)
        .tensor("a", &[8], 0, 0)
        .tensor("b", &[8], 0, 0)
        .data(32, 64)
        .err();
    assert_contains(&same, "overlap");
}

#[test]
fn tensors_may_be_stored_out_of_directory_order() {
    let f = parse(
        Hand::new(3, 2, 0)
            .tensor("late", &[8], 0, 32)
            .tensor("early", &[8], 0, 0)
            .data(32, 64)
            .0,
    )
    .expect("parses");
    assert_eq!(f.tensor_blob(&f.tensors[0])[0], 32);
    assert_eq!(f.tensor_blob(&f.tensors[1])[0], 0);
}

#[test]
fn duplicate_tensor_names_are_rejected() {
    let e = Hand::new(3, 2, 0)
        .tensor("w", &[8], 0, 0)
        .tensor("w", &[8], 0, 32)
        .data(32, 64)
        .err();
    assert_contains(&e, "duplicate tensor name 'w'");
}

#[test]
fn duplicate_metadata_keys_are_rejected() {
    let e = Hand::new(3, 0, 2)
        .kv_u32("general.x", 1)
        .kv_u32("general.x", 2)
        .err();
    assert_contains(
        &e,
        "duplicate metadata key 'general.x' (first at byte 0x18)",
    );
}

#[test]
fn row_length_must_be_a_multiple_of_the_block_size() {
    let e = Hand::new(3, 1, 0)
        .tensor("q", &[48, 2], 8, 0)
        .data(32, 200)
        .err();
    assert_contains(
        &e,
        "tensor 'q': row length 48 is not a multiple of the q8_0 block size 32",
    );
    let e = Hand::new(3, 1, 0)
        .tensor("q", &[16], 2, 0)
        .data(32, 64)
        .err();
    assert_contains(&e, "q4_0 block size 32");
}

#[test]
fn invalid_utf8_is_rejected_in_keys_values_and_tensor_names() {
    let key = Hand::new(3, 0, 1)
        .u64(2)
        .raw(&[0xc3, 0x28])
        .u32(T_U8)
        .u8(0)
        .err();
    assert_contains(&key, "metadata key #0: invalid UTF-8");
    let val = Hand::new(3, 0, 1)
        .str("k")
        .u32(T_STRING)
        .u64(3)
        .raw(b"a\xffb")
        .err();
    assert_contains(&val, "metadata 'k': invalid UTF-8 at byte 1");
    let in_array = Hand::new(3, 0, 1)
        .str("k")
        .u32(T_ARRAY)
        .u32(T_STRING)
        .u64(1)
        .u64(1)
        .raw(b"\x80")
        .err();
    assert_contains(&in_array, "metadata 'k': invalid UTF-8");
    let name = Hand::new(3, 1, 0).u64(1).raw(b"\xfe").raw(&[0; 40]).err();
    assert_contains(&name, "tensor #0 name: invalid UTF-8");
}

#[test]
fn bool_other_than_0_or_1_is_rejected() {
    let e = Hand::new(3, 0, 1)
        .str("b")
        .u32(T_BOOL)
        .u8(2)
        .raw(&[0; 4])
        .err();
    assert_contains(&e, "metadata 'b': bool byte is 2, must be 0 or 1");
    let e = Hand::new(3, 0, 1)
        .str("b")
        .u32(T_ARRAY)
        .u32(T_BOOL)
        .u64(2)
        .u8(1)
        .u8(255)
        .err();
    assert_contains(&e, "bool byte is 255");
}

#[test]
fn alignment_must_be_a_nonzero_power_of_two_u32() {
    assert_contains(
        &Hand::new(3, 0, 1).kv_u32(ALIGNMENT_KEY, 48).err(),
        "general.alignment is 48, must be a nonzero power of two",
    );
    assert_contains(
        &Hand::new(3, 0, 1).kv_u32(ALIGNMENT_KEY, 0).err(),
        "general.alignment is 0",
    );
    let e = Hand::new(3, 0, 1)
        .str(ALIGNMENT_KEY)
        .u32(T_U64)
        .u64(32)
        .err();
    assert_contains(&e, "general.alignment must be a u32, found u64");
}

#[test]
fn arrays_nested_too_deep_are_rejected_without_recursing() {
    let mut h = Hand::new(3, 0, 1).str("deep").u32(T_ARRAY);
    for _ in 0..10_000 {
        h = h.u32(T_ARRAY).u64(1);
    }
    let e = h.u32(T_U8).u64(0).err();
    assert_contains(&e, "arrays nested more than 16 deep");
    // The deepest allowed nesting reads back.
    let mut v = Value::Array(vec![Value::U8(1)]);
    for _ in 1..MAX_ARRAY_DEPTH {
        v = Value::Array(vec![v]);
    }
    let md = vec![("deep".to_owned(), v)];
    let f = parse(write_to_vec(&md, &[])).expect("16 deep parses");
    assert_eq!(f.metadata, md);
    let too_deep = vec![("deep".to_owned(), Value::Array(vec![md[0].1.clone()]))];
    let e = GgufWriter::new(Vec::new(), &too_deep, &[])
        .err()
        .expect("17 deep refused");
    assert_contains(&e.to_string(), "nested more than 16 deep");
}

#[test]
fn typed_getters_convert_or_name_the_key_and_actual_type() {
    let md = vec![
        ("n".to_owned(), Value::I32(7)),
        ("neg".to_owned(), Value::I32(-1)),
        ("x".to_owned(), Value::F64(0.5)),
        ("s".to_owned(), Value::from("llama")),
    ];
    let f = parse(write_to_vec(&md, &[])).expect("parses");
    assert_eq!(f.get_u64("n").expect("int"), Some(7));
    assert_eq!(f.get_u64("absent").expect("absent is fine"), None);
    assert_eq!(f.get_f32("x").expect("float"), Some(0.5));
    assert_eq!(f.get_str("s").expect("string"), Some("llama"));
    assert_eq!(f.get("n"), Some(&Value::I32(7)));
    let e = f
        .get_u64("s")
        .expect_err("string is not an int")
        .to_string();
    assert_contains(
        &e,
        "metadata 's' is string \"llama\", expected a non-negative integer",
    );
    assert_contains(
        &f.get_u64("neg").expect_err("negative").to_string(),
        "'neg' is i32 -1",
    );
    assert_contains(
        &f.get_f32("n").expect_err("int").to_string(),
        "'n' is i32 7, expected f32",
    );
    assert_contains(
        &f.get_str("x").expect_err("float").to_string(),
        "'x' is f64 0.5, expected string",
    );
}

#[test]
fn value_helpers_accept_only_their_types() {
    assert_eq!(Value::U8(3).as_u64(), Some(3));
    assert_eq!(Value::I64(-3).as_u64(), None);
    assert_eq!(Value::I64(-3).as_i64(), Some(-3));
    assert_eq!(Value::U64(u64::MAX).as_i64(), None);
    assert_eq!(Value::F32(1.0).as_u64(), None);
    assert_eq!(Value::F64(2.0).as_f32(), Some(2.0));
    assert_eq!(Value::U32(2).as_f32(), None);
    assert_eq!(Value::from("a").as_str(), Some("a"));
    assert_eq!(Value::Array(vec![]).as_array(), Some(&[][..]));
    assert_eq!(Value::Bool(true).type_name(), "bool");
    assert_eq!(Value::Array(vec![]).type_name(), "array");
}

#[test]
fn writer_checks_data_sizes_tensor_count_and_header_inputs() {
    let shapes = vec![
        ("a".to_owned(), vec![32], GgmlType::Q8_0),
        ("b".to_owned(), vec![2], GgmlType::F32),
    ];
    let mut w = GgufWriter::new(Vec::new(), &[], &shapes).expect("header");
    let e = w
        .write_tensor(&[0; 33])
        .expect_err("wrong size")
        .to_string();
    assert_contains(
        &e,
        "tensor 'a': got 33 bytes of data, its shape and type need 34",
    );
    w.write_tensor(&[0; 34]).expect("right size");
    let e = w.finish().expect_err("b missing").to_string();
    assert_contains(&e, "finished after 1 of 2 tensors; 'b' is missing");

    let mut w = GgufWriter::new(Vec::new(), &[], &shapes[..1]).expect("header");
    w.write_tensor(&[0; 34]).expect("right size");
    assert_contains(
        &w.write_tensor(&[]).expect_err("extra").to_string(),
        "all 1 tensors already written",
    );

    let dup = vec![shapes[0].clone(), shapes[0].clone()];
    assert_contains(
        &GgufWriter::new(Vec::new(), &[], &dup)
            .err()
            .expect("dup")
            .to_string(),
        "duplicate tensor name 'a'",
    );
    let bad_row = vec![("q".to_owned(), vec![16], GgmlType::Q4_0)];
    assert_contains(
        &GgufWriter::new(Vec::new(), &[], &bad_row)
            .err()
            .expect("row")
            .to_string(),
        "row length 16",
    );
    let dup_md = vec![
        ("k".to_owned(), Value::U8(1)),
        ("k".to_owned(), Value::U8(2)),
    ];
    assert_contains(
        &GgufWriter::new(Vec::new(), &dup_md, &[])
            .err()
            .expect("dup key")
            .to_string(),
        "duplicate key 'k'",
    );
    let mixed = vec![(
        "k".to_owned(),
        Value::Array(vec![Value::U8(1), Value::I8(2)]),
    )];
    assert_contains(
        &GgufWriter::new(Vec::new(), &mixed, &[])
            .err()
            .expect("mixed")
            .to_string(),
        "array mixes u8 and i8",
    );
    let align = vec![(ALIGNMENT_KEY.to_owned(), Value::U32(24))];
    assert_contains(
        &GgufWriter::new(Vec::new(), &align, &[])
            .err()
            .expect("align")
            .to_string(),
        "must be a nonzero power of two",
    );
}

#[test]
fn write_file_removes_the_partial_file_on_error() {
    let path = std::env::temp_dir().join(format!("baro-gguf-partial-{}.gguf", std::process::id()));
    let short: &[u8] = &[0; 3];
    let e = write_file(
        &path,
        &[],
        &[("t".to_owned(), vec![1], GgmlType::F32, short)],
    );
    assert!(e.is_err());
    assert!(!path.exists());
}

#[test]
fn human_sizes_read_naturally() {
    assert_eq!(human_size(0), "0 B");
    assert_eq!(human_size(1023), "1023 B");
    assert_eq!(human_size(1_310_720), "1.2 MiB");
    assert_eq!(human_size(3 << 30), "3.0 GiB");
}

/// Writes small valid files as the fuzzer's seed corpus:
/// `cargo test -p baro-engine gguf::tests::write_fuzz_seed_corpus -- --ignored`.
#[test]
#[ignore = "writes into engine/fuzz/corpus; run by hand before fuzzing"]
fn write_fuzz_seed_corpus() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/gguf_reader");
    std::fs::create_dir_all(&dir).expect("corpus dir");
    let seeds: Vec<(&str, Vec<u8>)> = vec![
        ("empty.gguf", Hand::new(3, 0, 0).0),
        ("small.gguf", small_valid_file()),
        ("all_values.gguf", write_to_vec(&every_value_type(), &[])),
        ("four_tensors.gguf", write_to_vec(&[], &four_tensors())),
        (
            "align64.gguf",
            write_to_vec(
                &[(ALIGNMENT_KEY.to_owned(), Value::U32(64))],
                &four_tensors()[..2],
            ),
        ),
        (
            "everything.gguf",
            write_to_vec(&every_value_type(), &four_tensors()),
        ),
    ];
    for (name, bytes) in seeds {
        std::fs::write(dir.join(name), bytes).expect("seed written");
    }
}
