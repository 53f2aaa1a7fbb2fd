//! The trace exports carry each pass's attribution warnings (telemetry::analysis) on its
//! slice of the passes track, in both formats: `attribution_warnings` (how many, always) and
//! `attribution` (their text as the dashboard words it, where any).

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::Cursor;

use baro_telemetry::analysis::frame_warnings;
use baro_telemetry::recording::export::{self, protos as pb};
use baro_telemetry::recording::{Reader, RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{Frame, RunDetails, Telemetry};
use prost::Message;

/// 6 passes; from pass 3 on, the stage closing level 2 is charged 60 µs over its own work.
fn recording(run: &RunDetails) -> (Vec<u8>, Vec<Frame>) {
    let closing = *run.levels[2].stages.last().unwrap();
    let mut w = Writer::new(Vec::new(), &RecordingHeader::new(run.clone(), "test")).unwrap();
    w.write(&Telemetry::Start(run.clone())).unwrap();
    let mut frames = vec![];
    for p in 0..6 {
        let mut f = synthetic_frame(run, p, 3);
        // Charged = busy everywhere: no tail but the one set below.
        for t in &mut f.stages {
            t.charged_ns = t.busy_ns;
            if p >= 3 && t.stage == closing {
                t.charged_ns += 60_000;
            }
        }
        w.write(&Telemetry::Frame(Box::new(f.clone()))).unwrap();
        frames.push(f);
    }
    (w.finish().unwrap(), frames)
}

/// Per pass, the expected (count, text).
fn expected(run: &RunDetails, frames: &[Frame]) -> Vec<(u64, Option<String>)> {
    frames
        .iter()
        .map(|f| {
            // One warning at most here: the text is whole (more than four: "… N more").
            let w: Vec<String> = frame_warnings(run, f)
                .iter()
                .map(ToString::to_string)
                .collect();
            assert!(w.len() <= 4, "{w:?}");
            (w.len() as u64, (!w.is_empty()).then(|| w.join("; ")))
        })
        .collect()
}

#[test]
fn json_trace_pass_slices_carry_the_passes_attribution_warnings_and_none_where_there_are_none() {
    let run = synthetic_run(4, 16, 7);
    let (bytes, frames) = recording(&run);
    let want = expected(&run, &frames);
    assert_eq!(
        want.iter().map(|w| w.0).collect::<Vec<_>>(),
        [0, 0, 0, 1, 1, 1]
    );
    let mut out = vec![];
    export::json_trace(
        &mut Reader::new(Cursor::new(&bytes)).unwrap(),
        &mut out,
        &export::TraceOptions::everything(),
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let got: Vec<(u64, Option<String>)> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "B" && e["name"].as_str().is_some_and(|n| n.starts_with("pass ")))
        .map(|e| {
            let a = &e["args"];
            (
                a["attribution_warnings"].as_u64().unwrap(),
                a.get("attribution")
                    .map(|s| s.as_str().unwrap().to_string()),
            )
        })
        .collect();
    assert_eq!(got, want);
    assert!(
        want[3].1.as_deref().unwrap().contains("is level 2's tail"),
        "{want:?}"
    );
}

#[test]
fn proto_trace_pass_slices_carry_the_same_attribution_annotations_as_the_json() {
    let run = synthetic_run(4, 16, 7);
    let (bytes, frames) = recording(&run);
    let mut out = vec![];
    export::proto_trace(
        &mut Reader::new(Cursor::new(&bytes)).unwrap(),
        &mut out,
        &export::TraceOptions::everything(),
    )
    .unwrap();
    let trace = pb::Trace::decode(out.as_slice()).unwrap();
    let mut names: HashMap<u64, String> = HashMap::new();
    let mut got = vec![];
    for p in &trace.packet {
        for n in p
            .interned_data
            .iter()
            .flat_map(|d| &d.debug_annotation_names)
        {
            names.insert(n.iid(), n.name().to_string());
        }
        let Some(pb::trace_packet::Data::TrackEvent(e)) = &p.data else {
            continue;
        };
        let is_pass = matches!(&e.name_field,
            Some(pb::track_event::NameField::Name(n)) if n.starts_with("pass "));
        if !is_pass || e.r#type() != pb::track_event::Type::SliceBegin {
            continue;
        }
        let (mut count, mut text) = (None, None);
        for a in &e.debug_annotations {
            let name = match &a.name_field {
                Some(pb::debug_annotation::NameField::NameIid(i)) => names[i].as_str(),
                Some(pb::debug_annotation::NameField::Name(n)) => n.as_str(),
                None => "",
            };
            match (name, &a.value) {
                ("attribution_warnings", Some(pb::debug_annotation::Value::UintValue(n))) => {
                    count = Some(*n)
                }
                ("attribution", Some(pb::debug_annotation::Value::StringValue(s))) => {
                    text = Some(s.clone())
                }
                _ => {}
            }
        }
        got.push((count.unwrap(), text));
    }
    assert_eq!(got, expected(&run, &frames));
}
