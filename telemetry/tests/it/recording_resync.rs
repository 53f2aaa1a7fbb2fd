//! Reading past damage: a damaged stretch costs the records it touches and no more, each
//! stretch is one error at its offset and one [`Skip`], the index of an unfinished file
//! holds every sound frame, and a crafted file cannot make the search for the next sound
//! record unbounded.

#![allow(clippy::unwrap_used)]

use std::io::Cursor;

use baro_telemetry::recording::{diff, Compression, Reader, RecordingError, Skip, Writer};
use baro_telemetry::synth::synthetic_run;
use baro_telemetry::Telemetry;

use super::recording::{header, record, small, stream};

/// Every message read, every error, the skips, whether the footer was read.
fn read_all_past_damage(bytes: &[u8]) -> (Vec<Telemetry>, Vec<RecordingError>, Vec<Skip>, bool) {
    let mut r = Reader::new(Cursor::new(bytes)).unwrap();
    let (mut got, mut errs) = (vec![], vec![]);
    for m in r.by_ref() {
        match m {
            Ok(m) => got.push(m),
            Err(e) => errs.push(e),
        }
    }
    (got, errs, r.skips().to_vec(), r.finished())
}

/// Where each message's record starts, and where the footer starts.
fn starts(run: &baro_telemetry::RunDetails, ends: &[u64]) -> Vec<u64> {
    let data_start = Writer::new(Vec::new(), &header(run)).unwrap().stats().bytes;
    std::iter::once(data_start)
        .chain(ends.iter().copied())
        .collect()
}

/// A finished recording of `passes` passes of a 4-layer run: the run, its messages, the
/// file, and where each message's record starts (then the footer's).
fn recorded(
    passes: u64,
    seed: u64,
) -> (
    baro_telemetry::RunDetails,
    Vec<Telemetry>,
    Vec<u8>,
    Vec<u64>,
) {
    let run = synthetic_run(4, 10, 5);
    let msgs = stream(&run, passes, seed);
    let (bytes, ends) = record(&run, &msgs, Compression::Lz4);
    let at = starts(&run, &ends);
    (run, msgs, bytes, at)
}

/// The passes `r`'s index holds (built by a walk where the file has no footer).
fn indexed_passes(r: &mut Reader<Cursor<&Vec<u8>>>) -> Vec<u64> {
    r.ensure_index()
        .unwrap()
        .entries()
        .iter()
        .map(|e| e.0)
        .collect()
}

/// The index in `msgs` of pass `pass`'s frame.
fn frame_of(msgs: &[Telemetry], pass: u64) -> usize {
    msgs.iter()
        .position(|m| matches!(m, Telemetry::Frame(f) if f.pass == pass))
        .unwrap()
}

#[test]
fn a_flipped_byte_in_any_record_costs_that_record_and_no_other() {
    let (run, msgs) = small();
    let (bytes, ends) = record(&run, &msgs, Compression::Lz4);
    let at = starts(&run, &ends);
    for i in 0..msgs.len() {
        let mut want = msgs.clone();
        want.remove(i);
        for b in at[i]..at[i + 1] {
            for mask in [0x01u8, 0x80, 0xff] {
                let mut d = bytes.clone();
                d[b as usize] ^= mask;
                let (got, errs, skips, finished) = read_all_past_damage(&d);
                let case = format!("record {i}, byte {b} ^ {mask:#x}");
                assert_eq!(got, want, "{case}");
                assert_eq!(errs.len(), 1, "{case}: {errs:?}");
                assert_eq!(errs[0].offset(), Some(at[i]), "{case}: {}", errs[0]);
                assert_eq!(
                    skips,
                    [Skip {
                        at: at[i],
                        resumed: Some(at[i + 1]),
                        gave_up: false
                    }],
                    "{case}"
                );
                assert!(finished, "{case}: the footer was read");
            }
        }
    }
}

#[test]
fn a_flipped_byte_in_the_footer_or_trailer_keeps_every_message_and_reads_as_unfinished() {
    let (run, msgs) = small();
    let (bytes, ends) = record(&run, &msgs, Compression::Lz4);
    let footer = *ends.last().unwrap();
    for b in footer as usize..bytes.len() {
        let mut d = bytes.clone();
        d[b] ^= 0x01;
        let (got, errs, skips, finished) = read_all_past_damage(&d);
        assert_eq!(got, msgs, "byte {b}");
        assert_eq!(errs.len(), 1, "byte {b}: {errs:?}");
        assert!(errs[0].offset().unwrap() >= footer, "byte {b}: {}", errs[0]);
        assert_eq!(skips.len(), 1, "byte {b}");
        assert_eq!(skips[0].resumed, None, "byte {b}");
        assert!(
            !finished,
            "byte {b}: a damaged footer is not a finished file"
        );
    }
}

#[test]
fn a_torn_stretch_across_records_costs_only_the_records_it_touches() {
    let (_, msgs, bytes, at) = recorded(30, 3);
    // Zeroes from inside record 6 to inside record 11: records 6 to 11 are lost.
    let (from, to) = (at[6] + 5, at[11] + 3);
    let mut d = bytes.clone();
    d[from as usize..to as usize].fill(0);
    let (got, errs, skips, finished) = read_all_past_damage(&d);
    let want: Vec<_> = msgs[..6].iter().chain(&msgs[12..]).cloned().collect();
    assert_eq!(got, want);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        skips,
        [Skip {
            at: at[6],
            resumed: Some(at[12]),
            gave_up: false
        }]
    );
    assert!(finished);
    let mut r = Reader::new(Cursor::new(&d)).unwrap();
    for _ in r.by_ref() {}
    assert_eq!(r.skipped_bytes(), at[12] - at[6]);
}

#[test]
fn many_damaged_records_each_cost_only_themselves_and_each_is_one_error() {
    let (_, msgs, bytes, at) = recorded(60, 9);
    let mut d = bytes.clone();
    let hit: Vec<usize> = (2..msgs.len() - 1).step_by(3).collect();
    for (k, &i) in hit.iter().enumerate() {
        // A different byte of each: the head's length, its kind, its checksum, the payload.
        let off = [1u64, 4, 7, 30][k % 4].min(at[i + 1] - at[i] - 1);
        d[(at[i] + off) as usize] ^= 0x40;
    }
    let (got, errs, skips, finished) = read_all_past_damage(&d);
    let want: Vec<_> = (0..msgs.len())
        .filter(|i| !hit.contains(i))
        .map(|i| msgs[i].clone())
        .collect();
    assert_eq!(got, want);
    assert_eq!(errs.len(), hit.len());
    let offsets: Vec<u64> = errs.iter().map(|e| e.offset().unwrap()).collect();
    assert_eq!(offsets, hit.iter().map(|&i| at[i]).collect::<Vec<_>>());
    assert_eq!(skips.len(), hit.len());
    assert!(finished);
}

#[test]
fn an_unfinished_damaged_recording_indexes_and_seeks_to_every_sound_frame() {
    let run = synthetic_run(4, 10, 5);
    let msgs = stream(&run, 20, 3);
    let mut w = Writer::new(Vec::new(), &header(&run)).unwrap();
    let mut at = vec![w.stats().bytes];
    for m in &msgs {
        w.write(m).unwrap();
        at.push(w.stats().bytes);
    }
    let mut d = w.get_ref().clone(); // no footer: a crash
    let frame_of = |p: u64| {
        msgs.iter()
            .position(|m| matches!(m, Telemetry::Frame(f) if f.pass == p))
            .unwrap()
    };
    let damaged = frame_of(7);
    d[(at[damaged] + 40) as usize] ^= 0x08;
    let mut r = Reader::new(Cursor::new(&d)).unwrap();
    assert!(r.index().is_none());
    let passes = indexed_passes(&mut r);
    assert_eq!(passes, (0..20).filter(|&p| p != 7).collect::<Vec<_>>());
    assert!(r.seek_to_pass(12).unwrap());
    assert_eq!(r.next().unwrap().unwrap(), msgs[frame_of(12)]);
    let Telemetry::Start(want) = &msgs[0] else {
        unreachable!()
    };
    assert_eq!(r.run_at_pass(15).unwrap().as_ref(), Some(want));
    assert!(
        r.frame(7).unwrap().is_none(),
        "the damaged frame is not indexed"
    );
}

#[test]
fn a_crafted_run_of_plausible_heads_spends_the_resync_bound_and_stops() {
    // A damaged record, then 2 MiB of heads that each fit the file and chain to the next
    // (a frame of 450,000 bytes; 450,009 is a multiple of the 9-byte stride) with checksums
    // that never hold: without a bound, every one would be checksummed (≈ 100 GB).
    let (run, msgs) = small();
    let mut w = Writer::new(Vec::new(), &header(&run)).unwrap();
    w.write(&msgs[0]).unwrap();
    let mut d = w.get_ref().clone();
    let damaged = d.len() as u64;
    let len: u32 = 450_000;
    assert_eq!((len as usize + 9) % 9, 0);
    let mut head = len.to_le_bytes().to_vec();
    head.push(3);
    head.extend_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    for _ in 0..(2 << 20) / 9 {
        d.extend_from_slice(&head);
    }
    let t = std::time::Instant::now();
    let (got, errs, skips, _) = read_all_past_damage(&d);
    assert_eq!(got, msgs[..1]);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].offset(), Some(damaged));
    assert_eq!(
        skips,
        [Skip {
            at: damaged,
            resumed: None,
            gave_up: true
        }]
    );
    // Not a timing assertion (the bound is in bytes); said for the one reading the log.
    eprintln!("resync gave up after {:?}", t.elapsed());
}

#[test]
fn random_damage_yields_only_original_messages_in_order_and_one_skip_per_error() {
    let run = synthetic_run(4, 10, 5);
    let msgs = stream(&run, 30, 5);
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let data_start = Writer::new(Vec::new(), &header(&run))
        .unwrap()
        .stats()
        .bytes as usize;
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n as u64) as usize
    };
    for case in 0..600 {
        let mut d = bytes.clone();
        for _ in 0..1 + rnd(6) {
            let at = data_start + rnd(d.len() - data_start);
            let long = rnd(4) == 0;
            let n = 1 + rnd(if long { 300 } else { 3 });
            for b in d.iter_mut().skip(at).take(n) {
                *b = rnd(256) as u8;
            }
        }
        if rnd(5) == 0 {
            d.truncate(data_start + rnd(d.len() - data_start));
        }
        let (got, errs, skips, _) = read_all_past_damage(&d);
        // Every message read is an original one, in the original order: a resync never
        // makes up a message or goes back.
        let mut want = msgs.iter();
        for m in &got {
            assert!(
                want.any(|w| w == m),
                "case {case}: a message out of order or not in the original"
            );
        }
        assert_eq!(errs.len(), skips.len(), "case {case}");
        assert!(
            skips
                .windows(2)
                .all(|w| w[0].resumed.is_some_and(|r| r <= w[1].at)),
            "case {case}: {skips:?}"
        );
        assert!(skips.iter().all(|s| !s.gave_up), "case {case}: {skips:?}");
    }
}

#[test]
fn random_flips_cost_exactly_the_records_they_hit_but_for_one_before_a_hit_head() {
    let (_, msgs, bytes, at) = recorded(50, 11);
    let footer = *at.last().unwrap();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    let mut passed_over = 0;
    for case in 0..60 {
        let mut d = bytes.clone();
        let mut hit = vec![false; msgs.len()];
        let mut head_hit = vec![false; msgs.len()];
        for _ in 0..1 + rnd(12) {
            let b = at[0] + rnd(footer - at[0]);
            d[b as usize] ^= 1 << rnd(8);
            let i = at.partition_point(|&s| s <= b) - 1;
            hit[i] = true;
            head_hit[i] |= b < at[i] + 9;
        }
        let (got, errs, skips, finished) = read_all_past_damage(&d);
        assert!(finished, "case {case}");
        assert_eq!(errs.len(), skips.len(), "case {case}");
        // Every record not hit is read, except one whose next record's head was hit and
        // that follows damage itself: its chain of heads is broken at both ends.
        let mut want = vec![];
        for i in 0..msgs.len() {
            if hit[i] {
                continue;
            }
            let excused = i > 0 && hit[i - 1] && head_hit.get(i + 1) == Some(&true);
            if got.contains(&msgs[i]) {
                want.push(msgs[i].clone());
            } else {
                assert!(
                    excused,
                    "case {case}: record {i} was not hit and is missing"
                );
                passed_over += 1;
            }
        }
        assert_eq!(got, want, "case {case}: only original records, in order");
    }
    eprintln!("sound records passed over between two damaged ones: {passed_over}");
}

#[test]
fn diff_pairs_tokens_by_pass_so_a_pass_lost_to_damage_is_no_mismatch_and_a_real_one_is() {
    let (run, msgs, bytes, at) = recorded(12, 4);
    let five = frame_of(&msgs, 5);
    let mut d = bytes.clone();
    d[(at[five] + 6) as usize] ^= 0x01; // the record's checksum
    let compare = |a: &[u8], b: &[u8]| {
        diff::compare(
            &mut Reader::new(Cursor::new(a)).unwrap(),
            &mut Reader::new(Cursor::new(b)).unwrap(),
        )
        .unwrap()
    };
    let r = compare(&d, &bytes);
    assert_eq!(
        r.tokens,
        diff::Tokens::Prefix {
            common: 11,
            a_passes: 11,
            b_passes: 12
        },
        "position pairing would say pass 6 differs"
    );
    assert!(r
        .a
        .damage
        .as_deref()
        .is_some_and(|s| s.contains("compared")));
    // A token that does differ after the lost pass is still found, at its own pass.
    let mut changed = msgs.clone();
    for m in &mut changed {
        if let Telemetry::Frame(f) = m {
            if f.pass == 9 {
                f.next += 1;
            }
        }
    }
    let (c, _) = record(&run, &changed, Compression::Lz4);
    assert!(
        matches!(compare(&d, &c).tokens, diff::Tokens::Differ { pass: 9, .. }),
        "{:?}",
        compare(&d, &c).tokens
    );
}

/// A record of a kind a newer writer has (0x20), with its checksum.
fn unknown_record(payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_le_bytes();
    let mut crc = crc32fast::Hasher::new();
    crc.update(&len);
    crc.update(&[0x20]);
    crc.update(payload);
    let mut r = len.to_vec();
    r.push(0x20);
    r.extend_from_slice(&crc.finalize().to_le_bytes());
    r.extend_from_slice(payload);
    r
}

/// An unfinished file of `msgs` with a newer writer's record after each, and where each
/// message's record starts.
fn with_unknown_records(
    run: &baro_telemetry::RunDetails,
    msgs: &[Telemetry],
) -> (Vec<u8>, Vec<u64>) {
    let mut w = Writer::new(Vec::new(), &header(run)).unwrap();
    let mut out = w.get_ref().clone();
    let mut at = vec![];
    for m in msgs {
        let before = w.get_ref().len();
        w.write(m).unwrap();
        at.push(out.len() as u64);
        out.extend_from_slice(&w.get_ref()[before..]);
        out.extend_from_slice(&unknown_record(b"from a newer writer"));
    }
    (out, at)
}

#[test]
fn past_damage_the_search_finds_its_way_between_records_of_a_newer_writers_kind() {
    let run = synthetic_run(4, 10, 5);
    let msgs = stream(&run, 20, 2);
    let (mut d, at) = with_unknown_records(&run, &msgs);
    d[(at[8] + 30) as usize] ^= 0x10;
    let (got, errs, skips, _) = read_all_past_damage(&d);
    let mut want = msgs.clone();
    want.remove(8);
    assert_eq!(got, want, "every message but the damaged one");
    assert_eq!(errs.len(), 1);
    assert_eq!(skips.len(), 1);
    assert!(skips[0].resumed.is_some());
}

#[test]
fn the_index_and_run_at_pass_check_every_record_as_iteration_does() {
    let run = synthetic_run(4, 10, 5);
    let mut second = run.clone();
    second.model = "second".into();
    let mut msgs = stream(&run, 20, 6);
    let ten = frame_of(&msgs, 10);
    msgs.insert(ten, Telemetry::Start(second.clone()));
    // No footer; the length of a sensor record before the second Start is damaged so that
    // it points past frames: a walk that trusts heads without their checksums skips them.
    let mut w = Writer::new(Vec::new(), &header(&run)).unwrap();
    let mut at = vec![];
    for m in &msgs {
        at.push(w.get_ref().len() as u64);
        w.write(m).unwrap();
    }
    let mut d = w.get_ref().clone();
    let sensor = msgs[..ten]
        .iter()
        .rposition(|m| matches!(m, Telemetry::Sensor(_)))
        .unwrap();
    d[(at[sensor] + 1) as usize] ^= 0x01; // +256 bytes: inside the next records
    let mut it = Reader::new(Cursor::new(&d)).unwrap();
    let frames: Vec<u64> = it
        .by_ref()
        .filter_map(|m| match m {
            Ok(Telemetry::Frame(f)) => Some(f.pass),
            _ => None,
        })
        .collect();
    let mut r = Reader::new(Cursor::new(&d)).unwrap();
    let indexed = indexed_passes(&mut r);
    assert_eq!(indexed, frames, "the index holds what iteration reads");
    assert_eq!(frames.len(), 20);
    assert_eq!(r.run_at_pass(15).unwrap(), Some(second));
    assert_eq!(r.run_at_pass(3).unwrap(), Some(run));
}

#[test]
fn seeking_back_over_damage_counts_it_once_and_costs_no_more_search() {
    let (_, msgs, bytes, at) = recorded(30, 8);
    let mut d = bytes.clone();
    let i = frame_of(&msgs, 12);
    // The head's length: the search, not the checksum's shortcut, finds the next record.
    d[(at[i] + 2) as usize] ^= 0x40;
    let mut r = Reader::new(Cursor::new(&d)).unwrap();
    for _ in 0..2000 {
        assert!(r.seek_to_pass(0).unwrap());
        let n = r
            .by_ref()
            .filter(|m| matches!(m, Ok(Telemetry::Frame(_))))
            .count();
        assert_eq!(n, 29);
    }
    assert_eq!(r.skips().len(), 1, "{:?}", r.skips());
    assert!(!r.skips()[0].gave_up);
}
