//! Where each pass's results lie in the host-visible readback buffer: one slot per pass of a
//! submission (chain slot), each holding the pass's sync words, then its output words, then
//! its ring frame. Every offset the recording copies write to and the host reads from comes
//! from here, so the copies and the reads cannot disagree.

use std::ops::Range;

/// The readback buffer's layout (all counts in 32-bit words).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct ReadbackLayout {
    /// The sync buffer's words a pass reads back (fail word, counters, residency).
    pub sync_words: usize,
    /// Output words: the logits (vocab), argmax and its value, two per workgroup partial.
    pub out_words: usize,
    /// Words of one ring frame (the in-kernel event ring of one pass).
    pub ring_frame_words: usize,
    /// Vocabulary size: the logits' words at the start of the output words.
    pub vocab: usize,
    /// Slots: passes one submission holds.
    pub slots: usize,
}

impl ReadbackLayout {
    /// The layout of a decoder with `grid` workgroups, a `vocab`-sized output, ring frames of
    /// `ring_frame_words` and `slots` passes per submission.
    pub fn new(grid: u32, vocab: usize, ring_frame_words: u32, slots: u32) -> ReadbackLayout {
        ReadbackLayout {
            sync_words: crate::vulkan::program::sync_words(grid),
            out_words: out_words(grid, vocab),
            ring_frame_words: ring_frame_words as usize,
            vocab,
            slots: slots.max(1) as usize,
        }
    }

    /// Words of one slot.
    pub fn slot_words(&self) -> usize {
        self.sync_words + self.out_words + self.ring_frame_words
    }

    /// Bytes of the whole buffer.
    pub fn bytes(&self) -> u64 {
        (self.slot_words() * self.slots) as u64 * 4
    }

    /// Word index of sync word `i` of slot `slot`.
    pub fn sync_word(&self, slot: usize, i: usize) -> usize {
        self.slot_words() * slot + i
    }

    /// Word index of output word `i` of slot `slot` (logit `i` below `vocab`).
    pub fn out_word(&self, slot: usize, i: usize) -> usize {
        self.sync_word(slot, self.sync_words) + i
    }

    /// Word index of the argmax of slot `slot` (its value follows it).
    pub fn argmax_word(&self, slot: usize) -> usize {
        self.out_word(slot, self.vocab)
    }

    /// Byte offset of slot `slot`'s sync words (the start of the slot).
    pub fn sync_offset(&self, slot: usize) -> u64 {
        self.sync_word(slot, 0) as u64 * 4
    }

    /// Byte offset of output word `i` of slot `slot`.
    pub fn out_offset(&self, slot: usize, i: usize) -> u64 {
        self.out_word(slot, i) as u64 * 4
    }

    /// Byte range of slot `slot`'s ring frame.
    pub fn ring_bytes(&self, slot: usize) -> Range<usize> {
        let start = self.out_word(slot, self.out_words) * 4;
        start..start + self.ring_frame_words * 4
    }
}

/// Output words of a decoder with `grid` workgroups and a `vocab`-sized output: the logits,
/// the argmax and its value, then each workgroup's partial argmax (index and value).
pub(super) fn out_words(grid: u32, vocab: usize) -> usize {
    vocab + 2 + 2 * grid as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_disjoint_and_hold_sync_then_output_then_ring_in_order() {
        let l = ReadbackLayout::new(132, 32000, 4 + 57 * 132 * 4, 4);
        assert_eq!(l.sync_words, crate::vulkan::program::sync_words(132));
        assert_eq!(l.out_words, 32000 + 2 + 264);
        assert_eq!(l.bytes(), (l.slot_words() * 4 * 4) as u64);
        for slot in 0..4 {
            let start = l.sync_word(slot, 0);
            assert_eq!(
                start,
                slot * l.slot_words(),
                "slot {slot} starts after the last"
            );
            assert_eq!(l.out_word(slot, 0), start + l.sync_words);
            assert_eq!(l.argmax_word(slot), start + l.sync_words + 32000);
            let ring = l.ring_bytes(slot);
            assert_eq!(ring.start, (start + l.sync_words + l.out_words) * 4);
            assert_eq!(
                ring.end,
                (start + l.slot_words()) * 4,
                "the ring ends the slot"
            );
            assert_eq!(l.sync_offset(slot), start as u64 * 4);
            assert_eq!(l.out_offset(slot, 5), (l.out_word(slot, 5) * 4) as u64);
        }
        assert_eq!(
            l.ring_bytes(3).end as u64,
            l.bytes(),
            "the last slot ends the buffer"
        );
    }

    #[test]
    fn zero_slots_are_one() {
        let l = ReadbackLayout::new(2, 512, 100, 0);
        assert_eq!(l.slots, 1);
        assert_eq!(l.bytes(), l.slot_words() as u64 * 4);
    }
}
