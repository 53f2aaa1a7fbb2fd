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
/// length, plus one largest record, over the life of a reader.
pub(super) const SCAN_FACTOR: u64 = 64;

/// What one head read away from the scan's window is charged: a nominal cost (the bound
/// counts the bytes the search asks for; a `BufReader` refills its whole buffer for one).
const HEAD_READ_COST: u64 = 4 << 10;

/// Heads a candidate's chain must hold (itself and the ones after it) before its checksum
/// is computed in the first stage, unless the file or the footer ends sooner.
const CHAIN: usize = 3;

impl<R: Read + Seek> Reader<R> {
    /// The next sound record after damage at `at` — not where the damaged head says its
    /// record ends, since that head may be the damaged part. Two stages:
    ///
    /// 1. the first offset `c` after `at` where a head fits the file, the two heads after it
    ///    fit too (or the file or the footer ends sooner: [`CHAIN`]), and its checksum
    ///    holds — the records after the damage, as a chain no random bytes make;
    /// 2. between `at` and `c`, the first offset whose head fits, whose record ends by `c`
    ///    at a head that fits (or at `c`), and whose checksum holds: a sound record between
    ///    two damaged ones (its chain broken by the second) is read too.
    ///
    /// `None` where the file has no sound record after `at`, or the search spent its bound
    /// on work (then the skip says it gave up).
    ///
    /// What a search found is kept (by `at`, and the first stage's span), so meeting the
    /// same damage again — a seek back, the walk behind an index — costs nothing more.
    pub(super) fn resync(&mut self, at: u64) -> Option<u64> {
        if let Some(&r) = self.resynced.get(&at) {
            return r;
        }
        let from = at + 1;
        let c = match self.stage1 {
            Some((f, c)) if f <= from && c.is_none_or(|c| from <= c) => c,
            _ => {
                let c = self.scan(from, None);
                if self.scan_left == 0 {
                    return c;
                }
                self.stage1 = Some((from, c));
                c
            }
        };
        let r = self.scan(from, Some(c.unwrap_or(self.len))).or(c);
        if self.scan_left > 0 {
            self.resynced.insert(at, r);
        }
        r
    }

    /// Whether a record starts at `at`: a head of a kind the format has, fitting the file,
    /// whose checksum holds. Spends the search's budget.
    fn sound_at(&mut self, at: u64) -> bool {
        let Ok(Some(h)) = self.read_head(at) else {
            return false;
        };
        if !known_kind(h.kind) || !self.spend(u64::from(h.len) + RECORD_HEAD) {
            return false;
        }
        self.checksum_holds(&h).unwrap_or(false)
    }

    /// Take `n` from the search's budget; `false` (and the budget spent) where it has less.
    fn spend(&mut self, n: u64) -> bool {
        if n > self.scan_left {
            self.scan_left = 0;
            return false;
        }
        self.scan_left -= n;
        true
    }

    /// The 9 bytes at `at`, from `buf` (read from `base`) where it holds them.
    fn head_bytes(&mut self, at: u64, base: u64, buf: &[u8]) -> Option<[u8; 9]> {
        let mut h = [0u8; RECORD_HEAD as usize];
        let i = at.checked_sub(base)? as usize;
        if let Some(b) = buf.get(i..i + h.len()) {
            h.copy_from_slice(b);
            return Some(h);
        }
        if !self.spend(HEAD_READ_COST) {
            return None;
        }
        self.read_at(at, &mut h).ok().map(|()| h)
    }

    /// Whether the chain of heads from the head `b` at `at` holds for `depth` heads, ending
    /// early at the file's end or at a footer with the trailer after it; with `by`, the
    /// first record must end by then, and one head after it is enough (or reaching `by`).
    fn chained(&mut self, at: u64, b: [u8; 9], by: Option<u64>, base: u64, buf: &[u8]) -> bool {
        let (mut at, mut b) = (at, b);
        let depth = if by.is_some() { 2 } else { CHAIN };
        for d in 1..depth {
            let end = at + RECORD_HEAD + u64::from(u32::from_le_bytes(le4(&b)));
            if d == 1 && by.is_some_and(|c| end > c) {
                return false;
            }
            if end == self.len
                || (b[4] == kind::INDEX && end + TRAILER == self.len)
                || by == Some(end)
            {
                return true;
            }
            if end + RECORD_HEAD > self.len {
                return false;
            }
            let Some(next) = self.head_bytes(end, base, buf) else {
                return false;
            };
            // A head after the candidate may be of a kind a newer writer has (this reader
            // skips such records, so it must find its way past them too).
            if !self.fits(end, &next, true) {
                return false;
            }
            (at, b) = (end, next);
        }
        true
    }

    /// The first sound record at or after `from` (before `by`, for the second stage),
    /// scanning the bytes in windows (4 KiB, doubling to 1 MiB): a candidate's chain of
    /// heads must hold ([`Reader::chained`]) before its checksum is computed.
    fn scan(&mut self, from: u64, by: Option<u64>) -> Option<u64> {
        let head = RECORD_HEAD as usize;
        let stop = by.unwrap_or(self.len);
        let mut window = 4u64 << 10;
        let mut base = from;
        let mut buf = vec![];
        while base < stop && base + RECORD_HEAD <= self.len {
            let n = (self.len - base).min(window + RECORD_HEAD);
            if !self.spend(n) {
                return None;
            }
            buf.resize(n as usize, 0);
            self.read_at(base, &mut buf).ok()?;
            let last = (buf.len() - head).min(window as usize - 1);
            for i in 0..=last.min((stop - base - 1) as usize) {
                let at = base + i as u64;
                let mut b = [0u8; RECORD_HEAD as usize];
                b.copy_from_slice(&buf[i..i + head]);
                if self.fits(at, &b, false)
                    && self.chained(at, b, by, base, &buf)
                    && self.sound_at(at)
                {
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

    /// Whether the 9 bytes `b` at `at` could be a record's head: a kind the format has (any
    /// kind but 0 with `any_kind`: a newer writer's), a length within its cap and the file.
    fn fits(&self, at: u64, b: &[u8], any_kind: bool) -> bool {
        let len = u64::from(u32::from_le_bytes(le4(b)));
        let cap = if b[4] & !kind::LZ4 == kind::INDEX {
            codec::MAX_INDEX
        } else {
            codec::MAX_PAYLOAD
        };
        let kind_ok = if any_kind {
            b[4] & !kind::LZ4 != 0
        } else {
            known_kind(b[4])
        };
        kind_ok && len <= cap as u64 && at + RECORD_HEAD + len <= self.len
    }

    /// Whether a footer-kind record ending at `at` is in the footer's place: at most a
    /// trailer's bytes after it (the trailer, damaged or cut short), or a trailer's magic.
    pub(super) fn trailer_follows(&mut self, at: u64) -> bool {
        let mut t = [0u8; TRAILER as usize];
        at + TRAILER >= self.len || (self.read_at(at, &mut t).is_ok() && t[8..] == TRAILER_MAGIC)
    }

    /// Whether the checksum of the record of `h` holds (its payload is read, not decoded).
    fn checksum_holds(&mut self, h: &Head) -> Result<bool> {
        Ok(IGNORE_CRC || self.payload_crc(h)? == h.crc)
    }

    /// The checksum of the record of `h` as its bytes are (its payload read into
    /// `self.stored`, not decoded).
    pub(super) fn payload_crc(&mut self, h: &Head) -> Result<u32> {
        let mut stored = std::mem::take(&mut self.stored);
        stored.clear();
        stored.resize(h.len as usize, 0);
        let r = self.read_at(h.offset + RECORD_HEAD, &mut stored);
        let crc = r.map(|()| record_crc(h, &stored));
        self.stored = stored;
        crc
    }
}

/// The crc32 of a record: its length and kind bytes, then its payload as stored.
fn record_crc(h: &Head, stored: &[u8]) -> u32 {
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
