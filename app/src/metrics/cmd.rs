//! `baro-top serve --metrics ADDR [--synthetic]`: the endpoint as a command, until SIGINT or
//! SIGTERM. The live engine is wired to it later (see the module doc of `metrics`); until then
//! the only producer is `--synthetic`, and without it the command refuses to start.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use baro_telemetry::synth::{synthetic_frame, synthetic_run};
use baro_telemetry::{EndReason, PowerMode, SensorReading, SensorSample, Telemetry};
use clap::Args;
use crossbeam_channel::{bounded, Sender, TrySendError};

/// `baro-top serve` options.
#[derive(Args, Debug)]
pub struct ServeArgs {
    /// Serve Prometheus/OpenMetrics metrics on this IP:PORT (e.g. 127.0.0.1:9464; port 0 = any
    /// free port, printed at start).
    #[arg(long, value_name = "ADDR", value_parser = parse_addr)]
    pub metrics: SocketAddr,
    /// Feed the endpoint synthetic telemetry (no GPU needed): for demos and tests.
    #[arg(long)]
    pub synthetic: bool,
    /// Synthetic passes per second, 1..=2000.
    #[arg(long, default_value_t = 100, requires = "synthetic", value_parser = clap::value_parser!(u32).range(1..=2000))]
    pub rate: u32,
}

/// `IP:PORT` with a message that says so.
pub fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse().map_err(|_| {
        format!("'{s}' is not IP:PORT (e.g. 127.0.0.1:9464, [::1]:9464, 0.0.0.0:9464)")
    })
}

/// Set by SIGINT/SIGTERM.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn install_signal_handlers() -> anyhow::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction with a handler that only stores to an atomic (async-
        // signal-safe); the pointers passed are valid for the call.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            bail!(
                "installing the handler for signal {sig}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

/// Run `serve`.
pub fn run(a: ServeArgs) -> anyhow::Result<ExitCode> {
    if !a.synthetic {
        bail!(
            "serve: the live engine does not feed the metrics endpoint yet; run `baro-top serve --metrics {} --synthetic` for synthetic telemetry",
            a.metrics
        );
    }
    install_signal_handlers()?;
    let (tx, rx) = bounded(1024);
    let server = super::serve(a.metrics, rx)?;
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = spawn_synthetic(tx, a.rate, Arc::clone(&stop))?;
    note!(
        "baro-top: serving metrics on http://{}/metrics (synthetic telemetry, {} passes/s); SIGINT or SIGTERM stops",
        server.local_addr(),
        a.rate
    );
    while !STOP.load(Ordering::SeqCst) && !feeder.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
    }
    stop.store(true, Ordering::SeqCst);
    let fed = feeder.join();
    server.shutdown();
    match fed {
        Ok(passes) => note!("baro-top: metrics endpoint stopped after {passes} synthetic passes"),
        Err(_) => bail!("the synthetic telemetry thread panicked"),
    }
    Ok(ExitCode::SUCCESS)
}

/// Synthetic telemetry at `rate` passes/s, as the engine sends it: a start, a sensor round
/// every second, frames with `try_send` (a full channel drops the frame and the next frame
/// that gets through carries the count), an end when stopped. Every tenth pass is labelled
/// as sharing the GPU with another client, so the contention label has two values.
fn spawn_synthetic(
    tx: Sender<Telemetry>,
    rate: u32,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<JoinHandle<u64>> {
    std::thread::Builder::new()
        .name("synthetic-telemetry".into())
        .spawn(move || {
            let mut run = synthetic_run(16, 23, 17);
            run.model = "synthetic llama 3 layers q4_0".into();
            let seed = 1;
            if tx.send(Telemetry::Start(run.clone())).is_err() {
                return 0;
            }
            let period = Duration::from_secs(1) / rate.max(1);
            let epoch = Instant::now();
            let mut next = epoch;
            let mut next_sensors = epoch;
            let (mut pass, mut dropped) = (0u64, 0u64);
            while !stop.load(Ordering::SeqCst) {
                let now = Instant::now();
                if now >= next_sensors {
                    let host_ns = now.duration_since(epoch).as_nanos() as u64;
                    for reading in sensors(pass) {
                        let _ = tx.try_send(Telemetry::Sensor(SensorSample { host_ns, reading }));
                    }
                    next_sensors += Duration::from_secs(1);
                }
                let mut f = synthetic_frame(&run, pass, seed);
                if pass % 10 == 9 {
                    f.contention.gpu_clients = 1;
                }
                f.dropped = dropped;
                match tx.try_send(Telemetry::Frame(Box::new(f))) {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => dropped += 1,
                    Err(TrySendError::Disconnected(_)) => return pass,
                }
                pass += 1;
                next += period;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else if now - next > Duration::from_secs(1) {
                    next = now; // fell far behind (a loaded machine): do not burst to catch up
                }
            }
            let _ = tx.send(Telemetry::End {
                passes: pass,
                dropped,
                reason: EndReason::Stopped,
            });
            pass
        })
        .context("starting the synthetic telemetry thread")
}

/// One round of plausible sensor readings (an H200 under load).
fn sensors(pass: u64) -> [SensorReading; 5] {
    [
        SensorReading::GpuClocks {
            sm_mhz: 1980,
            mem_mhz: Some(3201),
            max_sm_mhz: Some(1980),
            pstate: Some(0),
        },
        SensorReading::CpuBusy {
            fraction: if pass.is_multiple_of(2) { 0.125 } else { 0.25 },
        },
        SensorReading::GpuClients {
            count: 0,
            clients: vec![],
        },
        SensorReading::Throttle { reasons: 0 },
        SensorReading::Mode {
            mode: PowerMode::Fast,
        },
    ]
}
