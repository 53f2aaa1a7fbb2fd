//! The GGUF writer: metadata and tensor infos first, then the data, aligned, streamed.

use super::*;
use crate::quant::GgmlType;
use crate::{Error, Result};
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

// ------------------------------------------------------------------------------------------
// Writer
// ------------------------------------------------------------------------------------------

pub(super) fn invalid(msg: impl Into<String>) -> Error {
    Error::Invalid(msg.into())
}

/// Check a value can be written: arrays homogeneous and not nested too deep.
pub(super) fn check_value(key: &str, v: &Value, depth: usize) -> Result<()> {
    if let Value::Array(items) = v {
        if depth >= MAX_ARRAY_DEPTH {
            return Err(invalid(format!(
                "gguf metadata '{key}': arrays nested more than {MAX_ARRAY_DEPTH} deep"
            )));
        }
        if let Some(first) = items.first() {
            let t = first.type_id();
            if let Some((i, other)) = items.iter().enumerate().find(|(_, x)| x.type_id() != t) {
                return Err(invalid(format!(
                    "gguf metadata '{key}': array mixes {} and {} (element {i})",
                    first.type_name(),
                    other.type_name()
                )));
            }
        }
        for x in items {
            check_value(key, x, depth + 1)?;
        }
    }
    Ok(())
}

pub(super) fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

pub(super) fn put_value(buf: &mut Vec<u8>, v: &Value) {
    match v {
        Value::U8(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I8(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::U16(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I16(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::U32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::F32(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::Bool(x) => buf.push(u8::from(*x)),
        Value::String(s) => put_str(buf, s),
        Value::Array(items) => {
            // An empty array has no element to take a type from; u8 is as good as any.
            let elem = items.first().map_or(T_U8, Value::type_id);
            buf.extend_from_slice(&elem.to_le_bytes());
            buf.extend_from_slice(&(items.len() as u64).to_le_bytes());
            for x in items {
                put_value(buf, x);
            }
        }
        Value::U64(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::I64(x) => buf.extend_from_slice(&x.to_le_bytes()),
        Value::F64(x) => buf.extend_from_slice(&x.to_le_bytes()),
    }
}

/// Streaming GGUF v3 writer: [`GgufWriter::new`] writes the whole header (every tensor info,
/// offsets computed and aligned), then [`GgufWriter::write_tensor`] writes each tensor's data
/// in the order given, so multi-GB files never sit in memory.
pub struct GgufWriter<W: Write> {
    out: W,
    /// Names I/O errors (the output path, or a placeholder for anonymous writers).
    label: PathBuf,
    alignment: u64,
    /// Name and byte size of each tensor, in write order.
    tensors: Vec<(String, u64)>,
    next: usize,
    written: u64,
}

impl<W: Write> GgufWriter<W> {
    /// Validate everything and write the header. The alignment is `general.alignment` from
    /// `metadata` (a u32 power of two) or 32.
    pub fn new(
        out: W,
        metadata: &[(String, Value)],
        tensors: &[(String, Vec<u64>, GgmlType)],
    ) -> Result<Self> {
        Self::with_label(out, PathBuf::from("<gguf writer>"), metadata, tensors)
    }

    fn with_label(
        out: W,
        label: PathBuf,
        metadata: &[(String, Value)],
        tensors: &[(String, Vec<u64>, GgmlType)],
    ) -> Result<Self> {
        let mut keys = HashMap::new();
        let mut alignment = DEFAULT_ALIGNMENT;
        for (k, v) in metadata {
            if keys.insert(k.as_str(), ()).is_some() {
                return Err(invalid(format!("gguf metadata: duplicate key '{k}'")));
            }
            check_value(k, v, 0)?;
            if k == ALIGNMENT_KEY {
                alignment = match *v {
                    Value::U32(a) if a.is_power_of_two() => a.into(),
                    Value::U32(a) => {
                        return Err(invalid(format!(
                            "gguf {ALIGNMENT_KEY} is {a}, must be a nonzero power of two"
                        )))
                    }
                    ref v => {
                        return Err(invalid(format!(
                            "gguf {ALIGNMENT_KEY} must be a u32, got {}",
                            v.type_name()
                        )))
                    }
                };
            }
        }
        let mut names = HashMap::new();
        let mut sizes = Vec::with_capacity(tensors.len());
        for (name, dims, ty) in tensors {
            if names.insert(name.as_str(), ()).is_some() {
                return Err(invalid(format!("gguf: duplicate tensor name '{name}'")));
            }
            let n = check_shape(dims, *ty)
                .map_err(|m| invalid(format!("gguf tensor '{name}': {m}")))?;
            sizes.push((name.clone(), n));
        }

        let mut h = Vec::new();
        h.extend_from_slice(&MAGIC);
        h.extend_from_slice(&WRITE_VERSION.to_le_bytes());
        h.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
        h.extend_from_slice(&(metadata.len() as u64).to_le_bytes());
        for (k, v) in metadata {
            put_str(&mut h, k);
            h.extend_from_slice(&v.type_id().to_le_bytes());
            put_value(&mut h, v);
        }
        let mut offset = 0u64;
        for ((name, dims, ty), (_, n)) in tensors.iter().zip(&sizes) {
            put_str(&mut h, name);
            h.extend_from_slice(&(dims.len() as u32).to_le_bytes());
            for d in dims {
                h.extend_from_slice(&d.to_le_bytes());
            }
            h.extend_from_slice(&ty.id().to_le_bytes());
            h.extend_from_slice(&offset.to_le_bytes());
            offset = offset
                .checked_add(*n)
                .and_then(|e| align_up(e, alignment))
                .ok_or_else(|| invalid("gguf: total tensor data size overflows u64"))?;
        }
        let mut w = GgufWriter {
            out,
            label,
            alignment,
            tensors: sizes,
            next: 0,
            written: 0,
        };
        w.put(&h)?;
        w.pad()?;
        Ok(w)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| Error::io(&self.label, e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Zero-fill up to the next multiple of the alignment.
    fn pad(&mut self) -> Result<()> {
        const ZEROS: [u8; 256] = [0; 256];
        let mut n = align_up(self.written, self.alignment).map_or(0, |e| e - self.written);
        while n > 0 {
            let k = n.min(ZEROS.len() as u64);
            self.put(&ZEROS[..k as usize])?;
            n -= k;
        }
        Ok(())
    }

    /// Write the next tensor's data (exactly its size in bytes) and pad to the alignment.
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<()> {
        let Some((name, n)) = self.tensors.get(self.next) else {
            return Err(invalid(format!(
                "gguf writer: all {} tensors already written",
                self.tensors.len()
            )));
        };
        if data.len() as u64 != *n {
            return Err(invalid(format!(
                "gguf tensor '{name}': got {} bytes of data, its shape and type need {n}",
                data.len()
            )));
        }
        self.next += 1;
        self.put(data)?;
        self.pad()
    }

    /// Flush and return the output; an error if some tensors were not written.
    pub fn finish(mut self) -> Result<W> {
        if let Some((name, _)) = self.tensors.get(self.next) {
            return Err(invalid(format!(
                "gguf writer: finished after {} of {} tensors; '{name}' is missing",
                self.next,
                self.tensors.len()
            )));
        }
        self.out.flush().map_err(|e| Error::io(&self.label, e))?;
        Ok(self.out)
    }
}

/// Write a whole GGUF file. On error the partial file is removed.
pub fn write_file(
    path: &Path,
    metadata: &[(String, Value)],
    tensors: &[(String, Vec<u64>, GgmlType, &[u8])],
) -> Result<()> {
    let shapes: Vec<(String, Vec<u64>, GgmlType)> = tensors
        .iter()
        .map(|(n, d, t, _)| (n.clone(), d.clone(), *t))
        .collect();
    let file = File::create(path).map_err(|e| Error::io(path, e))?;
    let result = (|| {
        let mut w = GgufWriter::with_label(BufWriter::new(file), path.into(), metadata, &shapes)?;
        for (_, _, _, data) in tensors {
            w.write_tensor(data)?;
        }
        let buf = w.finish()?;
        let file = buf
            .into_inner()
            .map_err(|e| Error::io(path, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(path, e))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}
