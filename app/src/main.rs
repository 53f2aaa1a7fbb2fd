//! baro-top: terminal profiler and live decode monitor for a persistent-megakernel LLM decoder
//! on Vulkan. This binary parses the command line (`cli`) and hands each subcommand to its
//! module (`cmd`).

#[macro_use]
mod out;
mod args;
mod cli;
mod cmd;
mod files;
mod metrics;
mod validate;
/// The dashboard (a library target of this package, so its tests and benches can reach it).
use baro_ui as ui;

use std::process::ExitCode;

use baro_engine::device::Device;
use clap::Parser;

use cli::{Cli, Command, ModelCommand};

fn main() -> ExitCode {
    // A fault or abort (a Vulkan driver crashing in a pipeline compile) names itself on stderr
    // and, in the dashboard, restores the terminal before the process dies by it.
    if let Err(e) = ui::terminal::install_fatal() {
        note!("baro-top: warning: {e}");
    }
    let cli = Cli::parse();
    let result = match cli.command {
        None => cmd::default_run::run(),
        Some(c) => dispatch(c),
    };
    // A caught signal (or a panic in any thread) ended the command after it finished its
    // work (the terminal restored, a recording's footer written): say so in the status.
    let signalled = ui::terminal::caught().map(ui::terminal::exit_status);
    let code: u8 = match result {
        Ok(code) => {
            if let Some(s) = signalled {
                s
            } else if !Device::any_hung() {
                return code;
            } else {
                // An ExitCode cannot be read back; a run whose device hung did not succeed.
                1
            }
        }
        Err(e) => {
            note!("baro-top: error: {e:#}");
            signalled.unwrap_or(2)
        }
    };
    if Device::any_hung() {
        out::device_abandoned(code);
    }
    ExitCode::from(code)
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(a) => cmd::run::run(a),
        Command::Generate(a) => cmd::generate::run(a),
        Command::Tokenize(a) => cmd::tokenize::run(a),
        Command::Gate(a) => cmd::gate::run(a),
        Command::Devices(a) => cmd::devices::run(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Live(a) => live(a),
        Command::Model(ModelCommand::Gen(a)) => cmd::model::gen(a),
        Command::Model(ModelCommand::Import(a)) => cmd::model::import(a),
        Command::Model(ModelCommand::Info(a)) => cmd::model::info(a),
        Command::Replay(a) if a.headless => cmd::recording::replay_headless(&a),
        Command::Replay(a) => cmd::recording::replay_dashboard(&a),
        Command::Record(a) => cmd::record::record(a),
        Command::Export(a) => cmd::recording::export(&a),
        Command::Diff(a) => cmd::recording::diff(&a),
        Command::Serve(a) => cmd::serve::run(a),
    }
}

fn live(a: cmd::live::LiveArgs) -> anyhow::Result<ExitCode> {
    if a.synthetic {
        cmd::live::synthetic(a)
    } else {
        cmd::live::run(a)
    }
}
