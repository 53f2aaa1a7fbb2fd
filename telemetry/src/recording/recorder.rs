//! [`Recorder`]: the one road from a telemetry stream to a recording, taken by `record`, the
//! dashboard's `r` and `bench rec`.
//!
//! A stream starts with the run's `Start` (a sink subscribed late gets the current one
//! first): that message becomes the header, and nothing before it is written. The recorder
//! never drops a message it was given after that, except the spans it was told to thin
//! ([`Recorder::spans_every`]) and a repeated `Start` it was told to expect
//! ([`Recorder::skip_repeated_start`]). Threads, files and what a user reads stay with the
//! caller: this module never spawns, opens or prints.

use std::io::Write;
use std::time::Duration;

use crossbeam_channel::{select, Receiver};

use super::{RecordingHeader, Result, WriteStats, Writer};
use crate::Telemetry;

/// How often [`Recorder::pump`] calls back while no message comes (a caller's chance to
/// watch for a signal or show progress).
pub const TICK: Duration = Duration::from_millis(100);

/// How a [`Recorder::pump`] call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pumped {
    /// The stream ended: its `End` was written, or every sender is gone.
    pub ended: bool,
    /// Messages still queued when `stop` fired (written before returning).
    pub drained: u64,
}

/// Writes a telemetry stream as one recording: the header from the first `Start`, then a
/// record per message ([`Writer`]), the footer on [`Recorder::finish`].
pub struct Recorder<W: Write> {
    out: Option<W>,
    writer: Option<Writer<W>>,
    commit: String,
    quant: Option<String>,
    spans_every: u64,
    skip_start: bool,
    backlog: usize,
}

impl<W: Write> Recorder<W> {
    /// A recorder into `out` (nothing is written before the first `Start`), whose header
    /// names baro-top's `commit`.
    pub fn new(out: W, commit: impl Into<String>) -> Self {
        Recorder {
            out: Some(out),
            writer: None,
            commit: commit.into(),
            quant: None,
            spans_every: 1,
            skip_start: false,
            backlog: 0,
        }
    }

    /// The model's weight format, for the header.
    pub fn quant(mut self, quant: Option<String>) -> Self {
        self.quant = quant;
        self
    }

    /// Keep every workgroup's spans for one pass in `n` (pass numbers divisible by `n`; 0 is
    /// taken as 1): the other frames keep their timings, tokens and fail word.
    pub fn spans_every(mut self, n: u64) -> Self {
        self.spans_every = n.max(1);
        self
    }

    /// The next message, if it is a `Start`, is the run's `Start` again (a sink subscribed
    /// again to a recording that already holds it): it is not written.
    pub fn skip_repeated_start(&mut self) {
        self.skip_start = true;
    }

    /// Whether the header is written (a `Start` came).
    pub fn started(&self) -> bool {
        self.writer.is_some()
    }

    /// What has been written so far (all zero before the `Start`).
    pub fn stats(&self) -> WriteStats {
        self.writer.as_ref().map(Writer::stats).unwrap_or_default()
    }

    /// The most messages [`Recorder::pump`] has seen queued behind the one it took: how far
    /// behind the stream the recorder fell.
    pub fn backlog(&self) -> usize {
        self.backlog
    }

    /// Write one message (module doc: before the first `Start`, nothing is written).
    pub fn put(&mut self, mut msg: Telemetry) -> Result<()> {
        let repeated = std::mem::take(&mut self.skip_start);
        if repeated && matches!(msg, Telemetry::Start(_)) {
            return Ok(());
        }
        if let Telemetry::Frame(f) = &mut msg {
            if f.pass % self.spans_every != 0 {
                f.spans = Default::default();
            }
        }
        if self.writer.is_none() {
            let Telemetry::Start(run) = &msg else {
                return Ok(());
            };
            let Some(out) = self.out.take() else {
                return Ok(());
            };
            let mut h = RecordingHeader::new(run.clone(), self.commit.clone());
            h.quant = self.quant.clone();
            self.writer = Some(Writer::new(out, &h)?);
        }
        match self.writer.as_mut() {
            Some(w) => w.write(&msg),
            None => Ok(()),
        }
    }

    /// Write the stream `rx` until it ends (its `End` is written, or every sender is gone)
    /// or `stop` fires (what is queued by then is written). `each` is called after every
    /// message and every [`TICK`] without one.
    pub fn pump(
        &mut self,
        rx: &Receiver<Telemetry>,
        stop: &Receiver<()>,
        mut each: impl FnMut(&WriteStats),
    ) -> Result<Pumped> {
        loop {
            select! {
                recv(rx) -> m => {
                    let Ok(m) = m else {
                        return Ok(Pumped { ended: true, drained: 0 });
                    };
                    self.backlog = self.backlog.max(rx.len());
                    let end = matches!(m, Telemetry::End { .. });
                    self.put(m)?;
                    each(&self.stats());
                    if end {
                        return Ok(Pumped { ended: true, drained: 0 });
                    }
                }
                recv(stop) -> _ => {
                    let mut drained = 0;
                    for m in rx.try_iter() {
                        drained += 1;
                        self.put(m)?;
                    }
                    each(&self.stats());
                    return Ok(Pumped { ended: false, drained });
                }
                default(TICK) => each(&self.stats()),
            }
        }
    }

    /// Write the footer and hand back the output and what was written before it; `None`
    /// where no `Start` came (nothing was written: the stream never started).
    pub fn finish(self) -> Result<Option<(W, WriteStats)>> {
        let Some(w) = self.writer else {
            return Ok(None);
        };
        let stats = w.stats();
        Ok(Some((w.finish()?, stats)))
    }
}

#[cfg(test)]
#[path = "recorder_tests.rs"]
mod tests;
