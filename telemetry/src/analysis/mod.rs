//! What the stream means, beside what it says: the analyses every consumer (the dashboard,
//! `run --json`, `diff`, the trace export, the metrics endpoint) reports the same way, so that
//! none of them has to rebuild one from strings or raw spans.
//!
//! - [`attribution`]: where a stage's charged time is not its own cost. The last stage of a
//!   level absorbs the level's barrier wait (its *tail*); [`AttributionWarning`] names the
//!   stage, its level, charged and busy time, the tail, and the workgroup that arrived last;
//!   its `Display` is the dashboard's text.
//! - [`window`]: the same warnings over many passes (medians, the most frequent last
//!   arriver), for `diff`.
//! - [`labels`]: the power-state mode and contention labels of a pass (a disturbed run is
//!   labelled, never averaged in).
//! - [`judge`]: the correctness rule a reference's verdict comes from.
//! - [`bandwidth`]: a pass's weight bytes over its GPU time, and that rate's share of the
//!   device's nominal memory bandwidth (the roofline a decode pass is judged against).
//!
//! Pure functions of the recorded data: no I/O, no clock, no terminal. The last arrivers are
//! computed here from the barrier stamps already recorded in a frame's spans
//! ([`crate::Spans::arrive`]); the shader and the ring's readback layout carry nothing new
//! for them. Consumers get typed values to print, serialise or count; the only words made
//! here are the warnings' `Display`, the dashboard's text, so every consumer that prints
//! one prints the same sentence.

pub mod attribution;
pub mod bandwidth;
pub mod judge;
pub mod labels;
pub mod window;

pub use attribution::{
    count_last_arrivals, frame_tail_stages, frame_warnings, is_tail, last_arriver, last_arrivers,
    pass_straggler, straggler, tails, AttributionWarning, JsonLines, StageCost, Straggler,
    TailWarning, GAP_MIN_FRAC, GAP_MIN_NS, STRAGGLER_MIN_BARRIERS,
};
pub use bandwidth::{nominal_peak_bytes_per_s, pass_bandwidth, PassBandwidth, RunBandwidth};
pub use window::Window;
