//! Typed metadata getters and value helpers.

use super::*;

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
