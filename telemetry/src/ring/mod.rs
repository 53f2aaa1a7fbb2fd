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
use crate::spans::{BarrierTiming, Spans, MISSING};
use crate::{RunDetails, StageTiming};

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

impl RunDetails {
    /// The ring layout of this run's frames.
    pub fn ring_layout(&self) -> RingLayout {
        RingLayout {
            stages: self.stages.len() as u32,
            levels: self.levels.len() as u32,
            grid: self.grid,
        }
    }
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
        self.decode_words(words, expect_seq, barriers, None)
            .map(|(d, _)| d)
    }

    /// [`Self::decode`] on the frame's little-endian bytes as they lie in a mapped readback
    /// buffer (at least 4 × [`Self::frame_words`] bytes; any alignment), without copying them
    /// into words first. The same frame decodes to the same result either way.
    pub fn decode_le_bytes(
        &self,
        bytes: &[u8],
        expect_seq: u32,
        barriers: bool,
    ) -> Result<DecodedRing, RingError> {
        self.decode_words(bytes, expect_seq, barriers, None)
            .map(|(d, _)| d)
    }

    /// Decode the pass's ring frame and compute its stage and barrier timings
    /// ([`Spans::stage_timings`] with `run`'s stages, levels and `dispatch_ns`,
    /// [`Spans::barrier_timings`]) in one sweep, level by level, each level's timings taken
    /// while its rows are still in cache: the same results as decoding, then computing.
    pub(crate) fn decode_le_bytes_with_timings(
        &self,
        bytes: &[u8],
        expect_seq: u32,
        barriers: bool,
        run: &RunDetails,
        dispatch_ns: &[u64],
    ) -> Result<(DecodedRing, Timings), RingError> {
        let (d, t) = self.decode_words(bytes, expect_seq, barriers, Some((run, dispatch_ns)))?;
        Ok((d, t.unwrap_or_default()))
    }

    fn decode_words<W: Words + ?Sized>(
        &self,
        words: &W,
        expect_seq: u32,
        barriers: bool,
        timings: Option<(&RunDetails, &[u64])>,
    ) -> Result<(DecodedRing, Option<Timings>), RingError> {
        let need = self.frame_words();
        if words.len() < need {
            return Err(RingError::Short {
                have: words.len(),
                need,
            });
        }
        if words.word(0) != expect_seq {
            return Err(RingError::Sequence {
                found: words.word(0),
                expected: expect_seq,
            });
        }
        if words.word(2) != self.grid {
            return Err(RingError::Unfinished {
                finished: words.word(2),
                grid: self.grid,
            });
        }
        let (ns, g) = (self.stages as usize, self.grid as usize);
        let n = ns * g;
        let srec = |i: usize| words.record(HEADER_WORDS + RECORD_WORDS * i);
        // The origin: the earliest stage start, modulo 2^32 (`origin_by_scan`). Fast path: the
        // smallest start m. When every start lies less than 2^31 ns after m's low word (any
        // pass that does not straddle a wrap of the low word), the scan settles on the first
        // start with m's low word, and every offset is taken from that low word; otherwise
        // the scan runs.
        let m = min_start(n, |i| {
            let r = srec(i);
            stamp(r[0], r[1])
        })
        .ok_or(RingError::NoStamps)?;
        let rows = Rows {
            lay: self,
            words,
            barriers,
        };
        let (base, (spans, t)) = match rows.fill(m as u32, true, timings) {
            Some(filled) => {
                // The first start with m's low word (m itself, unless a start lies a
                // multiple of 2^32 ns away from it: only its high word differs).
                let first = (0..n)
                    .map(|i| {
                        let r = srec(i);
                        stamp(r[0], r[1])
                    })
                    .find(|&t| t != 0 && t as u32 == m as u32);
                (first.unwrap_or(m), filled)
            }
            None => {
                let base = origin_by_scan((0..n).map(srec)).ok_or(RingError::NoStamps)?;
                // Unchecked: always Some.
                let filled = rows
                    .fill(base as u32, false, timings)
                    .ok_or(RingError::NoStamps)?;
                (base, filled)
            }
        };
        Ok((
            DecodedRing {
                spans,
                device_start_ns: base,
            },
            t,
        ))
    }
}

/// A pass's stage and barrier timings (see [`Spans::stage_timings`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Timings {
    pub(crate) stages: Vec<StageTiming>,
    pub(crate) barriers: Vec<BarrierTiming>,
}

mod rows;
use rows::{min_start, origin_by_scan, stamp, Rows, Words};

#[cfg(test)]
mod tests;
