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

mod rejects;
mod values;
