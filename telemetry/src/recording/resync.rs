//! Reading past damage: the search for the next sound record (the parent module's doc,
//! "Damage", says what iteration does with it).

use std::io::{Read, Seek};

use super::{codec, le4, Head, Reader, IGNORE_CRC};
use crate::recording::{kind, Result, RECORD_HEAD, TRAILER, TRAILER_MAGIC};

/// A stretch of the file that iteration skipped: a damaged record, or bytes that held no
/// sound record, from `at` up to the next record whose head and checksum hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Skip {
    /// Offset of the damaged record (or of the bytes that cannot be one).
    pub at: u64,
    /// Where reading went on: the next sound record. `None` where no sound record follows
    /// (a file cut inside its last record, or damage to its end).
    pub resumed: Option<u64>,
    /// The resync stopped looking at its bound on work (a crafted file), not at the end.
    pub gave_up: bool,
}

/// The resync's bound on work: it reads and checksums at most this many times the file's
/// length, plus one largest record.
pub(super) const SCAN_FACTOR: u64 = 4;

impl<R: Read + Seek> Reader<R> {
    /// The next sound record after damage at `at`: the first offset after it where a
    /// record's head fits the file, the head after it fits too (or the file or the footer
    /// ends there), and its checksum holds. Not where the damaged head says its record
    /// ends: that head may be the damaged part. `None` where the file has no sound record
    /// after `at`, or the scan spent its bound on work.
    pub(super) fn resync(&mut self, at: u64) -> Option<u64> {
        self.scan(at + 1)
    }

    /// Whether a record starts at `at`: a head of a kind the format has, fitting the file,
    /// whose checksum holds. Spends the scan's budget.
    fn sound_at(&mut self, at: u64) -> bool {
        let Ok(Some(h)) = self.read_head(at) else {
            return false;
        };
        if !known_kind(h.kind) {
            return false;
        }
        let cost = u64::from(h.len) + RECORD_HEAD;
        if cost > self.scan_left {
            self.scan_left = 0;
            return false;
        }
        self.scan_left -= cost;
        self.checksum_holds(&h).unwrap_or(false)
    }

    /// The first sound record at or after `from`, scanning the bytes in windows (64 KiB,
    /// doubling to 1 MiB): a candidate needs a head of a known kind that fits the file,
    /// followed by the end of the file or by another such head, before its checksum is
    /// computed. (So a sound record right before a second damaged head is passed over, and
    /// the scan goes on to the one after.)
    fn scan(&mut self, from: u64) -> Option<u64> {
        let head = RECORD_HEAD as usize;
        let mut window = 64u64 << 10;
        let mut base = from;
        let mut buf = vec![];
        while base + RECORD_HEAD <= self.len {
            let n = (self.len - base).min(window + RECORD_HEAD);
            if n > self.scan_left {
                self.scan_left = 0;
                return None;
            }
            self.scan_left -= n;
            buf.resize(n as usize, 0);
            self.read_at(base, &mut buf).ok()?;
            for i in 0..=(buf.len() - head).min(window as usize - 1) {
                let b = &buf[i..i + head];
                let at = base + i as u64;
                if !self.plausible(at, b) {
                    continue;
                }
                let end = at + RECORD_HEAD + u64::from(u32::from_le_bytes(le4(b)));
                let mut after = [0u8; RECORD_HEAD as usize];
                let chained = end == self.len
                    || (b[4] == kind::INDEX && end + TRAILER == self.len)
                    || (end + RECORD_HEAD <= self.len
                        && self.read_at(end, &mut after).is_ok()
                        && self.plausible(end, &after));
                if chained && self.sound_at(at) {
                    return Some(at);
                }
                if self.scan_left == 0 {
                    return None;
                }
            }
            base += window;
            window = (window * 2).min(1 << 20);
        }
        None
    }

    /// Whether the 9 bytes `b` at `at` could be a record's head: a known kind, a length
    /// within its cap and the file.
    fn plausible(&self, at: u64, b: &[u8]) -> bool {
        let len = u64::from(u32::from_le_bytes(le4(b)));
        let cap = if b[4] & !kind::LZ4 == kind::INDEX {
            codec::MAX_INDEX
        } else {
            codec::MAX_PAYLOAD
        };
        known_kind(b[4]) && len <= cap as u64 && at + RECORD_HEAD + len <= self.len
    }

    /// Whether a footer-kind record ending at `at` is in the footer's place: at most a
    /// trailer's bytes after it (the trailer, damaged or cut short), or a trailer's magic.
    pub(super) fn trailer_follows(&mut self, at: u64) -> bool {
        let mut t = [0u8; TRAILER as usize];
        at + TRAILER >= self.len || (self.read_at(at, &mut t).is_ok() && t[8..] == TRAILER_MAGIC)
    }

    /// Whether the checksum of the record of `h` holds (its payload is read, not decoded).
    fn checksum_holds(&mut self, h: &Head) -> Result<bool> {
        let mut stored = std::mem::take(&mut self.stored);
        stored.clear();
        stored.resize(h.len as usize, 0);
        let r = self.read_at(h.offset + RECORD_HEAD, &mut stored);
        let ok = r.map(|()| IGNORE_CRC || record_crc(h, &stored) == h.crc);
        self.stored = stored;
        ok
    }
}

/// The crc32 of a record: its length and kind bytes, then its payload as stored.
pub(super) fn record_crc(h: &Head, stored: &[u8]) -> u32 {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&h.len.to_le_bytes());
    crc.update(&[h.kind]);
    crc.update(stored);
    crc.finalize()
}

/// A kind byte the format has (a record of a newer writer's kind is found again by the
/// sound record after it).
pub(super) fn known_kind(k: u8) -> bool {
    matches!(k & !kind::LZ4, kind::START..=kind::OTHER | kind::INDEX)
}
