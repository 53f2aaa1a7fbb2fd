//! The trace as Perfetto's native protobuf (`.pftrace`): a `Trace` message, written as one
//! `Trace` per batch (concatenated `Trace` messages are one `Trace`: `packet` is repeated).
//! The types are prost's, generated from a trimmed copy of Perfetto's own trace proto
//! (`telemetry/proto/perfetto_trace.proto`); nothing here encodes wire bytes by hand.
//!
//! ```text
//! packet 1       trusted_packet_sequence_id 1, SEQ_INCREMENTAL_STATE_CLEARED,
//!                timestamp T0 on BOOTTIME (6), clock_snapshot {BOOTTIME = T0,
//!                clock 64 = T0 incremental}, trace_packet_defaults {timestamp_clock_id 64}
//!                T0 = 1 s (trace time 0 is the first pass's start)
//! packet 2       track_descriptor: the process (uuid 1, pid 1, "baro-top: MODEL on
//!                DEVICE"), children ordered explicitly
//! then, per batch (all on sequence 1, SEQ_NEEDS_INCREMENTAL_STATE):
//!   a track_descriptor for each track used for the first time (parent 1, name,
//!                sibling_order_rank; counters with a CounterDescriptor and unit name)
//!   a track_event per event: timestamp = ns since the previous packet's (clock 64),
//!                (the first also interns every debug-annotation name),
//!                TYPE_SLICE_BEGIN (name, debug annotations), TYPE_SLICE_END, or
//!                TYPE_COUNTER (double_counter_value); interned_data with the names it
//!                uses for the first time
//! ```
//!
//! Track uuids: process 1, passes 2, power mode 3, counters 4 (decode tok/s), 5 (sm clock
//! MHz), 6 (mem clock MHz), grid lane n 65 + 2n, wg w 64 + 2w. Sibling order: passes, power
//! mode, counters, grid lanes, workgroups in number order. Event names: stages and waits
//! interned (iids from 1 in order of first use), "pass P" inline. Debug annotations
//! (names interned): a stage's `stage`, `level`; a grid stage's also `busy_mean_ns`,
//! `busy_max_ns`; a wait's `level`; a pass's `pass`, `pos`, `token`, `next`, `wall_ns`,
//! `gpu_ns` (where recorded), `fail_word`, `mode`, `contention`, `spans`,
//! `attribution_warnings` (their count) and `attribution` (the first four warnings' text,
//! `; `-joined, where any).

use std::collections::HashMap;
use std::io::Write;

use prost::Message;

use super::perfetto_protos as pb;
use super::timeline::{Counter, Ev, Kind, PassInfo, Slice, Timeline, Track};
use super::{mode_name, ExportStats, TraceSink};

/// The sequence every packet is on.
pub const SEQUENCE: u32 = 1;
/// The sequence-scoped incremental clock (ns) every event's timestamp is on.
pub const INCREMENTAL_CLOCK: u32 = 64;
/// Trace time 0 (the first pass's start) on BOOTTIME, ns.
pub const T0_NS: u64 = 1_000_000_000;
/// The process track's uuid.
pub const PROCESS_UUID: u64 = 1;

/// A track's uuid and sibling rank.
pub fn track_uuid_rank(t: TrackKey) -> (u64, i32) {
    let rank = |x: u64| i32::try_from(x).unwrap_or(i32::MAX);
    match t {
        TrackKey::Passes => (2, 0),
        TrackKey::Mode => (3, 1),
        TrackKey::Counter(i) => (4 + u64::from(i), 2 + i32::from(i)),
        TrackKey::Grid(n) => (65 + 2 * u64::from(n), rank(10 + u64::from(n))),
        TrackKey::Wg(w) => (64 + 2 * u64::from(w), rank(1_000_000 + u64::from(w))),
    }
}

/// A track as [`track_uuid_rank`] knows it (a public mirror of the timeline's tracks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrackKey {
    /// The passes track.
    Passes,
    /// The power-mode track.
    Mode,
    /// Counter 0 (decode tok/s), 1 (sm clock MHz), 2 (mem clock MHz).
    Counter(u8),
    /// Grid lane n.
    Grid(u32),
    /// Workgroup w.
    Wg(u32),
}

fn key(t: Track) -> TrackKey {
    match t {
        Track::Passes => TrackKey::Passes,
        Track::Mode => TrackKey::Mode,
        Track::Grid(n) => TrackKey::Grid(n),
        Track::Wg(w) => TrackKey::Wg(w),
        Track::Counter(Counter::TokS) => TrackKey::Counter(0),
        Track::Counter(Counter::SmMhz) => TrackKey::Counter(1),
        Track::Counter(Counter::MemMhz) => TrackKey::Counter(2),
    }
}

/// Debug annotation names, interned with iid = index + 1.
const ANNOTATIONS: [&str; 16] = [
    "stage",
    "level",
    "busy_mean_ns",
    "busy_max_ns",
    "pass",
    "pos",
    "token",
    "next",
    "wall_ns",
    "gpu_ns",
    "fail_word",
    "mode",
    "contention",
    "spans",
    "attribution_warnings",
    "attribution",
];

fn ann_iid(name: &str) -> u64 {
    ANNOTATIONS
        .iter()
        .position(|&n| n == name)
        .map_or(0, |i| i as u64 + 1)
}

fn uint(name: &str, v: u64) -> pb::DebugAnnotation {
    pb::DebugAnnotation {
        name_field: Some(pb::debug_annotation::NameField::NameIid(ann_iid(name))),
        value: Some(pb::debug_annotation::Value::UintValue(v)),
    }
}

fn string(name: &str, v: String) -> pb::DebugAnnotation {
    pb::DebugAnnotation {
        name_field: Some(pb::debug_annotation::NameField::NameIid(ann_iid(name))),
        value: Some(pb::debug_annotation::Value::StringValue(v)),
    }
}

pub(super) struct Proto<W: Write> {
    out: W,
    /// The previous packet's time on the incremental clock, ns (trace time).
    last_ts: u64,
    names: HashMap<String, u64>,
    /// Per stage / level of the current run: its name's iid once interned.
    stage_iid: Vec<Option<u64>>,
    wait_iid: Vec<Option<u64>>,
    annotations_sent: bool,
    buf: Vec<u8>,
}

impl<W: Write> Proto<W> {
    pub(super) fn new(out: W) -> Self {
        Proto {
            out,
            last_ts: 0,
            names: HashMap::new(),
            stage_iid: vec![],
            wait_iid: vec![],
            annotations_sent: false,
            buf: Vec::with_capacity(1 << 16),
        }
    }

    pub(super) fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    fn write(&mut self, packets: Vec<pb::TracePacket>) -> std::io::Result<()> {
        self.buf.clear();
        pb::Trace { packet: packets }
            .encode(&mut self.buf)
            .map_err(std::io::Error::other)?;
        self.out.write_all(&self.buf)
    }

    /// The iid of event name `name`, interning it into `new` on first use.
    fn intern(&mut self, name: &str, new: &mut Vec<pb::EventName>) -> u64 {
        if let Some(&i) = self.names.get(name) {
            return i;
        }
        let iid = self.names.len() as u64 + 1;
        self.names.insert(name.to_string(), iid);
        new.push(pb::EventName {
            iid: Some(iid),
            name: Some(name.to_string()),
        });
        iid
    }

    fn slice_name(
        &mut self,
        tl: &Timeline,
        s: Slice,
        pass: Option<&PassInfo>,
        new: &mut Vec<pb::EventName>,
    ) -> pb::track_event::NameField {
        use pb::track_event::NameField;
        let run = tl.run();
        match s {
            Slice::Pass => NameField::Name(format!("pass {}", pass.map_or(0, |p| p.pass))),
            Slice::Stage(i) | Slice::GridStage { stage: i, .. } => {
                let i = i as usize;
                if let Some(Some(iid)) = self.stage_iid.get(i) {
                    return NameField::NameIid(*iid);
                }
                let name = run
                    .stages
                    .get(i)
                    .map_or_else(|| format!("stage {i}"), |s| s.name.to_string());
                let iid = self.intern(&name, new);
                if let Some(slot) = self.stage_iid.get_mut(i) {
                    *slot = Some(iid);
                }
                NameField::NameIid(iid)
            }
            Slice::Wait(l) => {
                let l = l as usize;
                if let Some(Some(iid)) = self.wait_iid.get(l) {
                    return NameField::NameIid(*iid);
                }
                let name = run
                    .levels
                    .get(l)
                    .map_or_else(|| format!("wait {l}"), |x| format!("wait {}", x.name));
                let iid = self.intern(&name, new);
                if let Some(slot) = self.wait_iid.get_mut(l) {
                    *slot = Some(iid);
                }
                NameField::NameIid(iid)
            }
            Slice::Mode(m) => NameField::NameIid(self.intern(mode_name(m), new)),
        }
    }

    fn annotations(tl: &Timeline, s: Slice, pass: Option<&PassInfo>) -> Vec<pb::DebugAnnotation> {
        let level = |i: u32| tl.run().stages.get(i as usize).map_or(0, |s| s.level);
        match s {
            Slice::Stage(i) => vec![uint("stage", i.into()), uint("level", level(i).into())],
            Slice::GridStage {
                stage,
                busy_mean_ns,
                busy_max_ns,
            } => vec![
                uint("stage", stage.into()),
                uint("level", level(stage).into()),
                uint("busy_mean_ns", busy_mean_ns),
                uint("busy_max_ns", busy_max_ns),
            ],
            Slice::Wait(l) => vec![uint("level", l.into())],
            Slice::Mode(_) => vec![],
            Slice::Pass => {
                let Some(p) = pass else { return vec![] };
                let mut v = vec![
                    uint("pass", p.pass),
                    uint("pos", p.pos.into()),
                    uint("token", p.token.into()),
                    uint("next", p.next.into()),
                    uint("wall_ns", p.wall_ns),
                ];
                if let Some(g) = p.gpu_ns {
                    v.push(uint("gpu_ns", g));
                }
                v.extend([
                    string("fail_word", format!("0x{:08x}", p.fail_word)),
                    string("mode", mode_name(p.mode).into()),
                    string("contention", p.contention.clone()),
                    string("spans", p.spans.into()),
                    uint("attribution_warnings", p.attribution_warnings),
                ]);
                if let Some(t) = &p.attribution {
                    v.push(string("attribution", t.clone()));
                }
                v
            }
        }
    }

    fn descriptor(t: Track) -> pb::TracePacket {
        let (uuid, rank) = track_uuid_rank(key(t));
        let counter = match t {
            Track::Counter(c) => Some(pb::CounterDescriptor {
                unit_name: Some(c.name_unit().1.into()),
                ..Default::default()
            }),
            _ => None,
        };
        pb::TracePacket {
            data: Some(pb::trace_packet::Data::TrackDescriptor(
                pb::TrackDescriptor {
                    uuid: Some(uuid),
                    parent_uuid: Some(PROCESS_UUID),
                    static_or_dynamic_name: Some(pb::track_descriptor::StaticOrDynamicName::Name(
                        t.name(),
                    )),
                    counter,
                    sibling_order_rank: Some(rank),
                    ..Default::default()
                },
            )),
            ..on_sequence()
        }
    }
}

fn on_sequence() -> pb::TracePacket {
    pb::TracePacket {
        optional_trusted_packet_sequence_id: Some(
            pb::trace_packet::OptionalTrustedPacketSequenceId::TrustedPacketSequenceId(SEQUENCE),
        ),
        sequence_flags: Some(pb::trace_packet::SequenceFlags::SeqNeedsIncrementalState as u32),
        ..Default::default()
    }
}

impl<W: Write> TraceSink for Proto<W> {
    fn start(&mut self, tl: &Timeline) -> std::io::Result<()> {
        use pb::clock_snapshot::Clock;
        let boottime = pb::BuiltinClock::Boottime as u32;
        let first = pb::TracePacket {
            timestamp: Some(T0_NS),
            timestamp_clock_id: Some(boottime),
            sequence_flags: Some(
                pb::trace_packet::SequenceFlags::SeqIncrementalStateCleared as u32,
            ),
            first_packet_on_sequence: Some(true),
            trace_packet_defaults: Some(pb::TracePacketDefaults {
                timestamp_clock_id: Some(INCREMENTAL_CLOCK),
                track_event_defaults: None,
            }),
            data: Some(pb::trace_packet::Data::ClockSnapshot(pb::ClockSnapshot {
                clocks: vec![
                    Clock {
                        clock_id: Some(boottime),
                        timestamp: Some(T0_NS),
                        ..Default::default()
                    },
                    Clock {
                        clock_id: Some(INCREMENTAL_CLOCK),
                        timestamp: Some(T0_NS),
                        is_incremental: Some(true),
                        ..Default::default()
                    },
                ],
                primary_trace_clock: None,
            })),
            optional_trusted_packet_sequence_id: on_sequence().optional_trusted_packet_sequence_id,
            ..Default::default()
        };
        let run = tl.run();
        let process = pb::TracePacket {
            data: Some(pb::trace_packet::Data::TrackDescriptor(
                pb::TrackDescriptor {
                    uuid: Some(PROCESS_UUID),
                    process: Some(pb::ProcessDescriptor {
                        pid: Some(1),
                        process_name: Some(format!("baro-top: {} on {}", run.model, run.device)),
                        ..Default::default()
                    }),
                    child_ordering: Some(
                        pb::track_descriptor::ChildTracksOrdering::Explicit as i32,
                    ),
                    ..Default::default()
                },
            )),
            ..on_sequence()
        };
        self.write(vec![first, process])
    }

    fn batch(
        &mut self,
        tl: &Timeline,
        new_tracks: &[Track],
        pass: Option<&PassInfo>,
        evs: &[Ev],
    ) -> std::io::Result<()> {
        let run = tl.run();
        if self.stage_iid.len() != run.stages.len() || self.wait_iid.len() != run.levels.len() {
            self.stage_iid = vec![None; run.stages.len()];
            self.wait_iid = vec![None; run.levels.len()];
        }
        let mut packets: Vec<pb::TracePacket> =
            new_tracks.iter().map(|&t| Self::descriptor(t)).collect();
        packets.reserve(evs.len());
        for e in evs {
            let mut new_names = vec![];
            let (uuid, _) = track_uuid_rank(key(e.track));
            let mut ev = pb::TrackEvent {
                track_uuid: Some(uuid),
                ..Default::default()
            };
            match e.kind {
                Kind::Begin(s) => {
                    ev.r#type = Some(pb::track_event::Type::SliceBegin as i32);
                    ev.name_field = Some(self.slice_name(tl, s, pass, &mut new_names));
                    ev.debug_annotations = Self::annotations(tl, s, pass);
                }
                Kind::End(_) => ev.r#type = Some(pb::track_event::Type::SliceEnd as i32),
                Kind::Value(v) => {
                    ev.r#type = Some(pb::track_event::Type::Counter as i32);
                    ev.counter_value_field =
                        Some(pb::track_event::CounterValueField::DoubleCounterValue(v));
                }
            }
            // The timeline never goes back in time; a delta is never negative.
            let delta = e.ts.saturating_sub(self.last_ts);
            self.last_ts = self.last_ts.max(e.ts);
            // Annotation names go with the first event (an event packet is where every
            // reader looks for interned data).
            let annotation_names = if self.annotations_sent {
                vec![]
            } else {
                self.annotations_sent = true;
                ANNOTATIONS
                    .iter()
                    .enumerate()
                    .map(|(i, n)| pb::DebugAnnotationName {
                        iid: Some(i as u64 + 1),
                        name: Some((*n).into()),
                    })
                    .collect()
            };
            let interned = !new_names.is_empty() || !annotation_names.is_empty();
            packets.push(pb::TracePacket {
                timestamp: Some(delta),
                interned_data: interned.then(|| pb::InternedData {
                    event_names: new_names,
                    debug_annotation_names: annotation_names,
                    ..Default::default()
                }),
                data: Some(pb::trace_packet::Data::TrackEvent(ev)),
                ..on_sequence()
            });
        }
        self.write(packets)
    }

    fn finish(&mut self, _stats: &ExportStats) -> std::io::Result<()> {
        Ok(())
    }
}
