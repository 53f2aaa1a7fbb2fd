//! The codec's unit tests (varints, records, compression, the caps).

use super::*;

#[test]
fn varints_and_zigzag_round_trip_at_the_edges() {
    for v in [0u64, 1, 127, 128, 16_383, 16_384, u32::MAX as u64, u64::MAX] {
        let mut out = vec![];
        put_varint(&mut out, v);
        assert_eq!(Bytes::new(&out).varint("t").unwrap(), v);
    }
    for d in [0i32, 1, -1, i32::MAX, i32::MIN] {
        assert_eq!(unzigzag32(zigzag32(d)), d);
    }
    for d in [0i64, 1, -1, i64::MAX, i64::MIN] {
        assert_eq!(unzigzag64(zigzag64(d)), d);
    }
    assert!(Bytes::new(&[0xff; 11]).varint("t").is_err());
    assert!(Bytes::new(&[0x80]).varint("t").is_err());
}

#[test]
fn spans_stamps_round_trip_every_stamp_including_half_present_ones() {
    let mut s = Spans::new(3, 2, 2);
    s.set_span(0, 0, 5, 9);
    s.set_span(0, 1, 7, MISSING);
    s.set_span(1, 2, MISSING, 40);
    s.set_barrier(0, 1, 11, 30);
    s.set_barrier(1, 2, u32::MAX - 1, 3);
    let raw = s.stamps();
    assert_eq!(raw.grid, 3);
    assert_eq!(raw.start, [5, 7, MISSING, MISSING, MISSING, MISSING]);
    assert_eq!(raw.end, [9, MISSING, MISSING, MISSING, MISSING, 40]);
    let mut out = vec![];
    encode_spans(&mut out, &s);
    let back = decode_spans(&mut Bytes::new(&out)).unwrap();
    assert_eq!(back.stamps(), raw);
    assert_eq!(back, s);
}

#[test]
fn spans_rows_that_cannot_fit_the_payload_or_the_caps_are_refused_before_allocating() {
    let spans = |grid: u64, rows: u64| {
        let mut out = vec![];
        put_varint(&mut out, grid);
        put_varint(&mut out, rows);
        put_varint(&mut out, 0);
        decode_spans(&mut Bytes::new(&out)).unwrap_err()
    };
    let e = spans(100, 100);
    assert!(e.contains("do not fit"), "{e}");
    let e = spans(1 << 20, 1);
    assert!(e.contains("larger than the largest dispatch"), "{e}");
    let e = spans(1000, 1 << 20);
    assert!(e.contains("stamp pairs a frame may hold"), "{e}");
}

#[test]
fn a_payload_over_the_cap_is_refused_before_it_is_allocated() {
    let mut c = vec![];
    put_varint(&mut c, MAX_PAYLOAD as u64 + 1);
    c.extend_from_slice(&vec![0u8; MAX_PAYLOAD / 200]);
    let e = decompress(&c, &mut vec![]).unwrap_err();
    assert!(e.contains("cap"), "{e}");
}

#[test]
fn index_round_trips_with_non_monotonic_passes() {
    let e = vec![(0, 100), (5, 200), (3, 900), (u64::MAX, 1000)];
    let mut out = vec![];
    encode_index(&mut out, &e);
    assert_eq!(decode_index(&out, 1000).unwrap(), e);
}

#[test]
fn an_index_of_more_entries_than_its_records_can_hold_is_refused_before_it_is_sized() {
    // Four entries need four records of at least 10 bytes each.
    let e = vec![(0, 100), (1, 200), (2, 300), (3, 400)];
    let mut out = vec![];
    encode_index(&mut out, &e);
    assert_eq!(decode_index(&out, 40).unwrap(), e);
    let err = decode_index(&out, 39).unwrap_err();
    assert!(err.contains("39 bytes of records hold at most 3"), "{err}");
    // A count of 2^40 in a payload that could hold it by its own size is still refused.
    let mut huge = vec![];
    put_varint(&mut huge, 1 << 40);
    huge.extend_from_slice(&vec![0u8; 1 << 20]);
    assert!(decode_index(&huge, 1 << 20).is_err());
}

#[test]
fn compression_round_trips_and_is_skipped_where_it_does_not_pay() {
    let raw: Vec<u8> = (0..4096u32).map(|i| (i % 7) as u8).collect();
    let mut c = vec![];
    assert!(compress(&raw, &mut c));
    let mut d = vec![];
    decompress(&c, &mut d).unwrap();
    assert_eq!(d, raw);
    assert!(!compress(b"tiny", &mut c));
}

#[test]
fn a_decompression_bomb_is_refused() {
    let mut c = vec![];
    put_varint(&mut c, 1 << 40);
    c.extend_from_slice(&[0x1f, 0, 0]);
    assert!(decompress(&c, &mut vec![]).is_err());
}
