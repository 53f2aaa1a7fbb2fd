//! Malformed and adversarial files: each is refused with an error naming what and where,
//! never a panic or an unbounded allocation.

use super::*;

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
fn metadata_arrays_past_the_element_budget_are_refused_before_decoding() {
    // Two u8 arrays whose counts fit the file but together pass MAX_ARRAY_ELEMENTS by one:
    // the second count is refused where it stands (before its elements are decoded), naming
    // the total. Below the budget they parse (the second array short of it: decoding 2^24
    // Values would take 512 MiB here).
    let first = 1000usize;
    let file = |second: usize| {
        Hand::new(3, 0, 2)
            .str("a")
            .u32(T_ARRAY)
            .u32(T_U8)
            .u64(first as u64)
            .raw(&vec![7; first])
            .str("b")
            .u32(T_ARRAY)
            .u32(T_U8)
            .u64(second as u64)
            .raw(&vec![7; second])
    };
    let over = MAX_ARRAY_ELEMENTS as usize - first + 1;
    assert_contains(
        &file(over).err(),
        &format!(
            "metadata 'b': array count {over} brings the metadata's array elements to {}",
            MAX_ARRAY_ELEMENTS + 1
        ),
    );
    assert!(parse(file(5000).0).is_ok());
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
    // 16 is ggml's IQ2_XXS, which baro-top does not read: refused by its name.
    let e = Hand::new(3, 1, 0)
        .tensor("blk.0.ffn_up.weight", &[256], 16, 0)
        .data(32, 66)
        .err();
    assert_contains(
        &e,
        "tensor 'blk.0.ffn_up.weight': unsupported tensor type IQ2_XXS (ggml type 16",
    );
    let e = Hand::new(3, 1, 0)
        .tensor("t", &[32], 1000, 0)
        .data(32, 64)
        .err();
    assert_contains(
        &e,
        "unsupported tensor type unknown to ggml (ggml type 1000",
    );
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
