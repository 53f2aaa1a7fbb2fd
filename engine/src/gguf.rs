//! Strict GGUF v2/v3 reader (memory-mapped) and streaming writer.
//!
//! Layout (all little-endian):
//!
//! ```text
//! "GGUF" u32:version u64:tensor_count u64:metadata_kv_count
//! metadata_kv_count × { string:key u32:value_type value }
//! tensor_count      × { string:name u32:n_dims u64:dims[n_dims] u32:ggml_type u64:offset }
//! padding to general.alignment (default 32)
//! tensor data (each tensor at data_start + offset, offsets multiples of the alignment)
//! ```
//!
//! `string` is a u64 byte length followed by UTF-8 bytes. Value types: 0 u8, 1 i8, 2 u16,
//! 3 i16, 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array (u32 element type, u64 count,
//! elements), 10 u64, 11 i64, 12 f64.
//!
//! The reader trusts nothing: every count, length, offset and size is checked against the bytes
//! actually left in the file before anything is allocated or read, tensor ranges are checked
//! against the file size, for alignment and for overlap, and no input can make it panic. Every
//! failure is an [`Error::Gguf`] naming the byte offset and the field or tensor at fault.

use crate::blob::{Blob, Storage};
use crate::quant::GgmlType;
use crate::{Error, Result};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The four bytes every GGUF file starts with.
pub const MAGIC: [u8; 4] = *b"GGUF";
/// The version the writer produces.
pub const WRITE_VERSION: u32 = 3;
/// Data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The metadata key that sets the data alignment (a u32 power of two).
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// Most dimensions a tensor may have.
pub const MAX_DIMS: usize = 4;
/// Deepest nesting of arrays inside arrays (a metadata value that is a plain array has depth
/// 1). Bounds the reader's recursion so that no file can overflow the stack.
pub const MAX_ARRAY_DEPTH: usize = 16;

// Value type ids.
const T_U8: u32 = 0;
const T_I8: u32 = 1;
const T_U16: u32 = 2;
const T_I16: u32 = 3;
const T_U32: u32 = 4;
const T_I32: u32 = 5;
const T_F32: u32 = 6;
const T_BOOL: u32 = 7;
const T_STRING: u32 = 8;
const T_ARRAY: u32 = 9;
const T_U64: u32 = 10;
const T_I64: u32 = 11;
const T_F64: u32 = 12;

/// Smallest encoding of a metadata pair: empty key (8), type (4), one-byte value (1).
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Smallest encoding of a tensor info: empty name (8), n_dims (4), one dim (8), type (4),
/// offset (8).
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Type 0.
    U8(u8),
    /// Type 1.
    I8(i8),
    /// Type 2.
    U16(u16),
    /// Type 3.
    I16(i16),
    /// Type 4.
    U32(u32),
    /// Type 5.
    I32(i32),
    /// Type 6.
    F32(f32),
    /// Type 7 (one byte, 0 or 1).
    Bool(bool),
    /// Type 8.
    String(String),
    /// Type 9: elements all of one type (arrays may nest).
    Array(Vec<Value>),
    /// Type 10.
    U64(u64),
    /// Type 11.
    I64(i64),
    /// Type 12.
    F64(f64),
}

impl Value {
    /// GGUF's id for this value's type.
    pub fn type_id(&self) -> u32 {
        match self {
            Value::U8(_) => T_U8,
            Value::I8(_) => T_I8,
            Value::U16(_) => T_U16,
            Value::I16(_) => T_I16,
            Value::U32(_) => T_U32,
            Value::I32(_) => T_I32,
            Value::F32(_) => T_F32,
            Value::Bool(_) => T_BOOL,
            Value::String(_) => T_STRING,
            Value::Array(_) => T_ARRAY,
            Value::U64(_) => T_U64,
            Value::I64(_) => T_I64,
            Value::F64(_) => T_F64,
        }
    }

    /// The type's name for messages (`u32`, `string`, `array`, …).
    pub fn type_name(&self) -> &'static str {
        type_id_name(self.type_id()).unwrap_or("?")
    }

    /// Any integer type holding a non-negative value.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer type whose value fits an i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::I8(v) => Some(v.into()),
            Value::I16(v) => Some(v.into()),
            Value::I32(v) => Some(v.into()),
            Value::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// An F32, or an F64 narrowed to f32.
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::F32(v) => Some(v),
            Value::F64(v) => Some(v as f32),
            _ => None,
        }
    }

    /// A bool.
    pub fn as_bool(&self) -> Option<bool> {
        match *self {
            Value::Bool(v) => Some(v),
            _ => None,
        }
    }

    /// A string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// An array's elements.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from(x: $t) -> Self {
                Value::$v(x)
            }
        })*
    };
}
value_from!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32,
    bool => Bool, String => String, Vec<Value> => Array, u64 => U64, i64 => I64, f64 => F64);

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::String(s.to_owned())
    }
}

fn type_id_name(id: u32) -> Option<&'static str> {
    Some(match id {
        T_U8 => "u8",
        T_I8 => "i8",
        T_U16 => "u16",
        T_I16 => "i16",
        T_U32 => "u32",
        T_I32 => "i32",
        T_F32 => "f32",
        T_BOOL => "bool",
        T_STRING => "string",
        T_ARRAY => "array",
        T_U64 => "u64",
        T_I64 => "i64",
        T_F64 => "f64",
        _ => return None,
    })
}

/// Fewest bytes one value of type `id` can occupy (an empty string or an empty array counts
/// its length fields), or `None` for an unknown type.
fn min_value_bytes(id: u32) -> Option<u64> {
    Some(match id {
        T_U8 | T_I8 | T_BOOL => 1,
        T_U16 | T_I16 => 2,
        T_U32 | T_I32 | T_F32 => 4,
        T_U64 | T_I64 | T_F64 | T_STRING => 8,
        T_ARRAY => 4 + 8,
        _ => return None,
    })
}

/// Where a tensor is and what it holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name (`blk.0.attn_q.weight`, …).
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` is the row length (contiguous).
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
    /// Byte offset of the data from the start of the data section.
    pub offset: u64,
}

impl TensorInfo {
    /// Number of elements (the product of the dimensions; saturates for a tensor that was not
    /// validated, which the reader never returns).
    pub fn n_elements(&self) -> u64 {
        self.dims.iter().fold(1u64, |a, &d| a.saturating_mul(d))
    }

    /// Bytes of data. For tensors the reader returns this is exact; for an invalid shape it is
    /// `u64::MAX`.
    pub fn n_bytes(&self) -> u64 {
        self.ty.bytes_for(self.n_elements()).unwrap_or(u64::MAX)
    }

    /// Number of rows: the product of `dims[1..]`.
    pub fn rows(&self) -> u64 {
        self.dims
            .iter()
            .skip(1)
            .fold(1u64, |a, &d| a.saturating_mul(d))
    }

    /// Row length: `dims[0]`.
    pub fn cols(&self) -> u64 {
        self.dims.first().copied().unwrap_or(1)
    }
}

fn gguf_err(offset: u64, msg: impl Into<String>) -> Error {
    Error::Gguf {
        offset,
        msg: msg.into(),
    }
}

/// `n` bytes as a short human size (`512 B`, `1.2 MiB`).
fn human_size(n: u64) -> String {
    const UNITS: [&str; 6] = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

fn align_up(n: u64, alignment: u64) -> Option<u64> {
    // `alignment` is a nonzero power of two.
    let mask = alignment - 1;
    n.checked_add(mask).map(|x| x & !mask)
}

/// Check a tensor's shape and type and return its size in bytes. Shared by reader and writer;
/// the message does not name the tensor (callers prefix it).
fn check_shape(dims: &[u64], ty: GgmlType) -> std::result::Result<u64, String> {
    if dims.is_empty() || dims.len() > MAX_DIMS {
        return Err(format!("n_dims is {}, must be 1..={MAX_DIMS}", dims.len()));
    }
    if let Some(i) = dims.iter().position(|&d| d == 0) {
        return Err(format!("dimension {i} is 0 (dims {dims:?})"));
    }
    let n = dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .ok_or_else(|| format!("element count of dims {dims:?} overflows u64"))?;
    let block = ty.block_len() as u64;
    if !dims[0].is_multiple_of(block) {
        return Err(format!(
            "row length {} is not a multiple of the {ty} block size {block}",
            dims[0]
        ));
    }
    ty.bytes_for(n)
        .ok_or_else(|| format!("byte size of {n} {ty} elements overflows u64"))
}

/// Bounds-checked little-endian reads over the file bytes.
struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
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
struct Header {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, Value)>,
    meta_offsets: Vec<u64>,
    tensors: Vec<TensorInfo>,
    data_offset: u64,
}

fn parse_header(buf: &[u8]) -> Result<Header> {
    let mut c = Cursor { buf, pos: 0 };
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
    // Both counts are now bounded by the file size.
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
                    "tensor '{name}': unsupported tensor type {ty_id} (supported: f32=0, f16=1, \
                     q4_0=2, q8_0=8)"
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

    let header_end = c.off();
    let file_size = buf.len() as u64;
    let data_offset = align_up(header_end, alignment).ok_or_else(|| {
        gguf_err(
            header_end,
            format!("data section start overflows aligning {header_end:#x} to {alignment}"),
        )
    })?;
    for (t, &off_at) in tensors.iter().zip(&info_offsets) {
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
    Ok(Header {
        version,
        alignment,
        metadata,
        meta_offsets,
        tensors,
        data_offset,
    })
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
    /// Tensor directory in file order.
    pub tensors: Vec<TensorInfo>,
    storage: Arc<Storage>,
    data_offset: u64,
    /// File offset of each metadata value, for error messages.
    meta_offsets: Vec<u64>,
}

impl GgufFile {
    /// Memory-map and parse the file at `path`.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        // SAFETY: the map is read-only. As with every mmap, another process truncating or
        // rewriting the file while it is mapped is outside what Rust can guard against; model
        // files are not modified in place.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        Self::from_storage(Arc::new(Storage::Mmap(map)))
    }

    /// Parse GGUF bytes already in memory.
    pub fn from_storage(storage: Arc<Storage>) -> Result<Self> {
        let h = parse_header(&storage)?;
        Ok(GgufFile {
            version: h.version,
            alignment: h.alignment,
            metadata: h.metadata,
            tensors: h.tensors,
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
        self.tensors.iter().find(|t| t.name == name)
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
fn brief(v: &Value) -> String {
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

// ------------------------------------------------------------------------------------------
// Writer
// ------------------------------------------------------------------------------------------

fn invalid(msg: impl Into<String>) -> Error {
    Error::Invalid(msg.into())
}

/// Check a value can be written: arrays homogeneous and not nested too deep.
fn check_value(key: &str, v: &Value, depth: usize) -> Result<()> {
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

fn put_str(buf: &mut Vec<u8>, s: &str) {
    buf.extend_from_slice(&(s.len() as u64).to_le_bytes());
    buf.extend_from_slice(s.as_bytes());
}

fn put_value(buf: &mut Vec<u8>, v: &Value) {
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

/// Describe a file's metadata and tensors, one line each (for `--info` style output).
pub fn describe(f: &GgufFile) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "GGUF v{}, {} metadata, {} tensors, alignment {}, data at {:#x}, {}",
        f.version,
        f.metadata.len(),
        f.tensors.len(),
        f.alignment,
        f.data_offset(),
        human_size(f.file_size())
    );
    for (k, v) in &f.metadata {
        let _ = writeln!(s, "  {k}: {} = {}", v.type_name(), brief(v));
    }
    for t in &f.tensors {
        let _ = writeln!(
            s,
            "  {} {:?} {} @ {:#x} ({})",
            t.name,
            t.dims,
            t.ty,
            t.offset,
            human_size(t.n_bytes())
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: Vec<u8>) -> Result<GgufFile> {
        GgufFile::from_storage(Arc::new(Storage::Owned(bytes)))
    }

    /// The error message of a parse that must fail.
    fn parse_err(bytes: Vec<u8>) -> String {
        match parse(bytes) {
            Ok(f) => panic!("expected an error, parsed {}", describe(&f)),
            Err(e @ Error::Gguf { .. }) => e.to_string(),
            Err(e) => panic!("expected Error::Gguf, got {e:?}"),
        }
    }

    fn assert_contains(msg: &str, want: &str) {
        assert!(
            msg.contains(want),
            "error {msg:?} does not mention {want:?}"
        );
    }

    /// Hand-assembled GGUF bytes.
    #[derive(Clone)]
    struct Hand(Vec<u8>);

    impl Hand {
        fn new(version: u32, n_tensors: u64, n_kv: u64) -> Self {
            Hand(Vec::new())
                .raw(b"GGUF")
                .u32(version)
                .u64(n_tensors)
                .u64(n_kv)
        }
        fn raw(mut self, b: &[u8]) -> Self {
            self.0.extend_from_slice(b);
            self
        }
        fn u8(self, v: u8) -> Self {
            self.raw(&[v])
        }
        fn u32(self, v: u32) -> Self {
            self.raw(&v.to_le_bytes())
        }
        fn u64(self, v: u64) -> Self {
            self.raw(&v.to_le_bytes())
        }
        fn str(self, s: &str) -> Self {
            self.u64(s.len() as u64).raw(s.as_bytes())
        }
        fn kv_u32(self, key: &str, v: u32) -> Self {
            self.str(key).u32(T_U32).u32(v)
        }
        fn tensor(self, name: &str, dims: &[u64], ty: u32, offset: u64) -> Self {
            let mut h = self.str(name).u32(dims.len() as u32);
            for &d in dims {
                h = h.u64(d);
            }
            h.u32(ty).u64(offset)
        }
        /// Pad to `align` and append `n` data bytes.
        fn data(mut self, align: usize, n: usize) -> Self {
            while !self.0.len().is_multiple_of(align) {
                self.0.push(0);
            }
            self.0.extend((0..n).map(|i| i as u8));
            self
        }
        fn err(self) -> String {
            parse_err(self.0)
        }
    }

    fn f32_bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn every_value_type() -> Vec<(String, Value)> {
        vec![
            ("t.u8".into(), Value::U8(200)),
            ("t.i8".into(), Value::I8(-100)),
            ("t.u16".into(), Value::U16(60000)),
            ("t.i16".into(), Value::I16(-30000)),
            ("t.u32".into(), Value::U32(4_000_000_000)),
            ("t.i32".into(), Value::I32(-2_000_000_000)),
            ("t.f32".into(), Value::F32(1.5e-5)),
            ("t.bool.true".into(), Value::Bool(true)),
            ("t.bool.false".into(), Value::Bool(false)),
            ("t.string".into(), Value::from("héllo ▁wörld")),
            ("t.empty_string".into(), Value::from("")),
            ("t.u64".into(), Value::U64(u64::MAX)),
            ("t.i64".into(), Value::I64(i64::MIN)),
            ("t.f64".into(), Value::F64(-2.5e300)),
            (
                "t.array.strings".into(),
                Value::Array(vec!["<s>".into(), "</s>".into(), "▁a".into()]),
            ),
            (
                "t.array.f32".into(),
                Value::Array(vec![Value::F32(0.0), Value::F32(-1.25)]),
            ),
            (
                "t.array.i32".into(),
                Value::Array(vec![Value::I32(1), Value::I32(-2), Value::I32(3)]),
            ),
            (
                "t.array.bool".into(),
                Value::Array(vec![Value::Bool(true), Value::Bool(false)]),
            ),
            ("t.array.empty".into(), Value::Array(vec![])),
            (
                "t.array.nested".into(),
                Value::Array(vec![
                    Value::Array(vec![Value::U16(1), Value::U16(2)]),
                    Value::Array(vec![]),
                    Value::Array(vec![Value::from("x")]),
                    Value::Array(vec![Value::Array(vec![Value::F64(9.0)])]),
                ]),
            ),
        ]
    }

    /// Four tensors, one of each type, with distinct data. Returns (name, dims, type, data).
    fn four_tensors() -> Vec<(String, Vec<u64>, GgmlType, Vec<u8>)> {
        let mk = |name: &str, dims: Vec<u64>, ty: GgmlType, seed: u8| {
            let n = ty
                .bytes_for(dims.iter().product())
                .expect("test shapes are whole blocks");
            let data = (0..n)
                .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
                .collect();
            (name.to_owned(), dims, ty, data)
        };
        vec![
            mk("a.f32", vec![3], GgmlType::F32, 1),
            mk("b.f16", vec![5, 3], GgmlType::F16, 2),
            mk("c.q4_0", vec![64, 2, 1], GgmlType::Q4_0, 3),
            mk("d.q8_0", vec![32, 3, 2, 1], GgmlType::Q8_0, 4),
        ]
    }

    fn write_to_vec(
        metadata: &[(String, Value)],
        tensors: &[(String, Vec<u64>, GgmlType, Vec<u8>)],
    ) -> Vec<u8> {
        let shapes: Vec<_> = tensors
            .iter()
            .map(|(n, d, t, _)| (n.clone(), d.clone(), *t))
            .collect();
        let mut w = GgufWriter::new(Vec::new(), metadata, &shapes).expect("valid header");
        for (_, _, _, data) in tensors {
            w.write_tensor(data).expect("right size");
        }
        w.finish().expect("all tensors written")
    }

    /// A small valid file: two metadata pairs and two tensors, ending exactly at the last
    /// tensor's last byte (its size is a multiple of the alignment, so no trailing padding).
    fn small_valid_file() -> Vec<u8> {
        let md = vec![
            ("general.architecture".to_owned(), Value::from("llama")),
            (
                "tokenizer.ggml.tokens".to_owned(),
                Value::Array(vec!["a".into(), "bc".into()]),
            ),
        ];
        let t = vec![
            ("x".to_owned(), vec![4], GgmlType::F16, vec![7u8; 8]),
            ("y".to_owned(), vec![8], GgmlType::F32, f32_bytes(&[1.0; 8])),
        ];
        write_to_vec(&md, &t)
    }

    #[test]
    fn round_trip_preserves_every_value_type_and_all_four_tensor_types() {
        let md = every_value_type();
        let tensors = four_tensors();
        let bytes = write_to_vec(&md, &tensors);
        let f = parse(bytes).expect("writer output parses");
        assert_eq!(f.version, 3);
        assert_eq!(f.alignment, 32);
        assert_eq!(f.metadata, md);
        assert_eq!(f.data_offset() % 32, 0);
        assert_eq!(f.tensors.len(), tensors.len());
        for (info, (name, dims, ty, data)) in f.tensors.iter().zip(&tensors) {
            assert_eq!(&info.name, name);
            assert_eq!(&info.dims, dims);
            assert_eq!(info.ty, *ty);
            assert_eq!(info.offset % 32, 0, "{name} offset aligned");
            assert_eq!(info.n_bytes(), data.len() as u64);
            assert_eq!(&f.tensor_blob(info)[..], &data[..], "{name} data");
            assert_eq!(f.tensor(name), Some(info));
        }
        let d = f.tensor("d.q8_0").expect("present");
        assert_eq!((d.cols(), d.rows(), d.n_elements()), (32, 6, 192));
    }

    #[test]
    fn round_trip_honours_a_custom_alignment_for_header_and_every_tensor() {
        let md = vec![(ALIGNMENT_KEY.to_owned(), Value::U32(256))];
        let bytes = write_to_vec(&md, &four_tensors());
        let f = parse(bytes).expect("parses");
        assert_eq!(f.alignment, 256);
        assert_eq!(f.data_offset() % 256, 0);
        for t in &f.tensors {
            assert_eq!(t.offset % 256, 0, "{}", t.name);
        }
    }

    #[test]
    fn write_file_then_open_maps_the_same_bytes() {
        let path = std::env::temp_dir().join(format!("baro-gguf-test-{}.gguf", std::process::id()));
        let tensors = four_tensors();
        let refs: Vec<_> = tensors
            .iter()
            .map(|(n, d, t, b)| (n.clone(), d.clone(), *t, &b[..]))
            .collect();
        write_file(&path, &every_value_type(), &refs).expect("written");
        let f = GgufFile::open(&path).expect("opens");
        let _ = std::fs::remove_file(&path);
        assert_eq!(f.metadata, every_value_type());
        for (info, (_, _, _, data)) in f.tensors.iter().zip(&tensors) {
            assert_eq!(&f.tensor_blob(info)[..], &data[..]);
        }
    }

    #[test]
    fn open_of_a_missing_file_is_an_io_error_naming_the_path() {
        let path = Path::new("/nonexistent/dir/model.gguf");
        let e = GgufFile::open(path).expect_err("missing");
        assert!(matches!(e, Error::Io { .. }), "{e:?}");
        assert_contains(&e.to_string(), "/nonexistent/dir/model.gguf");
    }

    #[test]
    fn version_2_file_is_read() {
        let mut bytes = write_to_vec(&every_value_type(), &four_tensors());
        bytes[4..8].copy_from_slice(&2u32.to_le_bytes());
        let f = parse(bytes).expect("v2 parses");
        assert_eq!(f.version, 2);
        assert_eq!(f.metadata, every_value_type());
        assert_eq!(f.tensors.len(), 4);
    }

    #[test]
    fn file_without_tensors_or_metadata_is_valid() {
        let f = parse(Hand::new(3, 0, 0).0).expect("empty file parses");
        assert!(f.metadata.is_empty() && f.tensors.is_empty());
        assert_eq!(f.data_offset(), 32);
    }

    #[test]
    fn bad_magic_is_rejected() {
        let mut bytes = small_valid_file();
        bytes[0..4].copy_from_slice(b"GGML");
        assert_contains(&parse_err(bytes), "bad magic");
        assert_contains(
            &parse_err(b"\x7fELF\x02\x01\x01\x00".to_vec()),
            "not a GGUF file",
        );
    }

    #[test]
    fn version_1_and_unknown_versions_are_unsupported() {
        assert_contains(&Hand::new(1, 0, 0).err(), "unsupported GGUF version 1");
        assert_contains(&Hand::new(4, 0, 0).err(), "unsupported GGUF version 4");
        assert_contains(&Hand::new(0, 0, 0).err(), "unsupported GGUF version 0");
        assert_contains(&Hand::new(3u32.swap_bytes(), 0, 0).err(), "big-endian");
    }

    #[test]
    fn truncating_a_valid_file_at_every_length_is_an_error_never_a_panic() {
        let bytes = small_valid_file();
        parse(bytes.clone()).expect("the full file parses");
        for len in 0..bytes.len() {
            let r = parse(bytes[..len].to_vec());
            assert!(
                r.is_err(),
                "file cut to {len} of {} bytes parsed",
                bytes.len()
            );
        }
    }

    #[test]
    fn corrupting_any_single_byte_gives_ok_or_err_never_a_panic() {
        let bytes = write_to_vec(&every_value_type(), &four_tensors());
        for i in 0..bytes.len() {
            for v in [0x00, 0x01, 0x09, 0x7f, 0x80, 0xff] {
                let mut b = bytes.clone();
                b[i] = v;
                if let Ok(f) = parse(b) {
                    for t in &f.tensors {
                        assert_eq!(f.tensor_blob(t).len() as u64, t.n_bytes());
                    }
                }
            }
        }
    }

    #[test]
    fn truncated_header_errors_name_the_field_cut_short() {
        let full = Hand::new(3, 1, 1)
            .kv_u32("general.alignment", 32)
            .tensor("w", &[8], 0, 0)
            .data(32, 32)
            .0;
        parse(full.clone()).expect("full file parses");
        let cases: &[(usize, &str)] = &[
            (0, "truncated magic"),
            (3, "truncated magic"),
            (6, "truncated version"),
            (12, "truncated tensor_count"),
            (20, "truncated metadata_kv_count"),
            // Cuts in the middle of the metadata trip the up-front size bound first.
            (24, "metadata_kv_count 1 needs at least 13 bytes"),
            (45, "tensor_count 1 needs at least 32 bytes"),
        ];
        for &(len, want) in cases {
            assert_contains(&parse_err(full[..len].to_vec()), want);
        }
        // A cut inside the tensor info, with the counts' lower bounds still met.
        let long_name = Hand::new(3, 1, 0)
            .tensor("a_rather_long_tensor_name", &[8], 0, 0)
            .0;
        assert_contains(
            &parse_err(long_name[..60].to_vec()),
            "truncated tensor 'a_rather_long_tensor_name' n_dims",
        );
        // A cut inside a string's bytes.
        let s = Hand::new(3, 0, 1)
            .str("k")
            .u32(T_STRING)
            .str("a long string value")
            .0;
        assert_contains(
            &parse_err(s[..s.len() - 3].to_vec()),
            "runs past end of file",
        );
        // A cut inside the tensor data.
        assert_contains(
            &parse_err(full[..full.len() - 1].to_vec()),
            "past end of file",
        );
    }

    #[test]
    fn huge_metadata_kv_count_is_rejected_before_allocating() {
        let e = Hand::new(3, 0, 1 << 60).kv_u32("a", 1).err();
        assert_contains(&e, "metadata_kv_count 1152921504606846976 needs at least");
        let e = Hand::new(3, 0, u64::MAX).err();
        assert_contains(&e, "metadata_kv_count");
    }

    #[test]
    fn huge_tensor_count_is_rejected_before_allocating() {
        assert_contains(
            &Hand::new(3, 1 << 60, 0).err(),
            "tensor_count 1152921504606846976",
        );
        assert_contains(
            &Hand::new(3, u64::MAX, 0).raw(&[0; 64]).err(),
            "tensor_count",
        );
    }

    #[test]
    fn huge_string_length_is_rejected_before_allocating() {
        let key = Hand::new(3, 0, 1).u64(1 << 62).raw(&[b'a'; 16]).err();
        assert_contains(
            &key,
            "metadata key #0: string length 4611686018427387904 runs past end",
        );
        let val = Hand::new(3, 0, 1)
            .str("general.name")
            .u32(T_STRING)
            .u64(1 << 62)
            .raw(b"abc")
            .err();
        assert_contains(
            &val,
            "metadata 'general.name': string length 4611686018427387904",
        );
        let name = Hand::new(3, 1, 0).u64(1 << 62).raw(&[0; 40]).err();
        assert_contains(&name, "tensor #0 name: string length");
    }

    #[test]
    fn huge_array_count_is_rejected_before_allocating() {
        let e = Hand::new(3, 0, 1)
            .str("tokenizer.ggml.scores")
            .u32(T_ARRAY)
            .u32(T_F32)
            .u64(1 << 61)
            .raw(&[0; 16])
            .err();
        assert_contains(
            &e,
            "metadata 'tokenizer.ggml.scores': array count 2305843009213693952 of f32",
        );
        // count × element size overflowing u64 is caught too.
        let e = Hand::new(3, 0, 1)
            .str("k")
            .u32(T_ARRAY)
            .u32(T_U64)
            .u64(1 << 62)
            .err();
        assert_contains(&e, "array count 4611686018427387904 of u64");
        // Nested arrays count at least 12 bytes each even when empty.
        let e = Hand::new(3, 0, 1)
            .str("k")
            .u32(T_ARRAY)
            .u32(T_ARRAY)
            .u64(3)
            .raw(&[0; 24])
            .err();
        assert_contains(&e, "array count 3 of array needs at least 36 bytes");
    }

    #[test]
    fn unknown_value_type_is_rejected() {
        let e = Hand::new(3, 0, 1).str("k").u32(13).u32(0).err();
        assert_contains(&e, "metadata 'k': unknown value type 13");
        let e = Hand::new(3, 0, 1)
            .str("k")
            .u32(T_ARRAY)
            .u32(99)
            .u64(0)
            .err();
        assert_contains(&e, "metadata 'k': unknown array element type 99");
    }

    #[test]
    fn unsupported_tensor_type_is_rejected_naming_the_tensor() {
        // 3 is ggml's Q4_1, which baro-top does not read.
        let e = Hand::new(3, 1, 0)
            .tensor("blk.0.ffn_up.weight", &[32], 3, 0)
            .data(32, 64)
            .err();
        assert_contains(
            &e,
            "tensor 'blk.0.ffn_up.weight': unsupported tensor type 3",
        );
        let e = Hand::new(3, 1, 0)
            .tensor("t", &[32], 1000, 0)
            .data(32, 64)
            .err();
        assert_contains(&e, "unsupported tensor type 1000");
    }

    #[test]
    fn n_dims_must_be_between_1_and_4() {
        let zero = Hand::new(3, 1, 0)
            .str("t")
            .u32(0)
            .u32(0)
            .u64(0)
            .raw(&[0; 40])
            .err();
        assert_contains(&zero, "tensor 't': n_dims is 0, must be 1..=4");
        let five = Hand::new(3, 1, 0)
            .tensor("t", &[1, 1, 1, 1, 1], 0, 0)
            .data(32, 4)
            .err();
        assert_contains(&five, "tensor 't': n_dims is 5");
        let huge = Hand::new(3, 1, 0)
            .str("t")
            .u32(u32::MAX)
            .raw(&[0; 40])
            .err();
        assert_contains(&huge, "n_dims is 4294967295");
    }

    #[test]
    fn zero_dimension_is_rejected() {
        let e = Hand::new(3, 1, 0)
            .tensor("t", &[4, 0], 0, 0)
            .data(32, 16)
            .err();
        assert_contains(&e, "tensor 't': dimension 1 is 0");
    }

    #[test]
    fn element_count_overflow_is_rejected() {
        let e = Hand::new(3, 1, 0)
            .tensor("t", &[1 << 32, 1 << 32], 0, 0)
            .data(32, 16)
            .err();
        assert_contains(
            &e,
            "tensor 't': element count of dims [4294967296, 4294967296] overflows",
        );
        // The element count fits but the byte size does not.
        let e = Hand::new(3, 1, 0)
            .tensor("t", &[1 << 62, 2], 0, 0)
            .data(32, 16)
            .err();
        assert_contains(&e, "byte size");
    }

    #[test]
    fn tensor_data_past_end_of_file_is_rejected() {
        let e = Hand::new(3, 1, 0)
            .tensor("blk.3.attn_q.weight", &[512, 640], 0, 0x1000)
            .data(32, 64)
            .err();
        assert_contains(
            &e,
            "tensor 'blk.3.attn_q.weight': data [0x1060, +1.2 MiB) runs past end of file (size 0xa0)",
        );
        // An offset so large that start + size overflows.
        let e = Hand::new(3, 1, 0)
            .tensor("t", &[8], 0, u64::MAX - 31)
            .data(32, 32)
            .err();
        assert_contains(&e, "past end of file");
    }

    #[test]
    fn misaligned_tensor_offset_is_rejected() {
        let e = Hand::new(3, 1, 0)
            .tensor("t", &[4], 0, 16)
            .data(32, 64)
            .err();
        assert_contains(
            &e,
            "tensor 't': data offset 0x10 is not a multiple of the alignment 32",
        );
        let e = Hand::new(3, 1, 1)
            .kv_u32(ALIGNMENT_KEY, 64)
            .tensor("t", &[4], 0, 32)
            .data(64, 128)
            .err();
        assert_contains(&e, "not a multiple of the alignment 64");
    }

    #[test]
    fn overlapping_tensors_are_rejected() {
        let e = Hand::new(3, 2, 0)
            .tensor("a", &[16], 0, 32)
            .tensor("b", &[8], 0, 64)
            .data(32, 160)
            .err();
        assert_contains(&e, "tensors 'a' [0x20, 0x60) and 'b' [0x40, 0x60) overlap");
        let same = Hand::new(3, 2, 0)
            .tensor("a", &[8], 0, 0)
            .tensor("b", &[8], 0, 0)
            .data(32, 64)
            .err();
        assert_contains(&same, "overlap");
    }

    #[test]
    fn tensors_may_be_stored_out_of_directory_order() {
        let f = parse(
            Hand::new(3, 2, 0)
                .tensor("late", &[8], 0, 32)
                .tensor("early", &[8], 0, 0)
                .data(32, 64)
                .0,
        )
        .expect("parses");
        assert_eq!(f.tensor_blob(&f.tensors[0])[0], 32);
        assert_eq!(f.tensor_blob(&f.tensors[1])[0], 0);
    }

    #[test]
    fn duplicate_tensor_names_are_rejected() {
        let e = Hand::new(3, 2, 0)
            .tensor("w", &[8], 0, 0)
            .tensor("w", &[8], 0, 32)
            .data(32, 64)
            .err();
        assert_contains(&e, "duplicate tensor name 'w'");
    }

    #[test]
    fn duplicate_metadata_keys_are_rejected() {
        let e = Hand::new(3, 0, 2)
            .kv_u32("general.x", 1)
            .kv_u32("general.x", 2)
            .err();
        assert_contains(
            &e,
            "duplicate metadata key 'general.x' (first at byte 0x18)",
        );
    }

    #[test]
    fn row_length_must_be_a_multiple_of_the_block_size() {
        let e = Hand::new(3, 1, 0)
            .tensor("q", &[48, 2], 8, 0)
            .data(32, 200)
            .err();
        assert_contains(
            &e,
            "tensor 'q': row length 48 is not a multiple of the q8_0 block size 32",
        );
        let e = Hand::new(3, 1, 0)
            .tensor("q", &[16], 2, 0)
            .data(32, 64)
            .err();
        assert_contains(&e, "q4_0 block size 32");
    }

    #[test]
    fn invalid_utf8_is_rejected_in_keys_values_and_tensor_names() {
        let key = Hand::new(3, 0, 1)
            .u64(2)
            .raw(&[0xc3, 0x28])
            .u32(T_U8)
            .u8(0)
            .err();
        assert_contains(&key, "metadata key #0: invalid UTF-8");
        let val = Hand::new(3, 0, 1)
            .str("k")
            .u32(T_STRING)
            .u64(3)
            .raw(b"a\xffb")
            .err();
        assert_contains(&val, "metadata 'k': invalid UTF-8 at byte 1");
        let in_array = Hand::new(3, 0, 1)
            .str("k")
            .u32(T_ARRAY)
            .u32(T_STRING)
            .u64(1)
            .u64(1)
            .raw(b"\x80")
            .err();
        assert_contains(&in_array, "metadata 'k': invalid UTF-8");
        let name = Hand::new(3, 1, 0).u64(1).raw(b"\xfe").raw(&[0; 40]).err();
        assert_contains(&name, "tensor #0 name: invalid UTF-8");
    }

    #[test]
    fn bool_other_than_0_or_1_is_rejected() {
        let e = Hand::new(3, 0, 1)
            .str("b")
            .u32(T_BOOL)
            .u8(2)
            .raw(&[0; 4])
            .err();
        assert_contains(&e, "metadata 'b': bool byte is 2, must be 0 or 1");
        let e = Hand::new(3, 0, 1)
            .str("b")
            .u32(T_ARRAY)
            .u32(T_BOOL)
            .u64(2)
            .u8(1)
            .u8(255)
            .err();
        assert_contains(&e, "bool byte is 255");
    }

    #[test]
    fn alignment_must_be_a_nonzero_power_of_two_u32() {
        assert_contains(
            &Hand::new(3, 0, 1).kv_u32(ALIGNMENT_KEY, 48).err(),
            "general.alignment is 48, must be a nonzero power of two",
        );
        assert_contains(
            &Hand::new(3, 0, 1).kv_u32(ALIGNMENT_KEY, 0).err(),
            "general.alignment is 0",
        );
        let e = Hand::new(3, 0, 1)
            .str(ALIGNMENT_KEY)
            .u32(T_U64)
            .u64(32)
            .err();
        assert_contains(&e, "general.alignment must be a u32, found u64");
    }

    #[test]
    fn arrays_nested_too_deep_are_rejected_without_recursing() {
        let mut h = Hand::new(3, 0, 1).str("deep").u32(T_ARRAY);
        for _ in 0..10_000 {
            h = h.u32(T_ARRAY).u64(1);
        }
        let e = h.u32(T_U8).u64(0).err();
        assert_contains(&e, "arrays nested more than 16 deep");
        // The deepest allowed nesting reads back.
        let mut v = Value::Array(vec![Value::U8(1)]);
        for _ in 1..MAX_ARRAY_DEPTH {
            v = Value::Array(vec![v]);
        }
        let md = vec![("deep".to_owned(), v)];
        let f = parse(write_to_vec(&md, &[])).expect("16 deep parses");
        assert_eq!(f.metadata, md);
        let too_deep = vec![("deep".to_owned(), Value::Array(vec![md[0].1.clone()]))];
        let e = GgufWriter::new(Vec::new(), &too_deep, &[])
            .err()
            .expect("17 deep refused");
        assert_contains(&e.to_string(), "nested more than 16 deep");
    }

    #[test]
    fn typed_getters_convert_or_name_the_key_and_actual_type() {
        let md = vec![
            ("n".to_owned(), Value::I32(7)),
            ("neg".to_owned(), Value::I32(-1)),
            ("x".to_owned(), Value::F64(0.5)),
            ("s".to_owned(), Value::from("llama")),
        ];
        let f = parse(write_to_vec(&md, &[])).expect("parses");
        assert_eq!(f.get_u64("n").expect("int"), Some(7));
        assert_eq!(f.get_u64("absent").expect("absent is fine"), None);
        assert_eq!(f.get_f32("x").expect("float"), Some(0.5));
        assert_eq!(f.get_str("s").expect("string"), Some("llama"));
        assert_eq!(f.get("n"), Some(&Value::I32(7)));
        let e = f
            .get_u64("s")
            .expect_err("string is not an int")
            .to_string();
        assert_contains(
            &e,
            "metadata 's' is string \"llama\", expected a non-negative integer",
        );
        assert_contains(
            &f.get_u64("neg").expect_err("negative").to_string(),
            "'neg' is i32 -1",
        );
        assert_contains(
            &f.get_f32("n").expect_err("int").to_string(),
            "'n' is i32 7, expected f32",
        );
        assert_contains(
            &f.get_str("x").expect_err("float").to_string(),
            "'x' is f64 0.5, expected string",
        );
    }

    #[test]
    fn value_helpers_accept_only_their_types() {
        assert_eq!(Value::U8(3).as_u64(), Some(3));
        assert_eq!(Value::I64(-3).as_u64(), None);
        assert_eq!(Value::I64(-3).as_i64(), Some(-3));
        assert_eq!(Value::U64(u64::MAX).as_i64(), None);
        assert_eq!(Value::F32(1.0).as_u64(), None);
        assert_eq!(Value::F64(2.0).as_f32(), Some(2.0));
        assert_eq!(Value::U32(2).as_f32(), None);
        assert_eq!(Value::from("a").as_str(), Some("a"));
        assert_eq!(Value::Array(vec![]).as_array(), Some(&[][..]));
        assert_eq!(Value::Bool(true).type_name(), "bool");
        assert_eq!(Value::Array(vec![]).type_name(), "array");
    }

    #[test]
    fn writer_checks_data_sizes_tensor_count_and_header_inputs() {
        let shapes = vec![
            ("a".to_owned(), vec![32], GgmlType::Q8_0),
            ("b".to_owned(), vec![2], GgmlType::F32),
        ];
        let mut w = GgufWriter::new(Vec::new(), &[], &shapes).expect("header");
        let e = w
            .write_tensor(&[0; 33])
            .expect_err("wrong size")
            .to_string();
        assert_contains(
            &e,
            "tensor 'a': got 33 bytes of data, its shape and type need 34",
        );
        w.write_tensor(&[0; 34]).expect("right size");
        let e = w.finish().expect_err("b missing").to_string();
        assert_contains(&e, "finished after 1 of 2 tensors; 'b' is missing");

        let mut w = GgufWriter::new(Vec::new(), &[], &shapes[..1]).expect("header");
        w.write_tensor(&[0; 34]).expect("right size");
        assert_contains(
            &w.write_tensor(&[]).expect_err("extra").to_string(),
            "all 1 tensors already written",
        );

        let dup = vec![shapes[0].clone(), shapes[0].clone()];
        assert_contains(
            &GgufWriter::new(Vec::new(), &[], &dup)
                .err()
                .expect("dup")
                .to_string(),
            "duplicate tensor name 'a'",
        );
        let bad_row = vec![("q".to_owned(), vec![16], GgmlType::Q4_0)];
        assert_contains(
            &GgufWriter::new(Vec::new(), &[], &bad_row)
                .err()
                .expect("row")
                .to_string(),
            "row length 16",
        );
        let dup_md = vec![
            ("k".to_owned(), Value::U8(1)),
            ("k".to_owned(), Value::U8(2)),
        ];
        assert_contains(
            &GgufWriter::new(Vec::new(), &dup_md, &[])
                .err()
                .expect("dup key")
                .to_string(),
            "duplicate key 'k'",
        );
        let mixed = vec![(
            "k".to_owned(),
            Value::Array(vec![Value::U8(1), Value::I8(2)]),
        )];
        assert_contains(
            &GgufWriter::new(Vec::new(), &mixed, &[])
                .err()
                .expect("mixed")
                .to_string(),
            "array mixes u8 and i8",
        );
        let align = vec![(ALIGNMENT_KEY.to_owned(), Value::U32(24))];
        assert_contains(
            &GgufWriter::new(Vec::new(), &align, &[])
                .err()
                .expect("align")
                .to_string(),
            "must be a nonzero power of two",
        );
    }

    #[test]
    fn write_file_removes_the_partial_file_on_error() {
        let path =
            std::env::temp_dir().join(format!("baro-gguf-partial-{}.gguf", std::process::id()));
        let short: &[u8] = &[0; 3];
        let e = write_file(
            &path,
            &[],
            &[("t".to_owned(), vec![1], GgmlType::F32, short)],
        );
        assert!(e.is_err());
        assert!(!path.exists());
    }

    #[test]
    fn human_sizes_read_naturally() {
        assert_eq!(human_size(0), "0 B");
        assert_eq!(human_size(1023), "1023 B");
        assert_eq!(human_size(1_310_720), "1.2 MiB");
        assert_eq!(human_size(3 << 30), "3.0 GiB");
    }

    /// Writes small valid files as the fuzzer's seed corpus:
    /// `cargo test -p baro-engine gguf::tests::write_fuzz_seed_corpus -- --ignored`.
    #[test]
    #[ignore = "writes into engine/fuzz/corpus; run by hand before fuzzing"]
    fn write_fuzz_seed_corpus() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/gguf_reader");
        std::fs::create_dir_all(&dir).expect("corpus dir");
        let seeds: Vec<(&str, Vec<u8>)> = vec![
            ("empty.gguf", Hand::new(3, 0, 0).0),
            ("small.gguf", small_valid_file()),
            ("all_values.gguf", write_to_vec(&every_value_type(), &[])),
            ("four_tensors.gguf", write_to_vec(&[], &four_tensors())),
            (
                "align64.gguf",
                write_to_vec(
                    &[(ALIGNMENT_KEY.to_owned(), Value::U32(64))],
                    &four_tensors()[..2],
                ),
            ),
            (
                "everything.gguf",
                write_to_vec(&every_value_type(), &four_tensors()),
            ),
        ];
        for (name, bytes) in seeds {
            std::fs::write(dir.join(name), bytes).expect("seed written");
        }
    }
}
