//! Issue 25, items 2, 3 (record's output), 6, 7, 8 and 10, and issue 27 item 7, from the
//! command line: outputs never replace special files, symlinks or inputs; `record` refuses
//! an existing file without `--force` and a file another recorder holds, and finishes its
//! file on SIGINT / SIGTERM (exit 130 / 143); `diff` exits 2 on damage and on an empty comparison, has a headline,
//! refuses different models or devices without `--force` and speaks JSON; numeric flags are
//! refused out of range at parse time; a recording's strings reach no terminal raw.

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use baro_telemetry::recording::{Reader, RecordingHeader, Writer};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{EndReason, RunDetails, Telemetry};

/// The binary under test (`BARO_TOP_BIN`: another build, to see a test fail before its fix).
fn bin() -> String {
    std::env::var("BARO_TOP_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_baro-top").into())
}

/// Run the binary to its end: 120 s at most, so that a hang (an old build given
/// `--rate 1e-15`) fails the test instead of holding it.
fn baro(args: &[&str]) -> Output {
    baro_deadline(args, 120)
}

/// Run the binary; a run past `secs` is killed and fails the test with what it printed.
fn baro_deadline(args: &[&str], secs: u64) -> Output {
    let mut c = Command::new(bin())
        .args(args)
        .env("LP_NUM_THREADS", "2")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("baro-top runs");
    // Drained as it comes, so a child that prints a lot never blocks on a full pipe.
    let drain = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = vec![];
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            v
        })
    };
    let so = drain(c.stdout.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let se = drain(c.stderr.take().map(|r| Box::new(r) as Box<dyn Read + Send>));
    let t = Instant::now();
    let status = loop {
        if let Some(st) = c.try_wait().expect("wait") {
            break st;
        }
        if t.elapsed() > Duration::from_secs(secs) {
            let _ = c.kill();
            let _ = c.wait();
            let e = se.join().unwrap_or_default();
            panic!(
                "{args:?} ran past {secs} s: {}",
                String::from_utf8_lossy(&e)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: so.join().unwrap_or_default(),
        stderr: se.join().unwrap_or_default(),
    }
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("baro-rel-cli-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d.join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A finished synthetic recording of `passes` passes of `run`; `cut` drops its last bytes.
fn recording(path: &Path, run: &RunDetails, passes: u64, cut: usize) {
    let mut w = Writer::create(path, &RecordingHeader::new(run.clone(), "rel")).expect("writer");
    w.write(&Telemetry::Start(run.clone())).expect("start");
    for p in 0..passes {
        w.write(&Telemetry::Frame(Box::new(synthetic_frame(run, p, 5))))
            .expect("frame");
    }
    w.write(&Telemetry::End {
        passes,
        dropped: 0,
        reason: EndReason::Completed,
    })
    .expect("end");
    w.finish().expect("finish");
    if cut > 0 {
        let b = std::fs::read(path).expect("read");
        std::fs::write(path, &b[..b.len() - cut]).expect("write");
    }
}

fn run8() -> RunDetails {
    synthetic_run(8, 16, 6)
}

#[test]
fn export_onto_its_own_input_is_refused_and_the_recording_survives() {
    let rec = tmp("self.baro");
    recording(&rec, &run8(), 8, 0);
    let before = std::fs::read(&rec).expect("read");
    let link = tmp("self-link.baro");
    let hard = tmp("self-hard.baro");
    let _ = std::fs::remove_file(&link);
    let _ = std::fs::remove_file(&hard);
    std::os::unix::fs::symlink(&rec, &link).expect("symlink");
    std::fs::hard_link(&rec, &hard).expect("hard link");
    for target in [&rec, &link, &hard] {
        let o = baro(&["export", s(&rec), "--csv", s(target)]);
        assert_eq!(o.status.code(), Some(2), "{target:?}: {}", err(&o));
        assert!(
            err(&o).contains("one of this command's inputs"),
            "{}",
            err(&o)
        );
        assert_eq!(std::fs::read(&rec).expect("read"), before, "{target:?}");
    }
}

/// A null device to write to: as root, a private node (1, 3) made in the test's temporary
/// directory, so that an old build run against this test (`BARO_TOP_BIN`) can replace only
/// that node, never the system's /dev/null; otherwise /dev/null itself, which a process
/// without root cannot replace.
fn null_device() -> PathBuf {
    let p = tmp("null");
    let _ = std::fs::remove_file(&p);
    let c = std::ffi::CString::new(s(&p)).expect("cstr");
    // SAFETY: mknod on a NUL-terminated path; fails without privilege.
    let made = unsafe { libc::mknod(c.as_ptr(), libc::S_IFCHR | 0o666, libc::makedev(1, 3)) };
    if made == 0 {
        p
    } else {
        PathBuf::from("/dev/null")
    }
}

/// Wait (up to 120 s) until the file at `p` holds at least `n` bytes; `what` fails the test.
fn wait_for_len(p: &std::path::Path, n: u64, what: &str) {
    let t = Instant::now();
    while std::fs::metadata(p).map_or(0, |m| m.len()) < n {
        assert!(t.elapsed() < Duration::from_secs(120), "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

const STORIES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../engine/models/stories260K/stories260K.bin"
);
const TOK: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../engine/models/stories260K/tok512.bin"
);

#[test]
fn every_output_refuses_the_commands_own_inputs_whatever_name_reaches_them() {
    // Copies, so a failure of this test can damage nothing shipped.
    let ck = tmp("in-ck.bin");
    let tok = tmp("in-tok.bin");
    std::fs::copy(STORIES, &ck).expect("copy");
    std::fs::copy(TOK, &tok).expect("copy");
    let gguf = tmp("in-model.gguf");
    let o = baro(&["model", "import", s(&ck), "-z", s(&tok), "-o", s(&gguf)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let link = tmp("in-model-link.gguf");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&gguf, &link).expect("symlink");
    let cases: Vec<(Vec<&str>, &Path)> = vec![
        (
            vec!["model", "import", s(&ck), "-z", s(&tok), "-o", s(&ck)],
            &ck,
        ),
        (
            vec!["model", "import", s(&ck), "-z", s(&tok), "-o", s(&tok)],
            &tok,
        ),
        (
            vec!["run", "-m", s(&gguf), "--pipeline-cache-out", s(&gguf)],
            &gguf,
        ),
        (
            vec!["run", "-m", s(&gguf), "--pipeline-cache-out", s(&link)],
            &gguf,
        ),
        (
            vec!["bench", "rec", "-m", s(&gguf), "--out", s(&gguf)],
            &gguf,
        ),
        (
            vec!["bench", "rec", "-m", s(&gguf), "--out", s(&link)],
            &gguf,
        ),
    ];
    for (args, input) in cases {
        let before = std::fs::read(input).expect("read");
        let o = baro_deadline(&args, 60);
        let e = err(&o);
        assert_ne!(o.status.code(), Some(0), "{args:?}: {e}");
        assert!(e.contains("one of this command's inputs"), "{args:?}: {e}");
        assert!(
            std::fs::read(input).expect("read") == before,
            "{args:?}: {} is unchanged",
            input.display()
        );
    }
}

#[test]
fn outputs_onto_devices_fifos_symlinks_and_stdout_are_written_never_replaced() {
    let rec = tmp("out.baro");
    recording(&rec, &run8(), 4, 0);
    // A device stays the device (the run as root replaced /dev/null with a file).
    let null = null_device();
    let o = baro(&["export", s(&rec), "--csv", s(&null)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let m = std::fs::metadata(&null).expect("meta");
    assert!(
        m.file_type().is_char_device(),
        "{} is still a device",
        null.display()
    );
    // A symlink is written through: the link stays, its target gets the CSV.
    let target = tmp("target.csv");
    let link = tmp("link.csv");
    let _ = std::fs::remove_file(&link);
    std::fs::write(&target, b"old").expect("write");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let o = baro(&["export", s(&rec), "--csv", s(&link)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert!(std::fs::symlink_metadata(&link)
        .expect("meta")
        .file_type()
        .is_symlink());
    let csv = std::fs::read_to_string(&target).expect("read");
    assert!(csv.lines().count() > 4, "the target holds the CSV: {csv}");
    // A FIFO is written into (a reader takes the bytes), and stays a FIFO.
    let fifo = tmp("out.fifo");
    let _ = std::fs::remove_file(&fifo);
    let c = std::ffi::CString::new(s(&fifo)).expect("cstr");
    // SAFETY: mkfifo on a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let reader = {
        let f = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(f).expect("read the fifo"))
    };
    let o = baro(&["export", s(&rec), "--csv", s(&fifo)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    assert_eq!(reader.join().expect("reader"), csv);
    assert!(std::fs::metadata(&fifo)
        .expect("meta")
        .file_type()
        .is_fifo());
    // `-` and /dev/stdout: the CSV on stdout (a pipe here), nothing created.
    for dash in ["-", "/dev/stdout"] {
        let o = baro(&["export", s(&rec), "--csv", dash]);
        assert_eq!(o.status.code(), Some(0), "{dash}: {}", err(&o));
        assert_eq!(out(&o), csv, "{dash}");
    }
}

#[test]
fn export_to_dev_stdout_redirected_to_a_file_writes_that_file_in_place() {
    let rec = tmp("stdout-file.baro");
    recording(&rec, &run8(), 4, 0);
    let dest = tmp("stdout-file.csv");
    let f = std::fs::File::create(&dest).expect("create");
    let o = Command::new(bin())
        .args(["export", s(&rec), "--csv", "/dev/stdout"])
        .stdout(f)
        .output()
        .expect("runs");
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let csv = std::fs::read_to_string(&dest).expect("read");
    assert!(
        csv.lines().count() > 4,
        "the CSV went to the redirected file: {csv:?}"
    );
}

fn skip_without_vulkan() -> bool {
    let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    !in_ci && std::env::var_os("BARO_SKIP_VULKAN").is_some()
}

#[test]
fn record_refuses_an_existing_file_without_force_and_keeps_it() {
    let p = tmp("exists.baro");
    std::fs::write(&p, b"precious").expect("write");
    // Refused before the device is opened: no Vulkan needed.
    let o = baro(&["record", "-o", s(&p), "--passes", "2"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("--force"), "{}", err(&o));
    assert_eq!(std::fs::read(&p).expect("read"), b"precious");
    // An empty file (what a recorder killed during its device's start leaves) holds nothing
    // to lose: it passes the check (here the next one, the context, refuses the run).
    let empty = tmp("empty.baro");
    std::fs::write(&empty, b"").expect("write");
    let o = baro(&[
        "record",
        "-o",
        s(&empty),
        "--passes",
        "1",
        "--ctx",
        "100000",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("--ctx 100000"), "{}", err(&o));
    // Nor over the model it reads.
    let model = tmp("model-as-out.gguf");
    let o = baro(&["model", "gen", "-o", s(&model)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let size = std::fs::metadata(&model).expect("meta").len();
    let o = baro(&["record", "-o", s(&model), "-m", s(&model), "--force"]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("inputs"), "{}", err(&o));
    assert_eq!(std::fs::metadata(&model).expect("meta").len(), size);
}

/// `--force` replaces the old recording with the new run's, not with nothing: a run that
/// cannot start (q8 activations asked of an f32 model: refused when the session starts)
/// leaves the old file whole (it was emptied first, then removed as an empty new file).
#[test]
fn record_force_keeps_the_old_recording_when_the_new_run_cannot_start() {
    if skip_without_vulkan() {
        return;
    }
    let p = tmp("precious.baro");
    std::fs::write(&p, b"precious recording").expect("write");
    let o = baro(&[
        "record",
        "-o",
        s(&p),
        "--force",
        "--passes",
        "2",
        "--act",
        "q8",
        "--no-wait",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(err(&o).contains("q8"), "{}", err(&o));
    assert_eq!(
        std::fs::read(&p).expect("the old recording is still there"),
        b"precious recording"
    );
}

#[test]
fn record_force_overwrites_and_a_second_recorder_on_the_same_file_is_refused() {
    if skip_without_vulkan() {
        return;
    }
    let p = tmp("two.baro");
    std::fs::write(&p, b"old").expect("write");
    let mut first = Command::new(bin())
        .args([
            "record",
            "-o",
            s(&p),
            "--force",
            "--passes",
            "100000",
            "--no-wait",
        ])
        .env("LP_NUM_THREADS", "2")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    // Wait until the first one has written its header (it holds the lock from the start).
    wait_for_len(&p, 64, "the first record never started");
    let o = baro(&[
        "record",
        "-o",
        s(&p),
        "--force",
        "--passes",
        "4",
        "--no-wait",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", err(&o));
    assert!(
        err(&o).contains("another process is recording"),
        "{}",
        err(&o)
    );
    // SIGINT finishes the first: exit 130, a footer, every pass it wrote replays.
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(first.id() as i32, libc::SIGINT) };
    let status = wait_deadline(&mut first, 120);
    let mut e = String::new();
    first
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut e)
        .expect("stderr");
    assert_eq!(status, Some(130), "{e}");
    let mut r = Reader::open(&p).expect("a recording");
    let msgs = r.read_all().expect("no damage");
    assert!(r.finished(), "the footer was written: {e}");
    assert!(msgs.iter().any(|m| matches!(m, Telemetry::End { .. })));
    assert!(
        msgs.iter()
            .filter(|m| matches!(m, Telemetry::Frame(_)))
            .count()
            > 0
    );
}

#[test]
fn record_on_sigterm_finishes_the_file_and_exits_143() {
    if skip_without_vulkan() {
        return;
    }
    let p = tmp("term.baro");
    let _ = std::fs::remove_file(&p);
    let mut c = Command::new(bin())
        .args(["record", "-o", s(&p), "--passes", "100000", "--no-wait"])
        .env("LP_NUM_THREADS", "2")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    // Some passes in (a frame record is ≈ a few hundred bytes for the embedded model).
    wait_for_len(&p, 4096, "record never got going");
    // SAFETY: kill on our own child's pid.
    unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
    assert_eq!(wait_deadline(&mut c, 120), Some(143));
    let mut r = Reader::open(&p).expect("a recording");
    r.read_all().expect("no damage");
    assert!(r.finished(), "the footer was written");
}

#[test]
fn record_stopped_by_sigint_or_sigterm_keeps_every_pass_it_decoded() {
    if skip_without_vulkan() {
        return;
    }
    for (sig, code) in [(libc::SIGINT, 130), (libc::SIGTERM, 143)] {
        let p = tmp(&format!("every-pass-{sig}.baro"));
        let log = tmp(&format!("every-pass-{sig}.log"));
        let _ = std::fs::remove_file(&p);
        let mut c = Command::new(bin())
            .args(["record", "-o", s(&p), "--passes", "100000", "--no-wait"])
            .env("LP_NUM_THREADS", "2")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("spawn");
        wait_for_len(&p, 4096, "record never got going");
        // SAFETY: kill on our own child's pid.
        unsafe { libc::kill(c.id() as i32, sig) };
        assert_eq!(wait_deadline(&mut c, 120), Some(code), "signal {sig}");
        let e = std::fs::read_to_string(&log).expect("log");
        // What record says it recorded, what the engine says it decoded, what the file holds.
        let said: u64 = e
            .lines()
            .filter(|l| l.starts_with("record: ") && l.contains(" passes, "))
            .find_map(|l| l.split(" passes, ").next()?.rsplit(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no pass count in: {e}"));
        let mut r = Reader::open(&p).expect("a recording");
        let (mut frames, mut decoded, mut dropped) = (0u64, None, None);
        for m in r.by_ref() {
            match m.expect("no damage") {
                Telemetry::Frame(_) => frames += 1,
                Telemetry::End {
                    passes, dropped: d, ..
                } => {
                    decoded = Some(passes);
                    dropped = Some(d);
                }
                _ => {}
            }
        }
        assert!(r.finished(), "signal {sig}: the footer was written");
        assert_eq!(dropped, Some(0), "signal {sig}: nothing dropped");
        assert_eq!(
            decoded,
            Some(frames),
            "signal {sig}: every decoded pass is in the file"
        );
        assert_eq!(said, frames, "signal {sig}: the count record reports: {e}");
        assert!(frames > 0, "signal {sig}");
    }
}

fn wait_deadline(c: &mut Child, secs: u64) -> Option<i32> {
    let t = Instant::now();
    loop {
        if let Some(s) = c.try_wait().expect("wait") {
            return s.code();
        }
        if t.elapsed() > Duration::from_secs(secs) {
            let _ = c.kill();
            panic!("did not exit within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn diff_of_a_damaged_recording_exits_2_and_names_the_damage() {
    let a = tmp("diff-a.baro");
    let b = tmp("diff-b-cut.baro");
    recording(&a, &run8(), 16, 0);
    recording(&b, &run8(), 16, 0);
    let mut bytes = std::fs::read(&b).expect("read");
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&b, &bytes).expect("write");
    let o = baro(&["diff", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(2), "{}{}", out(&o), err(&o));
    assert!(err(&o).contains("damaged"), "{}", err(&o));
}

#[test]
fn diff_with_no_common_pass_is_not_comparable_and_exits_2() {
    let a = tmp("diff-empty-a.baro");
    let b = tmp("diff-empty-b.baro");
    recording(&a, &run8(), 0, 0);
    recording(&b, &run8(), 6, 0);
    let o = baro(&["diff", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(out(&o).contains("tokens: NOT COMPARABLE"), "{}", out(&o));
    assert!(!out(&o).contains("agree over the 0"), "{}", out(&o));
}

#[test]
fn diff_has_a_headline_refuses_different_models_without_force_and_speaks_json() {
    let a = tmp("diff-h-a.baro");
    let b = tmp("diff-h-b.baro");
    recording(&a, &run8(), 12, 0);
    recording(&b, &run8(), 12, 0);
    let o = baro(&["diff", s(&a), s(&b)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = out(&o);
    assert!(
        text.lines()
            .any(|l| l.starts_with("total") && l.contains("tok/s")),
        "{text}"
    );
    // Over the compared passes (the fast ones: one pass in eight is slow in synthetic data).
    assert!(text.lines().any(|l| l.starts_with("11/11")), "{text}");
    let o = baro(&["diff", s(&a), s(&b), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let v: serde_json::Value = serde_json::from_str(&out(&o)).expect("one JSON object");
    assert_eq!(v["headline"]["a_passes"], 11);
    assert_eq!(v["headline"]["tok_s_delta_pct"], 0.0);
    assert!(v["headline"]["a_tok_s"].as_f64().is_some_and(|t| t > 0.0));
    assert_eq!(v["tokens"]["verdict"], "agree");
    // Another model and device: refused, then compared with --force and a warning.
    let mut other = run8();
    other.model = "another-model".into();
    other.device = "another device".into();
    let c = tmp("diff-h-c.baro");
    recording(&c, &other, 12, 0);
    let o = baro(&["diff", s(&a), s(&c)]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(err(&o).contains("models differ") && err(&o).contains("devices differ"));
    assert!(err(&o).contains("--force"), "{}", err(&o));
    let o = baro(&["diff", s(&a), s(&c), "--force"]);
    assert!(out(&o).contains("warning: models differ"), "{}", out(&o));
}

#[test]
fn numeric_flags_out_of_range_are_refused_at_parse_time() {
    for args in [
        vec!["live", "--synthetic", "--rate", "1e-300"],
        vec!["live", "--synthetic", "--rate", "1e-15"],
        vec!["live", "--synthetic", "--rate", "inf"],
        vec!["replay", "--speed", "1e-300", "x.baro"],
        vec!["bench", "ui", "--workgroups", "65535"],
        vec!["live", "--synthetic", "--grid", "65535"],
        vec!["model", "gen", "--dim", "0", "-o", "/nonexistent/x.gguf"],
        vec![
            "model",
            "gen",
            "--hidden",
            "2000000",
            "-o",
            "/nonexistent/x.gguf",
        ],
        vec![
            "model",
            "gen",
            "--layers",
            "-1",
            "-o",
            "/nonexistent/x.gguf",
        ],
        vec!["model", "gen", "--heads", "0", "-o", "/nonexistent/x.gguf"],
        vec![
            "model",
            "gen",
            "--kv-heads",
            "0",
            "-o",
            "/nonexistent/x.gguf",
        ],
        vec![
            "model",
            "gen",
            "--vocab",
            "99999999999",
            "-o",
            "/nonexistent/x.gguf",
        ],
        vec!["model", "gen", "--seq", "0", "-o", "/nonexistent/x.gguf"],
        vec![
            "model",
            "gen",
            "--head-dim",
            "1e9",
            "-o",
            "/nonexistent/x.gguf",
        ],
        vec![
            "model",
            "gen",
            "--rope-scale",
            "nan",
            "-o",
            "/nonexistent/x.gguf",
        ],
        vec![
            "model",
            "gen",
            "--rope-scale",
            "0",
            "-o",
            "/nonexistent/x.gguf",
        ],
        vec![
            "model",
            "gen",
            "--margin-steps",
            "100000",
            "-o",
            "/nonexistent/x.gguf",
        ],
        // Any whole -n clamps to the context, as run.c does; past u64 it is no number.
        vec!["generate", "-n", "18446744073709551616"],
        vec!["generate", "-n", "-1"],
        vec!["run", "--inject-stall-wg", "65535"],
        vec!["live", "--synthetic", "--inject-producer-panic", "0"],
    ] {
        let t = Instant::now();
        let o = baro(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", err(&o));
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{args:?} was not refused at once"
        );
        assert!(
            err(&o).contains("invalid value") || err(&o).contains("at most"),
            "{args:?}: {}",
            err(&o)
        );
    }
}

#[test]
fn escape_sequences_in_a_models_strings_never_reach_stdout_or_stderr() {
    // general.name is the checkpoint's file stem: a name with a clear-screen, a window
    // title (OSC 0) and a C1 CSI in it.
    let evil = tmp("x\u{1b}[2J\u{1b}]0;pwned\u{7}\u{9b}31m.bin");
    std::fs::copy(STORIES, &evil).expect("copy");
    let gguf = tmp("evil-name.gguf");
    let o = baro(&["model", "import", s(&evil), "-z", TOK, "-o", s(&gguf)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let o = baro(&["model", "info", s(&gguf)]);
    assert_eq!(o.status.code(), Some(0), "{}", err(&o));
    let text = out(&o);
    assert!(
        text.contains("name       x"),
        "the name is shown, cleaned: {text}"
    );
    for (stream, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
        let s = String::from_utf8_lossy(bytes);
        for bad in ['\u{1b}', '\u{7}', '\u{9b}'] {
            assert!(
                !s.contains(bad),
                "{stream} of model info holds {bad:?}: {s:?}"
            );
        }
    }
}

#[test]
fn escape_sequences_in_a_recordings_strings_never_reach_the_terminal() {
    let mut run = run8();
    let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{1b}]52;c;ZXZpbA==\u{7}\u{9b}31m";
    run.device = format!("dev{evil}");
    run.model = format!("model{evil}");
    run.driver = format!("drv{evil}");
    let p = tmp("evil.baro");
    recording(&p, &run, 3, 0);
    for args in [
        vec!["replay", "--headless", s(&p)],
        vec!["replay", s(&p)],
        vec!["diff", s(&p), s(&p)],
        vec!["export", s(&p), "--csv", "/dev/null"],
    ] {
        let o = baro(&args);
        for (name, bytes) in [("stdout", &o.stdout), ("stderr", &o.stderr)] {
            let t = String::from_utf8_lossy(bytes);
            assert!(
                !t.contains('\u{1b}') && !t.contains('\u{7}') && !t.contains('\u{9b}'),
                "{args:?} {name}: {t:?}"
            );
        }
        // The OSC strings go whole (title, clipboard); the text around them stays.
        let all = out(&o) + &err(&o);
        assert!(
            !all.contains("pwned") && !all.contains("ZXZpbA"),
            "{args:?}: {all}"
        );
        assert!(
            all.contains("dev") || args[0] == "export",
            "{args:?}: {all}"
        );
    }
}
