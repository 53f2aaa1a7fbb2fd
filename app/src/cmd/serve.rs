//! `baro-top serve --metrics ADDR [--synthetic]`: the endpoint as a command, until SIGINT or
//! SIGTERM. Without `--synthetic` a live session decodes continuously on the chosen GPU (model
//! and sampling flags as `live` takes them) and a lossy sink feeds the endpoint; with it,
//! synthetic telemetry does (no GPU), and the engine's flags are refused.

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
    #[arg(long, value_name = "ADDR", value_parser = crate::validate::addr)]
    pub metrics: SocketAddr,
    /// Feed the endpoint synthetic telemetry (no GPU needed): for demos and tests.
    #[arg(long)]
    pub synthetic: bool,
    /// Synthetic: passes per second, 0.1..=10000 [default: 60] (as `live --synthetic`).
    #[arg(long, value_parser = crate::validate::rate, allow_negative_numbers = true)]
    pub rate: Option<f64>,
    #[command(flatten)]
    pub model: crate::args::ModelArgs,
    #[command(flatten)]
    pub dispatch: crate::args::DispatchStyle,
    #[command(flatten)]
    pub gpu: crate::args::GpuArgs,
    #[command(flatten)]
    pub session: crate::args::SessionArgs,
    /// Which passes the shadow CPU reference judges: auto, all, off, or N [default: auto].
    #[arg(long, value_parser = crate::validate::check)]
    pub check: Option<baro_engine::session::Check>,
    /// Turn the in-kernel event ring off (no per-stage histograms).
    #[arg(long)]
    pub no_instrument: bool,
}

impl ServeArgs {
    /// The flags only the live engine honours, given (refused with `--synthetic`).
    fn engine_flags(&self) -> Vec<&'static str> {
        let mut v: Vec<&'static str> = [
            ("--model", self.model.model.is_some()),
            ("--tokenizer", self.model.tokenizer.is_some()),
            ("--dispatch", self.dispatch.dispatch.is_some()),
        ]
        .into_iter()
        .chain(self.session.given())
        .chain([
            ("--check", self.check.is_some()),
            ("--no-instrument", self.no_instrument),
        ])
        .filter_map(|(f, g)| g.then_some(f))
        .collect();
        v.extend(self.gpu.given());
        v
    }
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
        // As `live`: a flag of the synthetic producer is refused on the engine.
        if a.rate.is_some() {
            bail!("serve: --rate is only honoured with --synthetic (the engine decodes as fast as it can)");
        }
        return run_live(a);
    }
    let rate = a.rate.unwrap_or(super::live::SYNTHETIC_RATE);
    if let Some(f) = a.engine_flags().first() {
        bail!("serve: {f} is not honoured with --synthetic (it applies to the live engine only)");
    }
    install_signal_handlers()?;
    let (tx, rx) = bounded(1024);
    let server = crate::metrics::serve(a.metrics, rx)?;
    let stop = Arc::new(AtomicBool::new(false));
    let feeder = spawn_synthetic(tx, rate, Arc::clone(&stop))?;
    note!(
        "baro-top: serving metrics on http://{}/metrics (synthetic telemetry, {rate} passes/s); SIGINT or SIGTERM stops",
        server.local_addr(),
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

/// Unread messages the metrics sink holds before the session drops frames for it.
const LIVE_SINK_CAPACITY: usize = 1024;

/// `serve` on a live session: decode on the GPU until SIGINT/SIGTERM (the sequence restarts
/// when the context is full; a failed pass is counted and decoding goes on). Exit status as
/// `live`'s: 0 clean, 1 a failed pass or verdict, 2 an error.
fn run_live(a: ServeArgs) -> anyhow::Result<ExitCode> {
    use baro_engine::sensors::host_lock;
    use baro_engine::session::{Check, SessionBuilder, SinkKind};
    install_signal_handlers()?;
    let model = super::load_model(&a.model)?;
    let positions = a.session.positions(model.config.seq_len)?;
    let (temp, topp) = a.session.temp_topp();
    let seed = crate::validate::resolve_seed(a.session.seed_or_default());
    let dev = super::open_gpu(&a.gpu)?;
    let dispatch = a.dispatch.get();
    let mut dopts = a
        .gpu
        .decoder_options(dispatch, positions, &model, dev.info());
    dopts.instrument = !a.no_instrument;
    let source = model.source.clone();
    // Not a timing run: it does not take the host lock, but a holder labels its passes.
    let lock = host_lock::lock_path(&host_lock::default_dir(), &dev.info().name);
    let mut b = SessionBuilder::new(&dev, model, dopts)
        .prompt(a.session.prompt_bytes())
        .sampling(temp, topp, seed)
        .check(a.check.unwrap_or(Check::Auto))
        .stop_on_fail(false)
        .host_lock(lock, None);
    let rx = b.subscribe(SinkKind::Lossy {
        capacity: LIVE_SINK_CAPACITY,
    });
    let session = b.spawn().context("starting the decode session")?;
    let server = crate::metrics::serve(a.metrics, rx)?;
    note!(
        "baro-top: serving metrics on http://{}/metrics (decoding {} on {}); SIGINT or SIGTERM stops",
        server.local_addr(),
        source,
        dev.info().name
    );
    while !STOP.load(Ordering::SeqCst) && !session.is_finished() {
        std::thread::sleep(Duration::from_millis(50));
    }
    session.stop();
    let outcome = session.wait().context("the decode session")?;
    server.shutdown();
    note!(
        "baro-top: metrics endpoint stopped after {} passes ({})",
        outcome.passes,
        outcome.reason
    );
    if outcome.failed_passes > 0 || outcome.failed_checks > 0 {
        note!(
            "serve: {} failed passes, {} of {} checked passes failed against the CPU reference",
            outcome.failed_passes,
            outcome.failed_checks,
            outcome.checked
        );
    }
    Ok(ExitCode::from(super::live::exit_code(&outcome)))
}

/// Synthetic telemetry at `rate` passes/s, as the engine sends it: a start, a sensor round
/// every second, frames with `try_send` (a full channel drops the frame and the next frame
/// that gets through carries the count), an end when stopped. Every tenth pass is labelled
/// as sharing the GPU with another client, so the contention label has two values.
fn spawn_synthetic(
    tx: Sender<Telemetry>,
    rate: f64,
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
            // `rate` is 0.1..=10000 (validate::rate).
            let period = Duration::from_secs_f64(1.0 / rate.max(0.1));
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
