//! Tests of the sensor thread and the `/proc` client scan on fake trees, and the real
//! CPU-burner test (no GPU needed).

use std::os::unix::fs::symlink;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use baro_telemetry::labels::{ContentionLabeler, SensorState};
use baro_telemetry::{ContentionReason, Frame};

use super::*;

/// A fake `/proc` process: `fds` are (fd, link target, fdinfo text).
fn fake_pid(root: &Path, pid: u32, comm: &str, fds: &[(u32, &str, &str)]) {
    let dir = root.join(pid.to_string());
    std::fs::create_dir_all(dir.join("fd")).unwrap();
    std::fs::create_dir_all(dir.join("fdinfo")).unwrap();
    std::fs::write(dir.join("comm"), format!("{comm}\n")).unwrap();
    for (fd, target, info) in fds {
        symlink(target, dir.join("fd").join(fd.to_string())).unwrap();
        std::fs::write(dir.join("fdinfo").join(fd.to_string()), info).unwrap();
    }
}

fn drm(id: u32) -> String {
    format!("pos:\t0\ndrm-driver:\tamdgpu\ndrm-client-id:\t{id}\n")
}

fn fake_proc() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let (d5, d7, d9) = (drm(5), drm(7), drm(9));
    // Us (pid 100): a render node, client 5.
    fake_pid(r, 100, "baro-top", &[(3, "/dev/dri/renderD128", &d5)]);
    // A forked worker of ours sharing client 5: the same client, not another.
    fake_pid(r, 101, "baro-top", &[(4, "/dev/dri/renderD128", &d5)]);
    // python with two fds on client 7, and a worker sharing client 7.
    fake_pid(
        r,
        4242,
        "python",
        &[
            (5, "/dev/dri/renderD128", &d7),
            (6, "/dev/dri/renderD128", &d7),
        ],
    );
    fake_pid(r, 4243, "python", &[(5, "/dev/dri/renderD128", &d7)]);
    // A compositor on another render node with its own client.
    fake_pid(r, 77, "Xorg", &[(9, "/dev/dri/renderD129", &d9)]);
    // A CUDA process (no fdinfo client id on NVIDIA) and the persistence daemon.
    fake_pid(
        r,
        500,
        "llama-bench",
        &[(3, "/dev/nvidiactl", ""), (4, "/dev/nvidia0", "")],
    );
    fake_pid(r, 2, "nvidia-persistenced", &[(3, "/dev/nvidia0", "")]);
    // A process holding no GPU, and a ROCm one.
    fake_pid(
        r,
        600,
        "bash",
        &[(0, "/dev/pts/0", ""), (1, "/dev/null", "")],
    );
    fake_pid(r, 700, "rocm-smi", &[(3, "/dev/kfd", "")]);
    std::fs::write(r.join("stat"), "cpu  10 0 10 80 0 0 0 0 0 0\n").unwrap();
    std::fs::write(
        r.join("100/stat"),
        "100 (baro-top) R 1 1 1 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 5 6 7",
    )
    .unwrap();
    std::fs::write(r.join("version"), "not a pid\n").unwrap();
    dir
}

fn pids(scan: &ClientScan) -> Vec<(u32, &str)> {
    scan.clients
        .iter()
        .map(|c| (c.pid, c.name.as_str()))
        .collect()
}

#[test]
fn client_scan_dedups_drm_clients_and_leaves_out_us_and_persistenced() {
    let dir = fake_proc();
    let scan = GpuClientScanner::rooted(dir.path(), 100).scan().unwrap();
    assert_eq!(
        pids(&scan),
        [
            (77, "Xorg"),
            (500, "llama-bench"),
            (700, "rocm-smi"),
            (4242, "python")
        ]
    );
    assert!(scan.self_holds_gpu);
    assert_eq!(scan.unreadable, 0);
    let python = &scan.clients[3];
    assert_eq!(python.nodes, ["/dev/dri/renderD128"]);
    assert_eq!(python.drm_client_ids, [7]);
}

#[test]
fn client_scan_restricted_to_our_nodes_counts_only_their_holders() {
    let dir = fake_proc();
    let scan = GpuClientScanner::rooted(dir.path(), 100)
        .only_nodes(vec!["/dev/dri/renderD128".into()])
        .scan()
        .unwrap();
    assert_eq!(pids(&scan), [(4242, "python")]);
}

#[test]
fn runtime_status_gates_reads_active_or_absent_only() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("runtime_status");
    assert!(runtime_active(&p), "no runtime PM: cannot be asleep");
    for (s, ok) in [
        ("active\n", true),
        ("suspended\n", false),
        ("resuming", false),
    ] {
        std::fs::write(&p, s).unwrap();
        assert_eq!(runtime_active(&p), ok, "{s}");
    }
}

#[test]
fn sensors_on_a_fake_tree_report_clients_then_cpu_and_the_lock_holder_once() {
    let dir = fake_proc();
    let lock = dir.path().join("gpu.lock");
    let _held = HostLock::try_lock(
        &lock,
        LockHolder {
            pid: 31337,
            command: "baro-top bench".into(),
            since_unix_ms: 0,
        },
    )
    .unwrap();
    let (mut s, off) = Sensors::open(SensorConfig {
        proc_root: dir.path().into(),
        sys_root: dir.path().join("sys"),
        gpu: GpuSensor::Amd { index: 0 },
        lock_path: Some(lock),
        clients_every: 2,
        ..Default::default()
    });
    // Our pid is not in the fake tree: the whole scan still works, only our stat is missing.
    assert!(
        matches!(&off[..], [SensorReading::SourceOff { source, .. }] if source == "amd"),
        "{off:?}"
    );
    let first = s.sample();
    let clients = first
        .iter()
        .find_map(|r| match r {
            SensorReading::GpuClients { count, clients } => Some((*count, clients.len())),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        clients,
        (5, 5),
        "no pid of ours in the fake tree: 101 counts too"
    );
    assert!(first.iter().any(|r| matches!(r,
        SensorReading::HostLock { holder: Some(h), ours: false } if h.pid == 31337)));
    assert!(first.iter().any(|r| matches!(r,
        SensorReading::SourceOff { source, .. } if source == "proc")));
    let second = s.sample();
    assert!(
        !second.iter().any(|r| matches!(
            r,
            SensorReading::GpuClients { .. }
                | SensorReading::HostLock { .. }
                | SensorReading::SourceOff { .. }
        )),
        "clients every 2nd sample; lock and source-off only on change: {second:?}"
    );
}

#[test]
fn sensor_thread_samples_and_stops_within_one_interval() {
    // "Within one interval plus one sample's time": the interval is long enough that a
    // sample (a /proc scan) and the wake-up of the sensor and test threads on a loaded 2-core
    // machine fit in the allowance beside it; the allowance is shorter than the interval, so
    // a thread that waits out the current interval and then another one is still caught.
    const INTERVAL: Duration = Duration::from_secs(1);
    const SAMPLE: Duration = Duration::from_millis(750);
    let (tx, rx) = crossbeam_channel::unbounded();
    let t = SensorThread::spawn(INTERVAL, move |s| {
        let _ = tx.send(s);
    })
    .unwrap();
    // The second sample carries a CPU figure.
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got_cpu = false;
    while Instant::now() < deadline && !got_cpu {
        if let Ok(s) = rx.recv_timeout(Duration::from_millis(100)) {
            got_cpu |= matches!(s.reading, SensorReading::CpuBusy { fraction } if (0.0..=1.0).contains(&fraction));
        }
    }
    assert!(got_cpu, "no CPU sample within 30 s");
    let t0 = Instant::now();
    t.stop();
    assert!(
        t0.elapsed() < INTERVAL + SAMPLE,
        "stop took {:?}",
        t0.elapsed()
    );
}

/// Child processes spinning on a core each, killed (by their own pid) on drop.
struct Burners(Vec<Child>);

impl Burners {
    fn start(n: usize) -> Self {
        Burners(
            (0..n)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .spawn()
                        .unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// CPUs as `/proc/stat` counts them (its busy fractions are of these).
fn cores() -> usize {
    std::fs::read_to_string("/proc/stat")
        .map(|s| {
            s.lines()
                .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
                .count()
        })
        .unwrap_or(2)
        .clamp(1, 256)
}

/// The two burner tests must not overlap: our own burner threads would hide the burner
/// processes' load from "others", and the processes would starve our threads.
static BURNING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// This process's CPU time (user + system), from getrusage.
fn own_cpu() -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage fills the struct we pass.
    let ru = unsafe {
        libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr());
        ru.assume_init()
    };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn busy_over(s: &mut CpuSampler, d: Duration) -> proc_stat::CpuBusy {
    s.sample().unwrap();
    std::thread::sleep(d);
    s.sample().unwrap().unwrap()
}

#[test]
fn cpu_burner_processes_raise_others_busy_and_flip_the_label_to_contended() {
    let _one = BURNING.lock().unwrap_or_else(|e| e.into_inner());
    let mut s = CpuSampler::new();
    let before = busy_over(&mut s, Duration::from_millis(300));
    // Twice as many burners as cores, and two more: they share the cores with whatever this
    // process runs meanwhile (another test on the second test thread), and hold at least
    // 80 % of what it leaves them.
    let burners = Burners::start(2 * cores() + 2);
    std::thread::sleep(Duration::from_millis(100));
    let during = busy_over(&mut s, Duration::from_millis(600));
    drop(burners);
    let room = 1.0 - during.own;
    assert!(
        during.others >= 0.8 * room && during.others >= 0.5,
        "burners on every core, others busy only {:.2} of the {room:.2} this process left (before {:.2})",
        during.others,
        before.others
    );
    let mut st = SensorState::default();
    st.observe(&SensorSample {
        host_ns: 0,
        reading: SensorReading::CpuBusy {
            fraction: during.others,
        },
    });
    let c = ContentionLabeler::default().label(&Frame::default(), &st);
    assert!(!c.is_quiet());
    assert!(
        matches!(c.reasons[..], [ContentionReason::CpuBusy { fraction }] if fraction == during.others),
        "{c:?}"
    );
    assert!(c.summary().starts_with("CPU ") && c.summary().ends_with("% busy"));
}

#[test]
fn cpu_burner_threads_of_our_own_are_counted_as_ours_not_others() {
    let _one = BURNING.lock().unwrap_or_else(|e| e.into_inner());
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..cores())
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        })
        .collect();
    let mut s = CpuSampler::new();
    s.sample().unwrap();
    let (cpu0, t0) = (own_cpu(), Instant::now());
    std::thread::sleep(Duration::from_millis(800));
    let during = s.sample().unwrap().unwrap();
    let (cpu, wall) = (own_cpu() - cpu0, t0.elapsed());
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    // However the host's other load shares the cores, the sampler's own figure is what
    // getrusage says this process used, and it is not in `others`.
    let expected = cpu.as_secs_f64() / (wall.as_secs_f64() * cores() as f64);
    assert!(
        expected > 0.05,
        "the burner threads barely ran: {expected:.2}"
    );
    assert!(
        (f64::from(during.own) - expected).abs() < 0.1,
        "own {:.2}, getrusage says {expected:.2}",
        during.own
    );
    // Our ticks are never in `others`. The process's ticks and the machine's are read a
    // moment apart, so with every core ours `own` can pass `total` by a tick (CI 2026-12-04:
    // total 0.9937, own 1.0, others 0.0); `others` is then 0, not negative.
    assert!(
        during.others <= (during.total - during.own).max(0.0) + 1e-3,
        "{during:?}"
    );
}

#[test]
fn the_first_rounds_come_at_the_start_interval_then_at_the_interval() {
    // A GPU's clocks ramp in its first few hundred ms of work: the thread samples
    // start_rounds more times at start_interval after its first round, then every interval
    // (an hour here: no further round comes while the test waits).
    let (tx, rx) = crossbeam_channel::unbounded();
    let t = SensorThread::spawn_with(
        SensorConfig {
            interval: Duration::from_secs(3600),
            start_interval: Duration::from_millis(10),
            start_rounds: 5,
            clients_every: 1,
            ..Default::default()
        },
        move |s| {
            let _ = tx.send(s);
        },
    )
    .unwrap();
    // Rounds (one /proc scan each) until `want` have come or `wait` is over.
    let rounds = |want: usize, wait: Duration| {
        let deadline = Instant::now() + wait;
        let mut n = 0;
        while n < want {
            let Ok(s) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) else {
                break;
            };
            n += usize::from(matches!(s.reading, SensorReading::GpuClients { .. }));
        }
        n
    };
    assert_eq!(
        rounds(6, Duration::from_secs(30)),
        6,
        "the first round and five fast ones"
    );
    assert_eq!(
        rounds(1, Duration::from_secs(1)),
        0,
        "none before the hour's interval"
    );
    t.stop();
}
