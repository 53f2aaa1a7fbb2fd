//! The session's sinks: who gets which message, lossy capacity, what a late sink sees first.

use super::*;

/// The sinks, and what a late sink must see first.
#[derive(Default)]
pub(super) struct Shared {
    pub(super) inner: Mutex<Sinks>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, Sinks> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Default)]
pub(super) struct Sinks {
    pub(super) list: Vec<Sink>,
    pub(super) ever: bool,
    pub(super) start: Option<RunDetails>,
    pub(super) end: Option<(u64, EndReason)>,
}

pub(super) struct Sink {
    pub(super) tx: Sender<Telemetry>,
    pub(super) kind: SinkKind,
    pub(super) dropped: u64,
}

impl Sinks {
    pub(super) fn add(&mut self, kind: SinkKind, tx: Sender<Telemetry>) {
        self.ever = true;
        if let Some(d) = &self.start {
            let _ = tx.send(Telemetry::Start(d.clone()));
        }
        if let Some((passes, reason)) = &self.end {
            let _ = tx.send(Telemetry::End {
                passes: *passes,
                dropped: 0,
                reason: reason.clone(),
            });
            return;
        }
        self.list.push(Sink {
            tx,
            kind,
            dropped: 0,
        });
    }

    /// Send `msg` to every sink (module doc: lossy capacity, must-deliver, gone sinks).
    /// Returns false when every sink that was ever added is gone. The last sink that takes
    /// the message gets `msg` itself, the others a clone (a 1B frame holds ≈ 0.2 MB of
    /// stamps).
    pub(super) fn emit(&mut self, msg: Telemetry) -> bool {
        match &msg {
            Telemetry::Start(d) => self.start = Some(d.clone()),
            Telemetry::End { passes, reason, .. } => self.end = Some((*passes, reason.clone())),
            _ => {}
        }
        let must = msg.must_deliver();
        let is_frame = matches!(msg, Telemetry::Frame(_));
        let is_end = matches!(msg, Telemetry::End { .. });
        // Who takes it: a lossy sink at capacity skips an ordinary message (and counts a
        // frame as dropped).
        let takes: Vec<bool> = self
            .list
            .iter_mut()
            .map(|s| match s.kind {
                SinkKind::Lossy { capacity } if !must && s.tx.len() >= capacity => {
                    if is_frame {
                        s.dropped += 1;
                    }
                    false
                }
                _ => true,
            })
            .collect();
        let last = takes.iter().rposition(|&t| t);
        let mut msg = Some(msg);
        let mut i = 0;
        self.list.retain_mut(|s| {
            let k = i;
            i += 1;
            if !takes[k] {
                return true;
            }
            let m = if Some(k) == last {
                msg.take()
            } else {
                msg.clone()
            };
            let Some(mut m) = m else {
                return true;
            };
            match &mut m {
                Telemetry::Frame(f) => f.dropped = s.dropped,
                Telemetry::End { dropped, .. } => *dropped = s.dropped,
                _ => {}
            }
            s.tx.send(m).is_ok()
        });
        if is_end {
            // End is the last message: close every sink, so a consumer's iteration ends.
            self.list.clear();
            return true;
        }
        !(self.ever && self.list.is_empty())
    }
}
