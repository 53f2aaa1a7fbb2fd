//! Recordings: the telemetry stream on disk (`*.baro`), read back as the same stream.
//!
//! A recording is every [`Telemetry`](crate::Telemetry) message of a run, in order, behind a header that says
//! where it came from. [`Writer`] streams it (one flushed record per message: a process
//! killed mid-run leaves a file whose every complete record replays); [`Recorder`] is the
//! one road from a session's stream to a `Writer` (`record`, the dashboard's `r` and `bench
//! rec` take it: the header from the stream's `Start`, spans thinned, the write loop); [`Reader`] gives the
//! messages back, seeks to a pass through the index footer, and on a damaged file yields one
//! error naming the byte offset of each damaged stretch and every sound record around them
//! (a file cut short: everything before the cut, then its error). [`export`]
//! turns a recording into a trace (Perfetto protobuf, Trace Event JSON) or CSVs; [`diff`] compares two.
//!
//! This module never drops or reorders messages, and never returns a message it could not
//! check: every byte after the magic is covered by a CRC-32 (IEEE, as zlib's `crc32`).
//!
//! # Byte layout, version 1
//!
//! Integers are little-endian. `varint` is unsigned LEB128 (7 bits a byte, low first);
//! `zigzag` maps a signed value `d` to `(d << 1) ^ (d >> 31)` before it is written as one.
//!
//! ```text
//! offset  size  field
//! 0       8     magic "BARO-REC"
//! 8       4     format version u32 (FORMAT_VERSION = 1)
//! 12      4     header length H u32
//! 16      4     crc32 of bytes 8..16 followed by the H header bytes
//! 20      H     header: RecordingHeader as JSON (UTF-8, uncompressed, readable with `head`)
//! 20+H    …     records, back to back, one per message:
//!
//!   +0    4     payload length L u32
//!   +4    1     kind: low 7 bits = what the payload is, bit 7 (0x80) = LZ4-compressed
//!   +5    4     crc32 of bytes +0..+5 followed by the L payload bytes (as stored)
//!   +9    L     payload
//!
//! after the last record, written only by `Writer::finish`:
//!   F     …     one record of kind INDEX (the index footer)
//!   end-16  8   F, the footer's offset, u64
//!   end-8   8   trailer magic "BARO-IDX"
//! ```
//!
//! Record kinds (low 7 bits): 1 start, 2 clock, 3 frame, 4 sensor, 5 end, 6 any other
//! [`Telemetry`](crate::Telemetry) variant (a future one), 0x7f index footer. A reader skips a kind it does
//! not know (counted in [`Reader::skipped`]); a version-1 reader refuses any other version.
//!
//! A compressed payload is `varint n` (the uncompressed length) followed by one LZ4 block
//! (`lz4_flex::block`) of n bytes. The writer compresses a payload only where that is
//! smaller (spans compress ≈ 1.2–1.5×, JSON more; a tiny message not at all).
//!
//! Uncompressed payloads:
//!
//! ```text
//! start, clock, sensor, end, other:   the message as one JSON object (Telemetry's own
//!                                     "type"-tagged JSON: the same as a `--json` line)
//! frame:   varint J, then J bytes: the Frame as JSON without its spans
//!          then the spans (see crate::spans for what the arrays mean):
//!          varint G (grid), varint S (stage rows), varint B (barrier rows)
//!          S·G pairs (start, end), row-major (stage, then workgroup)
//!          B·G pairs (arrive, exit), row-major (level, then workgroup)
//!          each stamp as a varint token: 0 = MISSING, else zigzag(v − p) + 1 where the
//!          difference is taken mod 2^32 and p is the stamp's predictor:
//!            start[i]  end[i − G] (same workgroup, previous stage row), else start[i − 1]
//!                      (previous workgroup), else 0 — the first present one
//!            end[i]    start[i], else 0
//!            arrive[i] arrive[i − 1], else arrive[i − G], else 0
//!            exit[i]   arrive[i], else 0
//! index:   varint N, then N × (varint zigzag(pass − previous pass),
//!                              varint offset − previous offset)   (both start at 0)
//!          one entry per frame record: its pass and the offset of its record
//! ```
//!
//! # Limits
//!
//! Every size a file declares is checked against what the file can hold (the bytes left
//! after it; LZ4 expands at most 255×) and against a stated cap before anything is
//! allocated: a header of at most [`MAX_HEADER`] bytes, a record payload (stored or
//! decompressed) of at most [`MAX_PAYLOAD`], an index footer of at most [`MAX_INDEX`], and a
//! frame's spans of at most [`MAX_SPAN_PAIRS`] stamp pairs of a grid of at most
//! [`MAX_GRID`]; a frame's JSON of at most [`MAX_FRAME_JSON`] bytes, holding at most the
//! run's stage count of stage timings and dispatch times and its level count of barrier
//! timings (and never more than [`MAX_FRAME_ROWS`]). A reader therefore holds at most a few hundred MiB for one record whatever
//! the file says, and its work is linear in 255 × the file's size (plus 64 × for searches
//! past damage). The writer refuses a message that a reader would refuse.
//!
//! # Damage
//!
//! A file ends cleanly after a whole record (a crash between records: no footer; see
//! [`Reader::finished`]) or after the trailer. Anything else is damage, and each damaged
//! stretch gives one [`RecordingError`] carrying the offset of the record (or header, or
//! trailer) at fault; [`Reader::skips`] lists the stretches. Reading goes on past it from
//! the next sound record — one whose head fits the file and whose checksum holds:
//!
//! - a record whose checksum held but that does not decode: the record after it;
//! - a record whose checksum fails, or a head that cannot be one (a length past its cap or
//!   the file): the first offset after the damage where a sound record starts whose next
//!   two heads fit too (the records after the damage: a chain random bytes do not make),
//!   or, before that, one between two damaged records (it ends where a head fits, or at
//!   the chain's start). Not where the damaged head says its record ends: that head may be
//!   the damaged part. The search reads and checksums at most 64 times the file's length
//!   (plus one largest record) over a reader's life, then gives up and says so; a sound
//!   record whose next record's head is damaged too, right after other damage, is passed
//!   over;
//! - the header, the index footer or the trailer: none (every message is before the
//!   footer; a damaged header is refused).
//!
//! A file cut inside a record ends with that record's [`RecordingError::Truncated`].

mod codec;
pub mod diff;
pub mod export;
mod reader;
mod recorder;
mod writer;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::{ClockSync, RunDetails};

pub use codec::{MAX_FRAME_JSON, MAX_FRAME_ROWS, MAX_GRID, MAX_INDEX, MAX_PAYLOAD, MAX_SPAN_PAIRS};
pub use reader::{Index, Reader, Skip, MAX_HEADER};
pub use recorder::{Pumped, Recorder, TICK};
pub use writer::{Compression, WriteStats, Writer};

/// The version [`Writer`] writes; [`Reader`] reads every version up to it.
pub const FORMAT_VERSION: u32 = 1;

/// The first 8 bytes of every recording.
pub const MAGIC: [u8; 8] = *b"BARO-REC";

/// The last 8 bytes of a finished recording.
pub const TRAILER_MAGIC: [u8; 8] = *b"BARO-IDX";

/// Bytes before the header JSON: magic, version, length, crc.
pub(crate) const PREAMBLE: u64 = 20;

/// Bytes before a record's payload: length, kind, crc.
pub(crate) const RECORD_HEAD: u64 = 9;

/// Bytes of the trailer after the footer record.
pub(crate) const TRAILER: u64 = 16;

/// Record kinds (the low 7 bits of a record's kind byte).
pub mod kind {
    /// [`crate::Telemetry::Start`].
    pub const START: u8 = 1;
    /// [`crate::Telemetry::Clock`].
    pub const CLOCK: u8 = 2;
    /// [`crate::Telemetry::Frame`].
    pub const FRAME: u8 = 3;
    /// [`crate::Telemetry::Sensor`].
    pub const SENSOR: u8 = 4;
    /// [`crate::Telemetry::End`].
    pub const END: u8 = 5;
    /// Any other message, as its JSON.
    pub const OTHER: u8 = 6;
    /// The index footer.
    pub const INDEX: u8 = 0x7f;
    /// The bit that marks an LZ4-compressed payload.
    pub const LZ4: u8 = 0x80;
}

/// Where a recording came from: the run's static details and the machine and program that
/// recorded it. Fields are added with defaults, so older headers keep loading.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RecordingHeader {
    /// The run (device, driver, model, dispatch, grid, stages, levels).
    pub run: RunDetails,
    /// The model's weight format (`q4_0`, `f16`, …), where known.
    #[serde(default)]
    pub quant: Option<String>,
    /// Host name of the machine that recorded it.
    #[serde(default)]
    pub host: String,
    /// baro-top's version.
    #[serde(default)]
    pub baro_top_version: String,
    /// The git commit baro-top was built from (`unknown` where not known).
    #[serde(default)]
    pub commit: String,
    /// When recording started, ms since the Unix epoch.
    #[serde(default)]
    pub created_unix_ms: u64,
    /// Clock calibrations known when recording started (later ones are records).
    #[serde(default)]
    pub calibrations: Vec<ClockSync>,
}

impl RecordingHeader {
    /// A header for `run` recorded now, on this host, by this version built from `commit`.
    pub fn new(run: RunDetails, commit: impl Into<String>) -> Self {
        RecordingHeader {
            run,
            quant: None,
            host: host_name(),
            baro_top_version: env!("CARGO_PKG_VERSION").to_string(),
            commit: commit.into(),
            created_unix_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            calibrations: vec![],
        }
    }
}

/// This machine's host name (`unknown` where it cannot be read).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".into())
}

/// What went wrong reading or writing a recording. Reading errors name the byte offset of
/// the header, record or trailer at fault.
#[derive(Debug, thiserror::Error)]
pub enum RecordingError {
    /// The file system said no (its message once: the error is its own cause).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The file does not start with [`MAGIC`].
    #[error("not a baro-top recording: it starts with {found:02x?}, not \"BARO-REC\"")]
    BadMagic {
        /// The first bytes.
        found: Vec<u8>,
    },
    /// A format version this build does not read.
    #[error("recording format version {found}: this baro-top reads versions 1 to {newest}")]
    UnsupportedVersion {
        /// The file's version.
        found: u32,
        /// [`FORMAT_VERSION`].
        newest: u32,
    },
    /// The file ends inside something.
    #[error("at byte {offset} (0x{offset:x}): file truncated: {what}")]
    Truncated {
        /// Offset of the header, record or trailer that is cut short.
        offset: u64,
        /// What was cut and how much was missing.
        what: String,
    },
    /// Stored and computed checksums differ.
    #[error(
        "at byte {offset} (0x{offset:x}): checksum mismatch in {what}: stored {stored:08x}, \
         computed {computed:08x} (the bytes were damaged)"
    )]
    Checksum {
        /// Offset of the header or record.
        offset: u64,
        /// `header` or `record of kind …`.
        what: String,
        /// The stored crc32.
        stored: u32,
        /// The crc32 of the bytes read.
        computed: u32,
    },
    /// Bytes whose checksum matched (or that have none) but that do not decode.
    #[error("at byte {offset} (0x{offset:x}): {what}")]
    Corrupt {
        /// Offset of the header, record or trailer at fault.
        offset: u64,
        /// What is wrong.
        what: String,
    },
    /// A message could not be encoded (the writer refuses rather than losing data).
    #[error("cannot encode {what}")]
    Encode {
        /// What and why.
        what: String,
    },
}

impl RecordingError {
    /// The byte offset at fault, for errors that have one.
    pub fn offset(&self) -> Option<u64> {
        match self {
            RecordingError::Truncated { offset, .. }
            | RecordingError::Checksum { offset, .. }
            | RecordingError::Corrupt { offset, .. } => Some(*offset),
            RecordingError::BadMagic { .. } | RecordingError::UnsupportedVersion { .. } => Some(0),
            RecordingError::Io(_) | RecordingError::Encode { .. } => None,
        }
    }

    /// Whether the error is a file cut short (what a crash leaves), as opposed to damage.
    pub fn is_truncation(&self) -> bool {
        matches!(self, RecordingError::Truncated { .. })
    }
}

/// What a reader of a damaged recording says of it, after `done` ("replayed", "exported",
/// "compared"): `first` is the first error iteration yielded, `skips` the reader's
/// [`Reader::skips`]. A file cut short (one stretch to its end) reads as before resyncing
/// existed: everything before the damage was used.
pub fn damage_note(first: &dyn fmt::Display, skips: &[Skip], done: &str) -> String {
    let gave_up = if skips.iter().any(|s| s.gave_up) {
        "; the search for a sound record after the last stretch stopped at its bound on work \
         (the rest of the file was not read)"
    } else {
        ""
    };
    match skips {
        [] | [Skip { resumed: None, .. }] => {
            format!(
                "the recording is damaged or cut: {first}; {done} everything before it{gave_up}"
            )
        }
        _ => {
            let n = skips.len();
            let to_end = skips.last().is_some_and(|s| s.resumed.is_none());
            format!(
                "the recording is damaged: {n} damaged stretch{} skipped, the first {first}; {done} \
                 every sound record around {}{}{gave_up}",
                if n == 1 { "" } else { "es" },
                if n == 1 { "it" } else { "them" },
                if to_end && !skips.last().is_some_and(|s| s.gave_up) {
                    "; the last runs to the end of the file"
                } else {
                    ""
                },
            )
        }
    }
}

/// `Result` with a [`RecordingError`].
pub type Result<T, E = RecordingError> = std::result::Result<T, E>;

/// A record kind's name, for messages.
pub(crate) struct KindName(pub u8);

impl fmt::Display for KindName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.0 & !kind::LZ4 {
            kind::START => "start",
            kind::CLOCK => "clock",
            kind::FRAME => "frame",
            kind::SENSOR => "sensor",
            kind::END => "end",
            kind::OTHER => "other",
            kind::INDEX => "index",
            _ => return write!(f, "unknown kind 0x{:02x}", self.0),
        };
        f.write_str(name)
    }
}

#[cfg(test)]
#[path = "shipped_tests.rs"]
mod shipped_tests;
