//! The trace as Trace Event JSON (layout: the parent module's doc).

use std::io::Write;

use super::timeline::{Ev, Kind, PassInfo, Slice, Timeline, Track};
use super::{mode_name, ExportStats, TraceSink, Us};

fn json_str(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"?\"".into())
}

/// A track's tid and sort index.
fn tid(t: Track) -> (u64, u64) {
    match t {
        Track::Passes => (1, 0),
        Track::Mode => (2, 1),
        Track::Grid(n) => (3 + u64::from(n), 2 + u64::from(n)),
        Track::Wg(w) => (1000 + u64::from(w), 1000 + u64::from(w)),
        // Counters are the process's; their tid is never shown.
        Track::Counter(_) => (1, 0),
    }
}

pub(super) struct Json<W: Write> {
    out: W,
    first: bool,
    /// `"name":…,"args":{…}` of each stage and wait (the same in every pass).
    stage_keys: Vec<String>,
    wait_keys: Vec<String>,
    /// `"name":…,"args":{…}` of the pass slice open on the passes track.
    pass_key: String,
}

impl<W: Write> Json<W> {
    pub(super) fn new(out: W) -> Self {
        Json {
            out,
            first: true,
            stage_keys: vec![],
            wait_keys: vec![],
            pass_key: String::new(),
        }
    }

    pub(super) fn flush(&mut self) -> std::io::Result<()> {
        self.out.flush()
    }

    fn keys(&mut self, tl: &Timeline) {
        let run = tl.run();
        self.stage_keys = run
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    r#""name":{},"args":{{"stage":{i},"level":{}}}"#,
                    json_str(&s.name),
                    s.level
                )
            })
            .collect();
        self.wait_keys = run
            .levels
            .iter()
            .enumerate()
            .map(|(i, l)| {
                format!(
                    r#""name":{},"args":{{"level":{i}}}"#,
                    json_str(&format!("wait {}", l.name))
                )
            })
            .collect();
    }

    fn sep(&mut self) -> std::io::Result<()> {
        if self.first {
            self.first = false;
            self.out.write_all(b"\n")
        } else {
            self.out.write_all(b",\n")
        }
    }

    fn meta(&mut self, tid: u64, what: &str, arg: &str) -> std::io::Result<()> {
        self.sep()?;
        write!(
            self.out,
            r#"{{"ph":"M","pid":1,"tid":{tid},"name":"{what}","args":{arg}}}"#
        )
    }

    fn declare(&mut self, t: Track) -> std::io::Result<()> {
        if let Track::Counter(_) = t {
            return Ok(());
        }
        let (tid, sort) = tid(t);
        let name = json_str(&t.name());
        self.meta(tid, "thread_name", &format!(r#"{{"name":{name}}}"#))?;
        self.meta(
            tid,
            "thread_sort_index",
            &format!(r#"{{"sort_index":{sort}}}"#),
        )
    }

    fn slice_key(&self, s: Slice) -> String {
        match s {
            Slice::Pass => self.pass_key.clone(),
            Slice::Stage(i) | Slice::GridStage { stage: i, .. } => self
                .stage_keys
                .get(i as usize)
                .cloned()
                .unwrap_or_else(|| format!(r#""name":"stage {i}","args":{{"stage":{i}}}"#)),
            Slice::Wait(l) => self
                .wait_keys
                .get(l as usize)
                .cloned()
                .unwrap_or_else(|| format!(r#""name":"wait {l}","args":{{"level":{l}}}"#)),
            Slice::Mode(m) => format!(r#""name":"{}""#, mode_name(m)),
        }
    }
}

fn pass_key(p: &PassInfo) -> String {
    let opt = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
    // The warnings' count always; their text, one string as in the protobuf, where any.
    let attribution = p.attribution.as_ref().map_or(String::new(), |t| {
        format!(r#","attribution":{}"#, json_str(t))
    });
    format!(
        r#""name":"pass {}","args":{{"pass":{},"pos":{},"token":{},"next":{},"wall_ns":{},"gpu_ns":{},"fail_word":"0x{:08x}","mode":"{}","contention":{},"spans":"{}","attribution_warnings":{}{}}}"#,
        p.pass,
        p.pass,
        p.pos,
        p.token,
        p.next,
        p.wall_ns,
        opt(p.gpu_ns),
        p.fail_word,
        mode_name(p.mode),
        json_str(&p.contention),
        p.spans,
        p.attribution_warnings,
        attribution
    )
}

impl<W: Write> TraceSink for Json<W> {
    fn start(&mut self, tl: &Timeline) -> std::io::Result<()> {
        self.keys(tl);
        let run = tl.run();
        self.out
            .write_all(br#"{"displayTimeUnit":"ns","traceEvents":["#)?;
        let title = json_str(&format!("baro-top: {} on {}", run.model, run.device));
        self.meta(1, "process_name", &format!(r#"{{"name":{title}}}"#))?;
        self.meta(1, "process_sort_index", r#"{"sort_index":0}"#)
    }

    fn batch(
        &mut self,
        tl: &Timeline,
        new_tracks: &[Track],
        pass: Option<&PassInfo>,
        evs: &[Ev],
    ) -> std::io::Result<()> {
        if self.stage_keys.len() != tl.run().stages.len() {
            self.keys(tl);
        }
        for &t in new_tracks {
            self.declare(t)?;
        }
        if let Some(p) = pass {
            self.pass_key = pass_key(p);
        }
        for e in evs {
            if matches!(e.kind, Kind::Value(_)) && !matches!(e.track, Track::Counter(_)) {
                continue;
            }
            self.sep()?;
            let (tid, _) = tid(e.track);
            let ts = Us(e.ts);
            match e.kind {
                Kind::Begin(s) | Kind::End(s) => {
                    let ph = if matches!(e.kind, Kind::Begin(_)) {
                        'B'
                    } else {
                        'E'
                    };
                    let key = self.slice_key(s);
                    write!(
                        self.out,
                        r#"{{"ph":"{ph}","pid":1,"tid":{tid},"ts":{ts},{key}}}"#
                    )?;
                }
                Kind::Value(v) => {
                    let (name, unit) = match e.track {
                        Track::Counter(c) => c.name_unit(),
                        _ => ("?", "?"),
                    };
                    write!(
                        self.out,
                        r#"{{"ph":"C","pid":1,"tid":{tid},"ts":{ts},"name":"{name}","args":{{"{unit}":{v:.3}}}}}"#
                    )?;
                }
            }
        }
        Ok(())
    }

    fn finish(&mut self, stats: &ExportStats) -> std::io::Result<()> {
        let note = stats
            .left_out()
            .unwrap_or_else(|| "every recorded span is in the trace".into());
        write!(
            self.out,
            "\n],\"otherData\":{{\"exporter\":\"baro-top\",\"sampling\":{}}}}}\n",
            json_str(&note)
        )
    }
}
