//! Reading and writing the files a user names.
//!
//! Every file the binary writes goes through [`write_atomic`]: the bytes go to `OUT.partial`
//! next to the destination, which is renamed over `OUT` only once complete. On every error
//! path (the writer fails, the rename fails, the reader of stdout goes away and the process
//! exits) the temporary file is removed, so a failed write never leaves a plausible-looking
//! partial file behind, and never replaces a good one.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context};

/// Temporary files being written now; removed by [`remove_temporaries`] on a quiet exit.
static TEMPORARIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn temporaries() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    TEMPORARIES.lock().unwrap_or_else(|p| p.into_inner())
}

/// Remove every temporary file still being written (the process is about to exit).
pub fn remove_temporaries() {
    for p in temporaries().drain(..) {
        let _ = std::fs::remove_file(p);
    }
}

/// Removes the temporary file when dropped, unless disarmed after the rename.
struct Temporary(PathBuf);

impl Temporary {
    fn new(path: PathBuf) -> Self {
        temporaries().push(path.clone());
        Temporary(path)
    }
    fn forget(self) {
        temporaries().retain(|p| p != &self.0);
        std::mem::forget(self);
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        temporaries().retain(|p| p != &self.0);
    }
}

/// `OUT.partial` (the whole file name plus `.partial`, so `a.gguf` and `a.bin` never share one).
pub fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    out.with_file_name(name)
}

/// Write `out` through a temporary file: `write(tmp)` creates and fills `tmp`; then `tmp` is
/// renamed to `out`. Refuses a directory (or a path with no file name) before writing anything.
pub fn write_atomic(
    out: &Path,
    write: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if out.is_dir() {
        bail!(
            "{} is a directory: -o/--out names the file to write",
            out.display()
        );
    }
    if out.file_name().is_none() {
        bail!("{} does not name a file to write", out.display());
    }
    let tmp = Temporary::new(partial_path(out));
    write(&tmp.0).with_context(|| format!("writing {}", tmp.0.display()))?;
    std::fs::rename(&tmp.0, out)
        .with_context(|| format!("renaming {} to {}", tmp.0.display(), out.display()))?;
    tmp.forget();
    Ok(())
}

/// [`write_atomic`] of bytes.
pub fn write_bytes_atomic(out: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic(out, |tmp| {
        std::fs::write(tmp, bytes).map_err(anyhow::Error::from)
    })
}
