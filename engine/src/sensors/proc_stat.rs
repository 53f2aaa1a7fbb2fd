//! CPU busy from `/proc/stat`, with this process's own share (`/proc/self/stat`) taken out:
//! the decode's own host threads are not contention.
//!
//! Both files count in clock ticks (`USER_HZ`), so the fraction needs no tick rate:
//!
//! ```text
//! /proc/stat       cpu  user nice system idle iowait irq softirq steal guest guest_nice
//! /proc/PID/stat   pid (comm) state … utime(14) stime(15) …
//! busy  = user + nice + system + irq + softirq + steal     (guest is already inside user)
//! total = busy + idle + iowait
//! other = (Δbusy − Δ(utime + stime)) / Δtotal, clamped to 0–1
//! ```
//!
//! Reads only; a missing or malformed file is an `io::Error` for the caller to turn into
//! "source off", never a panic.

use std::io;
use std::path::PathBuf;

/// Counters of one reading, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// Busy ticks over every core.
    pub busy: u64,
    /// Busy + idle ticks over every core.
    pub total: u64,
    /// This process's user + system ticks.
    pub own: u64,
}

/// CPU busy over an interval: every process, and every process but ours.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuBusy {
    /// Busy fraction of every core, all processes (0–1).
    pub total: f32,
    /// Busy fraction of every core, this process excluded (0–1).
    pub others: f32,
    /// This process's busy fraction of every core (0–1).
    pub own: f32,
}

/// Reads `/proc/stat` and a process's `stat` under a root (`/proc` in real use, a fake tree
/// in tests) and turns successive readings into [`CpuBusy`].
#[derive(Clone, Debug)]
pub struct CpuSampler {
    proc_root: PathBuf,
    pid: String,
    last: Option<CpuTicks>,
}

impl CpuSampler {
    /// A sampler of `/proc`, excluding this process.
    pub fn new() -> Self {
        Self::rooted("/proc", "self")
    }

    /// A sampler of the tree at `proc_root`, excluding process `pid` (`"self"` or a number).
    pub fn rooted(proc_root: impl Into<PathBuf>, pid: impl Into<String>) -> Self {
        CpuSampler {
            proc_root: proc_root.into(),
            pid: pid.into(),
            last: None,
        }
    }

    /// Read the counters now.
    pub fn ticks(&self) -> io::Result<CpuTicks> {
        let stat = std::fs::read_to_string(self.proc_root.join("stat"))?;
        let (busy, total) = parse_stat(&stat)?;
        let own_stat = std::fs::read_to_string(self.proc_root.join(&self.pid).join("stat"))?;
        let own = parse_pid_stat(&own_stat)?;
        Ok(CpuTicks { busy, total, own })
    }

    /// Read now; the busy fractions since the previous call (`None` on the first call, or
    /// when no tick passed).
    pub fn sample(&mut self) -> io::Result<Option<CpuBusy>> {
        let now = self.ticks()?;
        let prev = self.last.replace(now);
        Ok(prev.and_then(|p| busy_between(p, now)))
    }
}

impl Default for CpuSampler {
    fn default() -> Self {
        Self::new()
    }
}

/// The busy fractions between two readings (`None` when no tick passed).
pub fn busy_between(a: CpuTicks, b: CpuTicks) -> Option<CpuBusy> {
    let total = b.total.checked_sub(a.total).filter(|&t| t > 0)? as f64;
    let busy = b.busy.saturating_sub(a.busy) as f64;
    let own = b.own.saturating_sub(a.own) as f64;
    let clamp = |x: f64| x.clamp(0.0, 1.0) as f32;
    Some(CpuBusy {
        total: clamp(busy / total),
        others: clamp((busy - own) / total),
        own: clamp(own / total),
    })
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// (busy, total) ticks from `/proc/stat`'s aggregate `cpu` line.
pub fn parse_stat(text: &str) -> io::Result<(u64, u64)> {
    let line = text
        .lines()
        .find(|l| l.starts_with("cpu "))
        .ok_or_else(|| bad("/proc/stat: no aggregate cpu line"))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse::<u64>())
        .collect::<Result<_, _>>()
        .map_err(|_| bad("/proc/stat: a cpu field is not a number"))?;
    if v.len() < 4 {
        return Err(bad("/proc/stat: fewer than 4 cpu fields"));
    }
    let f = |i: usize| v.get(i).copied().unwrap_or(0);
    let busy = f(0) + f(1) + f(2) + f(5) + f(6) + f(7);
    let idle = f(3) + f(4);
    Ok((busy, busy + idle))
}

/// utime + stime ticks from a `/proc/PID/stat` line (the name may hold spaces and
/// parentheses: fields are counted from the last `)`).
pub fn parse_pid_stat(text: &str) -> io::Result<u64> {
    let rest = text
        .rfind(')')
        .map(|i| &text[i + 1..])
        .ok_or_else(|| bad("/proc/PID/stat: no ')' after the name"))?;
    // After ")": state(3) ppid(4) … utime(14) stime(15): indices 11 and 12 here.
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| -> io::Result<u64> {
        f.get(i)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| bad("/proc/PID/stat: utime/stime missing"))
    };
    Ok(num(11)? + num(12)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 5 50 800 20 3 2 1 7 0\ncpu0 50 2 25 400 10 1 1 0 0 0\nintr 1\n";

    #[test]
    fn stat_busy_excludes_idle_iowait_and_guest() {
        assert_eq!(parse_stat(STAT).unwrap(), (161, 981));
        assert!(parse_stat("intr 1\n").is_err());
        assert!(parse_stat("cpu  1 x 3 4\n").is_err());
    }

    #[test]
    fn pid_stat_reads_utime_and_stime_past_a_name_with_spaces_and_parens() {
        let line = "4242 (my (odd) name) S 1 2 3 4 5 6 7 8 9 10 31 9 0 0 20 0 4 0 1 2 3";
        assert_eq!(parse_pid_stat(line).unwrap(), 40);
        assert!(parse_pid_stat("4242 (x) S 1 2").is_err());
    }

    #[test]
    fn others_are_busy_minus_our_own_ticks() {
        let a = CpuTicks {
            busy: 1000,
            total: 4000,
            own: 100,
        };
        let b = CpuTicks {
            busy: 1800,
            total: 5000,
            own: 400,
        };
        let c = busy_between(a, b).unwrap();
        assert!((c.total - 0.8).abs() < 1e-6, "{c:?}");
        assert!((c.others - 0.5).abs() < 1e-6, "{c:?}");
        assert!((c.own - 0.3).abs() < 1e-6, "{c:?}");
        assert_eq!(busy_between(a, a), None);
    }

    #[test]
    fn sampler_reads_a_fake_proc_tree_and_reports_from_the_second_sample() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("77")).unwrap();
        let write = |busy: u64, idle: u64, own: u64| {
            std::fs::write(
                root.join("stat"),
                format!("cpu  {busy} 0 0 {idle} 0 0 0 0 0 0\n"),
            )
            .unwrap();
            std::fs::write(
                root.join("77/stat"),
                format!("77 (baro-top) R 1 1 1 0 -1 0 0 0 0 0 {own} 0 0 0 20 0 1 0 5 6 7"),
            )
            .unwrap();
        };
        let mut s = CpuSampler::rooted(root, "77");
        write(100, 900, 10);
        assert_eq!(s.sample().unwrap(), None);
        write(300, 1700, 60);
        let c = s.sample().unwrap().unwrap();
        // Δbusy 200 of Δtotal 1000, 50 of them ours.
        assert!(
            (c.total - 0.2).abs() < 1e-6 && (c.others - 0.15).abs() < 1e-6,
            "{c:?}"
        );
        assert!(CpuSampler::rooted(root, "78").sample().is_err());
    }
}
