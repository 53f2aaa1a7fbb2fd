use super::*;

const TOK512: &[u8] = include_bytes!("../../models/stories260K/tok512.bin");

fn tok512() -> Tokenizer {
    Tokenizer::from_llama2c(TOK512, 512).expect("tok512.bin parses")
}

/// A small vocabulary: `<unk>`, `<s>`, `</s>`, then `extra` pieces with their scores.
fn small(extra: &[(&str, f32)]) -> Tokenizer {
    let mut pieces: Vec<Vec<u8>> = vec![b"<unk>".to_vec(), b"<s>".to_vec(), b"</s>".to_vec()];
    let mut scores = vec![0.0; 3];
    for (p, s) in extra {
        pieces.push(p.as_bytes().to_vec());
        scores.push(*s);
    }
    Tokenizer::new(pieces, scores, 1, 2).expect("small vocabulary")
}

#[test]
fn reads_tok512() {
    let t = tok512();
    assert_eq!(t.vocab_size(), 512);
    assert_eq!(t.max_token_length(), 7);
    assert_eq!((t.bos_id(), t.eos_id()), (1, 2));
    assert_eq!(t.pieces()[1], b"\n<s>\n");
    assert_eq!(t.pieces()[259], b" t");
    assert_eq!(t.scores()[260], -1.0);
    // run.c's byte fallback is id = byte + 3; the table agrees for this vocabulary.
    for b in 0..256usize {
        assert_eq!(t.byte_fallback[b], Some(b as u32 + 3));
    }
}

#[test]
fn encodes_like_run_c() {
    let t = tok512();
    assert_eq!(t.encode(b"", true, false), [1]);
    assert_eq!(t.encode(b"", false, false), Vec::<u32>::new());
    assert_eq!(t.encode(b"", true, true), [1, 2]);
    // The reference greedy story starts with these ids.
    assert_eq!(
        t.encode(b"Once upon a time", true, false),
        [1, 403, 407, 261, 378]
    );
    assert_eq!(
        t.encode(b"Once upon a time", false, true),
        [403, 407, 261, 378, 2]
    );
    assert_eq!(
        t.encode(b"Lily's mom said, \"Hi!\"", true, false),
        [1, 317, 439, 419, 357, 336, 432, 313, 440, 417, 443, 436]
    );
    // Multi-byte code points in the vocabulary ("é", "—"), and byte fallback for "ï" and
    // the 4-byte emoji.
    assert_eq!(
        t.encode(
            "caf\u{e9} \u{2014} na\u{ef}ve \u{1F642}".as_bytes(),
            true,
            false
        ),
        [1, 280, 412, 431, 485, 410, 481, 297, 412, 198, 178, 360, 410, 243, 162, 156, 133]
    );
    assert_eq!(t.encode(b"\n\t x", true, false), [1, 410, 13, 12, 410, 444]);
    // Stray continuation bytes: run.c groups up to 4 of them, then falls back byte-wise.
    assert_eq!(
        t.encode(b"\x80\x80\x80\x80\x80a", true, false),
        [1, 410, 131, 131, 131, 131, 131, 412]
    );
    // The text is a C string: it ends at the first NUL.
    assert_eq!(
        t.encode(b"Once\0 upon", true, false),
        t.encode(b"Once", true, false)
    );
    assert_eq!(t.encode(b"\0abc", true, false), [1]);
}

#[test]
fn decodes_back_to_the_text() {
    let t = tok512();
    for text in ["Once upon a time", "Lily's mom said, \"Hi!\"", "\n\t x"] {
        let ids = t.encode(text.as_bytes(), true, false);
        let mut out = Vec::new();
        for w in ids.windows(2) {
            out.extend_from_slice(t.decode(w[0], w[1]));
        }
        assert_eq!(out, text.as_bytes(), "{text:?}");
    }
}

#[test]
fn decode_strips_the_space_after_bos_only() {
    let t = tok512();
    assert_eq!(t.decode(1, 403), b"Once");
    assert_eq!(t.decode(2, 403), b" Once");
    assert_eq!(t.decode(0, 403), b" Once");
    assert_eq!(t.decode(1, 410), b"");
    assert_eq!(t.decode(403, 407), b" upon");
    // Out-of-range ids decode to nothing.
    assert_eq!(t.decode(1, 512), b"");
    assert_eq!(t.decode(1, u32::MAX), b"");
}

#[test]
fn byte_tokens_decode_to_raw_bytes() {
    let t = tok512();
    assert_eq!(t.decode(5, 13), b"\n");
    assert_eq!(t.decode(1, 13), b"\n");
    assert_eq!(t.decode(5, 3), [0u8]);
    assert_eq!(t.decode(5, 258), [0xffu8]);
    assert_eq!(t.decode(5, 0), b"<unk>");
    assert_eq!(printable(t.decode(5, 3)), None);
    assert_eq!(printable(t.decode(5, 258)), None);
    assert_eq!(printable(t.decode(5, 13)), Some(&b"\n"[..]));
    // A byte piece is what `sscanf(piece, "<0x%02hhX>", &b) == 1` reads; after BOS the
    // stripped piece is what counts.
    let s = small(&[
        ("<0x41>", 0.0),
        ("<0x4>", 0.0),
        ("<0x41>x", 0.0),
        (" <0x42>", 0.0),
        ("<0x4a>", 0.0),
    ]);
    assert_eq!(s.decode(0, 3), b"A");
    assert_eq!(s.decode(0, 4), [4u8]);
    assert_eq!(s.decode(0, 5), b"A");
    assert_eq!(s.decode(0, 6), b" <0x42>");
    assert_eq!(s.decode(1, 6), b"B");
    assert_eq!(s.decode(0, 7), b"J");
}

#[test]
fn byte_pieces_are_read_as_glibcs_sscanf_reads_them() {
    // Each value as glibc 2.36's sscanf(piece, "<0x%02hhX>", &b) gave it (None: it returned 0).
    let cases: [(&[u8], Option<u8>); 26] = [
        (b"<0x4>", Some(0x04)),
        (b"<0x41>x", Some(0x41)),
        (b"<0x42", Some(0x42)),
        (b"<0x-1>", Some(0xff)),
        (b"<0x 43>", Some(0x43)),
        (b"<0x+7>", Some(0x07)),
        (b"<0x>", None),
        (b"<0x->", None),
        (b"<0xg1>", None),
        (b"<0x0x41>", Some(0)),
        (b"<0x0x>", Some(0)),
        (b"<0xX1>", None),
        (b"<0x\n\t4f>", Some(0x4f)),
        (b"<0x-0>", Some(0)),
        (b"<0x+>", None),
        (b"<0X41>", None),
        (b"<0x4g>", Some(0x04)),
        (b"<0x-f>", Some(0xf1)),
        (b"<0xff>", Some(0xff)),
        (b"<0x123>", Some(0x12)),
        (b"<0x0>", Some(0)),
        (b"<0x 0x5>", Some(0)),
        (b"<0x\x0b7>", Some(0x07)),
        (b"<0x-x1>", None),
        (b"<0x\x0041>", None),
        (b" <0x41>", None),
    ];
    for (piece, want) in cases {
        assert_eq!(
            super::runc_byte_piece(piece),
            want,
            "{:?}",
            String::from_utf8_lossy(piece)
        );
    }
    // A GGUF byte token is exactly <0xHH> (llama.cpp's form; others are refused at load).
    assert_eq!(super::byte_piece_value(b"<0x4a>"), Some(0x4a));
    for other in [&b"<0x4>"[..], b"<0x41>x", b"<0x 43>", b"<0x-1>"] {
        assert_eq!(super::byte_piece_value(other), None);
    }
}

#[test]
fn printable_filters_like_safe_printf() {
    assert_eq!(printable(b""), None);
    assert_eq!(printable(b"\0"), None);
    assert_eq!(printable(b"\0abc"), None);
    assert_eq!(printable(b"ab\0cd"), Some(&b"ab"[..]));
    assert_eq!(printable(b"a"), Some(&b"a"[..]));
    assert_eq!(printable(b"~"), Some(&b"~"[..]));
    for c in [b' ', b'\t', b'\n', 0x0b, 0x0c, b'\r'] {
        assert_eq!(printable(&[c]), Some(&[c][..]));
    }
    for c in [0x01u8, 0x08, 0x0e, 0x1f, 0x7f, 0x80, 0xc3, 0xff] {
        assert_eq!(printable(&[c]), None, "{c:#x}");
    }
    // Longer pieces print whatever bytes they hold.
    assert_eq!(printable(b"\x01\x02"), Some(&b"\x01\x02"[..]));
    assert_eq!(printable("\u{e9}".as_bytes()), Some("\u{e9}".as_bytes()));
}

#[test]
fn greedy_reference_story_decodes_byte_for_byte() {
    let json = include_str!("../../models/stories260K/expected_greedy.json");
    let want = include_bytes!("../../models/stories260K/greedy_empty_prompt_200.txt");
    let start = json.find("\"tokens_after_bos\"").expect("tokens_after_bos");
    let list = &json[start..];
    let list = &list[list.find('[').expect("[") + 1..list.find(']').expect("]")];
    let ids: Vec<u32> = list
        .split(',')
        .map(|s| s.trim().parse().expect("id"))
        .collect();
    assert!(ids.len() > 100);
    let t = tok512();
    let mut prev = 1;
    let mut out = Vec::new();
    for &id in &ids {
        if let Some(p) = printable(t.decode(prev, id)) {
            out.extend_from_slice(p);
        }
        prev = id;
    }
    assert_eq!(String::from_utf8_lossy(&out), String::from_utf8_lossy(want));
}

#[test]
fn merges_take_the_highest_score_and_the_first_pair_on_ties() {
    let v = [
        (" ", 0.0),
        ("a", 0.0),
        ("b", 0.0),
        ("ab", -1.0),
        ("ba", -1.0),
    ];
    let t = small(&v);
    assert_eq!(t.encode(b"aba", false, false), [3, 6, 4]);
    let v = [
        (" ", 0.0),
        ("a", 0.0),
        ("b", 0.0),
        ("ab", -2.0),
        ("ba", -1.0),
    ];
    let t = small(&v);
    assert_eq!(t.encode(b"aba", false, false), [3, 4, 7]);
    // Merges happen repeatedly, including with the dummy prefix.
    let v = [
        (" ", 0.0),
        ("a", 0.0),
        ("b", 0.0),
        ("ab", -1.0),
        (" ab", -2.0),
        (" a", -3.0),
    ];
    let t = small(&v);
    assert_eq!(t.encode(b"ab", false, false), [7]);
    // A merge scoring at or below run.c's starting best score of -1e10 never happens.
    let t = small(&[(" ", 0.0), ("a", 0.0), ("b", 0.0), ("ab", -1e10)]);
    assert_eq!(t.encode(b"ab", false, false), [3, 4, 5]);
    let t = small(&[(" ", 0.0), ("a", 0.0), ("b", 0.0), ("ab", -9.9e9)]);
    assert_eq!(t.encode(b"ab", false, false), [3, 6]);
    let t = small(&[(" ", 0.0), ("a", 0.0), ("b", 0.0), ("ab", f32::NAN)]);
    assert_eq!(t.encode(b"ab", false, false), [3, 4, 5]);
    // run.c merges over the whole sequence, BOS included.
    let t = small(&[(" ", 0.0), ("<s> ", 5.0)]);
    assert_eq!(t.encode(b" ", true, true), [4, 3, 2]);
}

#[test]
fn a_merge_scoring_minus_zero_ties_one_scoring_zero_and_the_earlier_pair_wins() {
    // run.c keeps the first pair unless a later one scores `>` it, and neither of -0.0 and
    // 0.0 is `>` the other: the earlier pair "ab" merges, whichever of the two it scores
    // (tok512's first merge, " t", scores -0.0).
    for (ab, bc) in [(-0.0, 0.0), (0.0, -0.0)] {
        let t = small(&[
            (" ", 0.0),
            ("a", 0.0),
            ("b", 0.0),
            ("c", 0.0),
            ("ab", ab),
            ("bc", bc),
        ]);
        assert_eq!(
            t.encode(b"abc", false, false),
            [3, 7, 6],
            "ab {ab}, bc {bc}"
        );
        let initial = vec![3, 4, 5, 6];
        assert_eq!(t.merge_all(initial.clone()), t.merge_all_reference(initial));
    }
}

#[test]
fn fallbacks_where_run_c_is_undefined() {
    // No " " piece: the dummy prefix is <0x20> when present, else left out.
    let t = small(&[("a", 0.0), ("<0x20>", 0.0)]);
    assert_eq!(t.encode(b"a", true, false), [1, 4, 3]);
    let t = small(&[("a", 0.0)]);
    assert_eq!(t.encode(b"a", true, false), [1, 3]);
    // A byte without a <0xXX> piece falls back to token 0.
    assert_eq!(t.encode(b"ab", false, false), [3, 0]);
}

#[test]
fn embedded_nul_pieces_act_as_c_strings() {
    let t = small(&[(" ", 0.0), ("a\0zz", 0.0), ("b", 0.0), ("ab", -1.0)]);
    // "a\0zz" is looked up as "a" and merges with "b" as "a".
    assert_eq!(t.encode(b"ab", false, false), [3, 6]);
    assert_eq!(t.decode(0, 4), b"a");
    assert_eq!(printable(&t.pieces()[4]), Some(&b"a"[..]));
}

#[test]
fn gguf_round_trip() {
    let t = tok512();
    let toks = t.gguf_tokens().expect("tok512 is UTF-8");
    assert_eq!(toks[259], "\u{2581}t");
    assert_eq!(toks[410], "\u{2581}");
    assert_eq!(toks[1], "\n<s>\n");
    let back = Tokenizer::from_gguf_arrays(&toks, t.scores(), 1, 2).expect("round trip");
    assert_eq!(back.pieces(), t.pieces());
    assert_eq!(back.scores(), t.scores());
    assert_eq!(
        back.encode(b"Once upon a time", true, false),
        [1, 403, 407, 261, 378]
    );
    let bad = Tokenizer::new(
        vec![b"a".to_vec(), b"\xff".to_vec(), b"c".to_vec()],
        vec![0.0; 3],
        1,
        2,
    )
    .expect("valid tokenizer");
    let e = bad.gguf_tokens().expect_err("not UTF-8").to_string();
    assert!(e.contains("token 1"), "{e}");
}

#[test]
fn constructor_checks() {
    assert!(Tokenizer::new(vec![], vec![], 0, 0).is_err());
    assert!(Tokenizer::new(vec![b"a".to_vec()], vec![], 0, 0).is_err());
    assert!(Tokenizer::new(vec![b"a".to_vec(), b"b".to_vec()], vec![0.0; 2], 1, 2).is_err());
    assert!(Tokenizer::from_gguf_arrays(&["a".into()], &[0.0, 1.0], 0, 0).is_err());
    let t = Tokenizer::new(vec![b"a".to_vec(), b"bcd".to_vec()], vec![0.0; 2], 0, 1).expect("ok");
    assert_eq!(t.max_token_length(), 3);
    assert!(Tokenizer::from_llama2c(TOK512, 0).is_err());
    assert!(
        Tokenizer::from_llama2c(TOK512, 2).is_err(),
        "vocab too small for BOS/EOS ids"
    );
}

#[test]
fn malformed_tokenizer_files_are_errors() {
    // Every truncation is an error, never a panic.
    for n in 0..TOK512.len() {
        assert!(
            Tokenizer::from_llama2c(&TOK512[..n], 512).is_err(),
            "length {n}"
        );
    }
    let mut long = TOK512.to_vec();
    long.push(0);
    let e = Tokenizer::from_llama2c(&long, 512)
        .expect_err("trailing byte")
        .to_string();
    assert!(e.contains("1 byte after"), "{e}");
    // Fewer records than the file holds leaves trailing bytes too; more than it holds names
    // both counts: the files do not belong together.
    assert!(Tokenizer::from_llama2c(TOK512, 511).is_err());
    let e = Tokenizer::from_llama2c(TOK512, 513)
        .expect_err("a record short")
        .to_string();
    assert!(
        e.contains("ends after 512 whole records") && e.contains("vocabulary size is 513"),
        "{e}"
    );
    assert!(Tokenizer::from_llama2c(TOK512, usize::MAX).is_err());
    // Record 0 sits at byte 4; its length field at byte 8.
    let mut bad = TOK512.to_vec();
    bad[8..12].copy_from_slice(&9000i32.to_le_bytes());
    let e = Tokenizer::from_llama2c(&bad, 512)
        .expect_err("long record")
        .to_string();
    assert!(
        e.contains("record 0 at byte 0x4: length 9000 runs past end of file"),
        "{e}"
    );
    bad[8..12].copy_from_slice(&(-1i32).to_le_bytes());
    let e = Tokenizer::from_llama2c(&bad, 512)
        .expect_err("negative length")
        .to_string();
    assert!(e.contains("negative length -1"), "{e}");
    let mut bad = TOK512.to_vec();
    bad[0..4].copy_from_slice(&(-7i32).to_le_bytes());
    assert!(Tokenizer::from_llama2c(&bad, 512).is_err());
}

#[test]
fn a_file_with_a_negative_record_length_is_refused_naming_that_record_and_its_byte() {
    // Record 5's offset: past the header and records 0..5 (score, length, bytes each).
    let mut at = 4usize;
    for _ in 0..5 {
        let len = i32::from_le_bytes(TOK512[at + 4..at + 8].try_into().unwrap());
        at += 8 + len as usize;
    }
    let mut bad = TOK512.to_vec();
    bad[at + 4..at + 8].copy_from_slice(&(-1i32).to_le_bytes());
    let p = std::env::temp_dir().join(format!("baro-tok-neg-{}.bin", std::process::id()));
    std::fs::write(&p, &bad).expect("write");
    let e = Tokenizer::read_llama2c_file(&p, 512)
        .expect_err("negative length")
        .to_string();
    let _ = std::fs::remove_file(&p);
    assert!(
        e.contains(&format!("record 5 at byte {at:#x}: negative length -1")),
        "{e}"
    );
}

#[test]
fn a_max_token_length_header_that_lies_is_reported_but_never_sizes_a_buffer() {
    // 2^31 - 1 claimed: the merge buffers are sized by the longest real piece instead (the
    // claim made `encode` ask for 4 GiB), and the text encodes as with the true header.
    let mut lie = TOK512.to_vec();
    lie[0..4].copy_from_slice(&i32::MAX.to_le_bytes());
    let t = Tokenizer::from_llama2c(&lie, 512).expect("loads");
    let truth = tok512();
    assert_eq!(t.max_token_length(), i32::MAX as usize);
    assert_eq!(t.longest_piece, truth.longest_piece);
    assert!(t.longest_piece <= truth.max_token_length());
    let text = b"Once upon a time, there was a little girl";
    assert_eq!(t.encode(text, true, false), truth.encode(text, true, false));
}

/// The heap-ordered merge gives exactly run.c's quadratic loop's tokens: on texts of the
/// vocabulary's own pieces and on bytes with ties of equal scores.
#[test]
fn heap_merge_gives_the_same_tokens_as_run_cs_quadratic_loop() {
    let t = tok512();
    let tied = small(&[("ab", 1.0), ("bc", 1.0), ("abc", 2.0), ("ca", 1.0)]);
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    for case in 0..300 {
        let (tk, text): (&Tokenizer, Vec<u8>) = if case % 2 == 0 {
            let n = 1 + rnd(40);
            let text = (0..n)
                .flat_map(|_| t.pieces()[rnd(512)].clone())
                .filter(|&b| b != 0)
                .collect();
            (&t, text)
        } else {
            (&tied, (0..1 + rnd(30)).map(|_| b"abc "[rnd(4)]).collect())
        };
        // The per-code-point tokens before merging, as encode makes them.
        let initial: Vec<u32> = {
            let mut v = vec![];
            for ch in String::from_utf8_lossy(&text).chars() {
                let mut b = [0u8; 4];
                let s = ch.encode_utf8(&mut b);
                match tk.lookup(s.as_bytes()) {
                    Some(id) => v.push(id),
                    None => v.extend(s.bytes().map(|b| tk.byte_fallback[b as usize].unwrap_or(0))),
                }
            }
            v
        };
        assert_eq!(
            tk.merge_all(initial.clone()),
            tk.merge_all_reference(initial),
            "case {case}: {:?}",
            String::from_utf8_lossy(&text)
        );
    }
}

/// A megabyte of prompt is tokenized in seconds (run.c's quadratic merge loop took about
/// 15 s for 120 KB and would take most of an hour for 1 MB), so a prompt too long for the
/// context is refused at once, whatever the vocabulary's longest piece.
#[test]
fn a_megabyte_prompt_is_tokenized_in_seconds_not_hours() {
    let t = tok512();
    let words = [
        "the ", "cat ", "sat ", "on ", "a ", "mat ", "once ", "upon ", "time ",
    ];
    let text: Vec<u8> = (0..(1 << 20) / 4)
        .flat_map(|i| words[(i * 7 + i / 3) % words.len()].bytes())
        .take(1 << 20)
        .collect();
    let t0 = std::time::Instant::now();
    let ids = t.encode(&text, true, false);
    let took = t0.elapsed();
    assert!(ids.len() > 1000, "{} tokens", ids.len());
    assert!(
        took < std::time::Duration::from_secs(60),
        "1 MiB took {took:?}"
    );
}
