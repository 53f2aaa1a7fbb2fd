//! The `.baro` format as a specification: what goes in comes out (serde equality), a file
//! cut anywhere keeps exactly its complete records, any flipped byte is caught, every
//! golden file of an old version keeps loading, and the exports are well-formed.
//!
//! Bless the golden file (only when FORMAT_VERSION changes, as a new `vN.baro`; never
//! rewrite an old one): `BLESS=1 cargo test --release -p baro-telemetry --test it recording::`.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::Cursor;
use std::path::PathBuf;

use baro_telemetry::fail::bits;
use baro_telemetry::recording::{
    diff, export, kind, Compression, Reader, RecordingError, RecordingHeader, Writer,
    FORMAT_VERSION,
};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{
    ClockSync, Correctness, EndReason, FailReport, FailWord, PowerMode, RunDetails, SensorReading,
    SensorSample, Telemetry, Verdict,
};

/// A fixed header (no host name or clock in it, so files are reproducible).
fn header(run: &RunDetails) -> RecordingHeader {
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
fn stream(run: &RunDetails, passes: u64, seed: u64) -> Vec<Telemetry> {
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
fn record(run: &RunDetails, msgs: &[Telemetry], c: Compression) -> (Vec<u8>, Vec<u64>) {
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

fn small() -> (RunDetails, Vec<Telemetry>) {
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
fn damage_is_reported_at_the_offset_of_the_damaged_record_after_the_records_before_it() {
    let (run, msgs) = small();
    let (mut bytes, ends) = record(&run, &msgs, Compression::Lz4);
    let third = ends[2]; // start of the fourth record
    bytes[third as usize + 20] ^= 0x10;
    let (got, err, _) = read(&bytes);
    assert_eq!(got, msgs[..3]);
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

fn trace_json(
    run: &RunDetails,
    msgs: &[Telemetry],
    opts: &export::TraceOptions,
) -> serde_json::Value {
    let (bytes, _) = record(run, msgs, Compression::Lz4);
    let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
    let mut out = vec![];
    let st = export::json_trace(&mut r, &mut out, opts).unwrap();
    assert!(st.damage.is_none());
    serde_json::from_slice(&out).unwrap()
}

/// Slices per tid as (begin ns, end ns, name), after checking that every `E` closes the
/// innermost open `B` of its tid with the same name and args and that nothing stays open.
fn slices_by_tid(evs: &[serde_json::Value]) -> HashMap<u64, Vec<(u64, u64, String)>> {
    let ns = |x: &serde_json::Value| (x.as_f64().unwrap() * 1000.0).round() as u64;
    let mut open: HashMap<u64, Vec<&serde_json::Value>> = HashMap::new();
    let mut out: HashMap<u64, Vec<(u64, u64, String)>> = HashMap::new();
    for e in evs {
        let tid = e["tid"].as_u64().unwrap();
        match e["ph"].as_str().unwrap() {
            "B" => open.entry(tid).or_default().push(e),
            "E" => {
                let b = open
                    .get_mut(&tid)
                    .and_then(|s| s.pop())
                    .expect("an E closes an open B");
                assert_eq!(b["name"], e["name"], "{b} / {e}");
                assert_eq!(b["args"], e["args"], "{b} / {e}");
                out.entry(tid).or_default().push((
                    ns(&b["ts"]),
                    ns(&e["ts"]),
                    e["name"].as_str().unwrap().into(),
                ));
            }
            _ => {}
        }
    }
    assert!(open.values().all(|s| s.is_empty()), "left open: {open:?}");
    out
}

#[test]
fn json_trace_is_one_process_with_every_tid_named_sorted_and_nonzero() {
    let run = synthetic_run(4, 16, 7);
    let msgs = stream(&run, 10, 5);
    let v = trace_json(&run, &msgs, &export::TraceOptions::everything());
    let evs = v["traceEvents"].as_array().unwrap();
    let mut named = HashMap::new();
    let mut sorted = HashMap::new();
    for e in evs {
        assert_eq!(e["pid"], 1, "{e}");
        assert_ne!(e["tid"], 0, "{e}");
        if e["ph"] == "M" {
            match e["name"].as_str().unwrap() {
                "thread_name" => {
                    named.insert(
                        e["tid"].as_u64().unwrap(),
                        e["args"]["name"].as_str().unwrap().to_string(),
                    );
                }
                "thread_sort_index" => {
                    sorted.insert(
                        e["tid"].as_u64().unwrap(),
                        e["args"]["sort_index"].as_u64().unwrap(),
                    );
                }
                "process_name" => assert!(e["args"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("baro-top: ")),
                "process_sort_index" => {}
                n => panic!("metadata {n}"),
            }
        }
    }
    let used: std::collections::BTreeSet<u64> = evs
        .iter()
        .filter(|e| e["ph"] == "B")
        .map(|e| e["tid"].as_u64().unwrap())
        .collect();
    for t in &used {
        assert!(
            named.contains_key(t) && sorted.contains_key(t),
            "tid {t} unnamed or unsorted"
        );
    }
    // Sorted: passes, power mode, grid, then workgroups in number order.
    let mut by_sort: Vec<(u64, &String)> = named.iter().map(|(t, n)| (sorted[t], n)).collect();
    by_sort.sort();
    let order: Vec<&str> = by_sort.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(
        order[..3],
        ["passes", "power mode", "grid (all workgroups)"]
    );
    let wgs: Vec<&str> = order
        .iter()
        .copied()
        .filter(|n| n.starts_with("wg "))
        .collect();
    assert_eq!(wgs, ["wg 0", "wg 1", "wg 2", "wg 3"]);
}

#[test]
fn json_trace_pairs_every_begin_with_an_end_of_the_same_name_and_args_and_keeps_every_span() {
    let run = synthetic_run(4, 16, 7);
    let msgs = stream(&run, 10, 5);
    let v = trace_json(&run, &msgs, &export::TraceOptions::everything());
    let evs = v["traceEvents"].as_array().unwrap();
    let slices = slices_by_tid(evs);
    // Passes on their own track, one slice each, none nested.
    let passes = &slices[&1];
    assert_eq!(passes.len(), 10);
    assert!(passes.windows(2).all(|w| w[0].1 <= w[1].0), "{passes:?}");
    // Every stage span and barrier wait of every pass, on its workgroup's track, as
    // siblings in time order, each inside its pass.
    let frames: Vec<&baro_telemetry::Frame> = msgs
        .iter()
        .filter_map(|m| match m {
            Telemetry::Frame(f) => Some(&**f),
            _ => None,
        })
        .collect();
    let spans: usize = frames.iter().map(|f| f.spans.iter().count()).sum();
    let wg: Vec<&(u64, u64, String)> = slices
        .iter()
        .filter(|(t, _)| **t >= 1000)
        .flat_map(|(_, v)| v)
        .collect();
    let stages = wg.iter().filter(|s| !s.2.starts_with("wait ")).count();
    assert_eq!(stages, spans);
    assert!(wg.iter().any(|s| s.2.starts_with("wait ")));
    for (t, v) in slices.iter().filter(|(t, _)| **t >= 1000) {
        assert!(
            v.windows(2).all(|w| w[0].1 <= w[1].0),
            "tid {t}: siblings overlap"
        );
        for s in v {
            assert!(
                passes.iter().any(|p| p.0 <= s.0 && s.1 <= p.1),
                "tid {t}: {s:?} outside every pass"
            );
        }
    }
    // A stage's args are the same in every pass (viewers aggregate it across passes).
    let mut args: HashMap<String, std::collections::HashSet<String>> = HashMap::new();
    for e in evs
        .iter()
        .filter(|e| e["ph"] == "B" && e["tid"].as_u64().unwrap() >= 3)
    {
        args.entry(e["name"].as_str().unwrap().into())
            .or_default()
            .insert(e["args"].to_string());
    }
    assert!(args.values().all(|a| a.len() == 1), "{args:?}");
}

#[test]
fn json_trace_writes_every_timestamp_as_us_with_three_decimals_so_equal_ns_are_equal_digits() {
    let run = synthetic_run(4, 16, 7);
    let msgs = stream(&run, 3, 5);
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let mut out = vec![];
    export::json_trace(
        &mut Reader::new(Cursor::new(&bytes)).unwrap(),
        &mut out,
        &export::TraceOptions::everything(),
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut n = 0;
    for line in text.lines().filter(|l| l.contains(r#""ts":"#)) {
        let ts = line
            .split(r#""ts":"#)
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap();
        let (int, frac) = ts.split_once('.').unwrap_or((ts, ""));
        assert!(
            int.bytes().all(|b| b.is_ascii_digit())
                && frac.len() == 3
                && frac.bytes().all(|b| b.is_ascii_digit()),
            "{ts} in {line}"
        );
        n += 1;
    }
    assert!(n > 100);
    // No durations: every slice is a B/E pair, so no viewer adds floats to find an end.
    assert!(!text.contains(r#""dur":"#));
    assert!(!text.contains(r#""ph":"X""#));
}

#[test]
fn json_trace_counters_name_each_quantity_once() {
    let run = synthetic_run(4, 16, 7);
    let msgs = stream(&run, 10, 5);
    let v = trace_json(&run, &msgs, &export::TraceOptions::everything());
    let mut names = std::collections::BTreeSet::new();
    for e in v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "C")
    {
        let args = e["args"].as_object().unwrap();
        assert_eq!(args.len(), 1, "{e}");
        let key = args.keys().next().unwrap();
        assert_ne!(e["name"].as_str().unwrap(), key, "{e}");
        names.insert(format!("{} {key}", e["name"].as_str().unwrap()));
    }
    assert!(names.contains("decode tok/s"), "{names:?}");
    assert!(names.contains("sm clock MHz"), "{names:?}");
}

#[test]
fn spans_every_keeps_one_spanned_pass_in_n_on_the_workgroup_tracks_and_every_pass_on_the_grid() {
    let run = synthetic_run(4, 16, 7);
    let msgs = stream(&run, 10, 5);
    let opts = export::TraceOptions {
        spans_every: export::SpansEvery::Every(3),
        workgroups: export::WgSelect::All,
        passes: None,
    };
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let mut out = vec![];
    let st = export::json_trace(
        &mut Reader::new(Cursor::new(&bytes)).unwrap(),
        &mut out,
        &opts,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let slices = slices_by_tid(v["traceEvents"].as_array().unwrap());
    // Passes 0, 3, 6, 9 keep their workgroup tracks.
    assert_eq!(st.sampling.spanned_passes, 10);
    assert_eq!(st.sampling.wg_passes, 4);
    let passes = &slices[&1];
    let in_pass = |s: &(u64, u64, String)| {
        passes
            .iter()
            .position(|p| p.0 <= s.0 && s.1 <= p.1)
            .unwrap()
    };
    let kept: std::collections::BTreeSet<usize> = slices
        .iter()
        .filter(|(t, _)| **t >= 1000)
        .flat_map(|(_, v)| v.iter().map(in_pass))
        .collect();
    assert_eq!(kept.into_iter().collect::<Vec<_>>(), [0, 3, 6, 9]);
    let grid: std::collections::BTreeSet<usize> = slices[&3].iter().map(in_pass).collect();
    assert_eq!(grid.len(), 10);
    let said = st.left_out().unwrap();
    assert!(said.contains("4 of 10 passes"), "{said}");
    assert!(
        said.contains(&(st.sampling.spans_total - st.sampling.spans_kept).to_string()),
        "{said}"
    );
}

#[test]
fn workgroups_list_and_slowest_keep_only_those_workgroup_tracks() {
    let run = synthetic_run(4, 16, 7);
    let msgs = stream(&run, 4, 5);
    let tids = |wgs: &str| {
        let opts = export::TraceOptions {
            spans_every: export::SpansEvery::Every(1),
            workgroups: wgs.parse().unwrap(),
            passes: None,
        };
        let v = trace_json(&run, &msgs, &opts);
        let s: std::collections::BTreeSet<u64> =
            slices_by_tid(v["traceEvents"].as_array().unwrap())
                .keys()
                .copied()
                .filter(|&t| t >= 1000)
                .collect();
        s
    };
    assert_eq!(tids("1,3").into_iter().collect::<Vec<_>>(), [1001, 1003]);
    assert_eq!(
        tids("0-2").into_iter().collect::<Vec<_>>(),
        [1000, 1001, 1002]
    );
    // One workgroup per pass: the one with the most stage work.
    let slow = tids("slowest");
    assert!(!slow.is_empty() && slow.len() <= 4, "{slow:?}");
    for bad in ["x", "3-1", "1,,2"] {
        assert!(bad.parse::<export::WgSelect>().is_err(), "{bad}");
    }
}

#[test]
fn auto_spans_every_picks_the_smallest_n_within_the_span_budget() {
    let run = synthetic_run(4, 16, 7);
    let msgs = stream(&run, 10, 5);
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let survey = export::survey(&mut Reader::new(Cursor::new(&bytes)).unwrap(), None);
    assert_eq!(
        (survey.passes, survey.spanned_passes, survey.grid),
        (10, 10, 4)
    );
    let per_pass = survey.spans / 10;
    let auto = |budget: u64| {
        export::TraceOptions {
            spans_every: export::SpansEvery::Auto { budget },
            workgroups: export::WgSelect::All,
            passes: None,
        }
        .resolve(&survey)
        .spans_every
    };
    assert_eq!(auto(survey.spans), export::SpansEvery::Every(1));
    assert_eq!(auto(survey.spans - 1), export::SpansEvery::Every(2));
    assert_eq!(auto(per_pass), export::SpansEvery::Every(10));
}

#[test]
fn proto_and_json_traces_hold_the_same_slices_at_the_same_times() {
    use baro_telemetry::recording::export::protos as pb;
    use prost::Message;
    let run = synthetic_run(4, 16, 7);
    let msgs = stream(&run, 6, 5);
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let opts = export::TraceOptions::everything();
    let mut out = vec![];
    export::proto_trace(
        &mut Reader::new(Cursor::new(&bytes)).unwrap(),
        &mut out,
        &opts,
    )
    .unwrap();
    let trace = pb::Trace::decode(out.as_slice()).unwrap();
    // Replay the incremental clock and interned names; collect (track name, name, begin, end).
    let (mut t, mut names, mut tracks) = (0u64, HashMap::new(), HashMap::new());
    let mut open: HashMap<u64, Vec<(String, u64)>> = HashMap::new();
    let mut got = vec![];
    for p in &trace.packet {
        for n in p.interned_data.iter().flat_map(|d| &d.event_names) {
            names.insert(n.iid(), n.name().to_string());
        }
        match &p.data {
            Some(pb::trace_packet::Data::ClockSnapshot(c)) => {
                t = c
                    .clocks
                    .iter()
                    .find(|c| c.is_incremental())
                    .unwrap()
                    .timestamp()
                    - export::proto::T0_NS;
            }
            Some(pb::trace_packet::Data::TrackDescriptor(d)) => {
                if let Some(pb::track_descriptor::StaticOrDynamicName::Name(n)) =
                    &d.static_or_dynamic_name
                {
                    tracks.insert(d.uuid(), n.clone());
                }
            }
            Some(pb::trace_packet::Data::TrackEvent(e)) => {
                t += p.timestamp();
                let name = match &e.name_field {
                    Some(pb::track_event::NameField::NameIid(i)) => names[i].clone(),
                    Some(pb::track_event::NameField::Name(n)) => n.clone(),
                    None => String::new(),
                };
                match e.r#type() {
                    pb::track_event::Type::SliceBegin => {
                        open.entry(e.track_uuid()).or_default().push((name, t))
                    }
                    pb::track_event::Type::SliceEnd => {
                        let (n, b) = open.get_mut(&e.track_uuid()).unwrap().pop().unwrap();
                        got.push((tracks[&e.track_uuid()].clone(), n, b, t));
                    }
                    _ => {}
                }
            }
            None => {}
        }
    }
    let v = trace_json(&run, &msgs, &opts);
    let evs = v["traceEvents"].as_array().unwrap();
    let tid_names: HashMap<u64, String> = evs
        .iter()
        .filter(|e| e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let mut want: Vec<(String, String, u64, u64)> = slices_by_tid(evs)
        .into_iter()
        .flat_map(|(tid, v)| {
            let tn = tid_names[&tid].clone();
            v.into_iter().map(move |(b, e, n)| (tn.clone(), n, b, e))
        })
        .collect();
    want.sort();
    got.sort();
    assert_eq!(got.len(), want.len());
    assert_eq!(got, want);
}

#[test]
fn json_trace_of_a_cut_recording_is_complete_json_and_reports_the_damage() {
    let (run, msgs) = small();
    let (bytes, ends) = record(&run, &msgs, Compression::Lz4);
    let cut = &bytes[..ends[4] as usize + 5];
    let mut r = Reader::new(Cursor::new(cut)).unwrap();
    let mut out = vec![];
    let st = export::json_trace(&mut r, &mut out, &export::TraceOptions::everything()).unwrap();
    assert!(st.damage.unwrap().is_truncation());
    assert_eq!(st.passes, 2); // start, clock, frame 0, sensor, frame 1 | cut
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    slices_by_tid(v["traceEvents"].as_array().unwrap());
}

#[test]
fn csv_passes_export_has_one_row_per_pass_joining_the_stage_csv_on_pass() {
    let (run, msgs) = small();
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let mut out = vec![];
    let st = export::csv_passes(&mut Reader::new(Cursor::new(&bytes)).unwrap(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "pass,pos,token,next,wall_ns,gpu_ns,host_start_ns,fail_word,mode,contention,spanned"
    );
    assert_eq!((lines.len() - 1, st.events, st.passes), (4, 4, 4));
    let frames: Vec<&baro_telemetry::Frame> = msgs
        .iter()
        .filter_map(|m| match m {
            Telemetry::Frame(f) => Some(&**f),
            _ => None,
        })
        .collect();
    for (l, f) in lines[1..].iter().zip(&frames) {
        let c: Vec<&str> = l.split(',').collect();
        assert_eq!(c.len(), 11, "{l}");
        assert_eq!(c[0], f.pass.to_string());
        assert_eq!(c[4], f.wall_ns.to_string());
        assert_eq!(c[5], f.gpu_ns.map_or(String::new(), |g| g.to_string()));
        assert_eq!(
            c[6],
            f.host_start_ns.map_or(String::new(), |g| g.to_string())
        );
        assert_eq!(c[7], format!("0x{:08x}", f.fail.word.bits));
        assert_eq!(c[10], if f.spans.is_empty() { "0" } else { "1" });
    }
}

#[test]
fn csv_export_has_one_row_per_pass_per_stage_with_the_fail_word_and_mode() {
    let (run, msgs) = small();
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
    let mut out = vec![];
    let st = export::csv(&mut r, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "pass,stage,name,kind,level,busy_ns,charged_ns,max_busy_ns,fail_word,mode"
    );
    assert_eq!(lines.len() - 1, 4 * 5);
    assert_eq!(st.events, 20);
    assert_eq!(st.passes, 4);
    assert!(lines[1].starts_with("0,0,q.l0,q,0,"), "{}", lines[1]);
    assert!(lines[11].ends_with(",0x00000201,fast"), "{}", lines[11]);
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

#[test]
fn a_pass_range_exports_only_those_passes_with_their_workgroup_spans() {
    let run = synthetic_run(4, 16, 7);
    let msgs = stream(&run, 10, 5);
    let opts = export::TraceOptions {
        passes: Some(4..=5),
        ..export::TraceOptions::everything()
    };
    let v = trace_json(&run, &msgs, &opts);
    let evs = v["traceEvents"].as_array().unwrap();
    let names: Vec<&str> = evs
        .iter()
        .filter(|e| e["ph"] == "B" && e["tid"] == 1)
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pass 4", "pass 5"]);
    let spans: usize = msgs
        .iter()
        .filter_map(|m| match m {
            Telemetry::Frame(f) if (4..=5).contains(&f.pass) => Some(f.spans.iter().count()),
            _ => None,
        })
        .sum();
    let stages = slices_by_tid(evs)
        .iter()
        .filter(|(t, _)| **t >= 1000)
        .flat_map(|(_, v)| v)
        .filter(|s| !s.2.starts_with("wait "))
        .count();
    assert_eq!(stages, spans);
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
