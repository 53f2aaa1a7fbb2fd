//! [`Writer`]: streams a recording, one flushed record per message.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::codec;
use super::{kind, RecordingError, RecordingHeader, Result, FORMAT_VERSION, MAGIC, TRAILER_MAGIC};
use crate::Telemetry;

/// Whether payloads are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    /// Never.
    None,
    /// LZ4 where it makes the payload smaller (the default).
    #[default]
    Lz4,
}

/// What a writer has written so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Records (messages) written.
    pub records: u64,
    /// Frame records among them.
    pub frames: u64,
    /// Present spans in those frames.
    pub spans: u64,
    /// Payload bytes before compression.
    pub raw_bytes: u64,
    /// Bytes of the file so far (header and record heads included).
    pub bytes: u64,
}

/// Writes a recording: [`Writer::new`] writes the header, [`Writer::write`] one record per
/// message (flushed, so a killed process loses at most the record being written),
/// [`Writer::finish`] the index footer and trailer.
///
/// Give it a `File` or a `BufWriter<File>` (each record is one `write_all` of a whole
/// buffer followed by `flush`). A writer dropped without `finish` leaves a file without a
/// footer, which reads fully by scanning.
pub struct Writer<W: Write> {
    out: W,
    compression: Compression,
    offset: u64,
    index: Vec<(u64, u64)>,
    stats: WriteStats,
    raw: Vec<u8>,
    packed: Vec<u8>,
    record: Vec<u8>,
    /// The run's stage and level counts, as the reader checks them.
    shape: codec::Shape,
}

impl Writer<BufWriter<File>> {
    /// Create (or truncate) `path` and write the header.
    pub fn create(path: impl AsRef<Path>, header: &RecordingHeader) -> Result<Self> {
        let f = File::create(path)?;
        Writer::new(BufWriter::with_capacity(1 << 20, f), header)
    }
}

impl<W: Write> Writer<W> {
    /// Write the magic, the version and `header` to `out`.
    pub fn new(out: W, header: &RecordingHeader) -> Result<Self> {
        let mut w = Writer {
            out,
            compression: Compression::default(),
            offset: 0,
            index: vec![],
            stats: WriteStats::default(),
            raw: vec![],
            packed: vec![],
            record: vec![],
            shape: (header.run.stages.len(), header.run.levels.len()),
        };
        let json = serde_json::to_vec(header).map_err(|e| RecordingError::Encode {
            what: format!("the header: {e}"),
        })?;
        let len = u32::try_from(json.len()).map_err(|_| RecordingError::Encode {
            what: format!("the header: {} bytes", json.len()),
        })?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&FORMAT_VERSION.to_le_bytes());
        crc.update(&len.to_le_bytes());
        crc.update(&json);
        let mut b = Vec::with_capacity(json.len() + 20);
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&crc.finalize().to_le_bytes());
        b.extend_from_slice(&json);
        w.emit_all(&b)?;
        Ok(w)
    }

    /// Use `c` for the records that follow.
    pub fn with_compression(mut self, c: Compression) -> Self {
        self.compression = c;
        self
    }

    /// Append one message as a record and flush it.
    pub fn write(&mut self, msg: &Telemetry) -> Result<()> {
        let mut raw = std::mem::take(&mut self.raw);
        raw.clear();
        let k = codec::check_shape(&mut self.shape, msg)
            .and_then(|()| codec::encode_message(&mut raw, msg))
            .map_err(|what| RecordingError::Encode { what });
        let r = k.and_then(|k| {
            if let Telemetry::Frame(f) = msg {
                self.index.push((f.pass, self.offset));
                self.stats.frames += 1;
                self.stats.spans += f.spans.iter().count() as u64;
            }
            self.stats.raw_bytes += raw.len() as u64;
            self.put_record(k, &raw)
        });
        self.raw = raw;
        r
    }

    /// Write the index footer and the trailer, flush, and hand back the output.
    pub fn finish(mut self) -> Result<W> {
        let mut raw = vec![];
        codec::encode_index(&mut raw, &self.index);
        let at = self.offset;
        self.put_record(kind::INDEX, &raw)?;
        let mut t = [0u8; 16];
        t[..8].copy_from_slice(&at.to_le_bytes());
        t[8..].copy_from_slice(&TRAILER_MAGIC);
        self.emit_all(&t)?;
        Ok(self.out)
    }

    /// What has been written so far.
    pub fn stats(&self) -> WriteStats {
        self.stats
    }

    /// The output.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    fn put_record(&mut self, k: u8, raw: &[u8]) -> Result<()> {
        let (k, payload) = if self.compression == Compression::Lz4
            && k != kind::INDEX
            && codec::compress(raw, &mut self.packed)
        {
            (k | kind::LZ4, &self.packed[..])
        } else {
            (k, raw)
        };
        let cap = if k == kind::INDEX {
            codec::MAX_INDEX
        } else {
            codec::MAX_PAYLOAD
        };
        let len = u32::try_from(payload.len())
            .ok()
            .filter(|_| raw.len() <= cap)
            .ok_or_else(|| RecordingError::Encode {
                what: format!(
                    "a record of {} bytes (a reader takes at most {cap})",
                    raw.len()
                ),
            })?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&len.to_le_bytes());
        crc.update(&[k]);
        crc.update(payload);
        let rec = &mut self.record;
        rec.clear();
        rec.extend_from_slice(&len.to_le_bytes());
        rec.push(k);
        rec.extend_from_slice(&crc.finalize().to_le_bytes());
        rec.extend_from_slice(payload);
        let rec = std::mem::take(&mut self.record);
        let r = self.emit_all(&rec);
        self.record = rec;
        self.stats.records += 1;
        r
    }

    fn emit_all(&mut self, b: &[u8]) -> Result<()> {
        self.out.write_all(b)?;
        self.out.flush()?;
        self.offset += b.len() as u64;
        self.stats.bytes = self.offset;
        Ok(())
    }
}
