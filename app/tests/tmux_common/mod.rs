//! Shared by the tmux tests: baro-top in a detached tmux pane of a chosen size on a server of
//! its own (own socket, no ~/.tmux.conf), read with `capture-pane`, driven with `send-keys`,
//! its exit status kept after it exits (the pane stays open so its last screen can be read).
//! In CI (CI=true) a missing tmux fails; outside CI it skips with a printed reason.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_baro-top");

/// Whether tmux runs here (panics in CI where it does not).
pub fn have_tmux() -> bool {
    let ok = Command::new("tmux")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("tmux is missing in CI (scripts/test.sh installs it)");
    }
    if !ok {
        eprintln!("tmux not installed: skipping (outside CI)");
    }
    ok
}

/// A scratch path of this test process.
pub fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("baro-e2e-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("tmp dir");
    d.join(name)
}

/// A tmux session of its own (own socket), killed on drop.
pub struct Session {
    sock: String,
    exit: PathBuf,
}

impl Session {
    /// `cmd` (a shell command line) with `env` in a `w`×`h` pane.
    pub fn sized(name: &str, cmd: &str, env: &[(&str, &str)], (w, h): (u16, u16)) -> Session {
        let sock = format!("baro-e2e-{}-{name}", std::process::id());
        let exit = tmp(&format!("{name}.exit"));
        let _ = std::fs::remove_file(&exit);
        let envs: String = env.iter().map(|(k, v)| format!("{k}={v} ")).collect();
        let shell = format!(
            "env TERM=xterm-256color {envs}{cmd}; echo $? > {}; exec sleep 600",
            exit.display()
        );
        // `-f /dev/null`: the server ignores the user's ~/.tmux.conf (a base-index of 1
        // there would leave no window 0 for the `-t 0` targets below).
        let st = Command::new("tmux")
            .args(["-f", "/dev/null", "-L", &sock, "new-session", "-d"])
            .args(["-x", &w.to_string(), "-y", &h.to_string()])
            .args(["sh", "-c", &shell])
            .status()
            .expect("tmux new-session");
        assert!(st.success());
        Session { sock, exit }
    }

    /// `cmd` in a 200×60 pane.
    pub fn start(name: &str, cmd: &str, env: &[(&str, &str)]) -> Session {
        Session::sized(name, cmd, env, (200, 60))
    }

    /// A tmux command against this session's server.
    pub fn t(&self, args: &[&str]) -> String {
        let o = Command::new("tmux")
            .args(["-L", &self.sock])
            .args(args)
            .output()
            .expect("tmux runs");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// The pane's text.
    pub fn capture(&self) -> String {
        self.t(&["capture-pane", "-p", "-t", "0"])
    }

    /// The pane's text with wrapped lines joined (a long line reads whole).
    pub fn capture_joined(&self) -> String {
        self.t(&["capture-pane", "-p", "-J", "-t", "0"])
    }

    /// Send one key (tmux's name for it).
    pub fn key(&self, k: &str) {
        self.t(&["send-keys", "-t", "0", k]);
    }

    /// Wait (bounded) until `pred` holds for the pane; returns the pane.
    pub fn wait_until(&self, what: &str, t: Duration, pred: impl Fn(&str) -> bool) -> String {
        let until = Instant::now() + t;
        loop {
            let s = self.capture();
            if pred(&s) {
                return s;
            }
            assert!(
                Instant::now() < until,
                "waited {t:?} for {what}; pane:\n{s}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Wait (bounded) until the pane shows every one of `want`.
    pub fn wait_for(&self, want: &[&str], t: Duration) -> String {
        self.wait_until(&format!("{want:?}"), t, |s| {
            want.iter().all(|w| s.contains(w))
        })
    }

    /// Wait (bounded) until the pane shows none of `gone`.
    pub fn wait_gone(&self, gone: &[&str], t: Duration) -> String {
        self.wait_until(&format!("{gone:?} to go"), t, |s| {
            !gone.iter().any(|g| s.contains(g))
        })
    }

    /// Wait (bounded) until `#{alternate_on}` of the pane is `want`. The exit status file is
    /// written by the shell after baro-top has exited, but the tmux server reads the pane's
    /// output (the switch back from the alternate screen) on its own schedule: on a loaded
    /// machine it can still be behind when the status is read, so poll rather than read once.
    pub fn wait_alternate(&self, want: &str, t: Duration) {
        let until = Instant::now() + t;
        loop {
            let on = self.t(&["display", "-p", "-t", "0", "#{alternate_on}"]);
            if on.trim() == want {
                return;
            }
            assert!(
                Instant::now() < until,
                "waited {t:?} for alternate_on {want}, still {:?}; pane:\n{}",
                on.trim(),
                self.capture()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// baro-top's exit status, once it has exited (bounded wait).
    pub fn exit_status(&self, t: Duration) -> String {
        let until = Instant::now() + t;
        loop {
            if let Ok(s) = std::fs::read_to_string(&self.exit) {
                if !s.trim().is_empty() {
                    return s.trim().to_string();
                }
            }
            assert!(
                Instant::now() < until,
                "baro-top did not exit; pane:\n{}",
                self.capture()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.sock, "kill-server"])
            .status();
    }
}
