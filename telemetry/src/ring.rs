//! The event ring's byte layout and its decoding into [`Spans`].
//!
//! # Layout (device side)
//!
//! The kernel writes one frame per pass into the `telemetry.ring` buffer (`u32` words,
//! little-endian); a frame is [`RingLayout::frame_words`] words:
//!
//! ```text
//! word 0            sequence: pass_id + 1, written LAST with release semantics by the
//!                   workgroup that finishes last (a frame whose sequence does not match the
//!                   pass is torn or overrun and is counted, never read)
//! word 1            pass_id
//! word 2            workgroups finished (atomic counter; must equal G)
//! word 3            reserved
//! words 4 ..        stages × G records of 4 words, record (stage * G + wg):
//!                   start lo, start hi, end lo, end hi
//! then              levels × G records of 4 words, record (level * G + wg):
//!                   barrier arrive lo, arrive hi, barrier exit lo, exit hi
//!                   (megakernel only; zero in multi mode, where per-dispatch GPU timestamps
//!                   give the level boundaries)
//! ```
//!
//! Stamps are the device clock (`VK_KHR_shader_clock` realtime, ns). A stamp of 0 was never
//! written. Lavapipe moves only the low 32 bits, so every stamp is taken relative to the
//! pass's earliest stage start modulo 2^32 ([`crate::clock::rel_ns`]); the earliest start is
//! itself found modulo 2^32, so a pass that straddles a wrap of the low word decodes right.
//!
//! The host zeroes the slot before each pass and copies it out after the pass's fence in the
//! same command buffer, so a pass never reads another pass's stamps. Decoding never panics
//! on any words: a short or torn frame is a [`RingError`].

use thiserror::Error;

use crate::clock::rel_ns;
use crate::spans::{Spans, MISSING};

/// Words before the first stage record.
pub const HEADER_WORDS: usize = 4;
/// Words per record (start/arrive lo, hi; end/exit lo, hi).
pub const RECORD_WORDS: usize = 4;

/// The shape of one ring frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingLayout {
    /// Stages in the program.
    pub stages: u32,
    /// Levels in the program.
    pub levels: u32,
    /// Workgroups (G).
    pub grid: u32,
}

/// Why a ring frame was not read.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RingError {
    /// Fewer words than the layout needs.
    #[error("ring frame has {have} words, the layout needs {need}")]
    Short {
        /// Words given.
        have: usize,
        /// Words the layout needs.
        need: usize,
    },
    /// The sequence word is not this pass's: torn (still being written) or overrun.
    #[error("ring frame sequence {found}, expected {expected} (torn or overrun)")]
    Sequence {
        /// Sequence word found.
        found: u32,
        /// Sequence word expected (`pass_id + 1`).
        expected: u32,
    },
    /// Not every workgroup finished writing.
    #[error("ring frame finished by {finished} of {grid} workgroups")]
    Unfinished {
        /// Workgroups counted.
        finished: u32,
        /// Workgroups in the grid.
        grid: u32,
    },
    /// No stage start was stamped at all.
    #[error("ring frame has no stage stamps")]
    NoStamps,
}

/// A decoded ring frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodedRing {
    /// The spans, ns from the earliest stage start.
    pub spans: Spans,
    /// The earliest stage start as stamped (device clock; only its low 32 bits are
    /// meaningful on devices that move only those): the origin of every span.
    pub device_start_ns: u64,
}

impl RingLayout {
    /// Words in one frame.
    pub fn frame_words(&self) -> usize {
        HEADER_WORDS
            + (self.stages as usize + self.levels as usize) * self.grid as usize * RECORD_WORDS
    }

    /// Word index of a stage record's start-lo word within a frame.
    pub fn stage_record(&self, stage: u32, wg: u32) -> usize {
        HEADER_WORDS + (stage as usize * self.grid as usize + wg as usize) * RECORD_WORDS
    }

    /// Word index of a barrier record's arrive-lo word within a frame.
    pub fn barrier_record(&self, level: u32, wg: u32) -> usize {
        self.stage_record(self.stages, 0)
            + (level as usize * self.grid as usize + wg as usize) * RECORD_WORDS
    }

    /// Decode one frame: `words` is the frame (at least [`Self::frame_words`] words),
    /// `expect_seq` the sequence word that marks this pass's frame complete (`pass_id + 1`),
    /// `barriers` whether barrier records are meaningful (megakernel).
    pub fn decode(
        &self,
        words: &[u32],
        expect_seq: u32,
        barriers: bool,
    ) -> Result<DecodedRing, RingError> {
        let need = self.frame_words();
        if words.len() < need {
            return Err(RingError::Short {
                have: words.len(),
                need,
            });
        }
        if words[0] != expect_seq {
            return Err(RingError::Sequence {
                found: words[0],
                expected: expect_seq,
            });
        }
        if words[2] != self.grid {
            return Err(RingError::Unfinished {
                finished: words[2],
                grid: self.grid,
            });
        }
        let stamp = |w: usize| (words[w] as u64) | ((words[w + 1] as u64) << 32);
        let (ns, nl, g) = (self.stages, self.levels, self.grid);
        // The origin: the earliest stage start, modulo 2^32.
        let mut base: Option<u64> = None;
        for s in 0..ns {
            for w in 0..g {
                let t = stamp(self.stage_record(s, w));
                if t != 0 && base.is_none_or(|b| rel_ns(t, b) > u32::MAX as u64 / 2) {
                    base = Some(t);
                }
            }
        }
        let base = base.ok_or(RingError::NoStamps)?;
        let rel = |t: u64| -> u32 {
            if t == 0 {
                MISSING
            } else {
                (rel_ns(t, base) as u32).min(MISSING - 1)
            }
        };
        let mut spans = Spans::new(g, ns, if barriers { nl } else { 0 });
        for s in 0..ns {
            for w in 0..g {
                let r = self.stage_record(s, w);
                let (a, b) = (stamp(r), stamp(r + 2));
                if a != 0 && b != 0 {
                    spans.set_span(s, w, rel(a), rel(b));
                }
            }
        }
        if barriers {
            for l in 0..nl {
                for w in 0..g {
                    let r = self.barrier_record(l, w);
                    spans.set_barrier(l, w, rel(stamp(r)), rel(stamp(r + 2)));
                }
            }
        }
        Ok(DecodedRing {
            spans,
            device_start_ns: base,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::tests::details;
    use crate::BarrierTiming;

    const L: RingLayout = RingLayout {
        stages: 3,
        levels: 2,
        grid: 2,
    };

    /// A frame for `L`: stage spans then barrier stamps, absolute device ns.
    fn frame(seq: u32, spans: &[[u64; 2]; 6], bar: &[[u64; 2]; 4]) -> Vec<u32> {
        let mut w = vec![seq, seq.wrapping_sub(1), 2, 0];
        for r in spans.iter().chain(bar) {
            w.extend([
                r[0] as u32,
                (r[0] >> 32) as u32,
                r[1] as u32,
                (r[1] >> 32) as u32,
            ]);
        }
        w
    }

    const SPANS: [[u64; 2]; 6] = [
        [1000, 1100],
        [1000, 1500],
        [1100, 1200],
        [1500, 1600],
        [1700, 1800],
        [1710, 1800],
    ];
    const BAR: [[u64; 2]; 4] = [[1200, 1700], [1600, 1710], [0, 0], [0, 0]];

    #[test]
    fn layout_places_barrier_records_after_every_stage_record() {
        assert_eq!(L.frame_words(), 4 + (3 + 2) * 2 * 4);
        assert_eq!(L.stage_record(0, 0), 4);
        assert_eq!(L.stage_record(1, 1), 4 + 3 * 4);
        assert_eq!(L.barrier_record(0, 0), 4 + 6 * 4);
        assert_eq!(L.barrier_record(1, 1), 4 + 9 * 4);
        assert_eq!(frame(8, &SPANS, &BAR).len(), L.frame_words());
        assert_eq!(details().ring_layout(), L);
    }

    #[test]
    fn complete_frame_decodes_to_offsets_from_the_earliest_start() {
        let d = L.decode(&frame(8, &SPANS, &BAR), 8, true).unwrap();
        assert_eq!(d.device_start_ns, 1000);
        assert_eq!(d.spans.span(0, 1), Some((0, 500)));
        assert_eq!(d.spans.span(2, 1), Some((710, 800)));
        assert_eq!(d.spans.arrive(0, 1), Some(600));
        assert_eq!(d.spans.exit(0, 0), Some(700));
        assert_eq!(d.spans.exit(1, 0), None, "the last level has no barrier");
        let rd = details();
        let t = d.spans.stage_timings(&rd.stages, &rd.levels, &[]);
        assert_eq!(t[1].charged_ns, 405);
        assert_eq!(
            d.spans.barrier_timings(),
            vec![BarrierTiming {
                level: 0,
                arrival_spread_ns: 400,
                release_ns: 100,
                exit_spread_ns: 10
            }]
        );
    }

    #[test]
    fn torn_frame_with_the_wrong_sequence_is_refused() {
        assert_eq!(
            L.decode(&frame(8, &SPANS, &BAR), 9, true),
            Err(RingError::Sequence {
                found: 8,
                expected: 9
            })
        );
    }

    #[test]
    fn frame_not_finished_by_every_workgroup_is_refused() {
        let mut f = frame(8, &SPANS, &BAR);
        f[2] = 1;
        assert_eq!(
            L.decode(&f, 8, true),
            Err(RingError::Unfinished {
                finished: 1,
                grid: 2
            })
        );
    }

    #[test]
    fn short_frame_is_refused_without_panicking() {
        let f = frame(8, &SPANS, &BAR);
        assert_eq!(
            L.decode(&f[..10], 8, true),
            Err(RingError::Short { have: 10, need: 44 })
        );
        assert!(L.decode(&[], 8, true).is_err());
    }

    #[test]
    fn frame_without_any_stage_stamp_is_refused() {
        let f = frame(8, &[[0, 0]; 6], &[[0, 0]; 4]);
        assert_eq!(L.decode(&f, 8, true), Err(RingError::NoStamps));
    }

    #[test]
    fn pass_straddling_a_32_bit_clock_wrap_decodes_to_small_offsets() {
        // Lavapipe: the high word stays 0 and the low word wraps mid-pass.
        let t0 = (1u64 << 32) - 75; // 75 ns before the wrap (no stamp lands on 0)
        let at = |d: u64| (t0 + d) & 0xffff_ffff;
        let spans = [
            [at(0), at(100)],
            [at(50), at(300)],
            [at(100), at(200)],
            [at(300), at(400)],
            [at(500), at(600)],
            [at(510), at(600)],
        ];
        let bar = [[at(200), at(500)], [at(400), at(510)], [0, 0], [0, 0]];
        // Stage 1's start on wg 0 sits after the wrap (a small raw value): the origin must
        // still be the pre-wrap stamp.
        assert!(at(100) < at(0));
        let d = L.decode(&frame(3, &spans, &bar), 3, true).unwrap();
        assert_eq!(d.device_start_ns, t0);
        assert_eq!(d.spans.span(0, 0), Some((0, 100)));
        assert_eq!(d.spans.span(1, 1), Some((300, 400)));
        assert_eq!(d.spans.exit(0, 1), Some(510));
        assert_eq!(d.spans.barrier_timings()[0].arrival_spread_ns, 200);
    }

    #[test]
    fn missing_stamps_leave_spans_and_barriers_missing() {
        let mut spans = SPANS;
        spans[4] = [0, 0]; // wg0 never ran stage c (single-workgroup stage)
        spans[3] = [1500, 0]; // wg1's end on b never stamped
        let mut bar = BAR;
        bar[1] = [1600, 0]; // wg1 arrived but its exit is missing
        let d = L.decode(&frame(8, &spans, &bar), 8, true).unwrap();
        assert_eq!(d.spans.span(2, 0), None);
        assert_eq!(d.spans.span(1, 1), None);
        assert_eq!(d.spans.arrive(0, 1), Some(600));
        assert_eq!(d.spans.exit(0, 1), None);
        assert_eq!(d.spans.iter().count(), 4);
        let b = d.spans.barrier_timings();
        assert_eq!((b[0].exit_spread_ns, b[0].release_ns), (0, 100));
    }

    #[test]
    fn multi_mode_decodes_no_barrier_rows() {
        let d = L.decode(&frame(8, &SPANS, &[[0, 0]; 4]), 8, false).unwrap();
        assert_eq!(d.spans.levels(), 0);
        assert_eq!(d.spans.stages(), 3);
        assert!(d.spans.barrier_timings().is_empty());
    }
}
