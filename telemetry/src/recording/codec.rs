//! Payload encoding (version 1): varints, the spans' delta coding, frames, the index, and
//! LZ4. Pure functions over byte slices; the layout is in the parent module's doc.
//!
//! Decoding checks every count against the bytes left before allocating, so a crafted
//! payload gets an error, never a huge allocation or a panic.

use crate::spans::MISSING;
use crate::{Frame, SpanStamps, Spans, Telemetry};

/// A decoding failure inside a payload (the caller adds the record's offset).
pub(crate) type DecodeError = String;

/// Payloads (stored or uncompressed) larger than this are refused before anything is
/// allocated: 64 MiB (a 1B pass is ≈ 100 KiB, an 8B pass at a grid of 1,024 ≈ 1.2 MiB).
pub const MAX_PAYLOAD: usize = 64 << 20;

/// Span stamp pairs (stage rows plus barrier rows, times the grid) one frame may declare:
/// 2^22 (an 8B pass at a grid of 1,024 has ≈ 3·10^5). Decoded, a pair takes 8 bytes twice
/// (the codec's arrays, then the frame's), so a frame's spans never take more than 64 MiB.
pub const MAX_SPAN_PAIRS: u64 = 1 << 22;

/// Index footers larger than this are refused (one entry takes 2 to 20 bytes: 256 MiB
/// indexes more than 10^7 passes).
pub const MAX_INDEX: usize = 256 << 20;

/// A frame's JSON (everything but its spans) larger than this is refused before it is
/// parsed: 4 MiB (an 8B pass, ≈ 300 stages and their names, is ≈ 60 KiB). With the row cap
/// below, one decoded frame without spans takes a few MiB at most, whatever the file says.
pub const MAX_FRAME_JSON: u64 = 4 << 20;

/// Stage timings, barrier timings and dispatch times one frame may hold, each (the reader
/// also holds them to the run's own stage and level counts).
pub const MAX_FRAME_ROWS: usize = 1 << 16;

/// The largest grid a frame may declare (Vulkan's guaranteed dispatch width, as `--grid`).
pub const MAX_GRID: u32 = 65_535;

pub(crate) fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn zigzag32(d: i32) -> u32 {
    ((d << 1) ^ (d >> 31)) as u32
}

fn unzigzag32(z: u32) -> i32 {
    ((z >> 1) as i32) ^ -((z & 1) as i32)
}

fn zigzag64(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag64(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// A cursor over a payload.
pub(crate) struct Bytes<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Bytes<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Bytes { buf, at: 0 }
    }

    pub(crate) fn left(&self) -> usize {
        self.buf.len() - self.at
    }

    pub(crate) fn varint(&mut self, what: &str) -> Result<u64, DecodeError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&b) = self.buf.get(self.at) else {
                return Err(format!("{what}: payload ends inside a varint"));
            };
            self.at += 1;
            if shift == 63 && b > 1 {
                return Err(format!("{what}: varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(format!("{what}: varint longer than 10 bytes"))
    }

    fn varint_u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| format!("{what}: {v} does not fit 32 bits"))
    }

    pub(crate) fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if n > self.left() {
            return Err(format!(
                "{what}: {n} bytes wanted, {} left in the payload",
                self.left()
            ));
        }
        let s = &self.buf[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let s = &self.buf[self.at..];
        self.at = self.buf.len();
        s
    }
}

fn put_stamp(out: &mut Vec<u8>, v: u32, pred: u32) {
    if v == MISSING {
        out.push(0);
    } else {
        put_varint(out, u64::from(zigzag32(v.wrapping_sub(pred) as i32)) + 1);
    }
}

fn get_stamp(b: &mut Bytes<'_>, pred: u32) -> Result<u32, DecodeError> {
    // Inlined fast path: most tokens are one or two bytes.
    let t = b.varint("span stamp")?;
    if t == 0 {
        return Ok(MISSING);
    }
    let z = u32::try_from(t - 1).map_err(|_| format!("span stamp token {t} too large"))?;
    Ok(pred.wrapping_add(unzigzag32(z) as u32))
}

fn present(v: u32) -> Option<u32> {
    (v != MISSING).then_some(v)
}

fn start_pred(start: &[u32], end: &[u32], i: usize, g: usize) -> u32 {
    let above = i.checked_sub(g).and_then(|j| present(end[j]));
    let left = (!i.is_multiple_of(g))
        .then(|| present(start[i - 1]))
        .flatten();
    above.or(left).unwrap_or(0)
}

fn arrive_pred(arrive: &[u32], i: usize, g: usize) -> u32 {
    let left = (!i.is_multiple_of(g))
        .then(|| present(arrive[i - 1]))
        .flatten();
    let above = i.checked_sub(g).and_then(|j| present(arrive[j]));
    left.or(above).unwrap_or(0)
}

/// Append the spans block: every stamp of `spans`, half-present ones included.
pub(crate) fn encode_spans(out: &mut Vec<u8>, spans: &Spans) {
    let r = spans.stamps();
    let g = r.grid as usize;
    let rows = |n: usize| n.checked_div(g).unwrap_or(0) as u64;
    put_varint(out, u64::from(r.grid));
    put_varint(out, rows(r.start.len()));
    put_varint(out, rows(r.arrive.len()));
    out.reserve(r.start.len() * 3 + r.arrive.len() * 3);
    for i in 0..r.start.len() {
        put_stamp(out, r.start[i], start_pred(r.start, r.end, i, g));
        put_stamp(out, r.end[i], present(r.start[i]).unwrap_or(0));
    }
    for i in 0..r.arrive.len() {
        put_stamp(out, r.arrive[i], arrive_pred(r.arrive, i, g));
        put_stamp(out, r.exit[i], present(r.arrive[i]).unwrap_or(0));
    }
}

/// Read a spans block (the rest of `b`).
pub(crate) fn decode_spans(b: &mut Bytes<'_>) -> Result<Spans, DecodeError> {
    let grid = b.varint_u32("spans grid")?;
    let srows = b.varint("spans stage rows")?;
    let brows = b.varint("spans barrier rows")?;
    if grid > MAX_GRID {
        return Err(format!(
            "spans: grid {grid} is larger than the largest dispatch ({MAX_GRID})"
        ));
    }
    let g = grid as u64;
    let pairs = srows
        .checked_add(brows)
        .and_then(|rows| rows.checked_mul(g));
    if pairs.is_none_or(|p| p > MAX_SPAN_PAIRS) {
        return Err(format!(
            "spans: {srows} stage rows and {brows} barrier rows of grid {grid} are more than \
             the {MAX_SPAN_PAIRS} stamp pairs a frame may hold"
        ));
    }
    // Every stamp takes at least one byte: the counts must fit in what is left.
    let n_span = srows.checked_mul(g).filter(|&n| n <= b.left() as u64 / 2);
    let n_bar = brows.checked_mul(g).filter(|&n| n <= b.left() as u64 / 2);
    let (Some(n_span), Some(n_bar)) = (n_span, n_bar) else {
        return Err(format!(
            "spans: {srows} stage rows and {brows} barrier rows of grid {grid} do not fit in \
             the {} bytes left",
            b.left()
        ));
    };
    if grid == 0 && (srows | brows) != 0 {
        return Err("spans: rows with a grid of 0".into());
    }
    let (ns, nb, gu) = (n_span as usize, n_bar as usize, grid as usize);
    let mut r = SpanStamps {
        grid,
        start: Vec::with_capacity(ns),
        end: Vec::with_capacity(ns),
        arrive: Vec::with_capacity(nb),
        exit: Vec::with_capacity(nb),
    };
    for i in 0..ns {
        let a = get_stamp(b, start_pred(&r.start, &r.end, i, gu))?;
        r.start.push(a);
        let e = get_stamp(b, present(a).unwrap_or(0))?;
        r.end.push(e);
    }
    for i in 0..nb {
        let a = get_stamp(b, arrive_pred(&r.arrive, i, gu))?;
        r.arrive.push(a);
        let e = get_stamp(b, present(a).unwrap_or(0))?;
        r.exit.push(e);
    }
    if b.left() != 0 {
        return Err(format!("spans: {} bytes after the last stamp", b.left()));
    }
    Spans::from_stamps(r)
}

/// The record kind of a message and its uncompressed payload, appended to `out`.
pub(crate) fn encode_message(out: &mut Vec<u8>, msg: &Telemetry) -> Result<u8, String> {
    use super::kind;
    let k = match msg {
        Telemetry::Frame(f) => {
            encode_frame(out, f)?;
            return Ok(kind::FRAME);
        }
        Telemetry::Start(_) => kind::START,
        Telemetry::Clock(_) => kind::CLOCK,
        Telemetry::Sensor(_) => kind::SENSOR,
        Telemetry::End { .. } => kind::END,
        // Messages without a kind of their own go as "other" (their JSON names them).
        Telemetry::Correctness { .. } => kind::OTHER,
    };
    serde_json::to_writer(&mut *out, msg).map_err(|e| format!("{} message: {e}", KindLabel(k)))?;
    Ok(k)
}

struct KindLabel(u8);

impl std::fmt::Display for KindLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        super::KindName(self.0).fmt(f)
    }
}

fn encode_frame(out: &mut Vec<u8>, f: &Frame) -> Result<(), String> {
    let rows = f
        .stages
        .len()
        .max(f.barriers.len())
        .max(f.dispatch_ns.len());
    if rows > MAX_FRAME_ROWS {
        return Err(format!(
            "frame {}: {rows} timing rows (a recording holds at most {MAX_FRAME_ROWS} per frame)",
            f.pass
        ));
    }
    let raw = f.spans.stamps();
    let pairs = (raw.start.len() + raw.arrive.len()) as u64;
    if raw.grid > MAX_GRID || pairs > MAX_SPAN_PAIRS {
        // A reader would refuse it: refuse it here, where the caller can still say so.
        return Err(format!(
            "frame {}: {pairs} span stamp pairs of grid {} (a recording holds at most \
             {MAX_SPAN_PAIRS} pairs of a grid of at most {MAX_GRID} per frame)",
            f.pass, raw.grid
        ));
    }
    // The frame without its spans, as JSON (every field, present and future, that serde
    // knows); the spans follow in their own coding.
    let bare = clone_without_spans(f);
    let json = serde_json::to_vec(&bare).map_err(|e| format!("frame {}: {e}", f.pass))?;
    if json.len() as u64 > MAX_FRAME_JSON {
        return Err(format!(
            "frame {}: {} bytes of JSON (a recording holds at most {MAX_FRAME_JSON} per frame)",
            f.pass,
            json.len()
        ));
    }
    put_varint(out, json.len() as u64);
    out.extend_from_slice(&json);
    encode_spans(out, &f.spans);
    Ok(())
}

/// A copy of `f` without cloning its (large) spans. Every field is named, so a field added
/// to [`Frame`] fails to compile here instead of silently missing from recordings.
fn clone_without_spans(f: &Frame) -> Frame {
    Frame {
        pass: f.pass,
        pos: f.pos,
        token: f.token,
        next: f.next,
        wall_ns: f.wall_ns,
        gpu_ns: f.gpu_ns,
        fail: f.fail.clone(),
        torn: f.torn,
        dropped: f.dropped,
        host_start_ns: f.host_start_ns,
        timestamp_start_ns: f.timestamp_start_ns,
        device_start_ns: f.device_start_ns,
        stages: f.stages.clone(),
        barriers: f.barriers.clone(),
        dispatch_ns: f.dispatch_ns.clone(),
        prefetched_bytes: f.prefetched_bytes,
        correctness: f.correctness,
        check: f.check,
        check_lag: f.check_lag,
        mode: f.mode,
        contention: f.contention.clone(),
        spans: Spans::default(),
    }
}

/// The run's stage and level counts: the header's, widened by any start message.
pub(crate) type Shape = (usize, usize);

/// A start message widens `shape`; a frame must fit in it: no more stage timings or
/// dispatch times than the run has stages, no more barrier timings than it has levels.
pub(crate) fn check_shape(shape: &mut Shape, msg: &Telemetry) -> Result<(), String> {
    let (stages, levels) = shape;
    match msg {
        Telemetry::Start(run) => {
            *stages = (*stages).max(run.stages.len());
            *levels = (*levels).max(run.levels.len());
        }
        Telemetry::Frame(f) => {
            for (what, len, cap, of) in [
                ("stage timings", f.stages.len(), *stages, "stages"),
                ("dispatch times", f.dispatch_ns.len(), *stages, "stages"),
                ("barrier timings", f.barriers.len(), *levels, "levels"),
            ] {
                if len > cap {
                    return Err(format!(
                        "frame {}: {len} {what}, the run has {cap} {of}",
                        f.pass
                    ));
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Decode an uncompressed payload of record kind `k` (low bits).
pub(crate) fn decode_message(k: u8, payload: &[u8]) -> Result<Telemetry, DecodeError> {
    use super::kind;
    if k == kind::FRAME {
        let mut b = Bytes::new(payload);
        let n = b.varint("frame JSON length")?;
        if n > MAX_FRAME_JSON {
            return Err(format!(
                "frame JSON of {n} bytes, more than the {MAX_FRAME_JSON}-byte cap on a frame"
            ));
        }
        let json = b.take(
            usize::try_from(n).map_err(|_| "frame JSON length".to_string())?,
            "frame JSON",
        )?;
        let mut f: Frame = serde_json::from_slice(json).map_err(|e| format!("frame JSON: {e}"))?;
        for (what, len) in [
            ("stage timings", f.stages.len()),
            ("barrier timings", f.barriers.len()),
            ("dispatch times", f.dispatch_ns.len()),
        ] {
            if len > MAX_FRAME_ROWS {
                return Err(format!(
                    "frame {}: {len} {what}, more than the {MAX_FRAME_ROWS} a frame may hold",
                    f.pass
                ));
            }
        }
        f.spans = decode_spans(&mut b)?;
        return Ok(Telemetry::Frame(Box::new(f)));
    }
    let msg: Telemetry =
        serde_json::from_slice(payload).map_err(|e| format!("{} JSON: {e}", KindLabel(k)))?;
    let expect = match &msg {
        Telemetry::Start(_) => kind::START,
        Telemetry::Clock(_) => kind::CLOCK,
        Telemetry::Frame(_) => kind::FRAME,
        Telemetry::Sensor(_) => kind::SENSOR,
        Telemetry::End { .. } => kind::END,
        Telemetry::Correctness { .. } => kind::OTHER,
    };
    if expect != k && k != kind::OTHER {
        return Err(format!(
            "a record of kind {} holds a {} message",
            KindLabel(k),
            KindLabel(expect)
        ));
    }
    Ok(msg)
}

/// The frame's pass, read from a frame payload without decoding its spans.
pub(crate) fn frame_pass(payload: &[u8]) -> Result<u64, DecodeError> {
    #[derive(serde::Deserialize)]
    struct Pass {
        pass: u64,
    }
    let mut b = Bytes::new(payload);
    let n = b.varint("frame JSON length")?;
    let json = b.take(
        usize::try_from(n).map_err(|_| "frame JSON length".to_string())?,
        "frame JSON",
    )?;
    serde_json::from_slice::<Pass>(json)
        .map(|p| p.pass)
        .map_err(|e| format!("frame JSON: {e}"))
}

/// Append the index payload.
pub(crate) fn encode_index(out: &mut Vec<u8>, entries: &[(u64, u64)]) {
    put_varint(out, entries.len() as u64);
    let (mut pp, mut po) = (0u64, 0u64);
    for &(pass, off) in entries {
        put_varint(out, zigzag64(pass.wrapping_sub(pp) as i64));
        put_varint(out, off.wrapping_sub(po));
        (pp, po) = (pass, off);
    }
}

/// Read an index payload whose entries point into `data` bytes of records: each entry names
/// a record of its own (a head and at least one byte), so no more than `data / 10` of them
/// exist. That bound, not the payload's size, sizes the entries (16 bytes each in memory
/// against 2 in the payload: a 256 MiB footer over no records claimed 2 GiB).
pub(crate) fn decode_index(payload: &[u8], data: u64) -> Result<Vec<(u64, u64)>, DecodeError> {
    let mut b = Bytes::new(payload);
    let n = b.varint("index entries")?;
    if n > b.left() as u64 / 2 {
        return Err(format!(
            "index: {n} entries do not fit in {} bytes",
            b.left()
        ));
    }
    let records = data / (super::RECORD_HEAD + 1);
    if n > records {
        return Err(format!(
            "index: {n} entries, but {data} bytes of records hold at most {records}"
        ));
    }
    let mut v = Vec::with_capacity(n as usize);
    let (mut pp, mut po) = (0u64, 0u64);
    for _ in 0..n {
        pp = pp.wrapping_add(unzigzag64(b.varint("index pass")?) as u64);
        po = po
            .checked_add(b.varint("index offset")?)
            .ok_or("index: offset overflows")?;
        v.push((pp, po));
    }
    if b.left() != 0 {
        return Err(format!("index: {} bytes after the last entry", b.left()));
    }
    Ok(v)
}

/// LZ4-compress `raw` into `out` (`varint n` + block); `false` (and `out` unspecified) when
/// that is not smaller.
pub(crate) fn compress(raw: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    if raw.len() < 64 {
        return false;
    }
    put_varint(out, raw.len() as u64);
    let at = out.len();
    out.resize(at + lz4_flex::block::get_maximum_output_size(raw.len()), 0);
    match lz4_flex::block::compress_into(raw, &mut out[at..]) {
        Ok(n) => {
            out.truncate(at + n);
            out.len() < raw.len()
        }
        Err(_) => false,
    }
}

/// Undo [`compress`] into `out`.
pub(crate) fn decompress(stored: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let mut b = Bytes::new(stored);
    let n = b.varint("compressed length")?;
    let block = b.rest();
    // LZ4 expands at most ≈ 255× per input byte; and no payload is larger than the cap.
    if n > MAX_PAYLOAD as u64 {
        return Err(format!(
            "compressed payload claims {n} bytes, more than the {MAX_PAYLOAD}-byte cap on a \
             record"
        ));
    }
    if n > (block.len() as u64).saturating_mul(255) {
        return Err(format!(
            "compressed payload claims {n} bytes from a {}-byte block (LZ4 expands at most \
             255×)",
            block.len()
        ));
    }
    out.clear();
    out.resize(n as usize, 0);
    let got = lz4_flex::block::decompress_into(block, out).map_err(|e| format!("LZ4: {e}"))?;
    if got != n as usize {
        return Err(format!("LZ4: {got} bytes decompressed, {n} declared"));
    }
    Ok(())
}

#[cfg(test)]
#[path = "codec_tests.rs"]
mod tests;
