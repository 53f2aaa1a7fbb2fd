//! Opening the files a user names: the one way every input file is opened.
//!
//! An input is opened non-blocking (a FIFO with no writer cannot hang the open), must be a
//! regular file (FIFOs, devices such as `/dev/zero`, sockets and directories are refused by
//! name) and no larger than the caller's stated cap, checked before anything is read; reads
//! stop at the cap whatever the file grows to meanwhile. `-` means standard input where the
//! caller allows it (read up to the same cap).
//!
//! Every input opened here is remembered by device and inode for the life of the process, so
//! an output writer can refuse to replace a file the command is reading ([`is_input`]),
//! whatever name — symlink or hard link — reaches it.

use std::fs::{File, Metadata, OpenOptions};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::Mutex;

/// (device, inode) of every input opened so far.
static INPUTS: Mutex<Vec<(u64, u64)>> = Mutex::new(Vec::new());

fn inputs() -> std::sync::MutexGuard<'static, Vec<(u64, u64)>> {
    INPUTS.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a file is, for messages: `a FIFO`, `a character device`, …
pub fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn refused(kind: io::ErrorKind, msg: String) -> io::Error {
    io::Error::new(kind, msg)
}

/// Remember `meta`'s file as one of this process's inputs.
pub fn register(meta: &Metadata) {
    let id = (meta.dev(), meta.ino());
    let mut v = inputs();
    if !v.contains(&id) {
        v.push(id);
    }
}

/// Whether `meta`'s file (by device and inode) is one this process opened as an input.
pub fn is_input(meta: &Metadata) -> bool {
    inputs().contains(&(meta.dev(), meta.ino()))
}

/// Open `path` (`what` names it in errors: `recording`, `--layout`) for reading: non-blocking,
/// a regular file of at most `cap` bytes, remembered as an input. Returns the file and its
/// length.
pub fn open(path: &Path, what: &str, cap: u64) -> io::Result<(File, u64)> {
    let f = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| refused(e.kind(), format!("{what} {}: {e}", path.display())))?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(refused(
            io::ErrorKind::InvalidInput,
            format!(
                "{what} {} is {}: only regular files are read",
                path.display(),
                kind_of(&meta)
            ),
        ));
    }
    if meta.len() > cap {
        return Err(refused(
            io::ErrorKind::InvalidData,
            format!(
                "{what} {} is {} bytes: more than the {cap} bytes a {what} may have",
                path.display(),
                meta.len()
            ),
        ));
    }
    clear_nonblocking(&f);
    register(&meta);
    Ok((f, meta.len()))
}

/// Reads on a regular file never block, but the flag is the file's, not the open's: clear
/// it so that a copy of the descriptor handed on behaves as a plain one.
fn clear_nonblocking(f: &File) {
    use std::os::fd::AsRawFd;
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor this function's caller owns; F_GETFL/F_SETFL touch only
    // the descriptor's status flags.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_NONBLOCK);
        }
    }
}

/// Read the whole of `path` (as [`open`]; `-` is standard input where `stdin_ok`), at most
/// `cap` bytes: a longer input is refused, never read to its end.
pub fn read(path: &Path, what: &str, cap: u64, stdin_ok: bool) -> io::Result<Vec<u8>> {
    if stdin_ok && path == Path::new("-") {
        return read_capped(io::stdin().lock(), "standard input", what, cap);
    }
    let (f, len) = open(path, what, cap)?;
    let mut v = Vec::with_capacity(len as usize);
    f.take(cap + 1).read_to_end(&mut v)?;
    if v.len() as u64 > cap {
        return Err(too_long(&path.display().to_string(), what, cap));
    }
    Ok(v)
}

fn too_long(name: &str, what: &str, cap: u64) -> io::Error {
    refused(
        io::ErrorKind::InvalidData,
        format!("{what} {name}: more than the {cap} bytes a {what} may have"),
    )
}

fn read_capped(r: impl Read, name: &str, what: &str, cap: u64) -> io::Result<Vec<u8>> {
    let mut v = vec![];
    r.take(cap + 1).read_to_end(&mut v)?;
    if v.len() as u64 > cap {
        return Err(too_long(name, what, cap));
    }
    Ok(v)
}

/// [`read`] as UTF-8 text.
pub fn read_text(path: &Path, what: &str, cap: u64, stdin_ok: bool) -> io::Result<String> {
    String::from_utf8(read(path, what, cap, stdin_ok)?).map_err(|e| {
        refused(
            io::ErrorKind::InvalidData,
            format!(
                "{what} {}: not UTF-8 text (byte {})",
                path.display(),
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn devices_directories_and_oversized_files_are_refused_by_kind_and_size() {
        let e = read(Path::new("/dev/zero"), "layout", 1 << 20, false).unwrap_err();
        assert!(e.to_string().contains("a character device"), "{e}");
        let e = read(Path::new("/"), "layout", 1 << 20, false).unwrap_err();
        assert!(e.to_string().contains("a directory"), "{e}");
        let d = std::env::temp_dir().join(format!("baro-input-{}", std::process::id()));
        std::fs::write(&d, vec![b'x'; 100]).unwrap();
        let e = read(&d, "layout", 99, false).unwrap_err();
        assert!(e.to_string().contains("more than the 99 bytes"), "{e}");
        assert_eq!(read(&d, "layout", 100, false).unwrap().len(), 100);
        assert!(is_input(&std::fs::metadata(&d).unwrap()));
        let _ = std::fs::remove_file(&d);
    }
}
