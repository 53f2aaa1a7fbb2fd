//! The one headless line format, shared by `run`, `replay --headless` and the dashboard's
//! commands when stdout is not a terminal (`live`, `replay FILE`), and the closing summary
//! line (also printed when the dashboard quits).
//!
//! Every time is in milliseconds with three decimals (`62.940 ms`). Passes chained into one
//! submission share its host wall time; a share below the pass's GPU time says so. A pass line waits for its
//! verdict when the live reference has still to send it (a bounded wait: at most [`HOLD`]
//! lines, then it prints as `ref pending`), so a line says what the reference found:
//!
//! ```text
//! start: kq-q8_0.gguf on llvmpipe (…) · driver Mesa 22.3.6, dispatch mega, grid 2 x 64 lanes, 16 stages in 12 levels
//! pass 12 pos 12 tok 459 -> 113 " the" gpu 64.709 ms wall 62.940 ms (share of a chained submission) busy 11.374 ms barrier 51.869 ms top head 1.977 ms ref match | fail-word 0x00000000 PASS
//! end: 20 passes, 0 dropped: completed
//! summary: 20 passes, 15.9 tok/s (1.259 s of wall), gpu 57.594 ms/pass | tokens: 20 match | fail word: 20 clean
//! ```

use std::collections::VecDeque;

use baro_telemetry::{CheckState, Correctness, Frame, Telemetry, Verdict};

use crate::state::Decoder;
use crate::stats::Summary;
use crate::text::{ms, sanitize, verdict_name};

/// Pass lines held at most while their verdicts are on the way.
pub const HOLD: usize = 256;

/// The verdict part of a pass line: `ref match`, `ref mismatch (reference 12, runner-up 40,
/// margin 1.20e-3)`, `ref pending`, `ref skipped`, or nothing with checks off.
fn verdict(check: CheckState, c: Option<&Correctness>) -> String {
    match (c, check) {
        (Some(c), _) => {
            let name = verdict_name(c.verdict);
            if c.verdict == Verdict::Match {
                return format!(" ref {name}");
            }
            let mut s = format!(
                " ref {name} (reference {}, runner-up {}, margin {}",
                c.reference.map_or("-".into(), |t| t.to_string()),
                c.runner_up.map_or("-".into(), |t| t.to_string()),
                c.margin.map_or("-".into(), |m| format!("{m:.2e}")),
            );
            if let Some(p) = c.first_divergence {
                s += &format!(", diverged at pass {p}");
            }
            s + ")"
        }
        (None, CheckState::Pending) => " ref pending".into(),
        (None, CheckState::Skipped) => " ref skipped".into(),
        (None, CheckState::Off | CheckState::Checked) => String::new(),
    }
}

/// A pass's wall time. Passes chained into one submission share its host wall time, so
/// each gets a share of it that can be below the pass's own GPU time: such a wall is
/// labelled, never printed bare beside a larger `gpu`.
fn wall(f: &Frame) -> String {
    match f.gpu_ns {
        Some(g) if f.wall_ns < g => format!("{} (share of a chained submission)", ms(f.wall_ns)),
        _ => ms(f.wall_ns),
    }
}

/// One pass line (its verdict as known now).
pub fn pass_line(f: &Frame, text: Option<&str>, c: Option<&Correctness>) -> String {
    let text = text.map_or(String::new(), |t| format!(" {t:?}"));
    let gpu = f.gpu_ns.map_or("n/a".into(), ms);
    let stages = if f.stages.is_empty() {
        String::new()
    } else {
        let top = f
            .stages
            .iter()
            .max_by_key(|s| s.busy_ns)
            .map_or(String::new(), |s| {
                format!(" top {} {}", s.name, ms(s.busy_ns))
            });
        format!(
            " busy {} barrier {}{top}",
            ms(f.busy_ns()),
            ms(f.barrier_ns())
        )
    };
    format!(
        "pass {} pos {} tok {} -> {}{text} gpu {gpu} wall {}{stages}{}{}{} | {}",
        f.pass,
        f.pos,
        f.token,
        f.next,
        wall(f),
        if f.torn { " TORN" } else { "" },
        if f.dropped > 0 {
            format!(" dropped {}", f.dropped)
        } else {
            String::new()
        },
        verdict(f.check, c.or(f.correctness.as_ref())),
        f.fail.line
    )
}

/// The `start:` line.
pub fn start_line(d: &baro_telemetry::RunDetails) -> String {
    let labels: String = d.path_labels().iter().map(|l| format!(", {l}")).collect();
    format!(
        "start: {} on {}, dispatch {}, grid {} x {} lanes, {} stages in {} levels{labels}",
        d.model,
        crate::text::device_label(&d.device, &d.driver),
        d.dispatch,
        d.grid,
        d.wg_size,
        d.stages.len(),
        d.levels.len()
    )
}

/// A held pass line: the frame, waiting for its verdict.
struct Held {
    frame: Box<Frame>,
    verdict: Option<Correctness>,
}

/// Turns a telemetry stream into headless lines in order, each pass line with its verdict
/// once the reference has sent it, and a closing summary.
pub struct Printer {
    decoder: Option<Decoder>,
    held: VecDeque<Held>,
    summary: Summary,
    /// Token text in line order (a character split across tokens printed whole).
    text: crate::text::TokenStream,
}

impl Printer {
    /// A printer; `decoder` adds each token's text to its line.
    pub fn new(decoder: Option<Decoder>) -> Printer {
        Printer {
            decoder,
            held: VecDeque::new(),
            summary: Summary::default(),
            text: crate::text::TokenStream::default(),
        }
    }

    /// The summary so far.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// Count a message into the summary without making lines of it (beside JSON output).
    pub fn count(&mut self, m: &Telemetry) {
        self.summary.ingest(m);
    }

    fn line(&mut self, h: &Held) -> String {
        let f = &h.frame;
        let text = self
            .decoder
            .as_ref()
            .map(|d| sanitize(&self.text.push(&**d, f.pass, f.pos, f.next), "\\n"));
        pass_line(&h.frame, text.as_deref(), h.verdict.as_ref())
    }

    fn ready(h: &Held) -> bool {
        h.frame.check != CheckState::Pending || h.verdict.is_some()
    }

    /// Lines ready to print from the front of the queue (all of them with `all`).
    fn drain(&mut self, all: bool, out: &mut Vec<String>) {
        while let Some(h) = self.held.front() {
            if !(all || Self::ready(h) || self.held.len() > HOLD) {
                break;
            }
            if let Some(h) = self.held.pop_front() {
                let l = self.line(&h);
                out.push(l);
            }
        }
    }

    /// Take one message in; the lines it lets out.
    pub fn push(&mut self, m: Telemetry) -> Vec<String> {
        self.summary.ingest(&m);
        let mut out = vec![];
        match m {
            Telemetry::Start(d) => {
                self.drain(true, &mut out);
                out.push(start_line(&d));
            }
            Telemetry::Frame(mut f) => {
                // The line needs no spans: a held frame stays small.
                f.spans = Default::default();
                self.held.push_back(Held {
                    frame: f,
                    verdict: None,
                });
                self.drain(false, &mut out);
            }
            Telemetry::Correctness { pass, correctness } => {
                if let Some(h) = self.held.iter_mut().find(|h| h.frame.pass == pass) {
                    h.verdict = Some(correctness);
                } else if correctness.verdict != Verdict::Match {
                    // Its pass line has gone out (the hold was full): a line of its own.
                    out.push(format!(
                        "pass {pass} verdict:{}",
                        verdict(CheckState::Checked, Some(&correctness))
                    ));
                }
                self.drain(false, &mut out);
            }
            Telemetry::End {
                passes,
                dropped,
                reason,
            } => {
                self.drain(true, &mut out);
                out.push(format!("end: {passes} passes, {dropped} dropped: {reason}"));
            }
            Telemetry::Sensor(_) | Telemetry::Clock(_) => {}
        }
        out
    }

    /// The held lines (verdicts that never came print as `ref pending`) and the summary.
    pub fn finish(&mut self) -> Vec<String> {
        let mut out = vec![];
        self.drain(true, &mut out);
        out.push(self.summary.line());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baro_telemetry::fail::bits;
    use baro_telemetry::synth::{synthetic_frame, synthetic_run};

    fn correctness(verdict: Verdict) -> Correctness {
        Correctness {
            verdict,
            gpu_token: 5,
            reference: Some(6),
            runner_up: Some(5),
            margin: Some(1e-3),
            first_divergence: None,
        }
    }

    #[test]
    fn a_pending_line_waits_for_its_verdict_and_keeps_the_order() {
        let run = synthetic_run(4, 4, 2);
        let mut p = Printer::new(None);
        assert_eq!(p.push(Telemetry::Start(run.clone())).len(), 1);
        let mut f0 = synthetic_frame(&run, 0, 1);
        f0.check = CheckState::Pending;
        f0.correctness = None;
        let mut f1 = synthetic_frame(&run, 1, 1);
        f1.check = CheckState::Off;
        f1.correctness = None;
        assert!(p.push(Telemetry::Frame(Box::new(f0))).is_empty());
        // Pass 1 needs no verdict but must not overtake pass 0.
        assert!(p.push(Telemetry::Frame(Box::new(f1))).is_empty());
        let out = p.push(Telemetry::Correctness {
            pass: 0,
            correctness: correctness(Verdict::Mismatch),
        });
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[0].starts_with("pass 0 "), "{out:?}");
        assert!(
            out[0].contains(" ref mismatch (reference 6, runner-up 5, margin 1.00e-3)"),
            "{out:?}"
        );
        assert!(out[1].starts_with("pass 1 ") && !out[1].contains(" ref "));
        let end = p.finish();
        assert_eq!(end.len(), 1);
        assert!(
            end[0].contains("tokens: 1 mismatch, 1 not checked"),
            "{end:?}"
        );
    }

    #[test]
    fn a_character_split_across_two_tokens_prints_whole_on_the_line_that_completes_it() {
        let run = synthetic_run(4, 4, 2);
        // "€" is E2 82 AC: token 0 holds its first byte, token 1 the rest.
        let d: Decoder = std::sync::Arc::new(|id| {
            if id == 0 {
                b"\xE2".to_vec()
            } else {
                b"\x82\xAC!".to_vec()
            }
        });
        let mut p = Printer::new(Some(d));
        p.push(Telemetry::Start(run.clone()));
        let mut out = vec![];
        for pass in 0..2u64 {
            let mut f = synthetic_frame(&run, pass, 1);
            f.pos = pass as u32 + 1;
            f.next = pass as u32;
            f.check = CheckState::Off;
            f.correctness = None;
            out.extend(p.push(Telemetry::Frame(Box::new(f))));
        }
        assert_eq!(out.len(), 2, "{out:?}");
        assert!(out[1].contains("€!"), "{out:?}");
        assert!(out.iter().all(|l| !l.contains('\u{FFFD}')), "{out:?}");
    }

    #[test]
    fn the_hold_is_bounded_and_a_late_failure_gets_its_own_line() {
        let run = synthetic_run(4, 4, 2);
        let mut p = Printer::new(None);
        let mut printed = 0;
        for pass in 0..(HOLD as u64 + 1) {
            let mut f = synthetic_frame(&run, pass, 1);
            f.check = CheckState::Pending;
            f.correctness = None;
            printed += p.push(Telemetry::Frame(Box::new(f))).len();
        }
        assert_eq!(printed, 1, "the oldest line goes out once the hold is full");
        let out = p.push(Telemetry::Correctness {
            pass: 0,
            correctness: correctness(Verdict::NonFinite),
        });
        assert_eq!(out.len(), 1);
        assert!(
            out[0].starts_with("pass 0 verdict: ref non-finite"),
            "{out:?}"
        );
        let rest = p.finish();
        assert_eq!(rest.len(), HOLD + 1);
        assert!(rest[0].contains(" ref pending"));
        assert!(rest[HOLD].contains(&format!("tokens: 1 non-finite, {HOLD} pending")));
    }

    #[test]
    fn a_wall_below_the_gpu_time_is_labelled_as_a_share_of_a_chained_submission() {
        let f = |wall_ns, gpu_ns| Frame {
            wall_ns,
            gpu_ns,
            ..Default::default()
        };
        let own = pass_line(&f(4_000_000, Some(3_900_000)), None, None);
        assert!(own.contains("gpu 3.900 ms wall 4.000 ms |"), "{own}");
        // A pass of a 16-pass chain: the submission's 64 ms wall split 16 ways.
        let short = pass_line(&f(4_000_000, Some(64_709_000)), None, None);
        assert!(
            short.contains("gpu 64.709 ms wall 4.000 ms (share of a chained submission)"),
            "{short}"
        );
        let no_gpu = pass_line(&f(4_000_000, None), None, None);
        assert!(no_gpu.contains("gpu n/a wall 4.000 ms"), "{no_gpu}");
    }

    #[test]
    fn the_summary_tallies_speed_verdicts_and_fail_bits() {
        let mut s = Summary::default();
        for (pass, bits_set) in [
            (0u64, 0u32),
            (1, bits::TIMEOUT | bits::POISONED),
            (2, bits::TIMEOUT),
        ] {
            let mut f = Frame {
                pass,
                wall_ns: 250_000_000,
                gpu_ns: Some(200_000_000),
                check: CheckState::Checked,
                correctness: Some(correctness(Verdict::Match)),
                ..Default::default()
            };
            f.fail.word.bits = bits_set;
            s.ingest(&Telemetry::Frame(Box::new(f)));
        }
        assert_eq!(s.tok_s(), Some(4.0));
        assert_eq!(
            s.line(),
            "summary: 3 passes, 4.0 tok/s (0.750 s of wall), gpu 200.000 ms/pass | tokens: 3 match \
             | fail word: 2 failed of 3 (barrier-timeout ×2, output-poisoned ×1)"
        );
    }
}
