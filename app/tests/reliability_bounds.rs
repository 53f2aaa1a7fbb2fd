//! Issue 25, items 1, 7 and 9: a small recording with valid checksums that claims gigabytes
//! (one LZ4 block of ≈ 4 MB that inflates to 1 GiB of spans for a grid of 65,535) is refused
//! by replay, export and diff at the record's offset, fast and in bounded memory (the peak
//! RSS of each child is read back from `getrusage`); `diff` says damage with exit 2. FIFOs
//! and devices given as a recording, a layout, prompts or a model are refused by name at
//! once, never waited on or read to the end of memory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use baro_telemetry::recording::RecordingHeader;
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::Telemetry;

/// The binary under test (`BARO_TOP_BIN` runs these against another build: an old one, to
/// see each test fail before its fix).
fn bin() -> String {
    std::env::var("BARO_TOP_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_baro-top").into())
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("baro-rel-bounds-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d.join(name)
}

/// CRC-32 (IEEE), bit by bit: the format's checksum, written here so the test crafts files
/// independently of the writer.
fn crc32(parts: &[&[u8]]) -> u32 {
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

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// An LZ4 block that inflates to `prefix` followed by `zeros` zero bytes.
fn lz4_zeros(prefix: &[u8], zeros: u64) -> Vec<u8> {
    assert!(zeros > 5 + 1 + 4);
    lz4_run(prefix, 0, zeros - 5, &[0; 5])
}

/// An LZ4 block that inflates to `head`, `n` copies of `byte`, then `tail`: `head` and one
/// `byte` as literals, one match of offset 1 for the rest of the run (255 per length byte),
/// then `tail` as the literals a block must end with (at least five).
fn lz4_run(head: &[u8], byte: u8, n: u64, tail: &[u8]) -> Vec<u8> {
    assert!(n > 1 + 4 && tail.len() >= 5);
    let mut b = vec![];
    let ext = |b: &mut Vec<u8>, mut r: u64| {
        while r >= 255 {
            b.push(255);
            r -= 255;
        }
        b.push(r as u8);
    };
    let lit = head.len() as u64 + 1;
    let mlen = n - 1;
    b.push((lit.min(15) as u8) << 4 | (mlen - 4).min(15) as u8);
    if lit >= 15 {
        ext(&mut b, lit - 15);
    }
    b.extend_from_slice(head);
    b.push(byte);
    b.extend_from_slice(&1u16.to_le_bytes());
    if mlen - 4 >= 15 {
        ext(&mut b, mlen - 4 - 15);
    }
    let lit = tail.len() as u64;
    b.push((lit.min(15) as u8) << 4);
    if lit >= 15 {
        ext(&mut b, lit - 15);
    }
    b.extend_from_slice(tail);
    b
}

fn record(out: &mut Vec<u8>, kind: u8, payload: &[u8]) {
    let len = (payload.len() as u32).to_le_bytes();
    let crc = crc32(&[&len, &[kind], payload]);
    out.extend_from_slice(&len);
    out.push(kind);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(payload);
}

/// A recording: a valid header and start, `good` ordinary frames, then one frame whose LZ4
/// payload inflates to spans of `grid` × `rows` stamp pairs (all missing: one zero byte each).
fn bomb(path: &Path, good: u64, grid: u64, rows: u64) -> u64 {
    let run = synthetic_run(8, 16, 6);
    let header = serde_json::to_vec(&RecordingHeader::new(run.clone(), "bomb")).expect("json");
    let mut f = b"BARO-REC".to_vec();
    let pre = [1u32.to_le_bytes(), (header.len() as u32).to_le_bytes()].concat();
    f.extend_from_slice(&pre);
    f.extend_from_slice(&crc32(&[&pre, &header]).to_le_bytes());
    f.extend_from_slice(&header);
    record(
        &mut f,
        1,
        &serde_json::to_vec(&Telemetry::Start(run.clone())).expect("json"),
    );
    // Ordinary frames, written by the writer's codec through a real Writer into memory.
    let mut w = baro_telemetry::recording::Writer::new(
        Vec::new(),
        &RecordingHeader::new(run.clone(), "bomb"),
    )
    .expect("writer");
    let skip = w.stats().bytes as usize;
    for p in 0..good {
        w.write(&Telemetry::Frame(Box::new(synthetic_frame(&run, p, 5))))
            .expect("frame");
    }
    let bytes = w.get_ref().clone();
    f.extend_from_slice(&bytes[skip..]);
    let at = f.len() as u64;
    let mut frame = synthetic_frame(&run, good, 5);
    frame.spans = Default::default();
    let json = serde_json::to_vec(&frame).expect("json");
    let mut prefix = vec![];
    varint(&mut prefix, json.len() as u64);
    prefix.extend_from_slice(&json);
    varint(&mut prefix, grid);
    varint(&mut prefix, rows);
    varint(&mut prefix, 0);
    let zeros = 2 * grid * rows;
    let mut payload = vec![];
    varint(&mut payload, prefix.len() as u64 + zeros);
    payload.extend_from_slice(&lz4_zeros(&prefix, zeros));
    record(&mut f, 3 | 0x80, &payload);
    std::fs::write(path, &f).expect("write");
    at
}

/// Run the binary; its output, wall time and the largest peak RSS of any child so far (KiB).
fn run(args: &[&str]) -> (Output, Duration, i64) {
    let t = Instant::now();
    let o = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    let took = t.elapsed();
    // SAFETY: getrusage fills the struct it is given.
    let rss = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    };
    (o, took, rss)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn a_few_mb_recording_claiming_gigabytes_is_refused_at_its_offset_in_bounded_memory() {
    let p = tmp("bomb.baro");
    // 65,535 × 8,192 pairs: 1 GiB of zero stamps from a ≈ 4 MB block.
    let at = bomb(&p, 3, 65_535, 8_192);
    let size = std::fs::metadata(&p).expect("meta").len();
    assert!(size < 8 << 20, "the bomb is small: {size} bytes");
    let ps = p.to_str().expect("utf8");
    let csv = tmp("bomb.csv");
    for args in [
        vec!["replay", "--headless", ps],
        vec!["diff", ps, ps],
        vec!["export", ps, "--csv", csv.to_str().expect("utf8")],
    ] {
        let (o, took, rss_kib) = run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&format!("at byte {at}")), "{args:?}: {e}");
        assert!(took < Duration::from_secs(60), "{args:?} took {took:?}");
        assert!(
            rss_kib < 512 * 1024,
            "{args:?}: peak RSS {rss_kib} KiB for a {size}-byte file"
        );
    }
    // The passes before the damage are replayed.
    let (o, _, _) = run(&["replay", "--headless", ps]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().filter(|l| l.starts_with("pass ")).count(), 3);
}

/// A recording of `frames` frames, each an LZ4 record of a few KB whose frame JSON is
/// `json_len` bytes (one stage name holds the bulk; the run's own stage and level counts),
/// with no spans.
fn many_big_frames(path: &Path, frames: u64, json_len: u64) {
    let run = synthetic_run(8, 16, 6);
    let mut w = baro_telemetry::recording::Writer::new(
        Vec::new(),
        &RecordingHeader::new(run.clone(), "many"),
    )
    .expect("writer");
    w.write(&Telemetry::Start(run.clone())).expect("start");
    let mut f = w.get_ref().clone();
    for p in 0..frames {
        let mut frame = synthetic_frame(&run, p, 5);
        frame.spans = Default::default();
        frame.stages[0].name = "@".into();
        let json = serde_json::to_string(&frame).expect("json");
        let (a, b) = json.split_once("\"@\"").expect("the marked name");
        let (a, b) = (format!("{a}\""), format!("\"{b}"));
        let n = json_len - (a.len() + b.len()) as u64;
        let mut head = vec![];
        varint(&mut head, json_len);
        head.extend_from_slice(a.as_bytes());
        let mut tail = b.into_bytes();
        tail.extend_from_slice(&[0, 0, 0]); // grid 0, no stage rows, no barrier rows
        let mut payload = vec![];
        varint(&mut payload, head.len() as u64 + n + tail.len() as u64);
        payload.extend_from_slice(&lz4_run(&head, b'x', n, &tail));
        record(&mut f, 3 | 0x80, &payload);
    }
    std::fs::write(path, &f).expect("write");
}

#[test]
fn many_frames_each_at_the_frame_cap_replay_and_diff_in_bounded_memory() {
    // 200 frames of 4 MiB of JSON each (the cap): 800 MiB of frames from a ≈ 4 MB file.
    // Replay and diff hold a few numbers per pass, never every frame.
    let cap = baro_telemetry::recording::MAX_FRAME_JSON;
    let p = tmp("many.baro");
    many_big_frames(&p, 200, cap);
    let size = std::fs::metadata(&p).expect("meta").len();
    assert!(size < 8 << 20, "the file is small: {size} bytes");
    let ps = p.to_str().expect("utf8");
    for args in [vec!["replay", "--headless", ps], vec!["diff", ps, ps]] {
        let (o, took, rss_kib) = run(&args);
        let e = stderr(&o);
        assert!(o.status.code().is_some_and(|c| c < 2), "{args:?}: {e}");
        assert!(took < Duration::from_secs(120), "{args:?} took {took:?}");
        assert!(
            rss_kib < 384 * 1024,
            "{args:?}: peak RSS {rss_kib} KiB for {size} bytes of 200 frames"
        );
    }
    let (o, _, _) = run(&["replay", "--headless", ps]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().filter(|l| l.starts_with("pass ")).count(), 200);
}

#[test]
fn frames_past_the_frame_cap_or_the_runs_stage_count_are_refused_at_their_offset() {
    let cap = baro_telemetry::recording::MAX_FRAME_JSON;
    // One byte over the JSON cap, in a file that is otherwise valid.
    let p = tmp("over-json.baro");
    many_big_frames(&p, 3, cap + 1);
    let (o, _, _) = run(&["replay", "--headless", p.to_str().expect("utf8")]);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("cap on a frame"), "{e}");
    // More stage timings than the run has stages (each a few bytes: 2^20 of them would be
    // ≈ 80 MiB decoded per record before the check).
    let run_ = synthetic_run(8, 16, 6);
    let mut w = baro_telemetry::recording::Writer::new(
        Vec::new(),
        &RecordingHeader::new(run_.clone(), "rows"),
    )
    .expect("writer");
    w.write(&Telemetry::Start(run_.clone())).expect("start");
    let mut frame = synthetic_frame(&run_, 0, 5);
    frame.stages.push(frame.stages[0].clone());
    let err = w.write(&Telemetry::Frame(Box::new(frame.clone())));
    assert!(err.is_err(), "the writer refuses what a reader would");
    let mut f = w.get_ref().clone();
    let at = f.len();
    frame.spans = Default::default();
    let json = serde_json::to_vec(&frame).expect("json");
    let mut payload = vec![];
    varint(&mut payload, json.len() as u64);
    payload.extend_from_slice(&json);
    payload.extend_from_slice(&[0, 0, 0]);
    record(&mut f, 3, &payload);
    let p = tmp("over-rows.baro");
    std::fs::write(&p, &f).expect("write");
    let ps = p.to_str().expect("utf8");
    for args in [vec!["replay", "--headless", ps], vec!["diff", ps, ps]] {
        let (o, _, _) = run(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {e}");
        assert!(e.contains(&format!("at byte {at}")), "{args:?}: {e}");
        assert!(
            e.contains("17 stage timings, the run has 16 stages"),
            "{args:?}: {e}"
        );
    }
}

#[test]
fn a_frame_within_the_caps_but_mostly_missing_stamps_still_replays() {
    // 1,024 × 512 pairs (a large real pass, every stamp missing): within every cap.
    let p = tmp("big-ok.baro");
    bomb(&p, 1, 1024, 512);
    let (o, _, _) = run(&["replay", "--headless", p.to_str().expect("utf8")]);
    let out = String::from_utf8_lossy(&o.stdout);
    // No End, no footer: a crash-cut file; both frames replay and nothing is damage.
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(out.lines().filter(|l| l.starts_with("pass ")).count(), 2);
}

const STORIES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../engine/models/stories260K/stories260K.bin"
);

fn fifo(name: &str) -> PathBuf {
    let p = tmp(name);
    let _ = std::fs::remove_file(&p);
    let c = std::ffi::CString::new(p.to_str().expect("utf8")).expect("cstr");
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    p
}

/// Run with a deadline (a hang is a failure, not a stuck test); the output.
fn run_deadline(args: &[&str], secs: u64) -> Output {
    let mut c = Command::new(bin())
        .args(args)
        .env("VK_DRIVER_FILES", "/nonexistent.json")
        .env("VK_ICD_FILENAMES", "/nonexistent.json")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let t = Instant::now();
    while c.try_wait().expect("wait").is_none() {
        if t.elapsed() > Duration::from_secs(secs) {
            let _ = c.kill();
            let o = c.wait_with_output().expect("output");
            panic!("{args:?} hung for {secs} s: {}", stderr(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    c.wait_with_output().expect("output")
}

#[test]
fn fifos_and_devices_as_inputs_are_refused_by_kind_at_once() {
    let f = fifo("in.fifo");
    let fs = f.to_str().expect("utf8");
    let ok = tmp("ok.baro");
    bomb(&ok, 2, 8, 1);
    let oks = ok.to_str().expect("utf8");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["model", "info", fs], "a FIFO"),
        (
            vec!["model", "import", fs, "-z", fs, "-o", "/nonexistent/x.gguf"],
            "a FIFO",
        ),
        (
            vec![
                "model",
                "import",
                STORIES,
                "-z",
                fs,
                "-o",
                "/nonexistent/x.gguf",
            ],
            "a FIFO",
        ),
        (vec!["replay", "--headless", fs], "a FIFO"),
        (vec!["export", fs, "--csv", "/dev/null"], "a FIFO"),
        (vec!["diff", fs, oks], "a FIFO"),
        (vec!["diff", oks, "/dev/zero"], "a character device"),
        (
            vec!["replay", "--headless", "/dev/urandom"],
            "a character device",
        ),
        (vec!["live", "--synthetic", "--layout", fs], "a FIFO"),
        (
            vec!["live", "--synthetic", "--layout", "/dev/zero"],
            "a character device",
        ),
        (vec!["bench", "--prompts", fs], "a FIFO"),
        (
            vec!["bench", "--prompts", "/dev/zero"],
            "a character device",
        ),
        (vec!["run", "-m", fs], "a FIFO"),
        (vec!["tokenize", "-m", fs, "hi"], "a FIFO"),
    ];
    for (args, kind) in cases {
        let o = run_deadline(&args, 30);
        let e = stderr(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}: {e}");
        assert!(e.contains(kind), "{args:?} should say {kind}: {e}");
    }
}

#[test]
fn a_layout_larger_than_its_cap_is_refused_before_it_is_parsed() {
    let p = tmp("huge.toml");
    let line = "# a comment line that a layout may carry\n";
    std::fs::write(&p, line.repeat((2 << 20) / line.len())).expect("write");
    let o = run_deadline(
        &["live", "--synthetic", "--layout", p.to_str().expect("utf8")],
        30,
    );
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("bytes a --layout may have"), "{e}");
}

#[test]
fn io_errors_print_their_cause_once() {
    let o = run_deadline(&["replay", "--headless", "/nonexistent/x.baro"], 30);
    let e = stderr(&o);
    assert_eq!(
        e.matches("No such file or directory").count(),
        1,
        "the cause once: {e}"
    );
}
