//! Shared, immutable byte storage for tensor data: a memory-mapped file, an owned buffer or
//! bytes compiled into the binary. Tensors hold cheap [`Blob`] views into one [`Storage`].

use std::ops::Deref;
use std::sync::Arc;

/// Where the bytes live.
pub enum Storage {
    /// A memory-mapped file (GGUF models are never copied into memory).
    Mmap(memmap2::Mmap),
    /// Bytes owned by the process (imports, synthetic models, tests).
    Owned(Vec<u8>),
    /// Bytes compiled into the binary (the embedded default model).
    Static(&'static [u8]),
}

impl Deref for Storage {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Storage::Mmap(m) => m,
            Storage::Owned(v) => v,
            Storage::Static(s) => s,
        }
    }
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            Storage::Mmap(_) => "mmap",
            Storage::Owned(_) => "owned",
            Storage::Static(_) => "static",
        };
        write!(f, "Storage::{kind}({} bytes)", self.len())
    }
}

/// A view of `len` bytes at `start` in a shared [`Storage`].
#[derive(Clone, Debug)]
pub struct Blob {
    storage: Arc<Storage>,
    start: usize,
    len: usize,
}

impl Blob {
    /// A view of `storage[start..start + len]`. Panics if the range is outside the storage:
    /// callers check ranges against the file first and report a format error instead.
    pub fn new(storage: Arc<Storage>, start: usize, len: usize) -> Self {
        assert!(
            start.checked_add(len).is_some_and(|e| e <= storage.len()),
            "blob out of range"
        );
        Blob {
            storage,
            start,
            len,
        }
    }

    /// Own `bytes` as a blob.
    pub fn owned(bytes: Vec<u8>) -> Self {
        let len = bytes.len();
        Blob {
            storage: Arc::new(Storage::Owned(bytes)),
            start: 0,
            len,
        }
    }

    /// f32 values as a little-endian blob.
    pub fn from_f32(values: &[f32]) -> Self {
        Blob::owned(values.iter().flat_map(|v| v.to_le_bytes()).collect())
    }
}

impl Deref for Blob {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.storage[self.start..self.start + self.len]
    }
}
