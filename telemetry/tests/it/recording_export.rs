//! The `.baro` exports as a specification: the Trace Event JSON and Perfetto protobuf traces of a
//! recording (one process, every track named, every begin closed, timestamps exact to the
//! nanosecond, sampled within a span budget) and its CSVs (one row per pass, per pass per stage).
//! The recordings come from the format's own tests (`recording`).

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::Cursor;

use baro_telemetry::recording::{export, Compression, Reader};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{RunDetails, Telemetry};

use super::recording::{record, small, stream};

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
fn one_pass_over_the_span_budget_keeps_one_workgroup_in_k_within_it_and_says_so() {
    // One pass of 8,192 workgroups: ≈ 190,000 workgroup spans against a budget of 20,000
    // (dropping whole passes cannot help: there is one).
    let run = synthetic_run(8_192, 16, 7);
    let msgs = stream(&run, 1, 5);
    let (bytes, _) = record(&run, &msgs, Compression::Lz4);
    let survey = export::survey(&mut Reader::new(Cursor::new(&bytes)).unwrap(), None);
    let budget = 20_000;
    assert_eq!(survey.spanned_passes, 1);
    assert!(survey.spans > 8 * budget, "{survey:?}");
    let opts = export::TraceOptions {
        spans_every: export::SpansEvery::Auto { budget },
        ..Default::default()
    }
    .resolve(&survey);
    let export::WgSelect::Every(k) = opts.workgroups else {
        panic!("not thinned: {opts:?}");
    };
    assert!(k > 1, "{k}");
    for (i, proto) in [false, true].into_iter().enumerate() {
        let mut out = vec![];
        let mut r = Reader::new(Cursor::new(&bytes)).unwrap();
        let st = if proto {
            export::proto_trace(&mut r, &mut out, &opts).unwrap()
        } else {
            export::json_trace(&mut r, &mut out, &opts).unwrap()
        };
        let s = &st.sampling;
        // Within the budget, and not needlessly far below it.
        assert_eq!(s.spans_total, survey.spans, "{i}");
        assert!(s.spans_kept <= budget && s.spans_kept > budget / 2, "{s:?}");
        let said = st.left_out().expect("the trace does not hold every span");
        assert!(
            said.contains(&format!(
                "workgroup tracks for 1 of 1 passes with spans (one in 1), in those of one \
                 workgroup in {k} (0, {k}, "
            )),
            "{said}"
        );
        assert!(
            said.contains(&format!(
                "left out {} of {}",
                s.spans_total - s.spans_kept,
                s.spans_total
            )),
            "{said}"
        );
        if !proto {
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            let tids: Vec<u64> = slices_by_tid(v["traceEvents"].as_array().unwrap())
                .into_keys()
                .filter(|&t| t >= 1000)
                .collect();
            assert_eq!(tids.len() as u64, 8_192u64.div_ceil(u64::from(k)));
            assert!(
                tids.iter().all(|t| (t - 1000) % u64::from(k) == 0),
                "{tids:?}"
            );
        }
    }
    // A budget the pass fits keeps every workgroup.
    let whole = export::TraceOptions {
        spans_every: export::SpansEvery::Auto {
            budget: survey.spans,
        },
        ..Default::default()
    }
    .resolve(&survey);
    assert_eq!(whole.workgroups, export::WgSelect::All);
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

/// Passes whose host start, wall or GPU time is near `u64::MAX` (a damaged clock, a crafted
/// file): every track's timestamps still never go back (they saturate instead of wrapping to
/// the start of the trace) and every slice still closes.
#[test]
fn json_trace_of_passes_with_absurd_times_never_goes_back_in_time_on_any_track() {
    let run = synthetic_run(2, 5, 3);
    let mut msgs = vec![Telemetry::Start(run.clone())];
    for (pass, host, wall, gpu) in [
        (0, Some(10), 1_000, Some(900)),
        (1, Some(u64::MAX - 5), 1_000, Some(900)),
        (2, Some(u64::MAX), u64::MAX, Some(u64::MAX)),
        (3, None, u64::MAX, None),
        (4, None, u64::MAX, None),
        (5, Some(5), 7, Some(7)),
    ] {
        let mut f = synthetic_frame(&run, pass, 1);
        (f.host_start_ns, f.wall_ns, f.gpu_ns) = (host, wall, gpu);
        msgs.push(Telemetry::Frame(Box::new(f)));
    }
    let v = trace_json(&run, &msgs, &export::TraceOptions::everything());
    let evs = v["traceEvents"].as_array().unwrap();
    let mut last: HashMap<u64, f64> = HashMap::new();
    for e in evs.iter().filter(|e| e["ph"] != "M") {
        let (tid, ts) = (e["tid"].as_u64().unwrap(), e["ts"].as_f64().unwrap());
        let prev = last.insert(tid, ts).unwrap_or(0.0);
        assert!(
            ts >= prev,
            "tid {tid} goes back from {prev} µs to {ts} µs: {e}"
        );
    }
    let slices = slices_by_tid(evs);
    assert_eq!(slices[&1].len(), 6, "a slice per pass: {:?}", slices[&1]);
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
