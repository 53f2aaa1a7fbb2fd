//! Opening and reading input files (models, tokenizers), shared by the format readers
//! ([`crate::gguf`], [`crate::tokenizer`]) and [`crate::model`]'s loader.

use std::path::Path;

use crate::{Error, Result};

/// Open an input file the way every input is opened (`baro_telemetry::input::open`):
/// non-blocking, a regular file or refused by kind (`what` names it in the error), and
/// registered as an input, so an output writer refuses to replace it.
/// A path the OS cannot reach (missing, unreadable) is an I/O error on that path, its cause
/// said once; a file it reaches that this program does not read (a FIFO, a device) is refused
/// as invalid.
pub(crate) fn open_input(path: &Path, what: &str) -> Result<std::fs::File> {
    // A stat never blocks (not even on a FIFO) and keeps the OS's own error.
    std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    baro_telemetry::input::open(path, what, u64::MAX)
        .map(|(f, _)| f)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => {
                Error::Invalid(e.to_string())
            }
            kind => Error::io(path, std::io::Error::from(kind)),
        })
}

/// Append to `buf` from `r` until `buf` holds `len` bytes or the input ends. Reads only as
/// far as data arrives, so a bogus `len` never allocates ahead of the bytes.
pub(crate) fn read_up_to(
    r: &mut impl std::io::Read,
    buf: &mut Vec<u8>,
    len: u64,
) -> std::io::Result<()> {
    let want = len.saturating_sub(buf.len() as u64);
    std::io::Read::read_to_end(&mut std::io::Read::take(r, want), buf)?;
    Ok(())
}
