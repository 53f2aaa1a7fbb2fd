//! The ring decoder against a reference decoder, on crafted and random frames.

use super::*;
use crate::run::tests::details;
use crate::BarrierTiming;

const L: RingLayout = RingLayout {
    stages: 3,
    levels: 2,
    grid: 2,
};

/// A frame for `L`: stage spans then barrier stamps, absolute device ns.
fn frame(seq: u32, spans: &[[u64; 2]; 6], bar: &[[u64; 2]; 4]) -> Vec<u32> {
    let mut w = vec![seq, seq.wrapping_sub(1), 2, 0];
    for r in spans.iter().chain(bar) {
        w.extend([
            r[0] as u32,
            (r[0] >> 32) as u32,
            r[1] as u32,
            (r[1] >> 32) as u32,
        ]);
    }
    w
}

const SPANS: [[u64; 2]; 6] = [
    [1000, 1100],
    [1000, 1500],
    [1100, 1200],
    [1500, 1600],
    [1700, 1800],
    [1710, 1800],
];
const BAR: [[u64; 2]; 4] = [[1200, 1700], [1600, 1710], [0, 0], [0, 0]];

/// The decoder as first written (one scan for the origin, then every stamp set through
/// `Spans`' checked setters): the slow, obvious reference of the fast one.
fn decode_reference(
    lay: &RingLayout,
    words: &[u32],
    expect_seq: u32,
    barriers: bool,
) -> Result<DecodedRing, RingError> {
    let need = lay.frame_words();
    if words.len() < need {
        return Err(RingError::Short {
            have: words.len(),
            need,
        });
    }
    if words[0] != expect_seq {
        return Err(RingError::Sequence {
            found: words[0],
            expected: expect_seq,
        });
    }
    if words[2] != lay.grid {
        return Err(RingError::Unfinished {
            finished: words[2],
            grid: lay.grid,
        });
    }
    let stamp = |w: usize| (words[w] as u64) | ((words[w + 1] as u64) << 32);
    let (ns, nl, g) = (lay.stages, lay.levels, lay.grid);
    let mut base: Option<u64> = None;
    for s in 0..ns {
        for w in 0..g {
            let t = stamp(lay.stage_record(s, w));
            if t != 0 && base.is_none_or(|b| rel_ns(t, b) > u32::MAX as u64 / 2) {
                base = Some(t);
            }
        }
    }
    let base = base.ok_or(RingError::NoStamps)?;
    let rel = |t: u64| -> u32 {
        if t == 0 {
            MISSING
        } else {
            (rel_ns(t, base) as u32).min(MISSING - 1)
        }
    };
    let mut spans = Spans::new(g, ns, if barriers { nl } else { 0 });
    for s in 0..ns {
        for w in 0..g {
            let r = lay.stage_record(s, w);
            let (a, b) = (stamp(r), stamp(r + 2));
            if a != 0 && b != 0 {
                spans.set_span(s, w, rel(a), rel(b));
            }
        }
    }
    if barriers {
        for l in 0..nl {
            for w in 0..g {
                let r = lay.barrier_record(l, w);
                spans.set_barrier(l, w, rel(stamp(r)), rel(stamp(r + 2)));
            }
        }
    }
    Ok(DecodedRing {
        spans,
        device_start_ns: base,
    })
}

fn le_bytes(words: &[u32]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

/// splitmix64, for the random frames below.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A random frame of `lay`: stamps around `t0` within `spread` ns, a quarter of them 0;
/// with `hi_noise` some stamps get another high word (only the low word is trusted).
fn random_frame(lay: &RingLayout, seed: u64, t0: u64, spread: u64, hi_noise: bool) -> Vec<u32> {
    let mut st = seed;
    let mut w = vec![0u32; lay.frame_words()];
    w[0] = 5;
    w[1] = 4;
    w[2] = lay.grid;
    for i in (HEADER_WORDS..w.len()).step_by(2) {
        let r = next(&mut st);
        if r.is_multiple_of(4) {
            continue;
        }
        let mut t = t0.wrapping_add(next(&mut st) % spread.max(1));
        if hi_noise && r.is_multiple_of(7) {
            t = t.wrapping_add(1 << 32);
        }
        w[i] = t as u32;
        w[i + 1] = (t >> 32) as u32;
    }
    w
}

#[test]
fn in_place_bytes_and_words_decode_like_the_reference() {
    let lays = [
        L,
        RingLayout {
            stages: 7,
            levels: 4,
            grid: 5,
        },
        RingLayout {
            stages: 1,
            levels: 1,
            grid: 1,
        },
    ];
    let starts = [
        1000,
        0x0000_1234_5678_0000,
        (1u64 << 32) - 300, // low word wraps mid-pass (lavapipe)
        u32::MAX as u64 - 5,
        0xffff_ffff_ffff_ff00, // the 64-bit clock wraps too
    ];
    let mut n = 0;
    for lay in lays {
        for (k, &t0) in starts.iter().enumerate() {
            for (spread, hi_noise) in [(2_000u64, false), (2_000, true), (3 << 30, false)] {
                for seed in 0..8u64 {
                    let w = random_frame(&lay, seed * 31 + k as u64, t0, spread, hi_noise);
                    for barriers in [true, false] {
                        let want = decode_reference(&lay, &w, 5, barriers);
                        assert_eq!(lay.decode(&w, 5, barriers), want, "{lay:?} t0 {t0:#x}");
                        assert_eq!(
                            lay.decode_le_bytes(&le_bytes(&w), 5, barriers),
                            want,
                            "{lay:?} t0 {t0:#x} spread {spread} seed {seed}"
                        );
                        n += 1;
                    }
                }
            }
        }
    }
    assert_eq!(n, 3 * 5 * 3 * 8 * 2);
}

#[test]
fn in_place_bytes_need_no_alignment_and_refuse_what_words_refuse() {
    let w = frame(8, &SPANS, &BAR);
    // At an odd offset in a larger buffer, as a slice of a mapped readback.
    let mut buf = vec![0xaau8; 3];
    buf.extend(le_bytes(&w));
    buf.extend([0x55; 9]);
    let bytes = &buf[3..3 + 4 * w.len()];
    assert_eq!(L.decode_le_bytes(bytes, 8, true), L.decode(&w, 8, true));
    assert!(L.decode_le_bytes(bytes, 8, true).is_ok());
    // Torn, unfinished, short, unstamped: the same errors.
    assert_eq!(
        L.decode_le_bytes(bytes, 9, true),
        Err(RingError::Sequence {
            found: 8,
            expected: 9
        })
    );
    let mut u = w.clone();
    u[2] = 1;
    assert_eq!(
        L.decode_le_bytes(&le_bytes(&u), 8, true),
        L.decode(&u, 8, true)
    );
    assert_eq!(
        L.decode_le_bytes(&bytes[..4 * 10 + 3], 8, true),
        Err(RingError::Short { have: 10, need: 44 })
    );
    let z = frame(8, &[[0, 0]; 6], &[[0, 0]; 4]);
    assert_eq!(
        L.decode_le_bytes(&le_bytes(&z), 8, true),
        Err(RingError::NoStamps)
    );
}

#[test]
fn the_origin_is_the_first_start_with_the_earliest_low_word() {
    // Two starts share the earliest low word, 2^32 ns apart: the scan keeps the first
    // one in stage-major order, and so must the fast path.
    let t = 0x0000_0007_0000_1000u64;
    let later = t + (1 << 32);
    let mut spans = SPANS;
    spans[0] = [later, later + 100];
    spans[1] = [t, t + 500];
    for r in spans.iter_mut().skip(2) {
        r[0] += t - 1000;
        r[1] += t - 1000;
    }
    let w = frame(8, &spans, &[[0, 0]; 4]);
    let d = L.decode(&w, 8, true).unwrap();
    assert_eq!(d.device_start_ns, later);
    assert_eq!(Ok(d), decode_reference(&L, &w, 8, true));
}

#[test]
fn timings_taken_level_by_level_equal_decoding_then_computing() {
    // The 1B-like synthetic run, and odd ones: levels out of stage order, a stage in two
    // levels, a stage in none, a level naming a stage past the layout.
    let base = crate::synth::synthetic_run(5, 12, 6);
    let mut odd = base.clone();
    odd.levels.swap(1, 3);
    odd.levels[2].stages.reverse();
    odd.levels[4].stages.push(0);
    odd.levels[5].stages.push(99);
    let taken: Vec<u32> = odd.levels[0].stages.drain(..).collect();
    assert!(!taken.is_empty());
    let mut n = 0;
    for run in [&base, &odd, &details()] {
        let lay = run.ring_layout();
        for seed in 0..12u64 {
            for (t0, spread) in [(0x1234_0000_0000u64, 5_000u64), ((1u64 << 32) - 700, 5_000)] {
                let w = random_frame(&lay, seed, t0, spread, seed % 3 == 0);
                let bytes = le_bytes(&w);
                for (barriers, disp) in [(true, &[][..]), (false, &[5, 6, 7, 8][..])] {
                    let want = decode_reference(&lay, &w, 5, barriers).map(|d| {
                        let t = Timings {
                            stages: d.spans.stage_timings(&run.stages, &run.levels, disp),
                            barriers: d.spans.barrier_timings(),
                        };
                        (d, t)
                    });
                    let got = lay.decode_le_bytes_with_timings(&bytes, 5, barriers, run, disp);
                    assert_eq!(got, want, "seed {seed} t0 {t0:#x} barriers {barriers}");
                    n += 1;
                }
            }
        }
    }
    assert_eq!(n, 3 * 12 * 2 * 2);
}

#[test]
fn a_frame_reads_its_ring_in_place_and_a_torn_one_is_flagged_never_read() {
    let rd = details();
    let bytes = le_bytes(&frame(8, &SPANS, &BAR));
    let mut f = crate::Frame::default();
    f.read_ring(&rd, &bytes, 8, true);
    let d = L.decode(&frame(8, &SPANS, &BAR), 8, true).unwrap();
    assert!(!f.torn);
    assert_eq!(f.device_start_ns, Some(1000));
    assert_eq!(f.stages, d.spans.stage_timings(&rd.stages, &rd.levels, &[]));
    assert_eq!(f.barriers, d.spans.barrier_timings());
    assert_eq!(f.spans, d.spans);
    // Torn (the sequence of another pass), unfinished, short: flagged, nothing read.
    let mut unfinished = frame(8, &SPANS, &BAR);
    unfinished[2] = 1;
    for (ring, seq) in [
        (bytes.clone(), 9),
        (le_bytes(&unfinished), 8),
        (bytes[..40].to_vec(), 8),
    ] {
        let mut f = crate::Frame::default();
        f.read_ring(&rd, &ring, seq, true);
        assert!(f.torn);
        assert!(f.spans.is_empty() && f.stages.is_empty() && f.barriers.is_empty());
        assert_eq!(f.device_start_ns, None);
    }
    // Multi mode: no barrier rows; each stage charged its dispatch time.
    let mut f = crate::Frame {
        dispatch_ns: vec![7, 8, 9],
        ..Default::default()
    };
    f.read_ring(&rd, &bytes, 8, false);
    assert_eq!(f.spans.levels(), 0);
    assert!(f.barriers.is_empty());
    assert_eq!(
        f.stages.iter().map(|s| s.charged_ns).collect::<Vec<_>>(),
        [7, 8, 9]
    );
}

#[test]
fn layout_places_barrier_records_after_every_stage_record() {
    assert_eq!(L.frame_words(), 4 + (3 + 2) * 2 * 4);
    assert_eq!(L.stage_record(0, 0), 4);
    assert_eq!(L.stage_record(1, 1), 4 + 3 * 4);
    assert_eq!(L.barrier_record(0, 0), 4 + 6 * 4);
    assert_eq!(L.barrier_record(1, 1), 4 + 9 * 4);
    assert_eq!(frame(8, &SPANS, &BAR).len(), L.frame_words());
    assert_eq!(details().ring_layout(), L);
}

#[test]
fn complete_frame_decodes_to_offsets_from_the_earliest_start() {
    let d = L.decode(&frame(8, &SPANS, &BAR), 8, true).unwrap();
    assert_eq!(d.device_start_ns, 1000);
    assert_eq!(d.spans.span(0, 1), Some((0, 500)));
    assert_eq!(d.spans.span(2, 1), Some((710, 800)));
    assert_eq!(d.spans.arrive(0, 1), Some(600));
    assert_eq!(d.spans.exit(0, 0), Some(700));
    assert_eq!(d.spans.exit(1, 0), None, "the last level has no barrier");
    let rd = details();
    let t = d.spans.stage_timings(&rd.stages, &rd.levels, &[]);
    assert_eq!(t[1].charged_ns, 405);
    assert_eq!(
        d.spans.barrier_timings(),
        vec![BarrierTiming {
            level: 0,
            arrival_spread_ns: 400,
            release_ns: 100,
            exit_spread_ns: 10
        }]
    );
}

#[test]
fn torn_frame_with_the_wrong_sequence_is_refused() {
    assert_eq!(
        L.decode(&frame(8, &SPANS, &BAR), 9, true),
        Err(RingError::Sequence {
            found: 8,
            expected: 9
        })
    );
}

#[test]
fn frame_not_finished_by_every_workgroup_is_refused() {
    let mut f = frame(8, &SPANS, &BAR);
    f[2] = 1;
    assert_eq!(
        L.decode(&f, 8, true),
        Err(RingError::Unfinished {
            finished: 1,
            grid: 2
        })
    );
}

#[test]
fn short_frame_is_refused_without_panicking() {
    let f = frame(8, &SPANS, &BAR);
    assert_eq!(
        L.decode(&f[..10], 8, true),
        Err(RingError::Short { have: 10, need: 44 })
    );
    assert!(L.decode(&[], 8, true).is_err());
}

#[test]
fn frame_without_any_stage_stamp_is_refused() {
    let f = frame(8, &[[0, 0]; 6], &[[0, 0]; 4]);
    assert_eq!(L.decode(&f, 8, true), Err(RingError::NoStamps));
}

#[test]
fn pass_straddling_a_32_bit_clock_wrap_decodes_to_small_offsets() {
    // Lavapipe: the high word stays 0 and the low word wraps mid-pass.
    let t0 = (1u64 << 32) - 75; // 75 ns before the wrap (no stamp lands on 0)
    let at = |d: u64| (t0 + d) & 0xffff_ffff;
    let spans = [
        [at(0), at(100)],
        [at(50), at(300)],
        [at(100), at(200)],
        [at(300), at(400)],
        [at(500), at(600)],
        [at(510), at(600)],
    ];
    let bar = [[at(200), at(500)], [at(400), at(510)], [0, 0], [0, 0]];
    // Stage 1's start on wg 0 sits after the wrap (a small raw value): the origin must
    // still be the pre-wrap stamp.
    assert!(at(100) < at(0));
    let d = L.decode(&frame(3, &spans, &bar), 3, true).unwrap();
    assert_eq!(d.device_start_ns, t0);
    assert_eq!(d.spans.span(0, 0), Some((0, 100)));
    assert_eq!(d.spans.span(1, 1), Some((300, 400)));
    assert_eq!(d.spans.exit(0, 1), Some(510));
    assert_eq!(d.spans.barrier_timings()[0].arrival_spread_ns, 200);
}

#[test]
fn missing_stamps_leave_spans_and_barriers_missing() {
    let mut spans = SPANS;
    spans[4] = [0, 0]; // wg0 never ran stage c (single-workgroup stage)
    spans[3] = [1500, 0]; // wg1's end on b never stamped
    let mut bar = BAR;
    bar[1] = [1600, 0]; // wg1 arrived but its exit is missing
    let d = L.decode(&frame(8, &spans, &bar), 8, true).unwrap();
    assert_eq!(d.spans.span(2, 0), None);
    assert_eq!(d.spans.span(1, 1), None);
    assert_eq!(d.spans.arrive(0, 1), Some(600));
    assert_eq!(d.spans.exit(0, 1), None);
    assert_eq!(d.spans.iter().count(), 4);
    let b = d.spans.barrier_timings();
    assert_eq!((b[0].exit_spread_ns, b[0].release_ns), (0, 100));
}

#[test]
fn multi_mode_decodes_no_barrier_rows() {
    let d = L.decode(&frame(8, &SPANS, &[[0, 0]; 4]), 8, false).unwrap();
    assert_eq!(d.spans.levels(), 0);
    assert_eq!(d.spans.stages(), 3);
    assert!(d.spans.barrier_timings().is_empty());
}
