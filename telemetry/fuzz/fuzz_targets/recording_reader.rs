//! Feed arbitrary bytes to the recording reader. It must yield messages and at most one
//! error, never panic, hang or allocate without bound; seeking, CSV and Perfetto export
//! must cope with whatever it accepted.
//!
//! Random bytes rarely carry a right CRC-32, so with the first input byte odd the target
//! first recomputes every checksum (header and records, walking the lengths): that is how
//! the fuzzer reaches the payload decoders (JSON, spans, index, LZ4) behind the checksums.

#![no_main]

use std::io::{sink, Cursor};

use baro_telemetry::recording::{export, Reader};
use libfuzzer_sys::fuzz_target;

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Recompute the header's and each record's crc32 in place, as far as the lengths allow.
fn fix_crcs(b: &mut [u8]) {
    let Some(hlen) = le32(b, 12) else { return };
    let end = 20 + hlen as usize;
    if end > b.len() {
        return;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&b[8..16]);
    h.update(&b[20..end]);
    b[16..20].copy_from_slice(&h.finalize().to_le_bytes());
    let mut at = end;
    while let Some(len) = le32(b, at) {
        let stop = at + 9 + len as usize;
        if stop > b.len() {
            return;
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&b[at..at + 5]);
        h.update(&b[at + 9..stop]);
        b[at + 5..at + 9].copy_from_slice(&h.finalize().to_le_bytes());
        at = stop;
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if mode & 1 == 1 {
        fix_crcs(&mut bytes);
    }
    let Ok(mut r) = Reader::new(Cursor::new(&bytes[..])) else {
        return;
    };
    let mut errors = 0;
    for m in r.by_ref() {
        if m.is_err() {
            errors += 1;
        }
    }
    assert!(errors <= 1, "iteration goes on after an error");
    if let Ok(ix) = r.ensure_index() {
        let passes: Vec<u64> = ix.entries().iter().map(|e| e.0).take(4).collect();
        for p in passes {
            let _ = r.frame(p);
        }
    }
    if let Ok(mut r) = Reader::new(Cursor::new(&bytes[..])) {
        let _ = export::csv(&mut r, sink());
    }
    if let Ok(mut r) = Reader::new(Cursor::new(&bytes[..])) {
        let _ = export::perfetto(&mut r, sink());
    }
});
