//! Property tests: every terminal size from 1×1 up draws without panicking (below the
//! layout's minimum it says "need W×H"), and token text full of escape bytes and control
//! characters never reaches the screen.
#![allow(clippy::unwrap_used)]

mod ui_common;
use ui_common::*;

use std::sync::Arc;

use baro_ui::layout::Layout;
use baro_ui::state::Meta;
use baro_ui::synthetic::{self, Synth, SynthConfig};
use baro_ui::theme::{ColorDepth, Theme};
use ratatui::buffer::Buffer;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn every_size_from_1x1_draws_without_panicking() {
    let (mut st, default) = state(
        SynthConfig {
            fail_every: Some(7),
            mismatch_at: Some(9),
            tail_wg: Some(3),
            ..clean()
        },
        12,
    );
    let layouts: Vec<Layout> = ["default", "flame", "compact"]
        .iter()
        .map(|n| Layout::load(n).unwrap())
        .collect();
    let mut rng = Rng(0x1234_5678);
    let mut sizes: Vec<(u16, u16)> = (1..=90)
        .flat_map(|w| [1, 2, 3, 11, 12, 23, 24, 25].map(|h| (w, h)))
        .collect();
    sizes.extend((0..60).map(|_| (1 + (rng.next() % 400) as u16, 1 + (rng.next() % 120) as u16)));
    for (i, (w, h)) in sizes.into_iter().enumerate() {
        let l = &layouts[i % layouts.len()];
        let theme = Theme::new(
            [ColorDepth::TrueColor, ColorDepth::Ansi16, ColorDepth::None][i % 3],
            i % 2 == 0,
        );
        st.view.expanded = i % 5 == 0;
        st.view.help = i % 7 == 0;
        let term = render_theme(&mut st, l, w, h, theme);
        // The help covers the whole screen, the size message too.
        if (w < l.min.0 || h < l.min.1) && !st.view.help {
            let text = lines(&term).concat();
            let msg = format!("need {}×{}", l.min.0, l.min.1);
            if w as usize >= msg.chars().count() {
                assert!(text.contains(&msg), "{w}×{h}: {text:?}");
            }
        }
    }
    let _ = default;
}

#[test]
fn need_message_is_centred_below_the_minimum_and_q_and_help_stay() {
    let (mut st, layout) = state(clean(), 2);
    let term = render(&mut st, &layout, 13, 3);
    let want = Buffer::with_lines(["             ", " need 80×24  ", "q ?          "]);
    let want: Vec<String> = (0..3)
        .map(|y| (0..13).map(|x| want[(x, y)].symbol().to_string()).collect())
        .collect();
    assert_eq!(lines(&term), want);
}

#[test]
fn escape_bytes_in_token_text_never_reach_the_screen() {
    let pieces = [
        "\u{1b}[31m",
        "\u{1b}]0;pwned\u{7}",
        "\u{1b}P+q\u{1b}\\",
        "\u{9b}2J",
        "\r",
        "\u{0}",
        "\u{7f}",
        "\u{202e}",
        "日本",
        "🦀",
        "a",
        "\t",
        "\n",
        "\u{1b}",
        "[",
    ];
    for seed in 1..40u64 {
        let p = pieces;
        let dec = move |id: u32| {
            let mut r = Rng(seed * 7919 + id as u64 + 1);
            // Pieces, and now and then a lone byte that starts, continues or cannot be part
            // of a UTF-8 character (a real vocabulary's byte tokens).
            let mut b = (0..(r.next() % 6))
                .map(|_| p[(r.next() % p.len() as u64) as usize])
                .collect::<String>()
                .into_bytes();
            if r.next().is_multiple_of(3) {
                b.push([0xE2u8, 0x82, 0xF0, 0xFF, 0x1B][(r.next() % 5) as usize]);
            }
            b
        };
        let cfg = SynthConfig {
            mismatch_at: Some(5),
            ..clean()
        };
        let mut meta = synthetic::meta(Synth::new(cfg.clone()).details());
        meta.decoder = Some(Arc::new(dec));
        let mut st = state_with(cfg, 30, meta);
        let layout = Layout::default_preset();
        for (w, h) in [(80, 24), (200, 60), (97, 31)] {
            let term = render(&mut st, &layout, w, h);
            let buf = term.backend().buffer();
            for c in buf.content() {
                assert!(
                    !c.symbol()
                        .chars()
                        .any(|ch| ch.is_control() || ('\u{202a}'..='\u{202e}').contains(&ch)),
                    "seed {seed}: {:?}",
                    c.symbol()
                );
            }
        }
    }
    let _ = Meta::default();
}
