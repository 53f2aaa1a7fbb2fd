//! CSV exports (layout: the parent module's doc).

use std::io::{BufWriter, Read, Seek, Write};

use super::{mode_name, ExportStats};
use crate::recording::{Reader, Result};
use crate::Telemetry;

fn csv_field(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\"")).into()
    } else {
        s.into()
    }
}

/// Every remaining message of `reader` to `each` until the end, past damage (the first
/// kept in the stats); `each` returns the rows it wrote. Counts passes and rows.
fn rows<R: Read + Seek>(
    reader: &mut Reader<R>,
    mut each: impl FnMut(&Telemetry) -> std::io::Result<u64>,
) -> Result<ExportStats> {
    let mut stats = ExportStats::default();
    for msg in reader.by_ref() {
        match msg {
            Ok(m) => {
                stats.passes += u64::from(matches!(m, Telemetry::Frame(_)));
                stats.events += each(&m)?;
            }
            // Reading goes on past it; the first is kept, the reader keeps every stretch.
            Err(e) => {
                stats.damage.get_or_insert(e);
            }
        }
    }
    stats.skips = reader.skips().to_vec();
    Ok(stats)
}

/// CSV of `reader`'s remaining frames: one row per pass per stage (module doc). A damaged
/// or cut recording exports every sound record around the damage, reported in
/// [`ExportStats::damage`].
pub fn csv<R: Read + Seek>(reader: &mut Reader<R>, out: impl Write) -> Result<ExportStats> {
    let mut out = BufWriter::with_capacity(1 << 20, out);
    let mut run = reader.header().run.clone();
    writeln!(
        out,
        "pass,stage,name,kind,level,busy_ns,charged_ns,max_busy_ns,fail_word,mode"
    )?;
    let stats = rows(reader, |m| {
        match m {
            Telemetry::Start(r) => run = r.clone(),
            Telemetry::Frame(f) => {
                let mode = mode_name(f.mode);
                for s in &f.stages {
                    let kind = run
                        .stages
                        .get(s.stage as usize)
                        .map_or("", |d| d.kind.name());
                    writeln!(
                        out,
                        "{},{},{},{kind},{},{},{},{},0x{:08x},{mode}",
                        f.pass,
                        s.stage,
                        csv_field(&s.name),
                        s.level,
                        s.busy_ns,
                        s.charged_ns,
                        s.max_busy_ns,
                        f.fail.word.bits
                    )?;
                }
                return Ok(f.stages.len() as u64);
            }
            _ => {}
        }
        Ok(0)
    })?;
    out.flush()?;
    Ok(stats)
}

/// CSV of `reader`'s remaining frames: one row per pass (module doc), joining the per-stage
/// CSV on `pass`. A damaged or cut recording exports every sound record around the damage,
/// reported in [`ExportStats::damage`].
pub fn csv_passes<R: Read + Seek>(reader: &mut Reader<R>, out: impl Write) -> Result<ExportStats> {
    let mut out = BufWriter::with_capacity(1 << 20, out);
    writeln!(
        out,
        "pass,pos,token,next,wall_ns,gpu_ns,host_start_ns,fail_word,mode,contention,spanned"
    )?;
    let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    let stats = rows(reader, |m| {
        let Telemetry::Frame(f) = m else {
            return Ok(0);
        };
        writeln!(
            out,
            "{},{},{},{},{},{},{},0x{:08x},{},{},{}",
            f.pass,
            f.pos,
            f.token,
            f.next,
            f.wall_ns,
            opt(f.gpu_ns),
            opt(f.host_start_ns),
            f.fail.word.bits,
            mode_name(f.mode),
            csv_field(&f.contention.summary()),
            u8::from(!f.spans.is_empty())
        )?;
        Ok(1)
    })?;
    out.flush()?;
    Ok(stats)
}
