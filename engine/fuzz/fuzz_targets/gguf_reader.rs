//! Feed arbitrary bytes to the GGUF reader. It must return `Ok` or `Err`, never panic, hang or
//! allocate without bound; on `Ok`, every tensor blob and metadata value must be readable, and
//! writing the parsed file back out and re-reading it must reproduce it.

#![no_main]

use baro_engine::blob::Storage;
use baro_engine::gguf::{GgufFile, GgufWriter, Value};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

/// Touch every byte of a value (so nothing is left unread) and return a checksum.
fn visit(v: &Value) -> u64 {
    match v {
        Value::String(s) => s.bytes().map(u64::from).sum(),
        Value::Array(items) => items.iter().map(visit).fold(0, u64::wrapping_add),
        other => other.as_u64().unwrap_or(0) ^ u64::from(other.as_f32().is_some()),
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_storage(Arc::new(Storage::Owned(data.to_vec()))) else {
        return;
    };
    let mut sum = 0u64;
    for (key, value) in &file.metadata {
        sum = sum.wrapping_add(visit(value));
        assert!(file.get(key).is_some());
        let _ = (file.get_u64(key), file.get_f32(key), file.get_str(key));
    }
    let mut blobs = Vec::with_capacity(file.tensors.len());
    for t in &file.tensors {
        let blob = file.tensor_blob(t);
        assert_eq!(blob.len() as u64, t.n_bytes());
        assert_eq!(t.offset % file.alignment, 0);
        assert!(file.data_offset() + t.offset + t.n_bytes() <= data.len() as u64);
        sum = sum.wrapping_add(blob.iter().map(|&b| u64::from(b)).sum::<u64>());
        blobs.push(blob);
    }
    std::hint::black_box(sum);

    // Round trip: what the reader accepts the writer must accept, and the result must read
    // back the same. (A huge alignment with no tensors is valid but would make the writer pad
    // gigabytes.)
    if file.alignment > 1 << 16 {
        return;
    }
    let shapes: Vec<_> = file
        .tensors
        .iter()
        .map(|t| (t.name.clone(), t.dims.clone(), t.ty))
        .collect();
    let mut w = GgufWriter::new(Vec::new(), &file.metadata, &shapes)
        .expect("writer accepts what the reader accepted");
    for b in &blobs {
        w.write_tensor(b).expect("tensor sizes agree");
    }
    let bytes = w.finish().expect("all tensors written");
    let again =
        GgufFile::from_storage(Arc::new(Storage::Owned(bytes))).expect("writer output parses");
    // Debug formatting compares NaNs as equal, unlike PartialEq.
    assert_eq!(
        format!("{:?}", again.metadata),
        format!("{:?}", file.metadata)
    );
    assert_eq!(again.alignment, file.alignment);
    assert_eq!(again.tensors.len(), file.tensors.len());
    for (a, (t, b)) in again.tensors.iter().zip(file.tensors.iter().zip(&blobs)) {
        assert_eq!((&a.name, &a.dims, a.ty), (&t.name, &t.dims, t.ty));
        assert_eq!(&again.tensor_blob(a)[..], &b[..]);
    }
});
