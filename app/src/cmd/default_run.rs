//! `baro-top` with no subcommand: live on the first Vulkan device, or, with none, the
//! recording embedded at build time replayed in the dashboard with a banner that says why.

use baro_engine::device::Device;

/// The recording embedded for machines without a Vulkan device (see build.rs): empty where
/// none was found at build time.
static DEMO: &[u8] = include_bytes!(env!("BARO_DEMO_RECORDING"));

/// Its path in the repository (`recordings/…`), empty where none.
pub const DEMO_NAME: &str = env!("BARO_DEMO_NAME");

/// How to get a Vulkan device, for every message that says there is none.
pub const LIVE_ADVICE: &str = "To run live: `sudo apt-get install mesa-vulkan-drivers libvulkan1` \
     (lavapipe, the CPU Vulkan device), then run baro-top again";

/// `baro-top` with no subcommand: live on the first Vulkan device; with no Vulkan loader or
/// no device, the embedded recording replayed in the dashboard with a banner that says so
/// (stdout not a terminal: the advice on stderr and exit status 2).
pub fn run() -> anyhow::Result<std::process::ExitCode> {
    match Device::list() {
        Ok(d) if !d.is_empty() => live_default(),
        other => {
            let why = match other {
                Err(e) => format!("no Vulkan loader or driver: {e}"),
                _ => "no Vulkan device found".into(),
            };
            no_device(&why)
        }
    }
}

/// No device: the embedded recording in the dashboard, or exit 2 with the advice.
fn no_device(why: &str) -> anyhow::Result<std::process::ExitCode> {
    use std::io::IsTerminal;
    if !std::io::stdout().is_terminal() || DEMO.is_empty() {
        let replay = if DEMO.is_empty() {
            "no recording is embedded in this build to replay".to_string()
        } else {
            format!("on a terminal, baro-top replays the embedded {DEMO_NAME} in the dashboard instead; stdout is not a terminal")
        };
        note!("baro-top: {why}.\nNo device to run on ({replay}). {LIVE_ADVICE}, or see `baro-top --help`.");
        return Ok(std::process::ExitCode::from(2));
    }
    let source = crate::ui::replay::Source::Bytes(DEMO);
    let header = source.open()?.header().clone();
    // The banner says SYNTHETIC for a synthetic recording (replay::banner).
    let label = format!("the embedded {DEMO_NAME}");
    let banner = vec![
        crate::ui::replay::banner(&label, &header),
        // The reason first and on a line of its own, so a narrow terminal cuts the advice's
        // tail, never the reason.
        format!("NOT LIVE. Why: {why}."),
        format!("{LIVE_ADVICE}."),
    ];
    let cfg = crate::ui::replay::ReplayConfig {
        source,
        label: DEMO_NAME.into(),
        speed: 1.0,
        hold_at_end: true,
        banner,
    };
    super::recording::play(cfg, "default", 30, false)
}

/// The device case of [`run`]: `baro-top live` with its defaults (the dashboard on a
/// terminal, one line per pass otherwise).
fn live_default() -> anyhow::Result<std::process::ExitCode> {
    use clap::Parser;
    #[derive(Parser)]
    struct P {
        #[command(flatten)]
        live: super::live::LiveArgs,
    }
    note!("baro-top: live decode on the first Vulkan device (`baro-top live`; q quits). `baro-top --help` lists every command.");
    super::live::run(P::parse_from(["baro-top"]).live)
}
