//! The host lock: one `flock` per GPU, so two baro-top timing runs on one GPU know of each
//! other (`bench` and `record` wait for it, or with `--no-wait` warn and label every pass).
//!
//! # The file
//!
//! `<dir>/gpu-<device>.lock`, `<device>` the GPU's UUID (or name) with every character
//! outside `[A-Za-z0-9._-]` replaced by `_`. The default dir is `$BARO_TOP_LOCK_DIR`, else
//! `/tmp/baro-top` (created world-writable and sticky, the lock files `0666`): the point is
//! that runs of *different users* on one GPU see each other, which a per-user
//! `$XDG_RUNTIME_DIR` would hide. The holder writes who it is into the file, one `key=value`
//! a line:
//!
//! ```text
//! pid=4242
//! command=baro-top bench -m llama-1b.gguf
//! since_unix_ms=1764500000000
//! ```
//!
//! The lock is an exclusive `flock` on the open file: released when the [`HostLock`] is
//! dropped, and by the kernel when the process dies, however it dies. The file is never
//! deleted (deleting a lock file races with a process that has opened but not locked it).
//! Reading who holds it ([`holder`]) takes a shared lock for an instant: a `try_lock` at that
//! very instant fails once with an unknown holder, which `lock_wait` simply retries.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use baro_telemetry::LockHolder;

/// Why a lock was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error("the GPU lock {} is held by {}", path.display(), holder.as_ref().map_or("an unknown process".to_string(), |h| h.to_string()))]
    Held {
        /// The lock file.
        path: PathBuf,
        /// Who holds it, where the file says.
        holder: Option<LockHolder>,
    },
    /// The lock file could not be opened or locked.
    #[error("GPU lock {}: {cause}", path.display())]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        cause: io::Error,
    },
}

/// A held host lock (released on drop).
#[derive(Debug)]
pub struct HostLock {
    file: File,
    path: PathBuf,
    holder: LockHolder,
}

/// The default lock directory: `$BARO_TOP_LOCK_DIR`, else `/tmp/baro-top`.
pub fn default_dir() -> PathBuf {
    std::env::var_os("BARO_TOP_LOCK_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/baro-top"))
}

/// The lock file of a device (by UUID, or name where there is none) in `dir`.
pub fn lock_path(dir: &Path, device: &str) -> PathBuf {
    let name: String = device
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    dir.join(format!("gpu-{name}.lock"))
}

fn open(path: &Path) -> io::Result<(File, bool)> {
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir)?;
            // Sticky and world-writable, like /tmp: every user's runs meet here.
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o1777));
        }
    }
    match OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o666)
        .open(path)
    {
        Ok(f) => {
            let _ = f.set_permissions(std::fs::Permissions::from_mode(0o666));
            Ok((f, true))
        }
        // Another user's file we may not write: flock works on a read-only fd too; only the
        // holder line cannot be written.
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            Ok((OpenOptions::new().read(true).open(path)?, false))
        }
        Err(e) => Err(e),
    }
}

/// `flock(op | LOCK_NB)`: Ok(true) taken, Ok(false) held elsewhere.
fn flock_nb(f: &File, op: libc::c_int) -> io::Result<bool> {
    loop {
        // SAFETY: flock on a file descriptor we own; no memory is passed.
        let r = unsafe { libc::flock(f.as_raw_fd(), op | libc::LOCK_NB) };
        if r == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(e),
        }
    }
}

fn read_holder(f: &mut File) -> Option<LockHolder> {
    let mut s = String::new();
    f.seek(SeekFrom::Start(0)).ok()?;
    f.read_to_string(&mut s).ok()?;
    parse_holder(&s)
}

/// Parse the holder lines (`None` if there is no pid).
pub fn parse_holder(text: &str) -> Option<LockHolder> {
    let mut h = LockHolder::default();
    let mut pid = None;
    for line in text.lines() {
        match line.split_once('=') {
            Some(("pid", v)) => pid = v.trim().parse().ok(),
            Some(("command", v)) => h.command = v.to_string(),
            Some(("since_unix_ms", v)) => h.since_unix_ms = v.trim().parse().unwrap_or(0),
            _ => {}
        }
    }
    h.pid = pid?;
    Some(h)
}

/// Who holds the lock at `path` now (`None`: nobody, or no such file).
pub fn holder(path: &Path) -> io::Result<Option<LockHolder>> {
    let mut f = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    if flock_nb(&f, libc::LOCK_SH)? {
        // Free (our shared lock drops with the file).
        return Ok(None);
    }
    Ok(Some(read_holder(&mut f).unwrap_or_default()))
}

/// This process as a holder: its pid, command line (at most 200 characters) and now.
pub fn this_process() -> LockHolder {
    let mut command = std::env::args().collect::<Vec<_>>().join(" ");
    if command.len() > 200 {
        let mut end = 200;
        while !command.is_char_boundary(end) {
            end -= 1;
        }
        command.truncate(end);
    }
    LockHolder {
        pid: std::process::id(),
        command,
        since_unix_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    }
}

impl HostLock {
    /// Take the lock at `path` now, or say who holds it.
    pub fn try_lock(path: &Path, me: LockHolder) -> Result<HostLock, LockError> {
        let io_err = |cause| LockError::Io {
            path: path.to_path_buf(),
            cause,
        };
        let (mut file, writable) = open(path).map_err(io_err)?;
        if !flock_nb(&file, libc::LOCK_EX).map_err(io_err)? {
            return Err(LockError::Held {
                path: path.to_path_buf(),
                holder: read_holder(&mut file),
            });
        }
        if writable {
            let text = format!(
                "pid={}\ncommand={}\nsince_unix_ms={}\n",
                me.pid,
                me.command.replace('\n', " "),
                me.since_unix_ms
            );
            file.set_len(0)
                .and_then(|_| file.seek(SeekFrom::Start(0)))
                .and_then(|_| file.write_all(text.as_bytes()))
                .map_err(io_err)?;
        }
        Ok(HostLock {
            file,
            path: path.to_path_buf(),
            holder: me,
        })
    }

    /// Take the lock, waiting for it (polling every `poll`) until `timeout` (`None`: for
    /// ever). `on_wait` is called with the holder whenever it changes (first when the wait
    /// starts), so the caller can say who it is waiting for.
    pub fn lock_wait(
        path: &Path,
        me: LockHolder,
        timeout: Option<Duration>,
        poll: Duration,
        mut on_wait: impl FnMut(Option<&LockHolder>),
    ) -> Result<HostLock, LockError> {
        let start = Instant::now();
        let mut last: Option<Option<LockHolder>> = None;
        loop {
            match Self::try_lock(path, me.clone()) {
                Ok(l) => return Ok(l),
                Err(LockError::Held { path, holder }) => {
                    if last.as_ref() != Some(&holder) {
                        on_wait(holder.as_ref());
                        last = Some(holder.clone());
                    }
                    if timeout.is_some_and(|t| start.elapsed() + poll > t) {
                        return Err(LockError::Held { path, holder });
                    }
                    std::thread::sleep(poll);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Who holds it: this process.
    pub fn holder(&self) -> &LockHolder {
        &self.holder
    }
}

impl Drop for HostLock {
    fn drop(&mut self) {
        // Closing the fd releases the lock as well; unlocking first makes the release not
        // wait for any other fd this process may have duplicated from it.
        // SAFETY: flock on the fd we own.
        unsafe { libc::flock(self.file.as_raw_fd(), libc::LOCK_UN) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufRead;
    use std::process::{Command, Stdio};

    fn me(pid: u32, command: &str) -> LockHolder {
        LockHolder {
            pid,
            command: command.into(),
            since_unix_ms: 1_764_500_000_000,
        }
    }

    #[test]
    fn lock_path_is_per_device_and_safe_as_a_file_name() {
        let p = lock_path(Path::new("/tmp/baro-top"), "GPU-1234/abcd NVIDIA H200");
        assert_eq!(
            p,
            PathBuf::from("/tmp/baro-top/gpu-GPU-1234_abcd_NVIDIA_H200.lock")
        );
    }

    #[test]
    fn second_lock_in_one_process_fails_and_names_the_holder_until_the_first_drops() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(&dir.path().join("locks"), "GPU-x");
        let first = HostLock::try_lock(&path, me(11, "baro-top bench -m a.gguf")).unwrap();
        assert_eq!(
            holder(&path).unwrap(),
            Some(me(11, "baro-top bench -m a.gguf"))
        );
        match HostLock::try_lock(&path, me(12, "baro-top record")) {
            Err(LockError::Held { holder, .. }) => {
                assert_eq!(holder, Some(me(11, "baro-top bench -m a.gguf")))
            }
            other => panic!("second lock taken: {other:?}"),
        }
        let err = HostLock::try_lock(&path, me(12, "x")).unwrap_err();
        assert!(
            err.to_string()
                .ends_with("is held by pid 11 (baro-top bench -m a.gguf)"),
            "{err}"
        );
        drop(first);
        assert_eq!(holder(&path).unwrap(), None);
        let second = HostLock::try_lock(&path, me(12, "baro-top record")).unwrap();
        assert_eq!(second.holder().pid, 12);
    }

    #[test]
    fn lock_wait_reports_the_holder_then_takes_the_lock_when_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(dir.path(), "gpu0");
        let first = HostLock::try_lock(&path, me(21, "baro-top bench")).unwrap();
        // The holder lets go once the waiter has reported it (a fixed delay instead would
        // race a waiter that is scheduled late: it would find the lock already free). If
        // no report comes, it lets go after 5 s anyway and `seen` below says so.
        let (reported, told) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _ = told.recv_timeout(Duration::from_secs(5));
            drop(first);
        });
        let mut seen = Vec::new();
        let l = HostLock::lock_wait(
            &path,
            me(22, "baro-top record"),
            Some(Duration::from_secs(10)),
            Duration::from_millis(10),
            |h| {
                seen.push(h.map(|h| h.pid));
                let _ = reported.send(());
            },
        )
        .unwrap();
        t.join().unwrap();
        assert_eq!(seen, [Some(21)]);
        assert_eq!(holder(&path).unwrap().map(|h| h.pid), Some(22));
        drop(l);
        let _held = HostLock::try_lock(&path, me(23, "a")).unwrap();
        let r = HostLock::lock_wait(
            &path,
            me(24, "b"),
            Some(Duration::from_millis(50)),
            Duration::from_millis(10),
            |_| {},
        );
        assert!(matches!(r, Err(LockError::Held { holder: Some(ref h), .. }) if h.pid == 23));
    }

    /// Run only as the child of the test below: takes the lock, says so, sleeps.
    #[test]
    #[ignore = "helper process for lock_held_by_a_child_names_it_and_is_released_when_it_dies"]
    fn helper_child_holds_the_lock() {
        let Some(path) = std::env::var_os("BARO_TOP_TEST_LOCK") else {
            return;
        };
        let _l = HostLock::try_lock(Path::new(&path), this_process()).unwrap();
        println!("locked");
        std::thread::sleep(Duration::from_secs(30));
    }

    #[test]
    fn lock_held_by_a_child_names_it_and_is_released_when_it_dies() {
        let dir = tempfile::tempdir().unwrap();
        let path = lock_path(dir.path(), "gpu0");
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "sensors::host_lock::tests::helper_child_holds_the_lock",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("BARO_TOP_TEST_LOCK", &path)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let locked = io::BufReader::new(out)
            .lines()
            .map_while(Result::ok)
            .any(|l| l.contains("locked"));
        assert!(locked, "the child never took the lock");
        let r = HostLock::try_lock(&path, me(1, "x"));
        let holder = match r {
            Err(LockError::Held { holder, .. }) => holder.unwrap(),
            other => {
                let _ = child.kill();
                panic!("lock taken while the child holds it: {other:?}")
            }
        };
        assert_eq!(holder.pid, child.id());
        assert!(holder.command.contains("helper_child_holds_the_lock"));
        child.kill().unwrap();
        child.wait().unwrap();
        // The kernel released it with the process.
        assert!(HostLock::try_lock(&path, me(1, "x")).is_ok());
    }
}
