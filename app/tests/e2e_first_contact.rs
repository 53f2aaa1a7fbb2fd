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

/// The help's position line: (first, last, of) from `lines A-B of N`.
fn help_pos(pane: &str) -> Option<(usize, usize, usize)> {
    let l = pane.lines().find(|l| l.contains("│lines "))?;
    let rest = l.split("lines ").nth(1)?;
    let (range, rest) = rest.split_once(" of ")?;
    let (a, b) = range.split_once('-')?;
    let n: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    Some((a.parse().ok()?, b.parse().ok()?, n.parse().ok()?))
}

/// The help page in a real terminal, live and in a replay (of the synthetic demo, under its
/// SYNTHETIC banner): full screen, scrolled page by
/// page to its last line with PgDn, a line back and forth with k and j, Home and End; the
/// replay keys in their own section; no text touching the frame; closed by `q` (which does
/// not quit), `?` and `Esc`; then `q` quits. Each key waits for its effect before the next
/// (two escape sequences in one read are not what a user types).
#[test]
fn the_help_is_full_screen_scrolls_to_its_end_and_closes_without_quitting() {
    if !have_tmux() {
        return;
    }
    let demo = repo("recordings/synthetic-demo.baro");
    let t = Duration::from_secs(30);
    for (w, h) in SIZES {
        for (name, cmd) in [
            ("live", format!("{BIN} live --synthetic --rate 20")),
            (
                "replay",
                format!("{BIN} replay {} --speed 0", demo.display()),
            ),
        ] {
            let s = Session::sized(&format!("help{name}{w}"), &cmd, &[], (w, h));
            let pane = s.wait_for(&["q quit  ? help"], Duration::from_secs(60));
            assert!(pane.lines().last().unwrap().starts_with("q quit  ? help"));
            // recordings/README.md promises this banner for the synthetic demo.
            if name == "replay" {
                assert!(pane.contains("SYNTHETIC REPLAY of "), "{pane}");
            }
            s.key("?");
            let pane = s.wait_for(&["┌ help · keys", "│lines 1-"], t);
            assert!(!pane.contains("┌ flame"), "full screen:\n{pane}");
            let (_, mut b, n) = help_pos(&pane).unwrap();
            let mut text: Vec<String> = vec![];
            let mut keep = |pane: &str| {
                let (a, ..) = help_pos(pane).unwrap();
                let rows: Vec<&str> = pane.lines().skip(1).take(h as usize - 3).collect();
                for (i, l) in rows.iter().enumerate() {
                    let chars: Vec<char> = l.chars().collect();
                    assert_eq!(chars.len(), w as usize, "{l:?}");
                    assert_eq!(chars[w as usize - 2], ' ', "cut at {w}×{h}: {l:?}");
                    if a + i > text.len() {
                        text.push(chars[1..w as usize - 1].iter().collect());
                    }
                }
            };
            keep(&pane);
            while b < n {
                s.key("PageDown");
                let pane = s.wait_until("a page down", t, |p| {
                    help_pos(p).is_some_and(|(_, b2, _)| b2 > b)
                });
                keep(&pane);
                b = help_pos(&pane).unwrap().1;
            }
            assert_eq!(text.len(), n, "every line seen once");
            let all = text.join("\n");
            assert!(all.contains("replay (baro-top replay FILE)"), "{all}");
            assert!(all.contains("replay: seek to a pass"), "{all}");
            assert!(text.last().unwrap().contains("pending"), "{all}");
            let pane = s.capture();
            assert!(
                pane.contains("↑ more") && !pane.contains("↓ more"),
                "{pane}"
            );
            let at = |p: &str| help_pos(p).map(|(a, ..)| a);
            let end = at(&pane).unwrap();
            s.key("k");
            s.wait_until("k: a line up", t, |p| at(p) == Some(end - 1));
            s.key("j");
            s.wait_until("j: a line down", t, |p| at(p) == Some(end));
            s.key("Home");
            s.wait_until("Home: the top", t, |p| at(p) == Some(1));
            s.key("End");
            s.wait_until("End: the end", t, |p| at(p) == Some(end));
            for close in ["q", "?", "Escape"] {
                s.key(close);
                s.wait_until(&format!("{close} to close the help"), t, |p| {
                    !p.contains("┌ help · keys") && p.contains("q quit  ? help")
                });
                if close != "Escape" {
                    s.key("?");
                    s.wait_for(&["┌ help · keys"], t);
                }
            }
            s.key("q");
            assert_eq!(s.exit_status(t), "0", "{name} {w}×{h}");
        }
    }
}
