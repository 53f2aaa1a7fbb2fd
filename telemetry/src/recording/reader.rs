//! [`Reader`]: the messages of a recording back, in order; past damage, from the next sound
//! record on.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use super::codec;
use super::{
    kind, KindName, RecordingError, RecordingHeader, Result, FORMAT_VERSION, MAGIC, PREAMBLE,
    RECORD_HEAD, TRAILER, TRAILER_MAGIC,
};
use crate::{Frame, RunDetails, Telemetry};

#[path = "resync.rs"]
mod resync;
pub use resync::Skip;
use resync::SCAN_FACTOR;

/// Header JSON larger than this is refused (a 1B run's is ≈ 20 KiB, an 8B run's ≈ 200 KiB).
pub const MAX_HEADER: u32 = 16 << 20;

/// Under `cargo fuzz` (`--cfg fuzzing`) checksums are computed but not enforced, so mutated
/// inputs reach the decoder and its size caps instead of stopping at the CRC. Never set in
/// any other build.
const IGNORE_CRC: bool = cfg!(fuzzing);

/// The index footer: where each frame's record is.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Index {
    entries: Vec<(u64, u64)>,
}

impl Index {
    /// `(pass, record offset)` of every frame, in file order.
    pub fn entries(&self) -> &[(u64, u64)] {
        &self.entries
    }

    /// Frames indexed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No frames.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Offset of the record of pass `pass`: O(1) where passes are consecutive (the usual
    /// case), else a binary search where they increase, else a scan.
    pub fn offset_of(&self, pass: u64) -> Option<u64> {
        let first = self.entries.first()?.0;
        if let Some(&(p, o)) = pass
            .checked_sub(first)
            .and_then(|d| usize::try_from(d).ok())
            .and_then(|d| self.entries.get(d))
        {
            if p == pass {
                return Some(o);
            }
        }
        if self.entries.windows(2).all(|w| w[0].0 < w[1].0) {
            let i = self.entries.binary_search_by_key(&pass, |e| e.0).ok()?;
            return Some(self.entries[i].1);
        }
        self.entries.iter().find(|e| e.0 == pass).map(|e| e.1)
    }
}

/// Reads a recording: [`Reader::open`] checks the magic and version and reads the header
/// (and the index footer where the file has one); iterating yields every message in order,
/// then stops cleanly at the end of a whole record or the trailer. Damage — a record whose
/// checksum fails or that does not decode, a head that cannot be a record's — yields one
/// error naming its offset, then iteration goes on from the next sound record (see
/// [`Reader::skips`]): one flipped bit costs the record it is in, not the rest of the file.
/// A file cut inside a record (a crash) ends with that error.
///
/// ```no_run
/// # fn main() -> baro_telemetry::recording::Result<()> {
/// use baro_telemetry::recording::Reader;
/// let mut r = Reader::open("run.baro")?;
/// println!("{} on {}", r.header().run.model, r.header().run.device);
/// for msg in r.by_ref() {
///     match msg {
///         Ok(msg) => { let _ = msg; }
///         // The offset and what is wrong; iteration goes on past it.
///         Err(e) => eprintln!("{e}"),
///     }
/// }
/// if !r.skips().is_empty() {
///     eprintln!("{} damaged bytes skipped", r.skipped_bytes());
/// }
/// # Ok(()) }
/// ```
pub struct Reader<R> {
    src: R,
    version: u32,
    header: RecordingHeader,
    /// Offset of the first record.
    data_start: u64,
    /// File length at open.
    len: u64,
    /// Offset of the next record to iterate.
    pos: u64,
    /// Where `src` is positioned.
    src_pos: u64,
    index: Option<Index>,
    finished: bool,
    done: bool,
    skipped: u64,
    /// The stretches iteration skipped past damage, in file order.
    skips: Vec<Skip>,
    /// Bytes a resync may still read or checksum while looking for the next sound record
    /// (its bound on the work a crafted file can cause).
    scan_left: u64,
    /// What each resync found (by the damage's offset): a seek back over damage, or a
    /// walk after iteration, finds it again at no cost.
    resynced: std::collections::HashMap<u64, Option<u64>>,
    /// The last first-stage search: from where, and the record it found (`None`: none to
    /// the end); every offset between holds no candidate, so a search from inside it ends
    /// where it did.
    stage1: Option<(u64, Option<u64>)>,
    /// Every sound record's place, by a walk of the whole file (frames, for an index where
    /// the file has no footer, and `Start` records, for [`Reader::run_at_pass`]).
    walked: Option<Walked>,
    stored: Vec<u8>,
    raw: Vec<u8>,
    /// The run's stage and level counts (the header's, or a start message's if larger): a
    /// frame may not hold more timings than these.
    shape: (usize, usize),
}

impl Reader<BufReader<File>> {
    /// Open the recording at `path`: a regular file, opened non-blocking (a FIFO or a device
    /// is refused by name, never waited on or read without end; see [`crate::input`]).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let (f, _) = crate::input::open(path.as_ref(), "recording", u64::MAX)?;
        // 64 KiB: a frame's payload is read past the buffer anyway, and a search past
        // damage reads heads far apart (each read refills it: 1 MiB made one ten times
        // slower).
        Reader::new(BufReader::with_capacity(64 << 10, f))
    }
}

/// What a walk of the file found ([`Reader::walk`]).
#[derive(Default)]
struct Walked {
    /// `(pass, offset)` of every sound frame.
    frames: Vec<(u64, u64)>,
    /// Offsets of every sound `Start` record.
    starts: Vec<u64>,
}

/// One record's head, read and bounds-checked.
struct Head {
    offset: u64,
    len: u32,
    kind: u8,
    crc: u32,
}

impl<R: Read + Seek> Reader<R> {
    /// Read the magic, version and header from `src`, and the index footer if there is one.
    pub fn new(mut src: R) -> Result<Self> {
        let len = src.seek(SeekFrom::End(0))?;
        src.seek(SeekFrom::Start(0))?;
        let mut pre = [0u8; PREAMBLE as usize];
        let got = read_up_to(&mut src, &mut pre)?;
        if got < 8 || pre[..8] != MAGIC {
            if got < 8 && MAGIC.starts_with(&pre[..got]) {
                return Err(RecordingError::Truncated {
                    offset: 0,
                    what: format!("{got} bytes: not even the 8-byte magic"),
                });
            }
            return Err(RecordingError::BadMagic {
                found: pre[..got.min(8)].to_vec(),
            });
        }
        if got < 12 {
            return Err(trunc(0, format!("{got} bytes: the version is cut")));
        }
        let version = u32::from_le_bytes(le4(&pre[8..12]));
        if version == 0 || version > FORMAT_VERSION {
            return Err(RecordingError::UnsupportedVersion {
                found: version,
                newest: FORMAT_VERSION,
            });
        }
        // Version dispatch: 1 is the only version so far. A version 2 reads its own
        // preamble and header here and records through `decode` below.
        if got < PREAMBLE as usize {
            return Err(trunc(0, format!("{got} bytes: the header's length is cut")));
        }
        let hlen = u32::from_le_bytes(le4(&pre[12..16]));
        let hcrc = u32::from_le_bytes(le4(&pre[16..20]));
        if hlen > MAX_HEADER {
            return Err(corrupt(
                12,
                format!(
                    "the header says {hlen} bytes, more than the {MAX_HEADER}-byte cap on a header"
                ),
            ));
        }
        if PREAMBLE + u64::from(hlen) > len {
            return Err(trunc(
                0,
                format!(
                    "the header says {hlen} bytes, the file has {} after the preamble",
                    len - PREAMBLE
                ),
            ));
        }
        let mut json = vec![0u8; hlen as usize];
        src.read_exact(&mut json)?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&pre[8..16]);
        crc.update(&json);
        let computed = crc.finalize();
        if computed != hcrc && !IGNORE_CRC {
            return Err(RecordingError::Checksum {
                offset: 0,
                what: "the header".into(),
                stored: hcrc,
                computed,
            });
        }
        let header: RecordingHeader =
            serde_json::from_slice(&json).map_err(|e| RecordingError::Corrupt {
                offset: PREAMBLE,
                what: format!("header JSON: {e}"),
            })?;
        let data_start = PREAMBLE + u64::from(hlen);
        let mut r = Reader {
            src,
            version,
            header,
            data_start,
            len,
            pos: data_start,
            src_pos: data_start,
            index: None,
            finished: false,
            done: false,
            skipped: 0,
            skips: vec![],
            resynced: Default::default(),
            stage1: None,
            walked: None,
            scan_left: len
                .saturating_mul(SCAN_FACTOR)
                .saturating_add(codec::MAX_PAYLOAD as u64),
            stored: vec![],
            raw: vec![],
            shape: (0, 0),
        };
        r.shape = (r.header.run.stages.len(), r.header.run.levels.len());
        r.index = r.read_footer().ok().flatten();
        Ok(r)
    }

    /// The file's format version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The header.
    pub fn header(&self) -> &RecordingHeader {
        &self.header
    }

    /// The index footer, where the file has a sound one (a finished recording).
    pub fn index(&self) -> Option<&Index> {
        self.index.as_ref()
    }

    /// Whether iteration reached the footer and a sound trailer (the writer finished):
    /// `false` before the end, and at the end of a file cut between records by a crash.
    pub fn finished(&self) -> bool {
        self.finished
    }

    /// Records of kinds this reader does not know that iteration skipped.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    /// Offset of the next record iteration reads.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The stretches iteration skipped past damage so far, in file order (one per error it
    /// yielded for damage). Empty for a sound file.
    pub fn skips(&self) -> &[Skip] {
        &self.skips
    }

    /// Bytes iteration skipped past damage so far (to the end of the file where no sound
    /// record followed).
    pub fn skipped_bytes(&self) -> u64 {
        self.skips
            .iter()
            .map(|s| s.resumed.unwrap_or(self.len) - s.at)
            .sum()
    }

    /// Build the index by scanning the frames' records where the file has no footer (a
    /// crashed recording); a no-op where it has one. Every record's checksum is checked on
    /// the way, as iteration checks it: damaged records are left out and the scan goes on
    /// from the next sound record; only an error of the file system ends it. Call it only
    /// on files you mean to seek in.
    pub fn ensure_index(&mut self) -> Result<&Index> {
        if self.index.is_none() {
            let entries = self.walk()?.frames.clone();
            self.index = Some(Index { entries });
        }
        Ok(self.index.get_or_insert_with(Index::default))
    }

    /// Walk every record once (the first call; later ones return what it found), checking
    /// each one's checksum and going past damage as iteration does, without decoding more
    /// than a frame's pass. Does not move iteration or add to [`Reader::skips`].
    fn walk(&mut self) -> Result<&Walked> {
        if self.walked.is_none() {
            let mut w = Walked::default();
            let mut at = self.data_start;
            while at < self.len {
                let (step, next) = self.walk_one(at, &mut w);
                at = match step {
                    Ok(true) => next.unwrap_or(self.len),
                    Ok(false) => break,
                    Err(e) if is_io(&e) => return Err(e),
                    Err(e) => match self.resume_after(&e, at, next) {
                        Some(n) => n,
                        None => break,
                    },
                };
            }
            self.walked = Some(w);
        }
        Ok(self.walked.get_or_insert_with(Walked::default))
    }

    /// The walk's step at `at`: `Ok(false)` at the footer, and where the record's head
    /// says it ends.
    fn walk_one(&mut self, at: u64, w: &mut Walked) -> (Result<bool>, Option<u64>) {
        let h = match self.read_head(at) {
            Ok(Some(h)) => h,
            Ok(None) => return (Ok(false), None),
            Err(e) => return (Err(e), None),
        };
        let next = h.offset + RECORD_HEAD + u64::from(h.len);
        let k = h.kind & !kind::LZ4;
        if k == kind::INDEX && self.trailer_follows(next) {
            return (Ok(false), Some(next));
        }
        // A frame is decoded as far as its pass only where the index is being built; every
        // other record's checksum is checked without decompressing it.
        if k == kind::FRAME && self.index.is_none() {
            let r = self.read_payload(&h).and_then(|()| {
                let pass = codec::frame_pass(&self.raw).map_err(|w| corrupt(at, w))?;
                w.frames.push((pass, at));
                Ok(true)
            });
            return (r, Some(next));
        }
        let r = self.payload_crc(&h).and_then(|computed| {
            if computed != h.crc && !IGNORE_CRC {
                return Err(checksum_mismatch(&h, computed));
            }
            match k {
                kind::START => w.starts.push(at),
                kind::INDEX => {
                    return Err(corrupt(at, "an index footer with records after it".into()))
                }
                _ => {}
            }
            Ok(true)
        });
        (r, Some(next))
    }

    /// The frame of pass `pass` (`None` if the recording has none), through the index:
    /// one seek and one record read. Does not move iteration.
    pub fn frame(&mut self, pass: u64) -> Result<Option<Frame>> {
        let Some(at) = self.ensure_index()?.offset_of(pass) else {
            return Ok(None);
        };
        let Some(h) = self.read_head(at)? else {
            return Err(corrupt(at, "the index points past the last record".into()));
        };
        match self.decode(&h)? {
            Some(Telemetry::Frame(f)) if f.pass == pass => Ok(Some(*f)),
            _ => Err(corrupt(
                at,
                format!("the index says pass {pass} is here; the record is not that frame"),
            )),
        }
    }

    /// Move iteration to the record of pass `pass`, through the index (built by a scan where
    /// the file has no footer): the next message iterated is that frame. `false` (iteration
    /// unmoved) where the recording has no such pass.
    pub fn seek_to_pass(&mut self, pass: u64) -> Result<bool> {
        let Some(at) = self.ensure_index()?.offset_of(pass) else {
            return Ok(false);
        };
        self.pos = at;
        self.done = false;
        Ok(true)
    }

    /// The run in effect at pass `pass`: the last sound `Start` record before that frame's
    /// (a live session sends one on each rebuild: another dispatch, grid or model), through
    /// the index; `None` where the recording has no such pass or no `Start` before it. The
    /// first call walks the file once ([`Reader::ensure_index`]'s walk, past damage);
    /// does not move iteration.
    pub fn run_at_pass(&mut self, pass: u64) -> Result<Option<RunDetails>> {
        let Some(end) = self.ensure_index()?.offset_of(pass) else {
            return Ok(None);
        };
        let starts: Vec<u64> = self
            .walk()?
            .starts
            .iter()
            .copied()
            .take_while(|&s| s < end)
            .collect();
        for &at in starts.iter().rev() {
            let Some(h) = self.read_head(at)? else {
                continue;
            };
            match self.decode(&h) {
                Ok(Some(Telemetry::Start(d))) => return Ok(Some(d)),
                Err(e) if is_io(&e) => return Err(e),
                _ => {}
            }
        }
        Ok(None)
    }

    /// Read every remaining message; the first error ends it (iterate to read past damage).
    pub fn read_all(&mut self) -> Result<Vec<Telemetry>> {
        self.by_ref().collect()
    }

    fn read_footer(&mut self) -> Result<Option<Index>> {
        if self.len < self.data_start + RECORD_HEAD + TRAILER {
            return Ok(None);
        }
        let mut t = [0u8; TRAILER as usize];
        self.read_at(self.len - TRAILER, &mut t)?;
        if t[8..] != TRAILER_MAGIC {
            return Ok(None);
        }
        let at = u64::from_le_bytes(le8(&t[..8]));
        if at < self.data_start || at > self.len - TRAILER - RECORD_HEAD {
            return Ok(None);
        }
        let Some(h) = self.read_head(at)? else {
            return Ok(None);
        };
        if h.kind != kind::INDEX || h.offset + RECORD_HEAD + u64::from(h.len) != self.len - TRAILER
        {
            return Ok(None);
        }
        self.read_payload(&h)?;
        let entries =
            codec::decode_index(&self.raw, at - self.data_start).map_err(|w| corrupt(at, w))?;
        if entries.iter().any(|&(_, o)| o < self.data_start || o >= at) {
            return Ok(None);
        }
        Ok(Some(Index { entries }))
    }

    fn seek_to(&mut self, at: u64) -> Result<()> {
        if self.src_pos != at {
            self.src.seek(SeekFrom::Start(at))?;
            self.src_pos = at;
        }
        Ok(())
    }

    fn read_at(&mut self, at: u64, buf: &mut [u8]) -> Result<()> {
        self.seek_to(at)?;
        self.src.read_exact(buf)?;
        self.src_pos += buf.len() as u64;
        Ok(())
    }

    /// The record head at `at`: `None` at the end of the file, an error if cut short or
    /// if its payload would run past the end.
    fn read_head(&mut self, at: u64) -> Result<Option<Head>> {
        if at >= self.len {
            return Ok(None);
        }
        if at + RECORD_HEAD > self.len {
            return Err(trunc(
                at,
                format!("a record's 9-byte head, {} bytes left", self.len - at),
            ));
        }
        let mut b = [0u8; RECORD_HEAD as usize];
        self.read_at(at, &mut b)?;
        let h = Head {
            offset: at,
            len: u32::from_le_bytes(le4(&b[..4])),
            kind: b[4],
            crc: u32::from_le_bytes(le4(&b[5..9])),
        };
        let left = self.len - at - RECORD_HEAD;
        let cap = if h.kind & !kind::LZ4 == kind::INDEX {
            codec::MAX_INDEX
        } else {
            codec::MAX_PAYLOAD
        };
        if h.len as usize > cap {
            return Err(corrupt(
                at,
                format!(
                    "a {} record of {} bytes: more than the {cap}-byte cap on a record",
                    KindName(h.kind),
                    h.len
                ),
            ));
        }
        if u64::from(h.len) > left {
            return Err(trunc(
                at,
                format!(
                    "a {} record of {} bytes, {left} bytes left",
                    KindName(h.kind),
                    h.len
                ),
            ));
        }
        Ok(Some(h))
    }

    /// Read and check the payload of `h` into `self.raw` (decompressed).
    fn read_payload(&mut self, h: &Head) -> Result<()> {
        // The payload as stored is left in `self.stored`.
        let computed = self.payload_crc(h)?;
        if computed != h.crc && !IGNORE_CRC {
            return Err(checksum_mismatch(h, computed));
        }
        if h.kind & kind::LZ4 != 0 {
            codec::decompress(&self.stored, &mut self.raw).map_err(|w| corrupt(h.offset, w))
        } else {
            self.raw.clear();
            self.raw.extend_from_slice(&self.stored);
            Ok(())
        }
    }

    /// Read and decode the record of `h`: `None` for a kind this reader does not know.
    fn decode(&mut self, h: &Head) -> Result<Option<Telemetry>> {
        self.read_payload(h)?;
        let k = h.kind & !kind::LZ4;
        match k {
            kind::START | kind::CLOCK | kind::FRAME | kind::SENSOR | kind::END | kind::OTHER => {
                let msg = codec::decode_message(k, &self.raw).map_err(|w| corrupt(h.offset, w))?;
                codec::check_shape(&mut self.shape, &msg).map_err(|w| corrupt(h.offset, w))?;
                Ok(Some(msg))
            }
            _ => Ok(None),
        }
    }

    /// The next message, or `None` at the end. On damage: the error, with iteration moved
    /// to the next sound record (or to the end where there is none) and the stretch noted
    /// in [`Reader::skips`].
    fn next_message(&mut self) -> Result<Option<Telemetry>> {
        loop {
            let at = self.pos;
            let h = match self.read_head(at) {
                Ok(Some(h)) => h,
                Ok(None) => return Ok(None),
                Err(e) => return Err(self.skip_past(e, at, None)),
            };
            let next = h.offset + RECORD_HEAD + u64::from(h.len);
            if h.kind & !kind::LZ4 == kind::INDEX {
                if !self.trailer_follows(next) {
                    // Records follow: not the footer, a damaged record (or a crafted one).
                    let e = match self.read_payload(&h) {
                        Err(e) => e,
                        Ok(()) => corrupt(at, "an index footer with records after it".into()),
                    };
                    return Err(self.skip_past(e, at, Some(next)));
                }
                // The footer is the last record: damage there or in the trailer ends the
                // reading (every message is before it).
                let end = self.read_payload(&h).and_then(|()| {
                    codec::decode_index(&self.raw, h.offset.saturating_sub(self.data_start))
                        .map_err(|w| corrupt(h.offset, w))?;
                    self.check_trailer(h.offset, next)
                });
                self.pos = self.len;
                if let Err(e) = end {
                    self.note_skip(Skip {
                        at,
                        resumed: None,
                        gave_up: false,
                    });
                    return Err(e);
                }
                self.finished = true;
                return Ok(None);
            }
            match self.decode(&h) {
                Ok(msg) => {
                    self.pos = next;
                    match msg {
                        Some(m) => return Ok(Some(m)),
                        None => self.skipped += 1,
                    }
                }
                Err(e) => return Err(self.skip_past(e, at, Some(next))),
            }
        }
    }

    /// Move iteration past the damage `e` of the record at `at` (whose head, where it could
    /// be read, says it ends at `next`) and note the stretch; `e` back.
    fn skip_past(&mut self, e: RecordingError, at: u64, next: Option<u64>) -> RecordingError {
        let resumed = if is_io(&e) {
            // The file system failed, not the bytes: nothing to resync to.
            None
        } else {
            self.resume_after(&e, at, next)
        };
        let gave_up = resumed.is_none() && self.scan_left == 0;
        self.note_skip(Skip {
            at,
            resumed,
            gave_up,
        });
        self.pos = resumed.unwrap_or(self.len);
        match e {
            // A head whose length runs past the end, with sound records after it: damage,
            // not a file cut short.
            RecordingError::Truncated { offset, what } if resumed.is_some() => corrupt(
                offset,
                format!("{what}: a damaged head (sound records follow)"),
            ),
            e => e,
        }
    }

    /// Where reading goes on after the damage `e` of the record at `at` (whose head, where it
    /// could be read, says it ends at `next`): there where the checksum held (the record is
    /// whole, only its content is bad), else the next sound record the search finds.
    fn resume_after(&mut self, e: &RecordingError, at: u64, next: Option<u64>) -> Option<u64> {
        match next {
            Some(n) if framed(e) => Some(n),
            _ => self.resync(at),
        }
    }

    /// Add `s` to the skips, in file order, once (iteration that seeks back over damage
    /// meets it again).
    fn note_skip(&mut self, s: Skip) {
        if let Err(i) = self.skips.binary_search_by_key(&s.at, |k| k.at) {
            self.skips.insert(i, s);
        }
    }

    fn check_trailer(&mut self, footer: u64, at: u64) -> Result<()> {
        let left = self.len - at;
        if left < TRAILER {
            return Err(trunc(
                at,
                format!("the 16-byte trailer after the index, {left} bytes left"),
            ));
        }
        let mut t = [0u8; TRAILER as usize];
        self.read_at(at, &mut t)?;
        if t[8..] != TRAILER_MAGIC {
            return Err(corrupt(at, format!("trailer magic {:02x?}", &t[8..])));
        }
        let points = u64::from_le_bytes(le8(&t[..8]));
        if points != footer {
            return Err(corrupt(
                at,
                format!("the trailer points at {points}, the index is at {footer}"),
            ));
        }
        if left > TRAILER {
            return Err(corrupt(
                at + TRAILER,
                format!("{} bytes after the trailer", left - TRAILER),
            ));
        }
        Ok(())
    }
}

impl<R: Read + Seek> Iterator for Reader<R> {
    type Item = Result<Telemetry>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_message() {
            Ok(Some(m)) => Some(Ok(m)),
            Ok(None) => {
                self.done = true;
                None
            }
            // Iteration goes on from the next sound record (or ends there is none).
            Err(e) => Some(Err(e)),
        }
    }
}

/// An error of the file system, not of the bytes.
fn is_io(e: &RecordingError) -> bool {
    matches!(e, RecordingError::Io(_))
}

/// An error in a record whose checksum held: the record is whole (its end is where its head
/// says), only its content does not decode.
fn framed(e: &RecordingError) -> bool {
    matches!(e, RecordingError::Corrupt { .. })
}

fn read_up_to(src: &mut impl Read, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match src.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(n)
}

fn le4(b: &[u8]) -> [u8; 4] {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[..4]);
    a
}

fn le8(b: &[u8]) -> [u8; 8] {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    a
}

/// The checksum of the record of `h` is `computed`, not the one its head stores.
fn checksum_mismatch(h: &Head, computed: u32) -> RecordingError {
    RecordingError::Checksum {
        offset: h.offset,
        what: format!("a {} record of {} bytes", KindName(h.kind), h.len),
        stored: h.crc,
        computed,
    }
}

fn trunc(offset: u64, what: String) -> RecordingError {
    RecordingError::Truncated { offset, what }
}

fn corrupt(offset: u64, what: String) -> RecordingError {
    RecordingError::Corrupt { offset, what }
}
