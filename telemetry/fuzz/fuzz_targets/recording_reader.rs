//! Any bytes given to the recording reader: it must never panic or allocate without bound;
//! it yields messages and one error per damaged stretch it skips (each moving forward), and
//! seeking by the index stays in the file.
#![no_main]

use baro_telemetry::recording::Reader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(mut r) = Reader::new(std::io::Cursor::new(data)) else {
        return;
    };
    let mut errors = 0;
    let mut last = 0;
    // Not `for … in r.by_ref()`: the position is read between messages.
    #[allow(clippy::while_let_on_iterator)]
    while let Some(m) = r.next() {
        if m.is_err() {
            errors += 1;
        }
        assert!(r.position() > last || r.position() == data.len() as u64, "no progress");
        last = r.position();
    }
    assert_eq!(errors, r.skips().len(), "one skip per error");
    assert!(r.skips().windows(2).all(|w| w[0].at < w[1].at), "skips move forward");
    let _ = r.finished();
    // Seeking through whatever index the file claims to have stays inside the file.
    if let Ok(mut r) = Reader::new(std::io::Cursor::new(data)) {
        let pass = data.last().copied().unwrap_or(0) as u64;
        if let Ok(true) = r.seek_to_pass(pass) {
            let _ = r.next();
        }
    }
});
