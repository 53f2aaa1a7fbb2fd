//! One pass: [`Frame`], and the labels it carries.
//!
//! A frame refers to the run's stages and levels by id ([`crate::RunDetails`]); its spans are
//! a [`Spans`] struct of arrays. The per-stage and per-barrier timings are computed once by
//! the producer ([`Spans::stage_timings`], [`Spans::barrier_timings`]) and carried, because
//! every consumer (dashboard, JSON lines, recorder) wants them; stage names inside them are
//! shared `Arc<str>`s, not copies.
//!
//! # Units
//!
//! Every time is integer nanoseconds. `wall_ns` is the host's; `gpu_ns` and
//! `timestamp_start_ns` are the timestamp-query domain's; `device_start_ns` and spans are the
//! device clock's; `host_start_ns` is host `CLOCK_MONOTONIC` (see [`crate::clock`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::fail::FailReport;
use crate::judge::{CheckState, Correctness};
use crate::spans::{BarrierTiming, Spans, StageTiming};
use crate::RunDetails;

/// The GPU's power state during a pass (not a DPM clock level: latency-bound stages cost
/// ≈ 2× in the slow mode). A/B comparisons are made within one mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PowerMode {
    /// Not classified (yet): the default.
    #[default]
    Unknown,
    /// The fast mode.
    Fast,
    /// The slow mode (e.g. clocks ramping from idle).
    Slow,
}

/// What else was using the machine around a pass. The default is quiet: nothing seen (or
/// nothing sampled yet). Fields are added with defaults, so older lines keep loading.
///
/// `reasons` says why a pass is contended, one entry per cause, each printable as a sentence
/// ([`ContentionReason`]'s `Display`: "2 other GPU processes: pid 4242 python, pid 77 Xorg",
/// "CPU 97% busy", "unaccounted 5.5 ms of 7.1 ms: time-sliced"); [`Contention::summary`] joins
/// them. It is not `Copy` (the reasons own their text); clone it where a copy is needed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Contention {
    /// Other processes holding the GPU open at the last sample.
    pub gpu_clients: u32,
    /// CPU busy fraction (0–1) of other processes at the last sample, where sampled.
    pub cpu_busy: Option<f32>,
    /// The pass's GPU time exceeded its stamped work by more than the time-slicing threshold
    /// (another context ran in the middle of it: invisible from inside the kernel).
    pub gpu_time_sliced: bool,
    /// The pass's GPU time (timestamps) minus the in-kernel work it can account for (the
    /// stamped extent of its spans, else its stages' charged or dispatch times), ns; `None`
    /// without timestamps or without stamps.
    pub unaccounted_ns: Option<u64>,
    /// Why the pass is contended (empty when quiet).
    pub reasons: Vec<ContentionReason>,
}

impl Contention {
    /// Nothing else seen.
    pub fn is_quiet(&self) -> bool {
        self.reasons.is_empty()
            && self.gpu_clients == 0
            && !self.gpu_time_sliced
            && self.cpu_busy.is_none_or(|c| c < 0.5)
    }

    /// `quiet`, or the reasons joined by `; ` (what the dashboard header shows).
    pub fn summary(&self) -> String {
        if self.reasons.is_empty() {
            return if self.is_quiet() {
                "quiet"
            } else {
                "contended"
            }
            .to_string();
        }
        let parts: Vec<String> = self.reasons.iter().map(|r| r.to_string()).collect();
        parts.join("; ")
    }
}

/// Another process using a GPU (from `/proc/*/fd` and DRM fdinfo, or from NVML).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuClient {
    /// Process id (in the reader's pid namespace for `/proc`, the host's for NVML).
    pub pid: u32,
    /// Process name (`/proc/PID/comm`), empty where unreadable.
    pub name: String,
    /// GPU memory it holds, bytes, where the driver reports it (NVML).
    pub gpu_memory_bytes: Option<u64>,
}

impl fmt::Display for GpuClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if !self.name.is_empty() {
            write!(f, " {}", self.name)?;
        }
        if let Some(b) = self.gpu_memory_bytes {
            write!(f, " ({})", Mib(b))?;
        }
        Ok(())
    }
}

/// Who holds the host's per-GPU timing lock (written into the lock file by its holder).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockHolder {
    /// Holder's process id.
    pub pid: u32,
    /// Holder's command line (or its name).
    pub command: String,
    /// Unix time in ms at which it took the lock.
    pub since_unix_ms: u64,
}

impl fmt::Display for LockHolder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if !self.command.is_empty() {
            write!(f, " ({})", self.command)?;
        }
        Ok(())
    }
}

/// One cause of contention, structured; its `Display` is the sentence a user reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ContentionReason {
    /// Other processes hold the GPU open.
    GpuClients {
        /// How many (may exceed `clients.len()` where only a count is known).
        count: u32,
        /// Those known by pid.
        clients: Vec<GpuClient>,
    },
    /// Other processes keep the CPU busy.
    CpuBusy {
        /// Busy fraction (0–1) of every core, this process excluded.
        fraction: f32,
    },
    /// The pass's GPU time is mostly not in its own stamped work: the GPU ran another
    /// context in the middle of it.
    TimeSliced {
        /// GPU time not accounted for by the pass's work, ns.
        unaccounted_ns: u64,
        /// The pass's GPU time, ns.
        gpu_ns: u64,
    },
    /// Another baro-top timing run holds this GPU's host lock (this run did not wait).
    HostLock {
        /// Who holds it.
        holder: LockHolder,
    },
}

impl fmt::Display for ContentionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContentionReason::GpuClients { count, clients } => {
                let s = if *count == 1 { "" } else { "es" };
                write!(f, "{count} other GPU process{s}")?;
                for (i, c) in clients.iter().enumerate() {
                    f.write_str(if i == 0 { ": " } else { ", " })?;
                    write!(f, "{c}")?;
                }
                Ok(())
            }
            ContentionReason::CpuBusy { fraction } => {
                write!(f, "CPU {:.0}% busy", fraction * 100.0)
            }
            ContentionReason::TimeSliced {
                unaccounted_ns,
                gpu_ns,
            } => write!(
                f,
                "unaccounted {} of {}: time-sliced",
                Ms(*unaccounted_ns),
                Ms(*gpu_ns)
            ),
            ContentionReason::HostLock { holder } => {
                write!(f, "another timing run holds the GPU lock: {holder}")
            }
        }
    }
}

/// ns printed as ms with one decimal.
struct Ms(u64);

impl fmt::Display for Ms {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1} ms", self.0 as f64 / 1e6)
    }
}

/// Bytes printed as MiB (or GiB from 1 GiB up).
struct Mib(u64);

impl fmt::Display for Mib {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MIB: f64 = 1024.0 * 1024.0;
        let m = self.0 as f64 / MIB;
        if m >= 1024.0 {
            write!(f, "{:.1} GiB", m / 1024.0)
        } else {
            write!(f, "{m:.0} MiB")
        }
    }
}

/// One pass.
///
/// On the wire (one JSON object per line, inside [`crate::Telemetry`]) the fail report is
/// flattened to `fail_word` (hex), `fail` (line) and `fail_detail`, and `spans` is left out
/// when empty.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// Pass number (0-based, per run).
    pub pass: u64,
    /// Position in the sequence.
    pub pos: u32,
    /// Input token.
    pub token: u32,
    /// Output token (argmax or sampled).
    pub next: u32,
    /// Host wall time of the pass (submit → fence), ns.
    pub wall_ns: u64,
    /// GPU time of the pass from timestamps, ns (`None` without timestamps).
    pub gpu_ns: Option<u64>,
    /// The fail word and its printed line.
    #[serde(flatten)]
    pub fail: FailReport,
    /// The pass's ring frame was torn or overrun and was not read (spans and stages empty).
    pub torn: bool,
    /// Frames this consumer has lost so far because it read too slowly.
    pub dropped: u64,
    /// Host `CLOCK_MONOTONIC` ns at which the pass started on the GPU (calibrated
    /// timestamps, drift-corrected); `None` where the device has none.
    pub host_start_ns: Option<u64>,
    /// Timestamp-domain ns at which the pass started (its first timestamp query).
    #[serde(default)]
    pub timestamp_start_ns: Option<u64>,
    /// Device-clock value of the pass's earliest stage start: the origin of [`Self::spans`]
    /// (only its low 32 bits move on lavapipe). `None` without decoded spans.
    #[serde(default)]
    pub device_start_ns: Option<u64>,
    /// Per-stage cost, in level order (empty when torn or uninstrumented).
    pub stages: Vec<StageTiming>,
    /// Per-barrier timings (megakernel).
    pub barriers: Vec<BarrierTiming>,
    /// Per-stage dispatch GPU times (multi mode), ns, indexed by stage.
    #[serde(default)]
    pub dispatch_ns: Vec<u64>,
    /// Weight bytes the megakernel's idle workgroups read ahead into L2 during the attention
    /// levels (`--prefetch-mib`; 0 without it, and left out of the JSON then).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prefetched_bytes: u64,
    /// Token correctness against a reference, where judged before the frame went out.
    #[serde(default)]
    pub correctness: Option<Correctness>,
    /// Whether a live reference judges this pass: `pending` frames get their verdict later in
    /// a `correctness` message.
    #[serde(default)]
    pub check: CheckState,
    /// Passes the live reference had not yet judged when this frame went out (how far behind
    /// it is); 0 without one.
    #[serde(default)]
    pub check_lag: u64,
    /// Power-state mode.
    #[serde(default)]
    pub mode: PowerMode,
    /// Contention label.
    #[serde(default)]
    pub contention: Contention,
    /// Every workgroup's stamps.
    #[serde(default, skip_serializing_if = "Spans::is_empty")]
    pub spans: Spans,
}

impl Frame {
    /// Read the pass's ring frame from its little-endian bytes, in place (a mapped readback
    /// buffer: [`crate::RingLayout::decode_le_bytes`]): the spans, the stage and barrier
    /// timings computed from them, and the device start. A frame that does not decode (torn,
    /// overrun, short, unstamped) sets `torn` and leaves them as they were. `barriers`: the
    /// megakernel (barrier records are meaningful); otherwise multi mode, where each stage is
    /// charged its `dispatch_ns`. The timings are computed level by level as the rows are
    /// decoded (the same values as [`Spans::stage_timings`] and [`Spans::barrier_timings`]
    /// on the decoded spans, with each row read while it is still in cache).
    pub fn read_ring(&mut self, run: &RunDetails, ring: &[u8], expect_seq: u32, barriers: bool) {
        let disp: &[u64] = if barriers { &[] } else { &self.dispatch_ns };
        match run
            .ring_layout()
            .decode_le_bytes_with_timings(ring, expect_seq, barriers, run, disp)
        {
            Ok((r, t)) => {
                self.stages = t.stages;
                self.barriers = t.barriers;
                self.device_start_ns = Some(r.device_start_ns);
                self.spans = r.spans;
            }
            Err(_) => self.torn = true,
        }
    }

    /// Whether the pass failed: its fail word fired or its token failed the reference.
    pub fn failed(&self) -> bool {
        !self.fail.word.ok() || self.correctness.is_some_and(|c| c.verdict.is_failure())
    }

    /// Sum of the stages' busy time, ns (saturating at `u64::MAX`: a damaged or crafted
    /// recording's times never wrap to a small sum).
    pub fn busy_ns(&self) -> u64 {
        (self.stages.iter())
            .map(|s| s.busy_ns)
            .fold(0, u64::saturating_add)
    }

    /// Sum over barriers of arrival spread + release (the time spent waiting at barriers), ns,
    /// saturating at `u64::MAX`.
    pub fn barrier_ns(&self) -> u64 {
        self.barriers
            .iter()
            .map(|b| b.arrival_spread_ns.saturating_add(b.release_ns))
            .fold(0, u64::saturating_add)
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fail::{bits, FailWord};
    use crate::judge::Verdict;

    #[test]
    fn power_mode_defaults_to_unknown_and_round_trips() {
        assert_eq!(PowerMode::default(), PowerMode::Unknown);
        for m in [PowerMode::Unknown, PowerMode::Fast, PowerMode::Slow] {
            let j = serde_json::to_string(&m).unwrap();
            assert_eq!(serde_json::from_str::<PowerMode>(&j).unwrap(), m);
        }
        assert_eq!(
            serde_json::to_string(&PowerMode::Slow).unwrap(),
            r#""slow""#
        );
    }

    #[test]
    fn contention_defaults_to_quiet_and_missing_fields_default() {
        assert!(Contention::default().is_quiet());
        let c: Contention = serde_json::from_str(r#"{"gpu_clients":2}"#).unwrap();
        assert!(!c.is_quiet());
        let c = Contention {
            gpu_clients: 1,
            cpu_busy: Some(0.75),
            gpu_time_sliced: true,
            unaccounted_ns: Some(5_500_000),
            reasons: vec![ContentionReason::CpuBusy { fraction: 0.75 }],
        };
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Contention>(&j).unwrap(), c);
    }

    #[test]
    fn contention_reasons_read_as_the_sentences_the_header_shows() {
        let c = Contention {
            gpu_clients: 2,
            reasons: vec![
                ContentionReason::GpuClients {
                    count: 2,
                    clients: vec![
                        GpuClient {
                            pid: 4242,
                            name: "python".into(),
                            gpu_memory_bytes: Some(3 << 30),
                        },
                        GpuClient {
                            pid: 77,
                            name: "Xorg".into(),
                            gpu_memory_bytes: None,
                        },
                    ],
                },
                ContentionReason::CpuBusy { fraction: 0.97 },
                ContentionReason::TimeSliced {
                    unaccounted_ns: 5_500_000,
                    gpu_ns: 7_100_000,
                },
                ContentionReason::HostLock {
                    holder: LockHolder {
                        pid: 9,
                        command: "baro-top bench".into(),
                        since_unix_ms: 1,
                    },
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            c.summary(),
            "2 other GPU processes: pid 4242 python (3.0 GiB), pid 77 Xorg; CPU 97% busy; \
             unaccounted 5.5 ms of 7.1 ms: time-sliced; \
             another timing run holds the GPU lock: pid 9 (baro-top bench)"
        );
        assert_eq!(Contention::default().summary(), "quiet");
        let one = ContentionReason::GpuClients {
            count: 1,
            clients: vec![],
        };
        assert_eq!(one.to_string(), "1 other GPU process");
        let j = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<Contention>(&j).unwrap(), c);
    }

    #[test]
    fn stage_timing_round_trips() {
        let t = StageTiming {
            stage: 4,
            name: "wo.l0".into(),
            level: 2,
            busy_ns: 1,
            charged_ns: 2,
            max_busy_ns: 3,
        };
        let j = serde_json::to_string(&t).unwrap();
        assert_eq!(serde_json::from_str::<StageTiming>(&j).unwrap(), t);
    }

    #[test]
    fn frame_without_spans_omits_the_key_and_round_trips() {
        let f = Frame {
            fail: FailReport::new(FailWord::clean(2), |_| "x"),
            ..Default::default()
        };
        let j = serde_json::to_string(&f).unwrap();
        assert!(!j.contains("spans"), "{j}");
        assert!(j.contains(r#""fail_word":"0x00000000","fail":"fail-word 0x00000000 PASS""#));
        assert_eq!(serde_json::from_str::<Frame>(&j).unwrap(), f);
    }

    #[test]
    fn frame_fails_on_its_fail_word_or_a_failing_verdict() {
        let mut f = Frame::default();
        assert!(!f.failed());
        f.fail.word.bits = bits::NON_FINITE;
        assert!(f.failed());
        f.fail.word.bits = 0;
        f.correctness = Some(Correctness {
            gpu_token: 1,
            reference: Some(2),
            runner_up: Some(1),
            margin: Some(0.0001),
            verdict: Verdict::NearTie,
            first_divergence: Some(0),
        });
        assert!(!f.failed(), "a near-tie is reported, not a failure");
        f.correctness.as_mut().unwrap().verdict = Verdict::Mismatch;
        assert!(f.failed());
    }
}
