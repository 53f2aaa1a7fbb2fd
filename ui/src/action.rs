//! What the user can ask for ([`Action`]) and the small trait through which the dashboard
//! steers whatever produces its telemetry ([`Control`]: the live session, a replayer, or the
//! synthetic producer), speaking telemetry's control vocabulary ([`Command`]). Keys map to
//! actions in [`crate::keymap`]; actions change the view state in
//! [`crate::state::UiState::apply`]; nothing here draws.

use baro_telemetry::control::Command;
use baro_telemetry::Dispatch;
use crossbeam_channel::Receiver;

use crate::state::Severity;

/// A producer's answer to a request (or its error), for the dashboard's log.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    /// How bad it is.
    pub sev: Severity,
    /// What happened.
    pub text: String,
}

/// Steering the producer with the control vocabulary ([`Command`], shared by every producer).
/// Every call is a request: it must return at once and never block the UI (the producer
/// answers through the telemetry stream or [`Control::notes`] / [`Control::status`]).
pub trait Control {
    /// Pass `c` to the producer; one that cannot honour it says so in its notes or ignores
    /// it. The one method a producer must write: the named requests below all come here.
    fn send(&self, c: Command);
    /// [`Command::Pause`]: stop decoding after the current pass.
    fn pause(&self) {
        self.send(Command::Pause)
    }
    /// [`Command::Resume`]: continue decoding.
    fn resume(&self) {
        self.send(Command::Resume)
    }
    /// [`Command::Step`]: while paused, run exactly one pass.
    fn step(&self) {
        self.send(Command::Step)
    }
    /// [`Command::SetDispatch`]: switch the dispatch style from the next pass on.
    fn set_dispatch(&self, d: Dispatch) {
        self.send(Command::SetDispatch(d))
    }
    /// [`Command::Stop`]: end the run (the producer sends `Telemetry::End`).
    fn stop(&self) {
        self.send(Command::Stop)
    }
    /// Whether the producer is a replay (seek, slowest, restart; the replay key bindings).
    fn seekable(&self) -> bool {
        false
    }
    /// [`Command::Seek`] (a replay): continue from pass `pass`.
    fn seek(&self, pass: u64) {
        self.send(Command::Seek(pass))
    }
    /// [`Command::SeekSlowest`] (a replay): continue from the recording's slowest pass.
    fn seek_slowest(&self) {
        self.send(Command::SeekSlowest)
    }
    /// [`Command::Restart`] (a replay): start again from the first pass.
    fn restart(&self) {
        self.send(Command::Restart)
    }
    /// What the producer wants on screen beside the stream (a replay's banner and position,
    /// its notes for the log); `None` for a producer with nothing to add (live, synthetic).
    /// Notes are handed over once: a second call returns only newer ones.
    fn status(&self) -> Option<ProducerStatus> {
        None
    }
    /// Where the producer answers requests (replies and errors go to the log); `None` when
    /// it answers only through the telemetry stream.
    fn notes(&self) -> Option<Receiver<Note>> {
        None
    }
    /// Start a recording of the stream to a file, or stop the one in progress. Returns false
    /// when this producer cannot record (a replay, the synthetic producer); the outcome of a
    /// recording (its file, passes, errors) comes back through [`Control::notes`].
    fn toggle_record(&self) -> bool {
        false
    }
    /// The recording in progress, for the header's `REC` badge.
    fn recording(&self) -> Option<RecStatus> {
        None
    }
}

/// A recording in progress (see [`Control::recording`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecStatus {
    /// The file being written, as given to the user.
    pub file: String,
    /// Bytes written so far.
    pub bytes: u64,
}

/// A producer's own state, for the header and the log (see [`Control::status`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProducerStatus {
    /// Lines always shown under the header (e.g. `REPLAY of FILE (recorded on …)`).
    pub banner: Vec<String>,
    /// The pass last sent.
    pub pass: Option<u64>,
    /// Passes in the recording, where known (the index, or a scan up to the damage).
    pub total: Option<u64>,
    /// Where in the recording: frames sent since the start (or the last seek) … of `total`.
    pub position: Option<u64>,
    /// Speed relative to the recording (0 = as fast as possible).
    pub speed: f64,
    /// New log lines (warnings: damage, requests a replay cannot honour).
    pub notes: Vec<String>,
}

/// A control that ignores every request (tests, and streams that cannot be steered).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoControl;

impl Control for NoControl {
    fn send(&self, _: Command) {}
}

/// Everything a key (or a click on a highlighted key) can do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Leave (restores the terminal).
    Quit,
    /// Toggle the help overlay.
    Help,
    /// Freeze / unfreeze the display (capture goes on underneath).
    Freeze,
    /// Pause / resume the engine.
    PauseResume,
    /// Run one pass (while paused).
    Step,
    /// Switch dispatch mode (mega ↔ multi) live.
    SwitchDispatch,
    /// Expand the focused panel to the whole body / back.
    Expand,
    /// Focus the next panel.
    FocusNext,
    /// Focus the previous panel.
    FocusPrev,
    /// Left in the focused panel (flame: cursor; navigator: older pass).
    Left,
    /// Right in the focused panel.
    Right,
    /// Up in the focused panel (flame: cursor row; tables: selection).
    Up,
    /// Down in the focused panel.
    Down,
    /// Zoom in around the flame cursor.
    ZoomIn,
    /// Zoom out.
    ZoomOut,
    /// Pan the flame window left.
    PanLeft,
    /// Pan the flame window right.
    PanRight,
    /// Show the whole pass.
    ZoomReset,
    /// Flame chart shows the latest pass.
    PickLatest,
    /// Flame chart shows the slowest retained pass.
    PickSlowest,
    /// Pin the pass the flame chart shows now (it stops following).
    Pin,
    /// Flame rows: workgroups ↔ stages.
    GroupToggle,
    /// Stage table: next sort column.
    Sort,
    /// Stage table: reverse the sort.
    SortReverse,
    /// Stage table: per stage ↔ per stage kind summed over layers.
    ByKind,
    /// Statistics over: all passes → sliding window → chosen range.
    Scope,
    /// Range start at the shown pass.
    RangeStart,
    /// Range end at the shown pass.
    RangeEnd,
    /// Replay: seek to a pass (opens a prompt in the footer: digits, Enter).
    Seek,
    /// Replay: jump to the slowest pass of the recording.
    SeekSlowest,
    /// Replay: start again from the first pass.
    Restart,
    /// Live: start / stop recording the session to a `.baro` file.
    Record,
}
