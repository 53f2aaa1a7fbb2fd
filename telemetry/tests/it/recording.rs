//! The `.baro` format as a specification: what goes in comes out (serde equality), a file
//! cut anywhere keeps exactly its complete records, any flipped byte is caught (and costs
//! only its record: `recording_resync`), every
//! golden file of an old version keeps loading, and diffs name what differs (the exports:
//! `recording_export`).
//!
//! Bless the golden file (only when FORMAT_VERSION changes, as a new `vN.baro`; never
//! rewrite an old one): `BLESS=1 cargo test --release -p baro-telemetry --test it recording::`.

#![allow(clippy::unwrap_used)]

use std::io::Cursor;
use std::path::PathBuf;

use baro_telemetry::fail::bits;
use baro_telemetry::recording::{
    diff, kind, Compression, Reader, RecordingError, RecordingHeader, Writer, FORMAT_VERSION,
    MAX_HEADER,
};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{
    ClockSync, Correctness, EndReason, FailReport, FailWord, PowerMode, RunDetails, SensorReading,
    SensorSample, Telemetry, Verdict,
};

/// A fixed header (no host name or clock in it, so files are reproducible).
pub(super) fn header(run: &RunDetails) -> RecordingHeader {
    RecordingHeader {
        run: run.clone(),
        quant: Some("q4_0".into()),
        host: "testhost".into(),
        baro_top_version: "0.1.0".into(),
        commit: "0123456789abcdef".into(),
        created_unix_ms: 1_764_460_800_000,
        calibrations: vec![clock(0)],
    }
}

fn clock(at_pass: u64) -> ClockSync {
    ClockSync {
        at_pass,
        shader_offset_ns: Some(-123_456_789),
        shader_uncertainty_ns: Some(640),
        host_offset_ns: Some(98_765),
        host_deviation_ns: Some(1_000),
        drift_ppm: (at_pass > 0).then_some(-3.25),
    }
}

/// Every message kind: start, clock, `passes` frames (pass 2 failed and judged), sensor
/// samples of every reading, a second clock, end.
pub(super) fn stream(run: &RunDetails, passes: u64, seed: u64) -> Vec<Telemetry> {
    let mut v = vec![Telemetry::Start(run.clone()), Telemetry::Clock(clock(0))];
    let readings = [
        SensorReading::CpuBusy { fraction: 0.125 },
        SensorReading::GpuClients {
            count: 2,
            clients: vec![],
        },
        SensorReading::GpuClocks {
            sm_mhz: 1980,
            mem_mhz: Some(2619),
            max_sm_mhz: Some(1980),
            pstate: Some(0),
        },
        SensorReading::Throttle { reasons: 4 },
        SensorReading::Mode {
            mode: PowerMode::Slow,
        },
    ];
    for p in 0..passes {
        let mut f = synthetic_frame(run, p, seed);
        if p == 2 {
            let word = FailWord {
                bits: bits::TIMEOUT | bits::POISONED,
                first: bits::TIMEOUT,
                level: Some(0),
                seen: 1,
                ..FailWord::clean(run.grid)
            };
            f.fail = FailReport::new(word, |l| run.level_name(l).into_owned());
            f.correctness = Some(Correctness {
                gpu_token: f.next,
                reference: Some(f.next + 1),
                runner_up: Some(f.next),
                margin: Some(0.015_625),
                verdict: Verdict::Mismatch,
                first_divergence: Some(2),
            });
            f.contention.gpu_clients = 1;
            f.contention.cpu_busy = Some(0.75);
        }
        v.push(Telemetry::Frame(Box::new(f)));
        if let Some(r) = readings.get(p as usize) {
            v.push(Telemetry::Sensor(SensorSample {
                host_ns: 1_000_000_000 + p * 1_000_000,
                reading: r.clone(),
            }));
        }
    }
    v.push(Telemetry::Clock(clock(passes)));
    v.push(Telemetry::End {
        passes,
        dropped: 0,
        reason: EndReason::Completed,
    });
    v
}

/// The file's bytes, and the offset at which each message's record ends.
pub(super) fn record(run: &RunDetails, msgs: &[Telemetry], c: Compression) -> (Vec<u8>, Vec<u64>) {
    let mut w = Writer::new(Vec::new(), &header(run))
        .unwrap()
        .with_compression(c);
    let mut ends = vec![];
    for m in msgs {
        w.write(m).unwrap();
        ends.push(w.stats().bytes);
    }
    (w.finish().unwrap(), ends)
}

fn read(bytes: &[u8]) -> (Vec<Telemetry>, Option<RecordingError>, bool) {
    let mut r = Reader::new(Cursor::new(bytes)).unwrap();
    let mut got = vec![];
    let mut err = None;
    for m in r.by_ref() {
        match m {
            Ok(m) => got.push(m),
            Err(e) => err = Some(e),
        }
    }
    (got, err, r.finished())
}

pub(super) fn small() -> (RunDetails, Vec<Telemetry>) {
    let run = synthetic_run(2, 5, 3);
    let msgs = stream(&run, 4, 7);
    (run, msgs)
}

#[test]
fn record_then_replay_gives_identical_messages_and_header() {
    let run = synthetic_run(16, 30, 12);
    let msgs = stream(&run, 24, 99);
    for c in [Compression::Lz4, Compression::None] {
        let (bytes, _) = record(&run, &msgs, c);
        let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
        assert_eq!(r.version(), FORMAT_VERSION);
        assert_eq!(r.header(), &header(&run));
        assert_eq!(r.read_all().unwrap(), msgs, "{c:?}");
        assert!(r.finished());
        assert_eq!(r.skipped(), 0);
    }
}

#[test]
fn compression_makes_a_frame_heavy_file_smaller() {
    let run = synthetic_run(32, 40, 20);
    let msgs = stream(&run, 10, 1);
    let (lz4, _) = record(&run, &msgs, Compression::Lz4);
    let (plain, _) = record(&run, &msgs, Compression::None);
    assert!(lz4.len() < plain.len(), "{} vs {}", lz4.len(), plain.len());
}

#[test]
fn an_unfinished_recording_replays_every_record_by_scanning() {
    let (run, msgs) = small();
    let mut w = Writer::new(Vec::new(), &header(&run)).unwrap();
    for m in &msgs {
        w.write(m).unwrap();
    }
    let bytes = w.get_ref().clone(); // the writer "crashed": no footer
    let (got, err, finished) = read(&bytes);
    assert_eq!(got, msgs);
    assert!(err.is_none(), "{err:?}");
    assert!(!finished);
    let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
    assert!(r.index().is_none());
    assert_eq!(r.ensure_index().unwrap().len(), 4);
}

#[test]
fn truncation_at_every_byte_offset_keeps_exactly_the_complete_messages() {
    let (run, msgs) = small();
    let (bytes, ends) = record(&run, &msgs, Compression::Lz4);
    let data_start = Writer::new(Vec::new(), &header(&run))
        .unwrap()
        .stats()
        .bytes;
    for cut in 0..bytes.len() {
        let part = &bytes[..cut];
        let r = Reader::new(Cursor::new(part));
        if (cut as u64) < data_start {
            let e = r
                .err()
                .unwrap_or_else(|| panic!("cut {cut}: the header is cut"));
            assert!(e.is_truncation(), "cut {cut}: {e}");
            assert_eq!(e.offset(), Some(0));
            continue;
        }
        let (got, err, finished) = read(part);
        let complete = ends.iter().filter(|&&e| e <= cut as u64).count();
        assert_eq!(got, msgs[..complete], "cut {cut}");
        assert!(!finished, "cut {cut}");
        let boundary = ends.contains(&(cut as u64)) || cut as u64 == data_start;
        match err {
            // A cut between records is what a crash leaves: a clean, unfinished end.
            None => assert!(boundary, "cut {cut}: no error"),
            Some(e) => {
                assert!(e.is_truncation(), "cut {cut}: {e}");
                let at = e.offset().unwrap();
                // Offset of the first incomplete thing: a record, the footer or the trailer.
                assert!(at <= cut as u64, "cut {cut}: offset {at}");
                assert!(
                    at >= ends
                        .get(complete.wrapping_sub(1))
                        .copied()
                        .unwrap_or(data_start)
                );
                assert!(e.to_string().contains(&format!("at byte {at}")), "{e}");
            }
        }
    }
    let (got, err, finished) = read(&bytes);
    assert_eq!(got, msgs);
    assert!(err.is_none() && finished);
}

#[test]
fn a_flipped_byte_anywhere_is_detected() {
    let (run, msgs) = small();
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    for at in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[at] ^= mask;
            let outcome = Reader::new(Cursor::new(&b)).and_then(|mut r| r.read_all());
            let Err(e) = outcome else {
                panic!("byte {at} ^ {mask:#x}: read without error");
            };
            assert!(e.offset().is_some(), "byte {at}: {e}");
        }
    }
}

#[test]
fn damage_is_reported_at_the_offset_of_the_damaged_record_and_reading_goes_on_past_it() {
    let (run, msgs) = small();
    let (mut bytes, ends) = record(&run, &msgs, Compression::Lz4);
    let third = ends[2]; // start of the fourth record
    bytes[third as usize + 20] ^= 0x10;
    let (got, err, finished) = read(&bytes);
    let mut want = msgs.clone();
    want.remove(3);
    assert_eq!(got, want, "every message but the damaged one");
    assert!(finished, "the footer after the damage was read");
    let e = err.unwrap();
    assert!(matches!(e, RecordingError::Checksum { .. }), "{e}");
    assert_eq!(e.offset(), Some(third));
    assert!(
        e.to_string().starts_with(&format!("at byte {third} ")),
        "{e}"
    );
}

#[test]
fn a_record_of_an_unknown_kind_is_skipped_and_counted() {
    let (run, msgs) = small();
    let mut w = Writer::new(Vec::new(), &header(&run)).unwrap();
    w.write(&msgs[0]).unwrap();
    let mut bytes = w.get_ref().clone();
    // A record from a future writer: kind 0x20, 3 bytes, its own crc.
    let payload = [1u8, 2, 3];
    let crc = crc32fast_hash(&[&3u32.to_le_bytes()[..], &[0x20], &payload]);
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.push(0x20);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes.extend_from_slice(&payload);
    let mut w2 = Writer::new(Vec::new(), &header(&run)).unwrap();
    let skip = w2.stats().bytes;
    w2.write(&msgs[1]).unwrap();
    bytes.extend_from_slice(&w2.get_ref()[skip as usize..]);
    let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
    assert_eq!(r.read_all().unwrap(), msgs[..2]);
    assert_eq!(r.skipped(), 1);
}

/// crc32 (IEEE) of the concatenation, bit by bit: the reference the format names.
fn crc32fast_hash(parts: &[&[u8]]) -> u32 {
    let mut c = !0u32;
    for p in parts {
        for &b in *p {
            c ^= u32::from(b);
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0xedb8_8320
                } else {
                    c >> 1
                };
            }
        }
    }
    !c
}

#[test]
fn a_file_that_is_not_a_recording_or_of_a_newer_version_is_refused_by_name() {
    let e = Reader::new(Cursor::new(b"GGUF\x03\0\0\0 and so on".to_vec()))
        .err()
        .unwrap();
    assert!(matches!(e, RecordingError::BadMagic { .. }), "{e}");
    assert!(e.to_string().contains("not a baro-top recording"), "{e}");
    let (run, msgs) = small();
    let (mut bytes, _) = record(&run, &msgs[..1], Compression::Lz4);
    bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let e = Reader::new(Cursor::new(bytes)).err().unwrap();
    assert!(
        matches!(e, RecordingError::UnsupportedVersion { found, .. } if found == FORMAT_VERSION + 1),
        "{e}"
    );
}

#[test]
fn seeking_to_a_pass_reads_its_frame_through_the_index_without_moving_iteration() {
    let run = synthetic_run(4, 10, 5);
    let msgs = stream(&run, 40, 3);
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
    assert_eq!(r.index().map(|i| i.len()), Some(40));
    let first = r.next().unwrap().unwrap();
    for p in [39, 0, 17] {
        let f = r.frame(p).unwrap().unwrap();
        let Telemetry::Frame(want) = msgs
            .iter()
            .find(|m| matches!(m, Telemetry::Frame(f) if f.pass == p))
            .unwrap()
        else {
            unreachable!()
        };
        assert_eq!(&f, &**want);
    }
    assert_eq!(r.frame(40).unwrap(), None);
    assert_eq!(first, msgs[0]);
    assert_eq!(r.next().unwrap().unwrap(), msgs[1]);
}

fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The golden stream: small, every message kind.
fn golden_stream() -> (RunDetails, Vec<Telemetry>) {
    let run = synthetic_run(3, 9, 4);
    let msgs = stream(&run, 5, 2026);
    (run, msgs)
}

#[test]
fn golden_v1_recording_still_loads_to_the_stream_it_was_blessed_from() {
    let baro = golden_dir().join("v1.baro");
    let jsonl = golden_dir().join("v1.jsonl");
    if std::env::var_os("BLESS").is_some() && FORMAT_VERSION == 1 {
        let (run, msgs) = golden_stream();
        let (bytes, _) = record(&run, &msgs, Compression::Lz4);
        std::fs::write(&baro, bytes).unwrap();
        let mut lines = serde_json::to_string(&header(&run)).unwrap() + "\n";
        for m in &msgs {
            lines += &m.to_json_line().unwrap();
            lines += "\n";
        }
        std::fs::write(&jsonl, lines).unwrap();
    }
    // What the golden file must decode to, as JSON lines (header first): independent of
    // the writer and of the synthetic generator that made it.
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let mut lines = text.lines();
    let want_header: RecordingHeader = serde_json::from_str(lines.next().unwrap()).unwrap();
    let want: Vec<Telemetry> = lines
        .map(|l| Telemetry::from_json_line(l).unwrap())
        .collect();
    let mut r = Reader::open(&baro).unwrap();
    assert_eq!(r.version(), 1);
    assert_eq!(r.header(), &want_header);
    assert_eq!(r.read_all().unwrap(), want);
    assert!(r.finished());
    assert!(r.index().is_some());
}

#[test]
fn diff_of_a_recording_with_itself_agrees_with_zero_deltas() {
    let (run, msgs) = small();
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let mut a = Reader::new(Cursor::new(&bytes)).unwrap();
    let mut b = Reader::new(Cursor::new(&bytes)).unwrap();
    let d = diff::compare(&mut a, &mut b).unwrap();
    assert_eq!(d.tokens, diff::Tokens::Agree { passes: 4 });
    assert_eq!(d.kinds.len(), 5); // q k v attn wo
    assert!(d.kinds.iter().all(|k| k.busy_delta_pct() == Some(0.0)));
    let table = d.to_string();
    assert!(table.contains("tokens: agree over 4 passes"), "{table}");
    assert!(table.contains("+0.0%"), "{table}");
}

#[test]
fn diff_names_the_first_pass_whose_token_differs_and_the_slower_kinds() {
    let run = synthetic_run(4, 16, 7);
    let a_msgs = stream(&run, 6, 1);
    let mut b_msgs = a_msgs.clone();
    for m in &mut b_msgs {
        if let Telemetry::Frame(f) = m {
            for s in &mut f.stages {
                s.busy_ns *= 2;
            }
            if f.pass == 3 {
                f.next += 1;
            }
        }
    }
    let (a, _) = record(&run, &a_msgs, Compression::Lz4);
    let (b, _) = record(&run, &b_msgs, Compression::Lz4);
    let d = diff::compare(
        &mut Reader::new(Cursor::new(&a)).unwrap(),
        &mut Reader::new(Cursor::new(&b)).unwrap(),
    )
    .unwrap();
    assert!(
        matches!(d.tokens, diff::Tokens::Differ { pass: 3, .. }),
        "{:?}",
        d.tokens
    );
    for k in &d.kinds {
        let p = k.busy_delta_pct().unwrap();
        assert!((p - 100.0).abs() < 1.0, "{k:?}");
        assert_eq!(k.charged_delta_pct(), Some(0.0));
    }
    assert!(d.to_string().contains("DIFFER first at pass 3"));
}

#[test]
fn a_compressed_record_is_marked_in_its_kind_byte() {
    let run = synthetic_run(8, 20, 8);
    let msgs = stream(&run, 1, 1);
    let (bytes, ends) = record(&run, &msgs, Compression::Lz4);
    // msgs: start, clock, frame 0 — the frame's record starts where the clock's ends.
    let k = bytes[ends[1] as usize + 4];
    assert_eq!(k, kind::FRAME | kind::LZ4);
    let (plain, ends) = record(&run, &msgs, Compression::None);
    assert_eq!(plain[ends[1] as usize + 4], kind::FRAME);
}

/// Writes a few small recordings (a few KB each: every message kind, compressed or not,
/// finished or cut before the footer) as the fuzzer's seed corpus. Small seeds keep
/// `-max_len` low and executions fast; see telemetry/fuzz/README.md.
/// `cargo test --release -p baro-telemetry --test it recording::write_fuzz_seed_corpus -- --ignored`
#[test]
#[ignore = "writes into telemetry/fuzz/corpus; run by hand before fuzzing"]
fn write_fuzz_seed_corpus() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/recording_reader");
    std::fs::create_dir_all(&dir).unwrap();
    for (grid, stages, levels, passes) in [(1, 1, 1, 1), (2, 3, 2, 3), (2, 5, 3, 4), (4, 2, 1, 6)] {
        let run = synthetic_run(grid, stages, levels);
        let msgs = stream(&run, passes, u64::from(grid) * 31 + passes);
        for (cname, c) in [("raw", Compression::None), ("lz4", Compression::Lz4)] {
            let (bytes, ends) = record(&run, &msgs, c);
            let name = format!("g{grid}s{stages}l{levels}p{passes}-{cname}");
            std::fs::write(dir.join(format!("{name}.baro")), &bytes).unwrap();
            // The same run cut after its last message, before the footer (a crash).
            let cut = ends[ends.len() - 1] as usize;
            std::fs::write(dir.join(format!("{name}-nofooter.baro")), &bytes[..cut]).unwrap();
        }
    }
}

#[test]
fn a_header_length_past_the_cap_is_named_as_past_the_cap_not_as_a_cut_file() {
    let mut bytes = b"BARO-REC".to_vec();
    bytes.extend_from_slice(&1u32.to_le_bytes());
    bytes.extend_from_slice(&(MAX_HEADER + 1).to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes());
    bytes.extend_from_slice(&[0u8; 64]);
    let e = Reader::new(Cursor::new(&bytes))
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains(&format!(
            "the header says {} bytes, more than the",
            MAX_HEADER + 1
        )),
        "{e}"
    );
    assert!(!e.contains("truncated"), "{e}");
}
