//! Reading and writing the files a user names.
//!
//! Every file the binary writes goes through [`write_atomic`] (or, for a recording streamed
//! as it is made, [`create_recording`]): the bytes go to `OUT.partial` next to the
//! destination, which is renamed over `OUT` only once complete — only where `OUT` is a
//! regular file or nothing yet; FIFOs, devices and `-` are written directly, and an output
//! that is one of the command's inputs is refused (see [`baro_telemetry::input`]). On every error
//! path (the writer fails, the rename fails, the reader of stdout goes away and the process
//! exits) the temporary file is removed, so a failed write never leaves a plausible-looking
//! partial file behind, and never replaces a good one.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use crate::out;

/// Removes the temporary file when dropped, unless disarmed after the rename; until then a
/// quiet exit removes it too ([`out::track_temporary`]).
struct Temporary(PathBuf);

impl Temporary {
    fn new(path: PathBuf) -> Self {
        out::track_temporary(&path);
        Temporary(path)
    }
    fn forget(self) {
        out::untrack_temporary(&self.0);
        std::mem::forget(self);
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        out::untrack_temporary(&self.0);
    }
}

/// `OUT.partial` (the whole file name plus `.partial`, so `a.gguf` and `a.bin` never share one).
pub fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    out.with_file_name(name)
}

/// Where an output goes, after following symlinks (dangling ones too) to the file they name.
enum Target {
    /// A regular file or nothing yet: written through `PATH.partial`, renamed over `PATH`.
    Replace(PathBuf),
    /// A FIFO, a device (`/dev/null`), or this process's own stdout or stderr: written in
    /// place, never replaced.
    Direct(PathBuf),
}

/// Follow `out`'s symlinks to the path they end at (which may not exist yet).
fn follow(out: &Path) -> anyhow::Result<PathBuf> {
    let mut p = out.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&p)
                    .with_context(|| format!("reading the symlink {}", p.display()))?;
                p = match p.parent() {
                    Some(dir) if to.is_relative() => dir.join(to),
                    _ => to,
                };
            }
            _ => return Ok(p),
        }
    }
    bail!("{}: too many levels of symlinks", out.display())
}

/// Whether `m` is the file behind this process's stdout or stderr.
fn is_own_stream(m: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    [1, 2].into_iter().any(|fd| {
        // SAFETY: a zeroed `stat` is a valid value of the plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fstat only fills the struct it is given; fd 1 and 2 are only read.
        let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
        ok && st.st_dev as u64 == m.dev() && st.st_ino as u64 == m.ino()
    })
}

/// Whether `out` is this process's own stdout or stderr (`-`, `/dev/stdout`, `/proc/self/fd/1`):
/// where a reader that went away ends the process quietly ([`out::reader_gone`]).
pub fn is_own_output(out: &Path) -> bool {
    out == Path::new("-") || std::fs::metadata(out).is_ok_and(|m| is_own_stream(&m))
}

/// Classify `out` (see [`Target`]); refuses a directory, a socket, a path with no file name,
/// and any file this command reads (by device and inode, whatever name reaches it).
fn target(out: &Path) -> anyhow::Result<Target> {
    if out.file_name().is_none() {
        bail!("{} does not name a file to write", out.display());
    }
    // `/dev/stdout` and friends are links into /proc: classify by what they open.
    let meta = match std::fs::metadata(out) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("looking at {}", out.display())),
    };
    let Some(m) = meta else {
        return Ok(Target::Replace(follow(out)?));
    };
    if baro_telemetry::input::is_input(&m) {
        bail!(
            "{} is one of this command's inputs: refusing to write over it",
            out.display()
        );
    }
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    if t.is_dir() {
        bail!(
            "{} is a directory: an output names a file to write",
            out.display()
        );
    }
    if t.is_socket() {
        bail!(
            "{} is a socket: outputs are files, FIFOs or devices",
            out.display()
        );
    }
    if !t.is_file() || is_own_stream(&m) {
        return Ok(Target::Direct(out.to_path_buf()));
    }
    Ok(Target::Replace(follow(out)?))
}

/// Write `out`: `write(path)` creates and fills `path`. A regular file (or a new one) is
/// written through `OUT.partial` next to it, renamed over it only once complete (through a
/// symlink: the file it names, the link kept). A FIFO, a device (`/dev/null`) or this
/// process's own stdout is written in place, never replaced by a regular file; `-` is
/// stdout. Refuses a directory, a socket, a recording, and any of the command's inputs
/// (checked before anything is written).
pub fn write_atomic(
    out: &Path,
    write: impl FnOnce(&Path) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    if out == Path::new("-") {
        return write_stdout(write);
    }
    match target(out)? {
        Target::Direct(p) => {
            // This process's own stdout or stderr (`/dev/stdout`, `/proc/self/fd/1`): a reader
            // that went away ends the process quietly, as on `-` (crate::out's rule).
            let own = is_own_output(&p);
            write(&p).map_err(|e| {
                if own && out::is_broken_pipe(&e) {
                    out::reader_gone();
                }
                e.context(format!("writing {}", p.display()))
            })
        }
        Target::Replace(p) => {
            refuse_replacing_a_recording(&p, out)?;
            let tmp = Temporary::new(partial_path(&p));
            // Named as the user named it: the temporary is ours.
            write(&tmp.0).with_context(|| format!("writing {}", out.display()))?;
            std::fs::rename(&tmp.0, &p)
                .with_context(|| format!("renaming {} to {}", tmp.0.display(), p.display()))?;
            tmp.forget();
            Ok(())
        }
    }
}

/// Binary bytes (a recording, a protobuf trace) never go to a terminal (`-` with stdout
/// one): they would garble it, and nothing could read them back.
pub fn refuse_binary_onto_a_terminal(what: &str) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        bail!("-: stdout is a terminal, and {what} is binary: redirect it (`> FILE`, `| ...`) or name a file");
    }
    Ok(())
}

/// A recording is the one output that cannot be made again: no export, model or cache
/// replaces one (`export a.baro --csv b.baro` destroyed b.baro). `record --force` replaces
/// a recording on purpose, through [`create_recording`].
fn refuse_replacing_a_recording(p: &Path, out: &Path) -> anyhow::Result<()> {
    use std::io::Read;
    let mut head = [0u8; 8];
    let is_recording = std::fs::File::open(p)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head == baro_telemetry::recording::MAGIC;
    if is_recording {
        bail!(
            "{} is a baro-top recording: refusing to replace it with this output (remove it first, or name another file)",
            out.display()
        );
    }
    Ok(())
}

/// `-`: the bytes go to a temporary file first (the writers need a path), then to stdout.
fn write_stdout(write: impl FnOnce(&Path) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let tmp = Temporary::new(
        std::env::temp_dir().join(format!("baro-top-stdout-{}.partial", std::process::id())),
    );
    write(&tmp.0).context("writing to stdout")?;
    let mut f = std::fs::File::open(&tmp.0).context("reading back what goes to stdout")?;
    let mut o = out::Stdout::lock();
    std::io::copy(&mut f, &mut o).context("writing to stdout")?;
    std::io::Write::flush(&mut o).context("writing to stdout")?;
    Ok(())
}

/// What [`write_atomic`] would refuse (an input, a directory, a socket), checked before the
/// work that makes the bytes.
pub fn check_output(out: &Path) -> anyhow::Result<()> {
    if out == Path::new("-") {
        return Ok(());
    }
    target(out).map(|_| ())
}

/// A private temporary file for a library that writes to a path it is given (the driver's
/// pipeline cache): the library writes here, never to the user's path, and [`Self::publish`]
/// then moves the bytes to the output through [`write_atomic`]. Removed on every exit path.
pub struct Scratch(Temporary);

impl Scratch {
    /// A new scratch path in the temporary directory (`what` names it: `pipeline-cache`).
    pub fn new(what: &str) -> Self {
        Scratch(Temporary::new(std::env::temp_dir().join(format!(
            "baro-top-{what}-{}.partial",
            std::process::id()
        ))))
    }

    /// Where the library writes.
    pub fn path(&self) -> &Path {
        &self.0 .0
    }

    /// Whether the library wrote anything yet.
    pub fn written(&self) -> bool {
        self.path().is_file()
    }

    /// Copy what was written to `out` (as [`write_atomic`]); the scratch file is removed.
    pub fn publish(self, out: &Path) -> anyhow::Result<()> {
        write_atomic(out, |tmp| {
            std::fs::copy(self.path(), tmp)
                .map(|_| ())
                .map_err(anyhow::Error::from)
        })
    }
}

/// What [`create_recording`] would refuse, checked without creating anything (a command
/// checks its output before the work that precedes creating it).
pub fn check_recording(out: &Path, force: bool) -> anyhow::Result<()> {
    if out == Path::new("-") {
        return refuse_binary_onto_a_terminal("a recording");
    }
    if let Target::Replace(p) = target(out)? {
        if !force && std::fs::symlink_metadata(&p).is_ok() && !is_empty_file(&p) {
            bail!(
                "{} exists: refusing to overwrite a file (--force overwrites it)",
                out.display()
            );
        }
    }
    Ok(())
}

/// Open `out` for a recording streamed as it is made (`record -o`): a new file, or with
/// `force` an existing regular one, left as it is (the second value is true: the caller
/// truncates it with [`truncate_recording`] once the new run has started, so that a run that
/// cannot start leaves the old recording whole); a FIFO or a device as it is; `-` stdout. A
/// regular file is locked exclusively (`flock`) for the life of the returned file, so a
/// second recorder to the same file is refused, never interleaved. Refuses a directory, a
/// socket and any of the command's inputs.
pub fn create_recording(out: &Path, force: bool) -> anyhow::Result<(std::fs::File, bool)> {
    use std::os::fd::AsRawFd;
    if out == Path::new("-") {
        refuse_binary_onto_a_terminal("a recording")?;
        // SAFETY: dup returns a new descriptor that the File then owns.
        let fd = unsafe { libc::dup(1) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error()).context("duplicating stdout");
        }
        // SAFETY: fd is a fresh descriptor owned by nothing else.
        return Ok((
            unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) },
            false,
        ));
    }
    let p = match target(out)? {
        Target::Direct(p) => {
            return std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .map(|f| (f, false))
                .with_context(|| format!("opening {}", p.display()))
        }
        Target::Replace(p) => p,
    };
    let (f, existed) = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&p)
    {
        Ok(f) => (f, false),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            if !force && !is_empty_file(&p) {
                bail!(
                    "{} exists: refusing to overwrite a file (--force overwrites it)",
                    out.display()
                );
            }
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&p)
                .with_context(|| format!("opening {}", p.display()))?;
            (f, true)
        }
        Err(e) => return Err(e).with_context(|| format!("creating {}", p.display())),
    };
    // SAFETY: flock on a descriptor `f` owns; the lock goes with the descriptor.
    if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.kind() == std::io::ErrorKind::WouldBlock {
            bail!(
                "{}: another process is recording to this file (it holds its lock)",
                out.display()
            );
        }
        return Err(e).with_context(|| format!("locking {}", out.display()));
    }
    Ok((f, existed))
}

/// An empty regular file holds nothing to lose: a recorder killed while its device started
/// (`kill -9`) leaves one, and the next `record` to that path takes it without `--force`.
fn is_empty_file(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == 0)
}

/// Empty an existing recording [`create_recording`] opened (its bytes are replaced by the
/// new run's from here on).
pub fn truncate_recording(f: &std::fs::File, out: &Path) -> anyhow::Result<()> {
    f.set_len(0)
        .with_context(|| format!("truncating {}", out.display()))
}

/// [`write_atomic`] of bytes.
pub fn write_bytes_atomic(out: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    write_atomic(out, |tmp| {
        std::fs::write(tmp, bytes).map_err(anyhow::Error::from)
    })
}
