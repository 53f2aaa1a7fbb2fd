//! baro-top's telemetry stream: the plain data the engine produces and every consumer (the
//! dashboard, headless JSON lines, the gate, the recorder, replay, tests) reads, and the
//! [`control`] requests that flow back. No Vulkan, no UI, no I/O beyond serde.
//!
//! # The stream
//!
//! One [`Telemetry`] enum, in this order:
//!
//! ```text
//! start            first: RunDetails (device, dispatch style, grid, stages, levels); again
//!                  when they change (a dispatch switch rebuilds the decoder, a replay seeks)
//! clock            at the start, then periodically: a ClockSync (see `clock`)
//! frame | sensor   one frame per pass; sensor samples whenever taken
//! correctness      a live reference's verdict on an earlier (pending) frame, when it has one
//! end              once, last: passes run, frames dropped, EndReason
//! ```
//!
//! Static details are sent in `start` and referred to by id ([`StageId`], level index). Every time
//! is integer nanoseconds; the clock domain of each field is in its doc ([`clock`] says how
//! they relate). A consumer may lose frames (the engine never blocks on it: `dropped` counts
//! them), but never `start`, `end`, or a frame for which [`Telemetry::must_deliver`] holds.
//!
//! # JSON
//!
//! Each message is one flat JSON object per line, internally tagged by `"type"`: `"start"`,
//! `"clock"`, `"frame"`, `"correctness"`, `"sensor"` or `"end"`, the message's fields beside it. A frame line
//! keeps the fields `baro-top run --json` has always printed (`pass`, `pos`, `token`, `next`,
//! `wall_ns`, `gpu_ns`, `fail_word` as `"0x00000000"`, `fail`, `torn`, `dropped`,
//! `host_start_ns`, `stages`, `barriers`) and adds the structured `fail_detail` and the rest
//! of [`Frame`]. `tests/golden/frame_v1.json` holds one frame: a schema change shows there as
//! a diff, and bumps [`SCHEMA_VERSION`]. `run --json` prints each frame line with its
//! analysis appended (`"attribution"`, [`analysis::JsonLines`]); readers ignore it.
//!
//! # Modules
//!
//! - [`run`]: static run details and the closed sets (dispatch, device kind, stage kind);
//! - [`frame`]: one pass, with its power mode and contention labels;
//! - [`fail`]: the fail word and its printed line;
//! - [`spans`]: compact spans and busy/charged/barrier timings computed from them;
//! - [`ring`]: the in-kernel event ring's layout and its decoding;
//! - [`clock`]: clock domains, calibration, drift;
//! - [`analysis`]: what the stream means, for every consumer alike: attribution warnings
//!   (a stage charged with its level's tail, the last-arriving workgroup), the power-mode and
//!   contention labels ([`labels`]) and the correctness rule ([`judge`]: the near-tie rule
//!   shared by the gate and a shadow reference);
//! - [`control`]: the requests a consumer sends back to the producer (pause, step, seek, …);
//! - [`recording`]: the stream on disk (`*.baro`), its reader, exports and diff;
//! - [`synth`]: synthetic runs and frames of any shape, for tests and benches.
//! - [`pipeline`]: the driver compiler's statistics for the decode pipeline (registers, spills);
//! - [`utf8`]: valid UTF-8 text from token bytes that may split a character.

#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod act;
pub mod analysis;
pub mod clock;
pub mod control;
pub mod fail;
pub mod frame;
pub mod input;
pub mod kv;
pub mod pipeline;
pub mod recording;
pub mod ring;
pub mod run;
pub mod spans;
pub mod synth;
pub mod utf8;

// Moved under `analysis`, beside the attribution warnings; the old paths stay.
pub use analysis::{judge, labels};

use std::fmt;

use serde::{Deserialize, Serialize};

pub use act::ActType;
pub use clock::{ClockSync, HostClock, ShaderCalibration};
pub use fail::{FailReport, FailWord};
pub use frame::{Contention, ContentionReason, Frame, GpuClient, LockHolder, PowerMode};
pub use judge::{CheckPlan, CheckState, Correctness, Judge, Margin, Verdict};
pub use kv::KvType;
pub use pipeline::{PipelineStat, PipelineStats, StatValue};
pub use recording::{RecordingError, RecordingHeader};
pub use ring::{DecodedRing, RingError, RingLayout};
pub use run::{DeviceKind, Dispatch, LevelDetails, RunDetails, StageDetails, StageId, StageKind};
pub use spans::{BarrierTiming, Span, SpanStamps, Spans, StageTiming};

/// Version of the stream's schema. Bumped on any change a reader of the previous version
/// could misread; added fields with defaults do not bump it.
pub const SCHEMA_VERSION: u32 = 1;

/// One message of the stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Telemetry {
    /// Sent first, and again whenever the run's static details change (a dispatch switch
    /// rebuilds the decoder; a replay seek restates the one in effect): frames refer to the
    /// latest.
    Start(RunDetails),
    /// A clock calibration (at the start, then periodically).
    Clock(ClockSync),
    /// One per pass.
    Frame(Box<Frame>),
    /// A live reference's verdict on an earlier frame (one sent with
    /// [`CheckState::Pending`]); it may lag the frames by many passes.
    Correctness {
        /// The pass judged.
        pass: u64,
        /// The verdict.
        correctness: Correctness,
    },
    /// A sample from a sensor (CPU, GPU clients, clocks), whenever one is taken.
    Sensor(SensorSample),
    /// Sent last.
    End {
        /// Passes run.
        passes: u64,
        /// Frames dropped on the way to this consumer.
        dropped: u64,
        /// Why the run ended.
        reason: EndReason,
    },
}

impl Telemetry {
    /// Whether this message must reach every consumer even when its channel is full: the
    /// start, the end, and a failed pass (a run that failed must never look clean).
    pub fn must_deliver(&self) -> bool {
        match self {
            Telemetry::Start(_) | Telemetry::End { .. } => true,
            Telemetry::Frame(f) => f.failed(),
            Telemetry::Correctness { correctness, .. } => correctness.verdict.is_failure(),
            Telemetry::Clock(_) | Telemetry::Sensor(_) => false,
        }
    }

    /// The message as one JSON line (no trailing newline).
    pub fn to_json_line(&self) -> serde_json::Result<String> {
        serde_json::to_string(self)
    }

    /// Parse one JSON line.
    pub fn from_json_line(line: &str) -> serde_json::Result<Self> {
        serde_json::from_str(line)
    }
}

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndReason {
    /// Every requested pass ran.
    Completed,
    /// Stopped on request.
    Stopped,
    /// A pass failed and the run stops on failure.
    FailedPass {
        /// The pass.
        pass: u64,
        /// Its fail word and line (flattened: `fail_word`, `fail`, `fail_detail`).
        #[serde(flatten)]
        fail: FailReport,
    },
    /// A pass's fence did not signal within the watchdog; the decoder refuses more work.
    Watchdog,
    /// The device was lost.
    DeviceLost,
    /// Every consumer went away.
    ConsumerGone,
    /// Any other error.
    Error {
        /// What went wrong.
        message: String,
    },
}

impl EndReason {
    /// Whether the run ended as asked: every pass ran, or it was stopped on request. (Whether
    /// every pass was also clean is the run's outcome, not its end reason.)
    pub fn is_success(&self) -> bool {
        matches!(self, EndReason::Completed | EndReason::Stopped)
    }
}

impl fmt::Display for EndReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndReason::Completed => f.write_str("completed"),
            EndReason::Stopped => f.write_str("stopped"),
            EndReason::FailedPass { pass, fail } => write!(f, "pass {pass} failed: {}", fail.line),
            EndReason::Watchdog => f.write_str("watchdog: the GPU did not finish a pass"),
            EndReason::DeviceLost => f.write_str("device lost"),
            EndReason::ConsumerGone => f.write_str("consumer gone"),
            EndReason::Error { message } => write!(f, "error: {message}"),
        }
    }
}

/// One sensor reading with the host time it was taken at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SensorSample {
    /// Host `CLOCK_MONOTONIC` ns of the reading.
    pub host_ns: u64,
    /// The reading.
    pub reading: SensorReading,
}

/// What a sensor read. Sensors are sampled gently (never waking a sleeping GPU to read it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SensorReading {
    /// CPU busy fraction (0–1) over the last interval, excluding this process.
    CpuBusy {
        /// Fraction.
        fraction: f32,
    },
    /// Other processes holding the GPU open.
    GpuClients {
        /// How many (de-duplicated: one per process).
        count: u32,
        /// Those known by pid, with their GPU memory where the driver reports it.
        #[serde(default)]
        clients: Vec<GpuClient>,
    },
    /// GPU clocks.
    GpuClocks {
        /// Shader clock, MHz.
        sm_mhz: u32,
        /// Memory clock, MHz, where reported.
        mem_mhz: Option<u32>,
        /// The shader clock's maximum, MHz, where reported.
        #[serde(default)]
        max_sm_mhz: Option<u32>,
        /// Performance state (NVML: 0 = P0, the fastest … 15), where reported.
        #[serde(default)]
        pstate: Option<u32>,
    },
    /// Throttle (clock-event) reasons as the driver reports them (NVML's bit mask), 0 = none.
    Throttle {
        /// Bits.
        reasons: u64,
    },
    /// A classification of the power-state mode.
    Mode {
        /// The mode.
        mode: PowerMode,
    },
    /// Board power and temperature.
    GpuPower {
        /// Power draw, mW, where reported.
        power_mw: Option<u32>,
        /// GPU temperature, °C, where reported.
        temperature_c: Option<u32>,
    },
    /// Who holds this GPU's host timing lock (`None`: nobody).
    HostLock {
        /// The holder.
        holder: Option<LockHolder>,
        /// Whether the holder is this process.
        ours: bool,
    },
    /// A sensor source is off (said once, not an error): e.g. NVML not installed.
    SourceOff {
        /// The source (`nvml`, `amd`, `proc`).
        source: String,
        /// Why.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(t: &Telemetry) -> String {
        let j = t.to_json_line().unwrap();
        assert!(!j.contains('\n'), "one line: {j}");
        assert_eq!(&Telemetry::from_json_line(&j).unwrap(), t, "{j}");
        j
    }

    #[test]
    fn start_round_trips_tagged_with_the_schema_version() {
        let j = round_trip(&Telemetry::Start(run::tests::details()));
        assert!(
            j.starts_with(r#"{"type":"start","schema_version":1,"#),
            "{j}"
        );
    }

    #[test]
    fn clock_round_trips_tagged() {
        let j = round_trip(&Telemetry::Clock(ClockSync {
            at_pass: 0,
            shader_offset_ns: Some(12),
            shader_uncertainty_ns: Some(3),
            host_offset_ns: None,
            host_deviation_ns: None,
            drift_ppm: None,
        }));
        assert!(j.starts_with(r#"{"type":"clock","at_pass":0,"#), "{j}");
    }

    #[test]
    fn every_sensor_reading_round_trips_tagged() {
        for reading in [
            SensorReading::CpuBusy { fraction: 0.25 },
            SensorReading::GpuClients {
                count: 1,
                clients: vec![GpuClient {
                    pid: 4242,
                    name: "python".into(),
                    gpu_memory_bytes: Some(1 << 30),
                }],
            },
            SensorReading::GpuClocks {
                sm_mhz: 1980,
                mem_mhz: Some(2619),
                max_sm_mhz: Some(1980),
                pstate: Some(0),
            },
            SensorReading::GpuPower {
                power_mw: Some(120_000),
                temperature_c: Some(41),
            },
            SensorReading::HostLock {
                holder: Some(LockHolder {
                    pid: 1,
                    command: "baro-top bench".into(),
                    since_unix_ms: 2,
                }),
                ours: false,
            },
            SensorReading::SourceOff {
                source: "nvml".into(),
                reason: "libnvidia-ml.so.1 not found".into(),
            },
            SensorReading::Throttle { reasons: 0x4 },
            SensorReading::Mode {
                mode: PowerMode::Slow,
            },
        ] {
            let j = round_trip(&Telemetry::Sensor(SensorSample {
                host_ns: 5,
                reading,
            }));
            assert!(
                j.starts_with(r#"{"type":"sensor","host_ns":5,"reading":{"#),
                "{j}"
            );
        }
    }

    #[test]
    fn older_sensor_lines_without_the_added_fields_still_load() {
        let t = Telemetry::from_json_line(
            r#"{"type":"sensor","host_ns":1,"reading":{"gpu_clocks":{"sm_mhz":345,"mem_mhz":null}}}"#,
        )
        .unwrap();
        assert_eq!(
            t,
            Telemetry::Sensor(SensorSample {
                host_ns: 1,
                reading: SensorReading::GpuClocks {
                    sm_mhz: 345,
                    mem_mhz: None,
                    max_sm_mhz: None,
                    pstate: None
                }
            })
        );
        let t = Telemetry::from_json_line(
            r#"{"type":"sensor","host_ns":1,"reading":{"gpu_clients":{"count":2}}}"#,
        )
        .unwrap();
        let Telemetry::Sensor(SensorSample {
            reading: SensorReading::GpuClients { count, clients },
            ..
        }) = t
        else {
            panic!("not a gpu_clients reading: {t:?}")
        };
        assert_eq!((count, clients.len()), (2, 0));
    }

    #[test]
    fn every_end_reason_round_trips_tagged() {
        let fail = FailReport::new(
            FailWord {
                bits: fail::bits::WATCHDOG,
                grid: 2,
                ..Default::default()
            },
            |_| "x",
        );
        for reason in [
            EndReason::Completed,
            EndReason::Stopped,
            EndReason::FailedPass { pass: 7, fail },
            EndReason::Watchdog,
            EndReason::DeviceLost,
            EndReason::ConsumerGone,
            EndReason::Error {
                message: "vkQueueSubmit: ERROR_OUT_OF_DEVICE_MEMORY".into(),
            },
        ] {
            let j = round_trip(&Telemetry::End {
                passes: 8,
                dropped: 1,
                reason,
            });
            assert!(
                j.starts_with(r#"{"type":"end","passes":8,"dropped":1,"reason":"#),
                "{j}"
            );
        }
    }

    #[test]
    fn correctness_round_trips_tagged_and_a_failing_verdict_must_be_delivered() {
        let mut j = Judge::default();
        let c = j.judge(4, 2, None, &[1.0, 5.0, 4.0]);
        let t = Telemetry::Correctness {
            pass: 4,
            correctness: c,
        };
        let s = round_trip(&t);
        assert!(
            s.starts_with(r#"{"type":"correctness","pass":4,"correctness":{"#),
            "{s}"
        );
        assert!(t.must_deliver(), "a mismatch is never dropped");
        let ok = Telemetry::Correctness {
            pass: 5,
            correctness: Judge::default().judge(5, 1, None, &[1.0, 5.0, 4.0]),
        };
        assert!(!ok.must_deliver());
    }

    #[test]
    fn only_completed_and_stopped_runs_end_successfully() {
        assert!(EndReason::Completed.is_success() && EndReason::Stopped.is_success());
        for r in [
            EndReason::Watchdog,
            EndReason::DeviceLost,
            EndReason::ConsumerGone,
            EndReason::Error {
                message: "x".into(),
            },
        ] {
            assert!(!r.is_success(), "{r}");
        }
    }

    #[test]
    fn end_reason_reads_as_a_sentence() {
        let fail = FailReport::new(
            FailWord {
                bits: fail::bits::POISONED,
                grid: 1,
                resident: 1,
                ..Default::default()
            },
            |_| "x",
        );
        assert_eq!(
            EndReason::FailedPass { pass: 3, fail }.to_string(),
            "pass 3 failed: fail-word 0x00000200 FAIL output-poisoned resident 1/1 started 0 arrivals 0"
        );
        assert_eq!(EndReason::Completed.to_string(), "completed");
        assert_eq!(
            EndReason::Error {
                message: "boom".into()
            }
            .to_string(),
            "error: boom"
        );
    }

    #[test]
    fn start_end_and_failed_frames_must_be_delivered_others_may_drop() {
        let clean = Frame::default();
        let mut failed = Frame::default();
        failed.fail.word.bits = fail::bits::TIMEOUT;
        assert!(!Telemetry::Frame(Box::new(clean)).must_deliver());
        assert!(Telemetry::Frame(Box::new(failed)).must_deliver());
        assert!(Telemetry::Start(run::tests::details()).must_deliver());
        assert!(Telemetry::End {
            passes: 0,
            dropped: 0,
            reason: EndReason::Stopped
        }
        .must_deliver());
        assert!(!Telemetry::Sensor(SensorSample {
            host_ns: 0,
            reading: SensorReading::GpuClients {
                count: 0,
                clients: vec![]
            }
        })
        .must_deliver());
    }
}
