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
//!
//! Modules: `read` (the bounds-checked parser over a memory map), `write` (the streaming
//! writer), `tests` (hand-built malformed files).

mod read;
#[cfg(test)]
mod tests;
mod write;

pub use read::GgufFile;
use read::*;
pub use write::{write_file, GgufWriter};

use crate::quant::GgmlType;
use crate::Error;
use std::fmt::Write as _;

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

/// Most array elements a file's metadata may hold in all (2^24): each is decoded to a
/// [`Value`] of 32 bytes, so this bounds the metadata's memory at about 512 MiB whatever the
/// file claims. Real vocabularies hold well under a million (Llama 3: tokens, types and merges
/// 0.54 million).
pub const MAX_ARRAY_ELEMENTS: u64 = 1 << 24;

// Value type ids.
pub(super) const T_U8: u32 = 0;
pub(super) const T_I8: u32 = 1;
pub(super) const T_U16: u32 = 2;
pub(super) const T_I16: u32 = 3;
pub(super) const T_U32: u32 = 4;
pub(super) const T_I32: u32 = 5;
pub(super) const T_F32: u32 = 6;
pub(super) const T_BOOL: u32 = 7;
pub(super) const T_STRING: u32 = 8;
pub(super) const T_ARRAY: u32 = 9;
pub(super) const T_U64: u32 = 10;
pub(super) const T_I64: u32 = 11;
pub(super) const T_F64: u32 = 12;

/// Smallest encoding of a metadata pair: empty key (8), type (4), one-byte value (1).
pub(super) const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Smallest encoding of a tensor info: empty name (8), n_dims (4), one dim (8), type (4),
/// offset (8).
pub(super) const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

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

pub(super) fn type_id_name(id: u32) -> Option<&'static str> {
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
pub(super) fn min_value_bytes(id: u32) -> Option<u64> {
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

pub(super) fn gguf_err(offset: u64, msg: impl Into<String>) -> Error {
    Error::Gguf {
        offset,
        msg: msg.into(),
    }
}

/// `n` bytes as a short human size (`512 B`, `1.2 MiB`).
pub(super) fn human_size(n: u64) -> String {
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

pub(super) fn align_up(n: u64, alignment: u64) -> Option<u64> {
    // `alignment` is a nonzero power of two.
    let mask = alignment - 1;
    n.checked_add(mask).map(|x| x & !mask)
}

/// Check a tensor's shape and type and return its size in bytes. Shared by reader and writer;
/// the message does not name the tensor (callers prefix it).
pub(super) fn check_shape(dims: &[u64], ty: GgmlType) -> std::result::Result<u64, String> {
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
