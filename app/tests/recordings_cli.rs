//! `replay --headless`, `export` and `diff` on recordings written by the telemetry crate's
//! writer (synthetic runs: no GPU needed).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use baro_telemetry::recording::{RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{EndReason, Telemetry};

fn baro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .output()
        .expect("baro-top runs")
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("baro-rec-cli-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("tmp dir");
    d
}

/// A finished recording of `passes` synthetic passes; `token_shift` changes the tokens from
/// pass `from` on (for diff). Returns the messages written.
fn write_recording(path: &Path, passes: u64, seed: u64, finish: bool) -> Vec<Telemetry> {
    let run = synthetic_run(8, 12, 4);
    let mut msgs = vec![Telemetry::Start(run.clone())];
    for p in 0..passes {
        msgs.push(Telemetry::Frame(Box::new(synthetic_frame(&run, p, seed))));
    }
    msgs.push(Telemetry::End {
        passes,
        dropped: 0,
        reason: EndReason::Completed,
    });
    let mut w = Writer::create(path, &RecordingHeader::new(run, "test")).expect("writer");
    let n = if finish { msgs.len() } else { msgs.len() - 3 };
    for m in &msgs[..n] {
        w.write(m).expect("write");
    }
    if finish {
        w.finish().expect("finish");
    }
    msgs[..n].to_vec()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn replay_headless_json_prints_the_recorded_messages_as_run_json_lines_with_their_attribution() {
    let d = tmpdir("json");
    let f = d.join("a.baro");
    let msgs = write_recording(&f, 6, 1, true);
    let o = baro(&[
        "replay",
        f.to_str().expect("utf-8 path"),
        "--headless",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // What `run --json` prints: the message, a frame with its attribution warnings.
    let mut json = baro_telemetry::analysis::JsonLines::new();
    let want: Vec<String> = msgs
        .into_iter()
        .map(|m| json.line(m, true).expect("json"))
        .collect();
    let text = stdout(&o);
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(got, want);
}

#[test]
fn replay_of_a_cut_recording_prints_every_complete_pass_and_exits_2_naming_the_offset() {
    let d = tmpdir("cut");
    let f = d.join("a.baro");
    write_recording(&f, 5, 2, true);
    let bytes = std::fs::read(&f).expect("read");
    let cut = d.join("cut.baro");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).expect("io");
    let o = baro(&["replay", cut.to_str().expect("utf-8 path"), "--headless"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stdout(&o).lines().any(|l| l.starts_with("pass 0 ")),
        "{}",
        stdout(&o)
    );
    assert!(stderr(&o).contains("at byte"), "{}", stderr(&o));
}

#[test]
fn replay_without_headless_into_a_pipe_exits_as_headless_does() {
    // Stdout is a pipe here: the same lines as --headless, and its status (it ended 0).
    let d = tmpdir("piped");
    let f = d.join("a.baro");
    write_recording(&f, 5, 2, true);
    let bytes = std::fs::read(&f).expect("read");
    let cut = d.join("cut.baro");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).expect("io");
    for (file, want) in [(&f, 0), (&cut, 2)] {
        let path = file.to_str().expect("utf-8 path");
        let (piped, headless) = (
            baro(&["replay", path]),
            baro(&["replay", path, "--headless"]),
        );
        assert_eq!(piped.status.code(), Some(want), "{}", stderr(&piped));
        assert_eq!(stdout(&piped), stdout(&headless));
    }
}

#[test]
fn export_and_diff_of_a_recording_without_its_footer_say_the_recorder_did_not_finish() {
    let d = tmpdir("nofooter");
    let (cut, whole) = (d.join("cut.baro"), d.join("whole.baro"));
    write_recording(&cut, 5, 3, false);
    write_recording(&whole, 5, 3, true);
    let csv = d.join("p.csv");
    for (file, said) in [(&cut, true), (&whole, false)] {
        let f = file.to_str().expect("utf-8 path");
        let o = baro(&["export", f, "--csv-passes", csv.to_str().expect("utf-8")]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        assert_eq!(
            stderr(&o).contains("no index footer (the recorder did not finish)"),
            said,
            "{}",
            stderr(&o)
        );
    }
    let o = baro(&[
        "diff",
        cut.to_str().expect("utf-8"),
        whole.to_str().expect("utf-8"),
    ]);
    let err = stderr(&o);
    assert!(
        err.contains("cut.baro: the recording has no index footer") && !err.contains("whole.baro:"),
        "{err}"
    );
}

#[test]
fn export_never_replaces_a_recording_but_replaces_its_own_earlier_output() {
    let d = tmpdir("clobber");
    let (a, b) = (d.join("a.baro"), d.join("b.baro"));
    write_recording(&a, 3, 4, true);
    write_recording(&b, 3, 5, true);
    let before = std::fs::read(&b).expect("read");
    let (sa, sb) = (a.to_str().expect("utf-8"), b.to_str().expect("utf-8"));
    for flag in ["--csv", "--csv-passes", "--perfetto", "--perfetto-proto"] {
        let o = baro(&["export", sa, flag, sb]);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("is a baro-top recording: refusing to replace it"),
            "{}",
            stderr(&o)
        );
        assert_eq!(std::fs::read(&b).expect("read"), before, "{flag}");
    }
    // An earlier export is replaced as before.
    let csv = d.join("a.csv");
    std::fs::write(&csv, b"old").expect("write");
    let o = baro(&["export", sa, "--csv", csv.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_ne!(std::fs::read(&csv).expect("read"), b"old");
}

#[test]
fn replay_says_when_it_skipped_records_of_a_kind_it_does_not_know() {
    // A record from a future writer between two frames: kind 0x20, 3 bytes, its own crc.
    let run = synthetic_run(8, 12, 4);
    let header = RecordingHeader::new(run.clone(), "test");
    let frame = |p| Telemetry::Frame(Box::new(synthetic_frame(&run, p, 6)));
    let mut w = Writer::new(Vec::new(), &header).expect("writer");
    w.write(&Telemetry::Start(run.clone())).expect("start");
    w.write(&frame(0)).expect("frame");
    let mut bytes = w.get_ref().clone();
    let payload = [1u8, 2, 3];
    let mut crc = !0u32;
    for &b in 3u32.to_le_bytes().iter().chain(&[0x20]).chain(&payload) {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.push(0x20);
    bytes.extend_from_slice(&(!crc).to_le_bytes());
    bytes.extend_from_slice(&payload);
    let d = tmpdir("unknown");
    let f = d.join("a.baro");
    std::fs::write(&f, &bytes).expect("write");
    let o = baro(&["replay", f.to_str().expect("utf-8"), "--headless"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("1 record of a kind this baro-top does not know skipped"),
        "{}",
        stderr(&o)
    );
    // Without the foreign record, nothing is said.
    let mut plain = Writer::new(Vec::new(), &header).expect("writer");
    plain.write(&Telemetry::Start(run.clone())).expect("start");
    plain.write(&frame(0)).expect("frame");
    std::fs::write(&f, plain.get_ref()).expect("write");
    let o = baro(&["replay", f.to_str().expect("utf-8"), "--headless"]);
    assert!(!stderr(&o).contains("does not know"), "{}", stderr(&o));
}

/// Run baro-top with stdout a terminal (a pseudo-terminal nobody reads: the output is small).
fn with_stdout_a_terminal(args: &[&str]) -> Output {
    let (mut master, mut slave) = (0, 0);
    // SAFETY: openpty writes two descriptors into the out-parameters; the rest may be null.
    let r = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(r, 0, "openpty");
    // SAFETY: `slave` is a fresh descriptor owned by nothing else.
    let tty = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(slave) };
    let o = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .stdout(tty)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("baro-top runs");
    // SAFETY: closing the master descriptor this function opened.
    unsafe { libc::close(master) };
    o
}

#[test]
fn binary_outputs_onto_a_terminal_are_refused_before_anything_runs() {
    let d = tmpdir("tty");
    let f = d.join("a.baro");
    write_recording(&f, 2, 7, true);
    let f = f.to_str().expect("utf-8");
    for (args, what) in [
        (
            vec!["export", f, "--perfetto-proto", "-"],
            "a protobuf trace is binary",
        ),
        (
            vec!["record", "-o", "-", "--passes", "2"],
            "a recording is binary",
        ),
    ] {
        let o = with_stdout_a_terminal(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(what), "{args:?}: {}", stderr(&o));
        // Refused before a device is opened.
        assert!(!stderr(&o).contains("device 0"), "{args:?}: {}", stderr(&o));
    }
    // Text goes to a terminal as before.
    let o = with_stdout_a_terminal(&["export", f, "--csv-passes", "-"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn export_refuses_a_workgroup_outside_the_recordings_grid() {
    let d = tmpdir("wgs");
    let f = d.join("a.baro");
    write_recording(&f, 2, 8, true);
    let (f, out) = (f.to_str().expect("utf-8"), d.join("t.json"));
    let out = out.to_str().expect("utf-8");
    // synthetic_run(8, ..): a grid of 8 workgroups.
    let o = baro(&["export", f, "--perfetto", out, "--workgroups", "0,99999"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("workgroup 99999 is not in") && stderr(&o).contains("grid of 8 (0-7)"),
        "{}",
        stderr(&o)
    );
    let o = baro(&["export", f, "--perfetto", out, "--workgroups", "0,7"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn replay_speed_paces_the_passes_by_their_recorded_wall_time() {
    let d = tmpdir("speed");
    let f = d.join("a.baro");
    let msgs = write_recording(&f, 4, 3, true);
    let recorded: u64 = msgs
        .iter()
        .filter_map(|m| match m {
            Telemetry::Frame(fr) => Some(fr.wall_ns),
            _ => None,
        })
        .sum();
    // Ask for a speed that makes the replay take ~0.5 s.
    let speed = recorded as f64 / 0.5e9;
    let t0 = std::time::Instant::now();
    let o = baro(&[
        "replay",
        f.to_str().expect("utf-8 path"),
        "--headless",
        "--speed",
        &format!("{speed}"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(t0.elapsed().as_secs_f64() >= 0.45, "{:?}", t0.elapsed());
    for bad in ["-1", "nan", "inf", "1e9"] {
        let o = baro(&[
            "replay",
            f.to_str().expect("utf-8 path"),
            "--headless",
            "--speed",
            bad,
        ]);
        assert_eq!(o.status.code(), Some(2), "--speed {bad}");
        assert!(stderr(&o).contains("--speed"), "{}", stderr(&o));
    }
}

#[test]
fn export_writes_perfetto_json_and_csv_with_a_row_per_pass_per_stage() {
    let d = tmpdir("export");
    let f = d.join("a.baro");
    write_recording(&f, 3, 4, true);
    let (pj, csv) = (d.join("t.json"), d.join("t.csv"));
    let o = baro(&[
        "export",
        f.to_str().expect("utf-8 path"),
        "--perfetto",
        pj.to_str().expect("utf-8 path"),
        "--csv",
        csv.to_str().expect("utf-8 path"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&pj).expect("read")).expect("perfetto JSON parses");
    let events = v
        .get("traceEvents")
        .and_then(|e| e.as_array())
        .expect("traceEvents");
    assert!(
        events.iter().any(|e| e["ph"] == "B") && events.iter().all(|e| e["ph"] != "X"),
        "slices as begin/end pairs"
    );
    let rows = std::fs::read_to_string(&csv).expect("io");
    assert_eq!(rows.lines().count(), 1 + 3 * 12, "{rows}");
    let o = baro(&["export", f.to_str().expect("utf-8 path")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--perfetto"), "{}", stderr(&o));
    assert!(!d.join("t.json.partial").exists());
}

#[test]
fn export_refuses_one_file_for_two_outputs_a_pass_range_without_a_trace_and_an_empty_range() {
    let d = tmpdir("export-refusals");
    let f = d.join("a.baro");
    write_recording(&f, 5, 4, true);
    let (f, csv, json) = (
        f.to_str().expect("utf-8 path"),
        d.join("t.csv"),
        d.join("t.json"),
    );
    let (csv, json) = (csv.to_str().expect("utf-8"), json.to_str().expect("utf-8"));
    // One path for two outputs: the second would silently replace the first.
    let o = baro(&["export", f, "--csv", csv, "--csv-passes", csv]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--csv and --csv-passes both name"),
        "{}",
        stderr(&o)
    );
    assert!(!Path::new(csv).exists());
    // --passes selects a trace's passes: with CSVs alone it would be ignored.
    let o = baro(&["export", f, "--csv", csv, "--passes", "1-2"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no trace is asked for"),
        "{}",
        stderr(&o)
    );
    // A range that holds no pass: refused with the passes the recording has, no empty trace.
    let o = baro(&["export", f, "--perfetto", json, "--passes", "100-200"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("its passes are 0-4"), "{}", stderr(&o));
    assert!(!Path::new(json).exists());
    // A range inside it exports those passes.
    let o = baro(&["export", f, "--perfetto", json, "--passes", "1-2"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains(": 2 passes"), "{}", stderr(&o));
}

#[test]
fn export_writes_a_gzipped_pftrace_and_json_a_per_pass_csv_and_says_what_sampling_left_out() {
    use std::io::Read;
    let d = tmpdir("export-proto");
    let f = d.join("a.baro");
    write_recording(&f, 6, 4, true);
    let (pb, pj, passes) = (d.join("t.pftrace.gz"), d.join("t.json.gz"), d.join("p.csv"));
    let path = |p: &Path| p.to_str().expect("utf-8 path").to_string();
    let o = baro(&[
        "export",
        &path(&f),
        "--perfetto-proto",
        &path(&pb),
        "--perfetto",
        &path(&pj),
        "--csv-passes",
        &path(&passes),
        "--spans-every",
        "3",
        "--workgroups",
        "0-3",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let gunzip = |p: &Path| {
        let mut out = vec![];
        flate2::read::GzDecoder::new(std::fs::File::open(p).expect("open"))
            .read_to_end(&mut out)
            .expect("gzip");
        out
    };
    // The protobuf starts with a TracePacket (field 1, length-delimited: 0x0a).
    assert_eq!(gunzip(&pb).first(), Some(&0x0a));
    let v: serde_json::Value = serde_json::from_slice(&gunzip(&pj)).expect("JSON parses");
    let tids: std::collections::BTreeSet<u64> = v["traceEvents"]
        .as_array()
        .expect("traceEvents")
        .iter()
        .filter(|e| e["ph"] == "B")
        .filter_map(|e| e["tid"].as_u64())
        .filter(|&t| t >= 1000)
        .collect();
    assert_eq!(
        tids.into_iter().collect::<Vec<_>>(),
        [1000, 1001, 1002, 1003]
    );
    // Passes 0 and 3 keep their workgroup tracks: the rest is said to be left out.
    let err = stderr(&o);
    assert!(
        err.contains("workgroup tracks for 2 of 6 passes with spans"),
        "{err}"
    );
    let rows = std::fs::read_to_string(&passes).expect("io");
    assert_eq!(rows.lines().count(), 1 + 6, "{rows}");
    assert!(rows.starts_with("pass,pos,token,next,wall_ns,gpu_ns,host_start_ns,"));
    for bad in [&["--spans-every", "0"][..], &["--workgroups", "3-1"]] {
        let mut args = vec![
            "export".to_string(),
            path(&f),
            "--perfetto".into(),
            path(&pj),
        ];
        args.extend(bad.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(|s| s.as_str()).collect();
        let o = baro(&args);
        assert_eq!(o.status.code(), Some(2), "{bad:?}");
        assert!(stderr(&o).contains(bad[0]), "{}", stderr(&o));
    }
}

#[test]
fn diff_of_two_recordings_compares_stage_kinds_and_says_whether_tokens_agree() {
    let d = tmpdir("diff");
    let (a, b) = (d.join("a.baro"), d.join("b.baro"));
    write_recording(&a, 6, 5, true);
    write_recording(&b, 6, 5, true);
    let o = baro(&[
        "diff",
        a.to_str().expect("utf-8 path"),
        b.to_str().expect("utf-8 path"),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).to_lowercase().contains("agree"),
        "{}",
        stdout(&o)
    );
    let o = baro(&["diff", a.to_str().expect("utf-8 path"), "/nonexistent.baro"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent.baro"), "{}", stderr(&o));
}

#[test]
fn a_file_that_is_not_a_recording_is_refused_by_name() {
    let d = tmpdir("notrec");
    let f = d.join("x.baro");
    std::fs::write(&f, b"GGUF not a recording at all").expect("io");
    let o = baro(&["replay", f.to_str().expect("utf-8 path"), "--headless"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("x.baro"), "{}", stderr(&o));
}

#[test]
fn dashboard_only_flags_are_refused_with_headless_not_ignored() {
    let d = tmpdir("dashflags");
    let f = d.join("a.baro");
    write_recording(&f, 2, 6, true);
    for extra in [&["--layout", "compact"][..], &["--fps", "10"], &["--ascii"]] {
        let mut args = vec!["replay", f.to_str().expect("utf-8 path"), "--headless"];
        args.extend_from_slice(extra);
        let o = baro(&args);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
    }
}

#[test]
fn replay_names_the_recording_device_and_its_driver_once_each() {
    // The shipped H200 recording: device "NVIDIA H200", driver "NVIDIA 580.159.04".
    let f = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../recordings/h200-llama1b-mega.baro"
    );
    let o = baro(&["replay", "--headless", f]);
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("replaying recording of"))
        .unwrap_or_else(|| panic!("no 'replaying' line in: {err}"));
    assert!(
        line.contains("on NVIDIA H200 · driver 580.159.04,"),
        "device and driver not said once each: {line}"
    );
    assert_eq!(line.matches("NVIDIA").count(), 1, "{line}");
}

/// A pass whose recorded wall time is longer than any run can record (the watchdog abandons a
/// pass within an hour) is replayed at `--speed 1` without waiting it out, said once on
/// stderr (was: the replay slept for the pass's 292 years).
#[test]
fn replay_at_speed_does_not_wait_out_a_pass_longer_than_any_run_records() {
    let d = tmpdir("absurd-wall");
    let f = d.join("a.baro");
    let run = synthetic_run(8, 12, 4);
    let mut w = Writer::create(&f, &RecordingHeader::new(run.clone(), "test")).expect("writer");
    w.write(&Telemetry::Start(run.clone())).expect("write");
    for (p, wall) in [(0, 1_000_000), (1, u64::MAX / 2), (2, 1_000_000)] {
        let mut fr = synthetic_frame(&run, p, 3);
        fr.wall_ns = wall;
        w.write(&Telemetry::Frame(Box::new(fr))).expect("write");
    }
    w.finish().expect("finish");
    let mut child = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(["replay", f.to_str().expect("utf-8 path"), "--headless"])
        .args(["--speed", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("baro-top runs");
    let t0 = std::time::Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if t0.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            panic!("replay still waiting after 30 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let o = child.wait_with_output().expect("output");
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.matches("without waiting it out").count(), 1, "{err}");
    assert!(err.contains("pass 1 says it took"), "{err}");
}

#[test]
fn a_flipped_byte_costs_replay_export_and_diff_its_one_pass_and_they_read_on_and_exit_2() {
    let d = tmpdir("flip");
    let (whole, flip) = (d.join("whole.baro"), d.join("flip.baro"));
    write_recording(&whole, 10, 3, true);
    let at = baro_telemetry::recording::Reader::open(&whole)
        .expect("open")
        .index()
        .and_then(|i| i.offset_of(4))
        .expect("pass 4 is indexed");
    let mut bytes = std::fs::read(&whole).expect("read");
    bytes[at as usize + 30] ^= 0x04;
    std::fs::write(&flip, &bytes).expect("write");
    let fs = flip.to_str().expect("utf-8 path");

    let o = baro(&["replay", fs, "--headless"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let passes: Vec<String> = stdout(&o)
        .lines()
        .filter(|l| l.starts_with("pass "))
        .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
        .collect();
    let want: Vec<String> = (0..10).filter(|&p| p != 4).map(|p| p.to_string()).collect();
    assert_eq!(
        passes,
        want,
        "every pass but the damaged one: {}",
        stdout(&o)
    );
    let e = stderr(&o);
    assert!(
        e.contains(&format!(
            "1 damaged stretch skipped, the first at byte {at} "
        )),
        "{e}"
    );
    assert!(e.contains("replayed every sound record around it"), "{e}");

    let csv = d.join("passes.csv");
    let o = baro(&["export", fs, "--csv-passes", csv.to_str().expect("utf-8")]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("exported every sound record"),
        "{}",
        stderr(&o)
    );
    let rows = std::fs::read_to_string(&csv).expect("csv");
    assert_eq!(
        rows.lines().count(),
        1 + 9,
        "a header and nine passes: {rows}"
    );

    let o = baro(&["diff", whole.to_str().expect("utf-8"), fs, "--json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let j: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("json");
    assert_eq!(j["b"]["passes"], 9, "{j}");
    assert!(
        j["b"]["damage"]
            .as_str()
            .is_some_and(|s| s.contains("compared every sound record")),
        "{j}"
    );
}
