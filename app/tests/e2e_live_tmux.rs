//! End to end in a real terminal: `baro-top live` (stories260K on lavapipe) in a detached tmux
//! pane, driven with keys: the decoded story and the panels appear, `?` opens and closes the
//! help, space pauses and resumes (the header says PAUSED, the log the engine's reply), `m`
//! switches the dispatch to multi (the log says so), `q` quits with status 0 and leaves the
//! alternate screen.
//!
//! In CI (`CI` set) a missing tmux or Vulkan device fails, never skips; outside CI,
//! `BARO_SKIP_VULKAN` skips with a printed reason (and so does a missing tmux). Waits are
//! bounded but generous and poll the pane: a loaded 2-core machine decodes ~5 passes/s.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// Why this test cannot run here, or panics where it must run (CI).
fn skip_reason() -> Option<String> {
    let tmux = Command::new("tmux").arg("-V").output();
    if !tmux.as_ref().is_ok_and(|o| o.status.success()) {
        if in_ci() {
            panic!("tmux is required in CI (apt-get install tmux)");
        }
        return Some("tmux is not installed".into());
    }
    let dev = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .arg("devices")
        .env("LP_NUM_THREADS", "2")
        .output()
        .unwrap();
    if !dev.status.success() {
        if in_ci() || std::env::var_os("BARO_SKIP_VULKAN").is_none() {
            panic!("no usable Vulkan device (install lavapipe: apt-get install mesa-vulkan-drivers libvulkan1; outside CI, BARO_SKIP_VULKAN=1 skips)");
        }
        return Some("BARO_SKIP_VULKAN set and no Vulkan device".into());
    }
    None
}

/// A tmux server of its own (`-L`), killed on every way out.
struct Tmux {
    socket: String,
    dir: PathBuf,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> Output {
        // `-f /dev/null`: the server this starts ignores the user's ~/.tmux.conf (key
        // bindings, status lines or hooks there would change what the pane shows).
        Command::new("tmux")
            .args(["-f", "/dev/null"])
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    fn capture(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "e2e"]).stdout).into_owned()
    }

    fn keys(&self, k: &str) {
        let o = self.cmd(&["send-keys", "-t", "e2e", k]);
        assert!(o.status.success(), "send-keys {k}: {o:?}");
    }

    /// Poll the pane until `pred` holds; panics with the pane after `secs`.
    fn wait_for(&self, what: &str, secs: u64, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let pane = self.capture();
            if pred(&pane) {
                return pane;
            }
            if Instant::now() > deadline {
                panic!(
                    "waited {secs} s for {what}; pane:\n{pane}\nstderr:\n{}",
                    std::fs::read_to_string(self.dir.join("stderr")).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    fn status(&self) -> Option<String> {
        std::fs::read_to_string(self.dir.join("status"))
            .ok()
            .filter(|s| s.ends_with('\n'))
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn wrapper(dir: &Path) -> PathBuf {
    let script = dir.join("run.sh");
    let bin = env!("CARGO_BIN_EXE_baro-top");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nLP_NUM_THREADS=2 '{bin}' live 2>'{d}/stderr'\necho $? >'{d}/status.tmp' && mv '{d}/status.tmp' '{d}/status'\n# keep the pane open so its screen can be read after the exit\nexec sleep 600\n",
            d = dir.display()
        ),
    )
    .unwrap();
    script
}

#[test]
fn live_dashboard_shows_the_story_obeys_help_pause_mode_and_quits_cleanly() {
    if let Some(why) = skip_reason() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    let dir = std::env::temp_dir().join(format!("baro-e2e-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let t = Tmux {
        socket: format!("baro-e2e-{}", std::process::id()),
        dir: dir.clone(),
    };
    let script = wrapper(&dir);
    let o = t.cmd(&[
        "new-session",
        "-d",
        "-s",
        "e2e",
        "-x",
        "200",
        "-y",
        "60",
        &format!("sh '{}'", script.display()),
    ]);
    assert!(o.status.success(), "tmux new-session: {o:?}");

    // The decoded story (the golden greedy story starts with it) and the panels.
    t.wait_for("the decoded story and the panel titles", 120, |p| {
        p.contains("Once upon a time")
            && ["tokens", "log", "flame", "stages"]
                .iter()
                .all(|title| p.contains(&format!("┌ {title}")))
    });
    let on = t.cmd(&["display", "-p", "-t", "e2e", "#{alternate_on}"]);
    assert_eq!(String::from_utf8_lossy(&on.stdout).trim(), "1");

    t.keys("?");
    t.wait_for("the help overlay", 30, |p| p.contains("┌ help"));
    t.keys("?");
    t.wait_for("the help closed", 30, |p| !p.contains("┌ help"));

    t.keys("Space");
    t.wait_for(
        "PAUSED in the header and the engine's reply in the log",
        60,
        |p| p.lines().next().is_some_and(|h| h.contains("PAUSED")) && p.contains("paused after"),
    );
    t.keys("Space");
    t.wait_for("resumed in the log", 60, |p| {
        p.contains("resumed") && !p.lines().next().is_some_and(|h| h.contains("PAUSED"))
    });

    t.keys("m");
    t.wait_for("the dispatch switch in the log", 120, |p| {
        p.contains("dispatch switched to multi")
    });

    t.keys("q");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = t.status() {
            break s;
        }
        assert!(
            Instant::now() < deadline,
            "no exit within 60 s of q; pane:\n{}",
            t.capture()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        status.trim(),
        "0",
        "stderr:\n{}",
        std::fs::read_to_string(dir.join("stderr")).unwrap_or_default()
    );
    // The status file is written after baro-top exited, but the tmux server reads the pane's
    // last output (leaving the alternate screen) on its own schedule: on a loaded machine it
    // can still be behind, so poll for the normal screen instead of reading it once.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let on = t.cmd(&["display", "-p", "-t", "e2e", "#{alternate_on}"]);
        let on = String::from_utf8_lossy(&on.stdout).trim().to_string();
        if on == "0" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "still on the alternate screen 30 s after the exit (alternate_on {on:?}); pane:\n{}",
            t.capture()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    t.wait_for("the dashboard gone from the screen", 30, |p| {
        !p.contains("┌ tokens") && !p.contains("┌ log")
    });
}
