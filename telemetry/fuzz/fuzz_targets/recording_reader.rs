//! Any bytes given to the recording reader: it must never panic or allocate without bound;
//! it yields messages, then at most one error, and seeking by the index stays in the file.
#![no_main]

use baro_telemetry::recording::Reader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = Reader::new(std::io::Cursor::new(data)) else {
        return;
    };
    let mut errors = 0;
    for m in r.by_ref() {
        if m.is_err() {
            errors += 1;
        }
    }
    assert!(errors <= 1, "more than one error from one reading");
    let _ = r.finished();
    // Seeking through whatever index the file claims to have stays inside the file.
    if let Ok(mut r) = Reader::new(std::io::Cursor::new(data)) {
        let pass = data.last().copied().unwrap_or(0) as u64;
        if let Ok(true) = r.seek_to_pass(pass) {
            let _ = r.next();
        }
    }
});
