//! The control channel's vocabulary: what a consumer of the stream (the dashboard, a test)
//! asks of whatever produces it, the live session, a replay of a recording or the synthetic
//! producer. The stream flows one way ([`crate::Telemetry`]); these requests flow back.
//!
//! One enum for every producer, so the dashboard sends the same words whatever it is drawing.
//! A producer honours what it can and answers the rest (a replay cannot switch the dispatch,
//! the live session cannot seek): a request is never an error, and never blocks the one who
//! sends it. Answers come back through the stream or the producer's notes, not from here.
//! Plain data: no channel, no thread.

use std::fmt;

use crate::run::Dispatch;

/// A request to the producer of a telemetry stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Stop producing after the current pass (the stream goes quiet, not away).
    Pause,
    /// Produce continuously again.
    Resume,
    /// While paused: produce exactly one pass.
    Step,
    /// End the run: the producer sends [`crate::Telemetry::End`] and stops.
    Stop,
    /// Decode with this dispatch style from the next pass on (live and synthetic).
    SetDispatch(Dispatch),
    /// Continue from this pass (a replay).
    Seek(u64),
    /// Continue from the slowest pass of the whole recording (a replay).
    SeekSlowest,
    /// Start again from the first pass (a replay; the live session restarts its sequence).
    Restart,
}

/// What the request asks, for a log line: `pause`, `switching dispatch to multi`, ….
impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Pause => f.write_str("pause"),
            Command::Resume => f.write_str("resume"),
            Command::Step => f.write_str("step"),
            Command::Stop => f.write_str("stop"),
            Command::SetDispatch(d) => write!(f, "switching dispatch to {d}"),
            Command::Seek(p) => write!(f, "seek to pass {p}"),
            Command::SeekSlowest => f.write_str("seek to the slowest pass"),
            Command::Restart => f.write_str("restart"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_request_reads_as_a_log_line() {
        let lines: Vec<String> = [
            Command::Pause,
            Command::Resume,
            Command::Step,
            Command::Stop,
            Command::SetDispatch(Dispatch::Multi),
            Command::Seek(12),
            Command::SeekSlowest,
            Command::Restart,
        ]
        .iter()
        .map(|c| c.to_string())
        .collect();
        assert_eq!(
            lines,
            [
                "pause",
                "resume",
                "step",
                "stop",
                "switching dispatch to multi",
                "seek to pass 12",
                "seek to the slowest pass",
                "restart"
            ]
        );
    }
}
