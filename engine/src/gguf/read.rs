//! The GGUF reader: every count, offset and size bounds-checked before use.

use super::*;
use crate::blob::{Blob, Storage};
use crate::quant::GgmlType;
use crate::{Error, Result};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// Bounds-checked little-endian reads over the file bytes.
pub(super) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Array elements read so far, over all metadata (bounded by [`MAX_ARRAY_ELEMENTS`]).
    elements: u64,
}

impl<'a> Cursor<'a> {
    fn off(&self) -> u64 {
        self.pos as u64
    }

    fn left(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    /// The next `n` bytes, or a truncation error naming `what`.
    fn take(&mut self, n: u64, what: &dyn Fn() -> String) -> Result<&'a [u8]> {
        let left = self.left();
        if n > left {
            return Err(gguf_err(
                self.off(),
                format!(
                    "truncated {}: needs {n} bytes, only {left} left in the file",
                    what()
                ),
            ));
        }
        // n <= left <= usize::MAX, so the cast and the slice are in range.
        let start = self.pos;
        self.pos += n as usize;
        Ok(&self.buf[start..self.pos])
    }

    fn array<const N: usize>(&mut self, what: &dyn Fn() -> String) -> Result<[u8; N]> {
        let b = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(b);
        Ok(out)
    }

    fn u32(&mut self, what: &dyn Fn() -> String) -> Result<u32> {
        self.array(what).map(u32::from_le_bytes)
    }

    fn u64(&mut self, what: &dyn Fn() -> String) -> Result<u64> {
        self.array(what).map(u64::from_le_bytes)
    }

    /// A length-prefixed UTF-8 string.
    fn string(&mut self, what: &dyn Fn() -> String) -> Result<String> {
        let at = self.off();
        let len = self.u64(&|| format!("{} length", what()))?;
        let left = self.left();
        if len > left {
            return Err(gguf_err(
                at,
                format!(
                    "{}: string length {len} runs past end of file ({left} bytes left)",
                    what()
                ),
            ));
        }
        let start = self.off();
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(gguf_err(
                start + e.valid_up_to() as u64,
                format!(
                    "{}: invalid UTF-8 at byte {} of the string",
                    what(),
                    e.valid_up_to()
                ),
            )),
        }
    }

    /// A value of type `ty`; `depth` is the number of arrays around it.
    fn value(&mut self, ty: u32, depth: usize, what: &dyn Fn() -> String) -> Result<Value> {
        Ok(match ty {
            T_U8 => Value::U8(u8::from_le_bytes(self.array(what)?)),
            T_I8 => Value::I8(i8::from_le_bytes(self.array(what)?)),
            T_U16 => Value::U16(u16::from_le_bytes(self.array(what)?)),
            T_I16 => Value::I16(i16::from_le_bytes(self.array(what)?)),
            T_U32 => Value::U32(u32::from_le_bytes(self.array(what)?)),
            T_I32 => Value::I32(i32::from_le_bytes(self.array(what)?)),
            T_F32 => Value::F32(f32::from_le_bytes(self.array(what)?)),
            T_U64 => Value::U64(u64::from_le_bytes(self.array(what)?)),
            T_I64 => Value::I64(i64::from_le_bytes(self.array(what)?)),
            T_F64 => Value::F64(f64::from_le_bytes(self.array(what)?)),
            T_BOOL => {
                let at = self.off();
                match self.array::<1>(what)?[0] {
                    0 => Value::Bool(false),
                    1 => Value::Bool(true),
                    b => {
                        return Err(gguf_err(
                            at,
                            format!("{}: bool byte is {b}, must be 0 or 1", what()),
                        ))
                    }
                }
            }
            T_STRING => Value::String(self.string(what)?),
            T_ARRAY => {
                let at = self.off();
                let elem = self.u32(&|| format!("{} array element type", what()))?;
                let Some(min) = min_value_bytes(elem) else {
                    return Err(gguf_err(
                        at,
                        format!("{}: unknown array element type {elem}", what()),
                    ));
                };
                if depth + 1 >= MAX_ARRAY_DEPTH && elem == T_ARRAY {
                    return Err(gguf_err(
                        at,
                        format!("{}: arrays nested more than {MAX_ARRAY_DEPTH} deep", what()),
                    ));
                }
                let count_at = self.off();
                let count = self.u64(&|| format!("{} array count", what()))?;
                let left = self.left();
                match count.checked_mul(min) {
                    Some(need) if need <= left => {}
                    _ => {
                        return Err(gguf_err(
                            count_at,
                            format!(
                                "{}: array count {count} of {} needs at least {} bytes, only \
                                 {left} left in the file",
                                what(),
                                type_id_name(elem).unwrap_or("?"),
                                count.saturating_mul(min)
                            ),
                        ))
                    }
                }
                // Each element becomes a 32-byte Value whatever its size in the file (a u8
                // array of 700 MB would take 22 GB): the elements of all arrays together are
                // bounded, far above what real files hold.
                self.elements = self.elements.saturating_add(count);
                if self.elements > MAX_ARRAY_ELEMENTS {
                    return Err(gguf_err(
                        count_at,
                        format!(
                            "{}: array count {count} brings the metadata's array elements to {}, \
                             more than baro-top reads ({MAX_ARRAY_ELEMENTS}; real vocabularies \
                             hold well under a million)",
                            what(),
                            self.elements
                        ),
                    ));
                }
                // count <= left bytes, so it fits usize; cap the up-front reservation anyway.
                let mut items = Vec::with_capacity(count.min(1 << 16) as usize);
                for _ in 0..count {
                    items.push(self.value(elem, depth + 1, what)?);
                }
                Value::Array(items)
            }
            _ => {
                return Err(gguf_err(
                    self.off().saturating_sub(4),
                    format!("{}: unknown value type {ty}", what()),
                ))
            }
        })
    }
}

/// Everything in a GGUF header, validated against the file size.
pub(super) struct Header {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, Value)>,
    meta_offsets: Vec<u64>,
    tensors: Vec<TensorInfo>,
    data_offset: u64,
}

pub(super) fn parse_header(buf: &[u8]) -> Result<Header> {
    let mut c = Cursor {
        buf,
        pos: 0,
        elements: 0,
    };
    let (version, tensor_count, kv_count) = read_counts(&mut c)?;
    let (metadata, meta_offsets) = read_metadata(&mut c, kv_count)?;
    let alignment = alignment_of(&metadata, &meta_offsets)?;
    let (tensors, info_offsets) = read_tensor_infos(&mut c, tensor_count, alignment)?;
    let header_end = c.off();
    let data_offset = align_up(header_end, alignment).ok_or_else(|| {
        gguf_err(
            header_end,
            format!("data section start overflows aligning {header_end:#x} to {alignment}"),
        )
    })?;
    check_data_ranges(&tensors, &info_offsets, data_offset, buf.len() as u64)?;
    Ok(Header {
        version,
        alignment,
        metadata,
        meta_offsets,
        tensors,
        data_offset,
    })
}

/// The magic, the version and the two counts, each count bounded by the bytes left (a
/// metadata pair and a tensor info take at least [`MIN_KV_BYTES`] and
/// [`MIN_TENSOR_INFO_BYTES`]): `(version, tensor_count, kv_count)`.
fn read_counts(c: &mut Cursor) -> Result<(u32, u64, u64)> {
    let magic: [u8; 4] = c.array(&|| "magic".into())?;
    if magic != MAGIC {
        return Err(gguf_err(
            0,
            format!(
                "bad magic {:02x?} ({:?}), expected \"GGUF\": not a GGUF file",
                magic,
                String::from_utf8_lossy(&magic)
            ),
        ));
    }
    let version = c.u32(&|| "version".into())?;
    match version {
        2 | 3 => {}
        1 => {
            return Err(gguf_err(
                4,
                "unsupported GGUF version 1 (32-bit counts); only versions 2 and 3 are read",
            ))
        }
        v if matches!(v.swap_bytes(), 2 | 3) => {
            return Err(gguf_err(
                4,
                format!(
                    "unsupported GGUF version {v:#x}: a big-endian GGUF (version {}), only \
                     little-endian files are read",
                    v.swap_bytes()
                ),
            ))
        }
        v => {
            return Err(gguf_err(
                4,
                format!("unsupported GGUF version {v}; only versions 2 and 3 are read"),
            ))
        }
    }
    let tensor_count = c.u64(&|| "tensor_count".into())?;
    let kv_count = c.u64(&|| "metadata_kv_count".into())?;
    let left = c.left();
    let kv_min = kv_count.checked_mul(MIN_KV_BYTES);
    if !matches!(kv_min, Some(n) if n <= left) {
        return Err(gguf_err(
            16,
            format!(
                "metadata_kv_count {kv_count} needs at least {} bytes, only {left} left in the file",
                kv_count.saturating_mul(MIN_KV_BYTES)
            ),
        ));
    }
    let ti_min = tensor_count.checked_mul(MIN_TENSOR_INFO_BYTES);
    let all_min = ti_min.and_then(|t| kv_min.and_then(|k| k.checked_add(t)));
    if !matches!(all_min, Some(n) if n <= left) {
        return Err(gguf_err(
            8,
            format!(
                "tensor_count {tensor_count} needs at least {} bytes of tensor infos (after \
                 {kv_count} metadata pairs), only {left} left in the file",
                tensor_count.saturating_mul(MIN_TENSOR_INFO_BYTES)
            ),
        ));
    }
    Ok((version, tensor_count, kv_count))
}

/// Metadata pairs in file order, and the offset of each value.
type Metadata = (Vec<(String, Value)>, Vec<u64>);

/// `kv_count` metadata pairs (keys unique), with the offset of each value.
fn read_metadata(c: &mut Cursor, kv_count: u64) -> Result<Metadata> {
    // Both counts are bounded by the file size (read_counts).
    let mut metadata = Vec::with_capacity(kv_count as usize);
    let mut meta_offsets = Vec::with_capacity(kv_count as usize);
    let mut seen_keys: HashMap<String, u64> = HashMap::new();
    for i in 0..kv_count {
        let key_at = c.off();
        let key = c.string(&|| format!("metadata key #{i}"))?;
        if let Some(first) = seen_keys.get(&key) {
            return Err(gguf_err(
                key_at,
                format!("duplicate metadata key '{key}' (first at byte {first:#x})"),
            ));
        }
        let ctx = || format!("metadata '{key}'");
        let ty = c.u32(&|| format!("metadata '{key}' value type"))?;
        let value_at = c.off();
        let value = c.value(ty, 0, &ctx)?;
        seen_keys.insert(key.clone(), key_at);
        metadata.push((key, value));
        meta_offsets.push(value_at);
    }
    Ok((metadata, meta_offsets))
}

/// The data section's alignment: [`ALIGNMENT_KEY`] where the metadata has it (a u32 power of
/// two), else [`DEFAULT_ALIGNMENT`].
fn alignment_of(metadata: &[(String, Value)], meta_offsets: &[u64]) -> Result<u64> {
    let mut alignment = DEFAULT_ALIGNMENT;
    if let Some(i) = metadata.iter().position(|(k, _)| k == ALIGNMENT_KEY) {
        let at = meta_offsets[i];
        alignment = match metadata[i].1 {
            Value::U32(a) if a.is_power_of_two() => a.into(),
            Value::U32(a) => {
                return Err(gguf_err(
                    at,
                    format!("{ALIGNMENT_KEY} is {a}, must be a nonzero power of two"),
                ))
            }
            ref v => {
                return Err(gguf_err(
                    at,
                    format!("{ALIGNMENT_KEY} must be a u32, found {}", v.type_name()),
                ))
            }
        };
    }
    Ok(alignment)
}

/// `tensor_count` tensor infos (names unique, shapes and types supported, offsets aligned),
/// with the offset of each one's data offset field.
fn read_tensor_infos(
    c: &mut Cursor,
    tensor_count: u64,
    alignment: u64,
) -> Result<(Vec<TensorInfo>, Vec<u64>)> {
    let mut tensors: Vec<TensorInfo> = Vec::with_capacity(tensor_count as usize);
    let mut info_offsets = Vec::with_capacity(tensor_count as usize);
    let mut seen_names: HashMap<String, u64> = HashMap::new();
    for i in 0..tensor_count {
        let info_at = c.off();
        let name = c.string(&|| format!("tensor #{i} name"))?;
        if let Some(first) = seen_names.get(&name) {
            return Err(gguf_err(
                info_at,
                format!("duplicate tensor name '{name}' (first at byte {first:#x})"),
            ));
        }
        let what = |field: &str| format!("tensor '{name}' {field}");
        let ndims_at = c.off();
        let n_dims = c.u32(&|| what("n_dims"))?;
        if n_dims == 0 || n_dims as usize > MAX_DIMS {
            return Err(gguf_err(
                ndims_at,
                format!("tensor '{name}': n_dims is {n_dims}, must be 1..={MAX_DIMS}"),
            ));
        }
        let mut dims = Vec::with_capacity(n_dims as usize);
        for d in 0..n_dims {
            dims.push(c.u64(&|| what(&format!("dims[{d}]")))?);
        }
        let ty_at = c.off();
        let ty_id = c.u32(&|| what("type"))?;
        let Some(ty) = GgmlType::from_id(ty_id) else {
            return Err(gguf_err(
                ty_at,
                format!(
                    "tensor '{name}': unsupported tensor type {} (ggml type {ty_id}; supported: {})",
                    crate::quant::ggml_type_name(ty_id).unwrap_or("unknown to ggml"),
                    GgmlType::ALL.map(|t| t.ggml_name()).join(", ")
                ),
            ));
        };
        check_shape(&dims, ty).map_err(|m| gguf_err(ndims_at, format!("tensor '{name}': {m}")))?;
        let off_at = c.off();
        let offset = c.u64(&|| what("offset"))?;
        if !offset.is_multiple_of(alignment) {
            return Err(gguf_err(
                off_at,
                format!(
                    "tensor '{name}': data offset {offset:#x} is not a multiple of the alignment \
                     {alignment}"
                ),
            ));
        }
        seen_names.insert(name.clone(), info_at);
        tensors.push(TensorInfo {
            name,
            dims,
            ty,
            offset,
        });
        info_offsets.push(off_at);
    }
    Ok((tensors, info_offsets))
}

/// Every tensor's data inside the file (the data section at `data_offset`) and no two
/// overlapping.
fn check_data_ranges(
    tensors: &[TensorInfo],
    info_offsets: &[u64],
    data_offset: u64,
    file_size: u64,
) -> Result<()> {
    for (t, &off_at) in tensors.iter().zip(info_offsets) {
        let n_bytes = t.n_bytes();
        let start = data_offset.checked_add(t.offset);
        match start.and_then(|s| s.checked_add(n_bytes)) {
            Some(end) if end <= file_size => {}
            _ => {
                return Err(gguf_err(
                    off_at,
                    format!(
                    "tensor '{}': data [{:#x}, +{}) runs past end of file (size {file_size:#x})",
                    t.name,
                    data_offset.saturating_add(t.offset),
                    human_size(n_bytes)
                ),
                ))
            }
        }
    }
    let mut order: Vec<usize> = (0..tensors.len()).collect();
    order.sort_by_key(|&i| tensors[i].offset);
    for w in order.windows(2) {
        let (a, b) = (&tensors[w[0]], &tensors[w[1]]);
        // Both ranges are inside the file, so the sum cannot overflow.
        let a_end = a.offset + a.n_bytes();
        if a_end > b.offset {
            return Err(gguf_err(
                info_offsets[w[1]],
                format!(
                    "tensors '{}' [{:#x}, {:#x}) and '{}' [{:#x}, {:#x}) overlap (offsets relative \
                     to the data section at {data_offset:#x})",
                    a.name,
                    a.offset,
                    a_end,
                    b.name,
                    b.offset,
                    b.offset + b.n_bytes()
                ),
            ));
        }
    }
    Ok(())
}

/// A parsed GGUF file: metadata, tensor directory, and the bytes the tensors live in.
#[derive(Clone, Debug)]
pub struct GgufFile {
    /// Format version (2 or 3).
    pub version: u32,
    /// Data alignment in bytes (`general.alignment`, default 32).
    pub alignment: u64,
    /// Metadata in file order.
    pub metadata: Vec<(String, Value)>,
    /// Tensor directory in file order (read-only after parsing: [`Self::tensor`] looks names
    /// up through an index built then).
    pub tensors: Vec<TensorInfo>,
    /// Each tensor's position in `tensors` by name: a model's loader asks for 9-14 tensors a
    /// layer, and a linear search made a 20,000-layer file take 30 s to refuse.
    tensor_index: HashMap<String, usize>,
    storage: Arc<Storage>,
    data_offset: u64,
    /// File offset of each metadata value, for error messages.
    meta_offsets: Vec<u64>,
}

impl GgufFile {
    /// Memory-map and parse the file at `path` (a regular file, opened as every input is:
    /// [`crate::input::open_input`]).
    pub fn open(path: &Path) -> Result<Self> {
        let file = crate::input::open_input(path, "GGUF file")?;
        // SAFETY: the map is read-only. As with every mmap, another process truncating or
        // rewriting the file while it is mapped is outside what Rust can guard against; model
        // files are not modified in place.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        Self::from_storage(Arc::new(Storage::Mmap(map)))
    }

    /// Parse GGUF bytes already in memory.
    pub fn from_storage(storage: Arc<Storage>) -> Result<Self> {
        let h = parse_header(&storage)?;
        // Names are unique (read_tensor_infos refuses a duplicate).
        let tensor_index = h
            .tensors
            .iter()
            .enumerate()
            .map(|(i, t)| (t.name.clone(), i))
            .collect();
        Ok(GgufFile {
            version: h.version,
            alignment: h.alignment,
            metadata: h.metadata,
            tensors: h.tensors,
            tensor_index,
            storage,
            data_offset: h.data_offset,
            meta_offsets: h.meta_offsets,
        })
    }

    fn lookup(&self, key: &str) -> Option<(u64, &Value)> {
        let i = self.metadata.iter().position(|(k, _)| k == key)?;
        let at = self.meta_offsets.get(i).copied().unwrap_or(0);
        Some((at, &self.metadata[i].1))
    }

    /// The metadata value for `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.lookup(key).map(|(_, v)| v)
    }

    /// An integer metadata value: `Ok(None)` if absent, an error if present but not a
    /// non-negative integer.
    pub fn get_u64(&self, key: &str) -> Result<Option<u64>> {
        let Some((at, v)) = self.lookup(key) else {
            return Ok(None);
        };
        v.as_u64().map(Some).ok_or_else(|| {
            gguf_err(
                at,
                format!(
                    "metadata '{key}' is {} {}, expected a non-negative integer",
                    v.type_name(),
                    brief(v)
                ),
            )
        })
    }

    /// A float metadata value (f32, or f64 narrowed): `Ok(None)` if absent, an error if present
    /// with another type.
    pub fn get_f32(&self, key: &str) -> Result<Option<f32>> {
        let Some((at, v)) = self.lookup(key) else {
            return Ok(None);
        };
        v.as_f32().map(Some).ok_or_else(|| {
            gguf_err(
                at,
                format!(
                    "metadata '{key}' is {} {}, expected f32 or f64",
                    v.type_name(),
                    brief(v)
                ),
            )
        })
    }

    /// A string metadata value: `Ok(None)` if absent, an error if present with another type.
    pub fn get_str(&self, key: &str) -> Result<Option<&str>> {
        let Some((at, v)) = self.lookup(key) else {
            return Ok(None);
        };
        v.as_str().map(Some).ok_or_else(|| {
            gguf_err(
                at,
                format!(
                    "metadata '{key}' is {} {}, expected string",
                    v.type_name(),
                    brief(v)
                ),
            )
        })
    }

    /// The tensor called `name`.
    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        let t = self.tensors.get(*self.tensor_index.get(name)?)?;
        (t.name == name).then_some(t)
    }

    /// The data of `info` (one of this file's tensors): exactly `info.n_bytes()` bytes, checked
    /// against the file when it was parsed. Panics if `info` is not a tensor of this file.
    pub fn tensor_blob(&self, info: &TensorInfo) -> Blob {
        let start = self.data_offset.saturating_add(info.offset);
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        let len = usize::try_from(info.n_bytes()).unwrap_or(usize::MAX);
        Blob::new(self.storage.clone(), start, len)
    }

    /// File offset where the data section (tensor offset 0) starts.
    pub fn data_offset(&self) -> u64 {
        self.data_offset
    }

    /// Size of the whole file in bytes.
    pub fn file_size(&self) -> u64 {
        self.storage.len() as u64
    }
}

/// A value for an error message: itself if short, else its type and size.
pub(super) fn brief(v: &Value) -> String {
    match v {
        Value::String(s) if s.len() <= 40 => format!("{s:?}"),
        Value::String(s) => format!("({} bytes)", s.len()),
        Value::Array(a) => format!("({} elements)", a.len()),
        Value::U8(x) => x.to_string(),
        Value::I8(x) => x.to_string(),
        Value::U16(x) => x.to_string(),
        Value::I16(x) => x.to_string(),
        Value::U32(x) => x.to_string(),
        Value::I32(x) => x.to_string(),
        Value::U64(x) => x.to_string(),
        Value::I64(x) => x.to_string(),
        Value::F32(x) => x.to_string(),
        Value::F64(x) => x.to_string(),
        Value::Bool(x) => x.to_string(),
    }
}
