//! A ring frame's records decoded row by row into [`Spans`], read in place from `u32`
//! words or from the little-endian bytes of a mapped buffer (the [`Words`] views), and the
//! origin (earliest stage start) found modulo 2^32.

use super::*;

/// Decodes a frame's records into [`Spans`] rows, offsets from a given low word.
pub(super) struct Rows<'a, W: Words + ?Sized> {
    pub(super) lay: &'a RingLayout,
    pub(super) words: &'a W,
    pub(super) barriers: bool,
}

impl<W: Words + ?Sized> Rows<'_, W> {
    /// Every row, offsets from `lo`; with `timings`, level by level in the run's level
    /// order, each level's timings computed right after its rows. `None` when `check` and
    /// a start lies 2^31 ns or more after `lo` (the origin is not `lo`'s).
    pub(super) fn fill(
        &self,
        lo: u32,
        check: bool,
        timings: Option<(&RunDetails, &[u64])>,
    ) -> Option<(Spans, Option<Timings>)> {
        let lay = self.lay;
        let (ns, nl) = (lay.stages, if self.barriers { lay.levels } else { 0 });
        let mut spans = Spans::new(lay.grid, ns, nl);
        let mut outside = false;
        let mut done = vec![false; ns as usize];
        let mut t = None;
        if let Some((run, disp)) = timings {
            let mut out = Timings {
                stages: Vec::with_capacity(run.stages.len()),
                barriers: Vec::with_capacity(run.levels.len()),
            };
            for (li, lv) in run.levels.iter().enumerate() {
                let li32 = li as u32;
                if li32 < nl {
                    self.barrier_row(&mut spans, li32, lo);
                }
                for &sid in &lv.stages {
                    if let Some(d) = done.get_mut(sid as usize).filter(|d| !**d) {
                        *d = true;
                        outside |= self.stage_row(&mut spans, sid, lo);
                    }
                }
                if check && outside {
                    return None;
                }
                spans.level_stage_timings(&run.stages, li, lv, disp, &mut out.stages);
                // The last level has no barrier after it.
                if li32 + 1 < nl {
                    out.barriers.extend(spans.barrier_timing(li32));
                }
            }
            // Rows of levels past the run's (none when the layout is the run's).
            for l in run.levels.len() as u32..nl {
                self.barrier_row(&mut spans, l, lo);
                if l + 1 < nl {
                    out.barriers.extend(spans.barrier_timing(l));
                }
            }
            t = Some(out);
        } else {
            for l in 0..nl {
                self.barrier_row(&mut spans, l, lo);
            }
        }
        // Stages no level names (all of them without timings).
        for (sid, d) in done.iter().enumerate() {
            if !d {
                outside |= self.stage_row(&mut spans, sid as u32, lo);
            }
        }
        if check && outside {
            return None;
        }
        Some((spans, t))
    }

    /// Stage row `stage`, offsets from `lo`; whether a start lies 2^31 ns or more after it.
    fn stage_row(&self, spans: &mut Spans, stage: u32, lo: u32) -> bool {
        let lay = self.lay;
        let Some((start, end)) = spans.stage_row_mut(stage) else {
            return false;
        };
        let first = lay.stage_record(stage, 0);
        let mut outside = false;
        for (i, (s, e)) in start.iter_mut().zip(end).enumerate() {
            let r = self.words.record(first + RECORD_WORDS * i);
            let (a, b) = (stamp(r[0], r[1]), stamp(r[2], r[3]));
            outside |= a != 0 && r[0].wrapping_sub(lo) > u32::MAX / 2;
            // A span is both stamps or neither.
            let both = a != 0 && b != 0;
            *s = if both { off(r[0], lo) } else { MISSING };
            *e = if both { off(r[2], lo) } else { MISSING };
        }
        outside
    }

    /// Barrier row `level`, offsets from `lo`.
    fn barrier_row(&self, spans: &mut Spans, level: u32, lo: u32) {
        let lay = self.lay;
        let Some((arrive, exit)) = spans.level_row_mut(level) else {
            return;
        };
        let first = lay.barrier_record(level, 0);
        for (i, (a, x)) in arrive.iter_mut().zip(exit).enumerate() {
            let r = self.words.record(first + RECORD_WORDS * i);
            // Selects, not branches (a stamp of 0 was never written): the loop vectorises.
            let (ta, tx) = (r[0] | r[1] != 0, r[2] | r[3] != 0);
            *a = if ta { off(r[0], lo) } else { MISSING };
            *x = if tx { off(r[2], lo) } else { MISSING };
        }
    }
}

/// The offset of a stamp known to be non-zero (0 was never written) from the origin's low
/// word `lo`, modulo 2^32; one that would equal [`MISSING`] is `MISSING − 1`.
pub(super) fn off(lo_word: u32, lo: u32) -> u32 {
    lo_word.wrapping_sub(lo).min(MISSING - 1)
}

/// A 64-bit device stamp from its low and high words.
pub(super) fn stamp(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// The smallest non-zero of the `n` stamps `t(0..n)`, if any (four independent minima: the
/// loop is bound by loads, not by one compare chain).
pub(super) fn min_start(n: usize, t: impl Fn(usize) -> u64) -> Option<u64> {
    // t − 1 maps 0 (never stamped) to u64::MAX, which never wins.
    let v = |i: usize| t(i).wrapping_sub(1);
    let (mut m0, mut m1, mut m2, mut m3) = (u64::MAX, u64::MAX, u64::MAX, u64::MAX);
    let mut i = 0;
    while i + 4 <= n {
        m0 = m0.min(v(i));
        m1 = m1.min(v(i + 1));
        m2 = m2.min(v(i + 2));
        m3 = m3.min(v(i + 3));
        i += 4;
    }
    while i < n {
        m0 = m0.min(v(i));
        i += 1;
    }
    let m = m0.min(m1).min(m2.min(m3));
    (m != u64::MAX).then(|| m + 1)
}

/// The pass's origin by definition: scanning the stage records in order, the start that no
/// later start precedes modulo 2^32 (a start moves the origin when it lies in the half of
/// the 32-bit circle before it). The slow, obvious reference of the fast path in `decode`,
/// and its fallback for a pass that straddles a wrap of the low word.
pub(super) fn origin_by_scan(records: impl Iterator<Item = [u32; 4]>) -> Option<u64> {
    let mut base: Option<u64> = None;
    for r in records {
        let t = stamp(r[0], r[1]);
        if t != 0 && base.is_none_or(|b| rel_ns(t, b) > u32::MAX as u64 / 2) {
            base = Some(t);
        }
    }
    base
}

/// A ring frame's words, however they are held: `u32`s, or the little-endian bytes of a
/// mapped buffer (read in place).
pub(super) trait Words {
    /// Words held.
    fn len(&self) -> usize;
    /// Word `i` (`i < len()`).
    fn word(&self, i: usize) -> u32;
    /// The record of [`RECORD_WORDS`] words at word `at` (`at + 4 <= len()`).
    fn record(&self, at: usize) -> [u32; 4];
}

impl Words for [u32] {
    fn len(&self) -> usize {
        <[u32]>::len(self)
    }

    fn word(&self, i: usize) -> u32 {
        self[i]
    }

    #[inline]
    fn record(&self, at: usize) -> [u32; 4] {
        let c = &self[at..at + 4];
        [c[0], c[1], c[2], c[3]]
    }
}

impl Words for [u8] {
    fn len(&self) -> usize {
        <[u8]>::len(self) / 4
    }

    fn word(&self, i: usize) -> u32 {
        let c = &self[4 * i..4 * i + 4];
        u32::from_le_bytes([c[0], c[1], c[2], c[3]])
    }

    #[inline]
    fn record(&self, at: usize) -> [u32; 4] {
        // 16 bytes (the slice has them); as an array the reads need no further checks.
        let c: [u8; 16] = self[4 * at..4 * at + 16].try_into().unwrap_or([0; 16]);
        let w = |i: usize| u32::from_le_bytes([c[i], c[i + 1], c[i + 2], c[i + 3]]);
        [w(0), w(4), w(8), w(12)]
    }
}
