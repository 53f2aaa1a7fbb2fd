//! Issue 27's small things, as a newcomer meets them: the frozen header's `live N` follows
//! the stream, the no-GPU banner's reason is never cut (tmux, 80×24 and 200×60); one
//! synthetic rate (default and range) and the same refusals for `live` and `serve`; a text
//! file given as a model is refused as not a model; every `model gen` flag has help text.
#![allow(clippy::unwrap_used)]

mod tmux_common;

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use tmux_common::{have_tmux, Session, BIN};

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 60)];

/// No Vulkan driver: baro-top with no subcommand replays its embedded recording.
const NO_DRIVER: [(&str, &str); 2] = [
    ("VK_DRIVER_FILES", "/nonexistent.json"),
    ("VK_ICD_FILENAMES", "/nonexistent.json"),
];

/// baro-top with a deadline (a regression that hangs fails instead of hanging the test).
fn baro(args: &[&str]) -> Output {
    let mut c = Command::new("timeout");
    c.args(["60", BIN]).args(args);
    c.output().unwrap()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `live N` of `FROZEN at pass A · live N` on the pane's first line.
fn live_n(pane: &str) -> Option<u64> {
    let l = pane.lines().next()?;
    let rest = l.split("· live ").nth(1)?;
    rest.chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .ok()
}

#[test]
fn frozen_the_header_keeps_counting_the_live_passes_at_any_width() {
    if !have_tmux() {
        return;
    }
    for (w, h) in SIZES {
        let s = Session::sized(
            &format!("frozen{w}"),
            &format!("{BIN} live --synthetic --rate 20"),
            &[],
            (w, h),
        );
        s.wait_for(&["q quit  ? help"], Duration::from_secs(60));
        s.key("f");
        let pane = s.wait_until("FROZEN in the header", Duration::from_secs(30), |p| {
            live_n(p).is_some()
        });
        let first = live_n(&pane).unwrap();
        let pane = s.wait_until("live N to advance", Duration::from_secs(30), |p| {
            live_n(p).is_some_and(|n| n >= first + 5)
        });
        assert!(pane
            .lines()
            .next()
            .unwrap()
            .starts_with("baro-top │ FROZEN at pass "));
        s.key("q");
        assert_eq!(s.exit_status(Duration::from_secs(30)), "0");
    }
}

#[test]
fn with_no_gpu_the_banner_says_why_in_full_on_a_line_of_its_own() {
    if !have_tmux() {
        return;
    }
    // The reason, as the same run off a terminal states it on stderr.
    let o = Command::new(BIN).envs(NO_DRIVER).output().unwrap();
    let e = err(&o);
    let reason = e
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("baro-top: "))
        .unwrap()
        .to_string();
    for (w, h) in SIZES {
        let s = Session::sized(&format!("nogpu{w}"), BIN, &NO_DRIVER, (w, h));
        let pane = s.wait_for(&["NOT LIVE. Why: "], Duration::from_secs(60));
        let lines: Vec<&str> = pane.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("NOT LIVE. Why: "))
            .unwrap();
        // The banner rows from there on, up to the position bar.
        let joined = lines[at..]
            .iter()
            .take_while(|l| !l.starts_with("pass "))
            .map(|l| l.trim())
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            joined.contains(&format!("NOT LIVE. Why: {reason}")),
            "{w}×{h}: the reason {reason:?} is cut:\n{pane}"
        );
        assert!(
            joined.contains("To run live: `sudo apt-get install mesa-vulkan-drivers libvulkan1`"),
            "{joined}"
        );
        s.key("q");
        assert_eq!(s.exit_status(Duration::from_secs(30)), "0");
    }
}

#[test]
fn live_and_serve_share_the_synthetic_rate_its_default_and_its_refusals() {
    for rate in ["0.05", "20000", "nan"] {
        let live = baro(&["live", "--synthetic", "--rate", rate]);
        let serve = baro(&[
            "serve",
            "--metrics",
            "127.0.0.1:0",
            "--synthetic",
            "--rate",
            rate,
        ]);
        for o in [&live, &serve] {
            assert_eq!(o.status.code(), Some(2), "{rate}: {}", err(o));
        }
        let line = |o: &Output| {
            err(o)
                .lines()
                .find(|l| l.contains("--rate"))
                .map(|l| l.split("--rate").nth(1).unwrap().to_string())
                .unwrap_or_default()
        };
        assert_eq!(line(&live), line(&serve), "{rate}");
        assert!(
            err(&live).contains("0.1 to 10000 passes per second"),
            "{}",
            err(&live)
        );
    }
    // Without --synthetic, --rate is refused by both, with one reason.
    let live = baro(&["live", "--rate", "5"]);
    let serve = baro(&["serve", "--metrics", "127.0.0.1:0", "--rate", "5"]);
    for o in [&live, &serve] {
        assert_eq!(o.status.code(), Some(2), "{}", err(o));
        assert!(
            err(o).contains("--rate is only honoured with --synthetic"),
            "{}",
            err(o)
        );
    }
    for cmd in [&["live", "--help"][..], &["serve", "--help"]] {
        let help = String::from_utf8_lossy(&baro(cmd).stdout).into_owned();
        assert!(
            help.contains("passes per second, 0.1..=10000 [default: 60]"),
            "{cmd:?}: {help}"
        );
    }
}

#[test]
fn a_text_file_given_as_a_model_is_refused_as_not_a_model() {
    let readme = Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md");
    let o = baro(&["run", "-m", readme.to_str().unwrap(), "--passes", "1"]);
    let e = err(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert!(e.contains("not a model file"), "{e}");
    assert!(e.contains("starts with \"# baro-top"), "{e}");
    assert!(
        !e.contains("dim 1"),
        "no llama2.c header read from text: {e}"
    );
}

#[test]
fn every_model_gen_flag_has_help_text() {
    let o = baro(&["model", "gen", "--help"]);
    let help = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", err(&o));
    let lines: Vec<&str> = help.lines().collect();
    let mut flags = 0;
    for (i, l) in lines.iter().enumerate() {
        let t = l.trim_start();
        if !t.starts_with("--") && !t.starts_with('-') {
            continue;
        }
        flags += 1;
        // clap prints `--flag <X>  help` or the help on the next line.
        let after = t.split_once("  ").map(|(_, h)| h.trim()).unwrap_or("");
        let next = lines.get(i + 1).map_or("", |n| n.trim());
        let has = !after.is_empty() || (!next.is_empty() && !next.starts_with('-'));
        assert!(has, "no help for {t:?}:\n{help}");
    }
    assert!(flags >= 18, "{help}");
}
