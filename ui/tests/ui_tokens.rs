//! The tokens panel, cell by cell: a token the reference has still to judge is underlined and
//! carries no marker glyph (a word's pieces stay together on screen); once its verdict comes
//! the underline goes and the title counts it; a token the reference skips is plain, counted
//! as not checked; without a vocabulary the ids are space-separated under a label.
#![allow(clippy::unwrap_used)]

mod ui_common;

use std::sync::Arc;

use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{CheckState, Correctness, Telemetry, Verdict};
use baro_ui::layout::Layout;
use baro_ui::state::Meta;
use ratatui::style::Modifier;

/// Subword pieces of "let's go to": the pending marker used to land inside these words.
const PIECES: [&str; 5] = [" let", "'", "s", " g", "o"];

fn meta(vocab: bool) -> Meta {
    Meta {
        decoder: vocab.then(|| {
            Arc::new(|id: u32| PIECES[id as usize % PIECES.len()].as_bytes().to_vec())
                as baro_ui::state::Decoder
        }),
        ..Default::default()
    }
}

/// Five passes whose tokens spell " let's go", all pending (`skip`: the reference skips them).
fn stream(meta: Meta, skip: bool) -> baro_ui::view::UiState {
    let layout = Layout::default_preset();
    let run = synthetic_run(8, 12, 4);
    let mut s = baro_ui::app::new_state(meta, &layout);
    s.live.ingest(Telemetry::Start(run.clone()));
    for p in 0..5u64 {
        let mut f = synthetic_frame(&run, p, 1);
        f.pos = p as u32 + 1;
        f.next = p as u32;
        f.correctness = None;
        f.fail.word.bits = 0;
        f.fail.line = "fail-word 0x00000000 PASS".into();
        f.check = if skip {
            CheckState::Skipped
        } else {
            CheckState::Pending
        };
        s.live.ingest(Telemetry::Frame(Box::new(f)));
    }
    s
}

/// The tokens panel's inner rows and whether each of the text's cells is underlined.
fn panel(s: &mut baro_ui::view::UiState, w: u16, h: u16) -> (Vec<String>, String, Vec<bool>) {
    let layout = Layout::default_preset();
    let term = ui_common::render(s, &layout, w, h);
    let lines = ui_common::lines(&term);
    let (y, x) = lines
        .iter()
        .enumerate()
        .find_map(|(y, l)| {
            let c = l.find("┌ tokens")?;
            Some((y, l[..c].chars().count()))
        })
        .expect("a tokens panel");
    let buf = term.backend().buffer();
    let mut text = String::new();
    let mut under = vec![];
    for cx in x + 1..x + 30 {
        let c = &buf[(cx as u16, y as u16 + 1)];
        text.push_str(c.symbol());
        under.push(c.modifier.contains(Modifier::UNDERLINED));
    }
    (lines, text, under)
}

#[test]
fn pending_tokens_are_underlined_whole_words_and_lose_it_with_their_verdict() {
    for (w, h) in [(80, 24), (200, 60)] {
        let mut s = stream(meta(true), false);
        let (lines, text, under) = panel(&mut s, w, h);
        assert!(text.starts_with("let's go "), "{w}×{h}: {text:?}");
        let all = lines.join("\n");
        assert!(all.contains("5 pending (underlined)"), "{all}");
        assert!(under[..8].iter().all(|u| *u), "{w}×{h}: {under:?}");
        for p in 0..5 {
            s.live.ingest(Telemetry::Correctness {
                pass: p,
                correctness: Correctness {
                    gpu_token: p as u32,
                    reference: Some(p as u32),
                    runner_up: None,
                    margin: Some(1.0),
                    verdict: Verdict::Match,
                    first_divergence: None,
                },
            });
        }
        let (lines, text, under) = panel(&mut s, w, h);
        assert!(text.starts_with("let's go "), "{text:?}");
        assert!(under.iter().all(|u| !*u), "{w}×{h}: {under:?}");
        let all = lines.join("\n");
        assert!(all.contains("tokens · 5 ✓ match"), "{all}");
        assert!(!all.contains("pending"), "{all}");
    }
}

#[test]
fn skipped_tokens_are_plain_and_counted_as_not_checked() {
    let mut s = stream(meta(true), true);
    let (lines, text, under) = panel(&mut s, 200, 60);
    assert!(text.starts_with("let's go "), "{text:?}");
    assert!(under.iter().all(|u| !*u));
    assert!(lines.join("\n").contains("tokens · 5 not checked"));
}

#[test]
fn without_a_vocabulary_ids_are_space_separated_under_a_label() {
    let mut s = stream(meta(false), true);
    let layout = Layout::default_preset();
    let lines = ui_common::lines(&ui_common::render(&mut s, &layout, 200, 60));
    let all = lines.join("\n");
    assert!(all.contains("│token ids (no vocabulary)"), "{all}");
    assert!(all.contains("│0 1 2 3 4 "), "{all}");
}

/// Byte pieces of "€ ok 😀" as a real vocabulary can cut them: "€" (E2 82 AC) over two
/// tokens, the emoji (F0 9F 98 80) over three.
const BYTES: [&[u8]; 6] = [b"\xE2", b"\x82\xAC", b" ok ", b"\xF0\x9F", b"\x98", b"\x80"];

/// The tokens panel's cells for passes 0.. with positions `pos` (ids 0..).
fn cells(pos: &[u32], skip_pass: Option<u64>) -> Vec<String> {
    let meta = Meta {
        decoder: Some(
            Arc::new(|id: u32| BYTES[id as usize % BYTES.len()].to_vec())
                as baro_ui::state::Decoder,
        ),
        ..Default::default()
    };
    let run = synthetic_run(8, 12, 4);
    let mut d = baro_ui::state::Data::new(meta);
    d.ingest(Telemetry::Start(run.clone()));
    for (p, &at) in pos.iter().enumerate() {
        if Some(p as u64) == skip_pass {
            continue;
        }
        let mut f = synthetic_frame(&run, p as u64, 1);
        f.pos = at;
        f.next = p as u32;
        d.ingest(Telemetry::Frame(Box::new(f)));
    }
    d.tokens.iter().map(|t| t.text.clone()).collect()
}

#[test]
fn a_character_split_across_tokens_shows_whole_with_the_token_that_completes_it() {
    let c = cells(&[1, 2, 3, 4, 5, 6], None);
    assert_eq!(c, ["", "€", " ok ", "", "", "😀"]);
    assert!(c.iter().all(|t| !t.contains('\u{FFFD}')), "{c:?}");
}

#[test]
fn split_bytes_are_never_joined_across_a_restart_or_a_dropped_pass() {
    // The sequence restarts at pass 1 (position 0): pass 0's lone E2 can no longer complete,
    // and pass 1's continuation bytes alone are not a character.
    let c = cells(&[1, 0, 1], None);
    assert_eq!(c, ["", "\u{FFFD}\u{FFFD}", " ok "]);
    // Pass 4 never arrived (a lossy consumer dropped it): pass 5's byte is not joined to pass
    // 3's two.
    let c = cells(&[1, 2, 3, 4, 5, 6], Some(4));
    assert_eq!(c, ["", "€", " ok ", "", "\u{FFFD}"]);
}
