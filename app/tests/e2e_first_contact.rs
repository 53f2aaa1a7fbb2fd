//! First contact, in a real terminal (tmux) at 80×24 and 200×60: what a newcomer sees first.
//!
//! - The tokens panel of an ended H200 replay (synthetic weights, no vocabulary in the
//!   recording): ids, compact and labelled, with the verdict counts, never a wall of `…<id>`.
//! - The tokens panel of a live decode of a real vocabulary (the kq-q8_0 fixture's
//!   SentencePiece vocabulary, on lavapipe): readable words, then `q` leaves the summary line
//!   on the normal screen.
//!
//! In CI (CI=true) a missing tmux or Vulkan device fails; outside CI both skip with a reason.
#![allow(clippy::unwrap_used)]

mod tmux_common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use tmux_common::{have_tmux, tmp, Session, BIN};

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 60)];

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// The lines of the tokens panel (its box, from the title down to the bottom border).
fn tokens_panel(pane: &str) -> Vec<String> {
    let lines: Vec<&str> = pane.lines().collect();
    let Some((top, col)) = lines
        .iter()
        .enumerate()
        .find_map(|(i, l)| l.find("┌ tokens").map(|c| (i, c)))
    else {
        panic!("no tokens panel:\n{pane}");
    };
    // Columns are characters here: the box glyphs are several bytes.
    let col = lines[top][..col].chars().count();
    let width = lines[top].chars().skip(col).position(|c| c == '┐').unwrap() + 1;
    let mut out = vec![];
    for l in &lines[top..] {
        let seg: String = l.chars().skip(col).take(width).collect();
        out.push(seg.clone());
        if seg.starts_with('└') {
            break;
        }
    }
    out
}

#[test]
fn an_ended_h200_replay_shows_token_ids_compactly_with_their_verdicts() {
    if !have_tmux() {
        return;
    }
    let f = repo("recordings/h200-llama1b-mega.baro");
    for (w, h) in SIZES {
        let s = Session::sized(
            &format!("ids{w}"),
            &format!("{BIN} replay {} --speed 0", f.display()),
            &[],
            (w, h),
        );
        let pane = s.wait_for(&["120 of 120"], Duration::from_secs(60));
        let panel = tokens_panel(&pane);
        let all = panel.join("\n");
        // The recording judged 8 passes (all match) and sampled the other 112 out.
        assert!(panel[0].contains("8 ✓ match"), "{w}×{h}:\n{all}");
        assert!(
            all.contains("token ids: no vocabulary recorded"),
            "{w}×{h}:\n{all}"
        );
        assert!(
            !all.contains('<') && !all.contains('…'),
            "no pending marker, no <id> wrapping: {w}×{h}:\n{all}"
        );
        // Ids are whole numbers separated by spaces (the newest pass's token is one).
        let body: Vec<&str> = panel[2..panel.len() - 1]
            .iter()
            .flat_map(|l| l.trim_matches('│').split_whitespace())
            .collect();
        assert!(!body.is_empty(), "{w}×{h}:\n{all}");
        assert!(
            body.iter().all(|t| t.parse::<u32>().is_ok() || *t == "|"),
            "{w}×{h}: {body:?}"
        );
        s.key("q");
        assert_eq!(s.exit_status(Duration::from_secs(30)), "0");
    }
}

/// The kq-q8_0 fixture (a llama.cpp file with a real SentencePiece vocabulary), decompressed.
fn kq_q8_0() -> PathBuf {
    let out = tmp("kq-q8_0.gguf");
    if !out.exists() {
        let z = std::fs::File::open(repo("engine/tests/data/models/kq-q8_0.gguf.zst")).unwrap();
        let mut d = ruzstd::decoding::StreamingDecoder::new(z).unwrap();
        let mut bytes = vec![];
        std::io::Read::read_to_end(&mut d, &mut bytes).unwrap();
        std::fs::write(&out, bytes).unwrap();
    }
    out
}

fn have_vulkan() -> bool {
    let ok = Command::new(BIN)
        .arg("devices")
        .env("LP_NUM_THREADS", "2")
        .output()
        .is_ok_and(|o| o.status.success());
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    if !ok && (ci || std::env::var_os("BARO_SKIP_VULKAN").is_none()) {
        panic!("no usable Vulkan device (install lavapipe: apt-get install mesa-vulkan-drivers libvulkan1; outside CI, BARO_SKIP_VULKAN=1 skips)");
    }
    if !ok {
        eprintln!("SKIPPED (BARO_SKIP_VULKAN set): no Vulkan device");
    }
    ok
}

#[test]
fn a_real_vocabulary_reads_as_words_in_the_tokens_panel_and_q_leaves_the_summary() {
    if !have_tmux() || !have_vulkan() {
        return;
    }
    let model = kq_q8_0();
    for (w, h) in SIZES {
        let s = Session::sized(
            &format!("vocab{w}"),
            &format!(
                "{BIN} live -m {} -i 'Once upon a time' --passes 12 --check all",
                model.display()
            ),
            &[("LP_NUM_THREADS", "2")],
            (w, h),
        );
        // The prompt is forced at the start of the sequence: its words, as the vocabulary
        // spells them, whole (no marker between a word's pieces), then every verdict in.
        let pane = s.wait_until(
            "the prompt's words and 12 verdicts",
            Duration::from_secs(240),
            |p| {
                p.contains("┌ tokens") && {
                    let panel = tokens_panel(p).join("\n");
                    panel.contains("Once upon a time") && panel.contains("12 ✓ match")
                }
            },
        );
        let panel = tokens_panel(&pane).join("\n");
        assert!(!panel.contains("token ids"), "{w}×{h}:\n{panel}");
        assert!(!panel.contains("pending"), "{w}×{h}:\n{panel}");
        s.key("q");
        assert_eq!(s.exit_status(Duration::from_secs(60)), "0");
        s.wait_alternate("0", Duration::from_secs(30));
        s.wait_for(&["summary: 12 passes, "], Duration::from_secs(30));
        let after = s.capture_joined();
        assert!(
            after.contains("tokens: 12 match") && after.contains("fail word: 12 clean"),
            "{w}×{h}:\n{after}"
        );
    }
}
