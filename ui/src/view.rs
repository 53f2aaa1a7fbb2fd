//! View state (focus, zoom, selection, freeze; what actions change) and the derived rows the
//! panels draw (stage table, barriers, attribution warnings), computed in
//! [`UiState::prepare`] before a draw, never while drawing.

use std::sync::Arc;

use baro_telemetry::analysis::{self, StageCost};
use baro_telemetry::{Dispatch, Frame, RunDetails, StageKind};

use crate::action::{Action, Control};
use crate::state::Data;
use crate::stats::{Pcts, Selected, WINDOW};

/// Panels, by name in layout files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PanelId {
    /// Header.
    Header,
    /// Pass navigator strip.
    Navigator,
    /// Flame chart.
    Flame,
    /// Stage table.
    Stages,
    /// Barriers.
    Barriers,
    /// Attribution warnings.
    Attribution,
    /// Tokens.
    Tokens,
    /// Warnings / log.
    Log,
}

impl PanelId {
    /// Every panel with its layout name.
    pub const ALL: [(PanelId, &'static str); 8] = [
        (PanelId::Header, "header"),
        (PanelId::Navigator, "navigator"),
        (PanelId::Flame, "flame"),
        (PanelId::Stages, "stages"),
        (PanelId::Barriers, "barriers"),
        (PanelId::Attribution, "attribution"),
        (PanelId::Tokens, "tokens"),
        (PanelId::Log, "log"),
    ];
    /// Layout name.
    pub fn name(self) -> &'static str {
        PanelId::ALL
            .iter()
            .find(|(p, _)| *p == self)
            .map_or("?", |x| x.1)
    }
}

/// Which pass the flame chart shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// The newest.
    Latest,
    /// The slowest of the last window.
    Slowest,
    /// A pinned pass.
    Pass(u64),
}

/// Statistics scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every pass since the start.
    All,
    /// The last `WINDOW` passes.
    Window,
    /// Passes lo..=hi.
    Range(u64, u64),
}

/// Stage table sort column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortCol {
    /// Program order.
    Order,
    /// Busy p50.
    Busy,
    /// Charged p50.
    Charged,
    /// Charged − busy.
    Gap,
    /// Busy p99.
    P99,
}

/// View state.
#[derive(Clone, Debug)]
pub struct View {
    /// Focused panel.
    pub focus: PanelId,
    /// Focusable panels of the layout, in order.
    pub panels: Vec<PanelId>,
    /// The focused panel fills the body.
    pub expanded: bool,
    /// Help page shown.
    pub help: bool,
    /// First help line shown (bounded by the event loop to what the screen holds).
    pub help_scroll: u16,
    /// Engine paused (as requested).
    pub paused: bool,
    /// Flame pass.
    pub pick: Pick,
    /// Flame rows are stages (else workgroups).
    pub by_stage: bool,
    /// Flame time window as fractions of the pass: start, width.
    pub zoom: (f64, f64),
    /// Flame cursor: time fraction of the pass, row index.
    pub cursor: (f64, u16),
    /// Stage table sort.
    pub sort: (SortCol, bool),
    /// Stage table by kind.
    pub by_kind: bool,
    /// Selected table row.
    pub row: usize,
    /// Statistics scope.
    pub scope: Scope,
    /// Quit requested.
    pub quit: bool,
    /// Bumped on every change.
    pub generation: u64,
    /// The seek prompt's digits while it is open (replay: `g`).
    pub prompt: Option<String>,
    /// The producer's own status (a replay's banner and position).
    pub producer: Option<crate::action::ProducerStatus>,
    /// The recording in progress (header `REC file size`).
    pub recording: Option<crate::action::RecStatus>,
}

impl Default for View {
    fn default() -> Self {
        View {
            focus: PanelId::Flame,
            panels: vec![],
            expanded: false,
            help: false,
            help_scroll: 0,
            paused: false,
            pick: Pick::Latest,
            by_stage: false,
            zoom: (0.0, 1.0),
            cursor: (0.5, 0),
            sort: (SortCol::Order, false),
            by_kind: false,
            row: 0,
            scope: Scope::Window,
            quit: false,
            generation: 0,
            prompt: None,
            producer: None,
            recording: None,
        }
    }
}

/// One stage-table row.
#[derive(Clone, Debug, PartialEq)]
pub struct StageRow {
    /// Stage name or kind name.
    pub name: Arc<str>,
    /// Kind (colour).
    pub kind: StageKind,
    /// Program order.
    pub order: usize,
    /// Busy percentiles.
    pub busy: Pcts,
    /// Charged percentiles.
    pub charged: Pcts,
    /// Busy p50 as a share of the pass p50.
    pub share: f64,
    /// Effective bandwidth (weight bytes ÷ busy p50), bytes/s.
    pub bw: Option<f64>,
    /// The same bytes over the charged p50 (the stage's wall, its level's barrier wait
    /// included where it is the level's last stage), bytes/s.
    pub bw_charged: Option<f64>,
}

/// One barrier row.
#[derive(Clone, Debug, PartialEq)]
pub struct BarrierRow {
    /// Level.
    pub level: u32,
    /// Level name.
    pub name: Arc<str>,
    /// Arrival spread, release, exit spread.
    pub p: [Pcts; 3],
}

/// Warning thresholds (charged − busy must exceed both to be named): the analysis's.
pub use baro_telemetry::analysis::{GAP_MIN_FRAC, GAP_MIN_NS};

/// Rows derived for drawing.
#[derive(Clone, Debug, Default)]
pub struct Derived {
    /// Stage rows, sorted.
    pub stages: Vec<StageRow>,
    /// Barrier rows.
    pub barriers: Vec<BarrierRow>,
    /// Barrier waits (arrival spread + release p50, summed) as a share of the pass p50.
    pub barrier_share: f64,
    /// Pass duration percentiles over the scope.
    pub pass: Pcts,
    /// Attribution warnings.
    pub attribution: Vec<String>,
    /// Passes in scope.
    pub passes: u64,
    key: (u64, u64),
    frames: u64,
    at: Option<std::time::Instant>,
}

/// Derived rows are recomputed after this many new passes (or `REFRESH` time) so the
/// numbers do not jitter and a busy stream does not pay for them every frame; a view change
/// recomputes at once.
pub const REFRESH_PASSES: u64 = 8;
/// … or after this long with any new pass.
pub const REFRESH: std::time::Duration = std::time::Duration::from_millis(250);

/// The whole UI state: live data, an optional frozen snapshot, the view, derived rows.
pub struct UiState {
    /// Everything ingested.
    pub live: Data,
    /// The snapshot shown while frozen.
    pub frozen: Option<Data>,
    /// View.
    pub view: View,
    /// Derived rows for the shown data.
    pub derived: Derived,
    /// What the flame chart derived from its pass, kept between draws.
    pub flame: crate::flame_cache::FlameCache,
}

impl UiState {
    /// Empty state.
    pub fn new(live: Data, panels: Vec<PanelId>) -> UiState {
        let focus = panels
            .iter()
            .copied()
            .find(|p| *p == PanelId::Flame)
            .or(panels.first().copied())
            .unwrap_or(PanelId::Flame);
        let view = View {
            focus,
            panels,
            ..Default::default()
        };
        UiState {
            live,
            frozen: None,
            view,
            derived: Derived::default(),
            flame: Default::default(),
        }
    }

    /// The data on screen (the snapshot while frozen).
    pub fn shown(&self) -> &Data {
        self.frozen.as_ref().unwrap_or(&self.live)
    }

    /// The frame the flame chart shows.
    pub fn flame_frame(&self) -> Option<&Arc<Frame>> {
        let d = self.shown();
        match self.view.pick {
            Pick::Latest => d.recent.back(),
            Pick::Slowest => d.slowest.as_ref().or(d.recent.back()),
            Pick::Pass(p) => d.frame_by_pass(p).or(d.recent.back()),
        }
    }

    /// Apply an action; engine requests go to `ctl`.
    pub fn apply(&mut self, a: Action, ctl: &dyn Control) {
        self.view.generation += 1;
        let v = &mut self.view;
        let focus = v.focus;
        let step = v.zoom.1 / 40.0;
        match a {
            Action::Quit
            | Action::PauseResume
            | Action::Step
            | Action::SwitchDispatch
            | Action::SeekSlowest
            | Action::Restart
            | Action::Record => self.steer(a, ctl),
            Action::Help => {
                v.help = !v.help;
                v.help_scroll = 0;
            }
            Action::Freeze => {
                self.frozen = match self.frozen.take() {
                    Some(_) => None,
                    None => Some(self.live.clone()),
                };
            }
            Action::Seek => v.prompt = Some(String::new()),
            Action::Expand => v.expanded = !v.expanded,
            Action::FocusNext | Action::FocusPrev if !v.panels.is_empty() => {
                let n = v.panels.len();
                let i = v.panels.iter().position(|p| *p == focus).unwrap_or(0);
                let j = if a == Action::FocusNext {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                v.focus = v.panels[j];
            }
            Action::FocusNext | Action::FocusPrev => {}
            Action::Left | Action::Right if focus == PanelId::Navigator => {
                let ret = self.shown().retained();
                let cur = self.flame_frame().map(|f| f.pass);
                let next = match (a, cur) {
                    (Action::Left, Some(c)) => ret.iter().rev().find(|&&p| p < c).copied(),
                    (_, Some(c)) => ret.iter().find(|&&p| p > c).copied(),
                    _ => None,
                };
                if let Some(p) = next {
                    self.pin(p);
                }
            }
            Action::Left => v.cursor.0 = (v.cursor.0 - step).max(0.0),
            Action::Right => v.cursor.0 = (v.cursor.0 + step).min(1.0),
            Action::Up if focus == PanelId::Flame => v.cursor.1 = v.cursor.1.saturating_sub(1),
            Action::Down if focus == PanelId::Flame => v.cursor.1 = v.cursor.1.saturating_add(1),
            Action::Up => v.row = v.row.saturating_sub(1),
            Action::Down => v.row = v.row.saturating_add(1),
            Action::ZoomIn => zoom(v, 0.5, v.cursor.0),
            Action::ZoomOut => zoom(v, 2.0, v.cursor.0),
            Action::PanLeft => pan(v, -0.25),
            Action::PanRight => pan(v, 0.25),
            Action::ZoomReset => v.zoom = (0.0, 1.0),
            Action::PickLatest => v.pick = Pick::Latest,
            Action::PickSlowest => v.pick = Pick::Slowest,
            Action::Pin => {
                if let Some(p) = self.flame_frame().map(|f| f.pass) {
                    self.pin(p);
                }
            }
            Action::GroupToggle => v.by_stage = !v.by_stage,
            Action::Sort => {
                v.sort.0 = match v.sort.0 {
                    SortCol::Order => SortCol::Busy,
                    SortCol::Busy => SortCol::Charged,
                    SortCol::Charged => SortCol::Gap,
                    SortCol::Gap => SortCol::P99,
                    SortCol::P99 => SortCol::Order,
                };
                v.sort.1 = v.sort.0 != SortCol::Order;
            }
            Action::SortReverse => v.sort.1 = !v.sort.1,
            Action::ByKind => v.by_kind = !v.by_kind,
            Action::Scope | Action::RangeStart | Action::RangeEnd => self.scope(a),
        }
    }

    /// The actions that steer the producer (quit, pause, step, dispatch, seek to the slowest
    /// pass, restart, record): requests to `ctl`, and what the view keeps of them.
    fn steer(&mut self, a: Action, ctl: &dyn Control) {
        let v = &mut self.view;
        match a {
            Action::Quit => {
                v.quit = true;
                ctl.stop();
            }
            Action::PauseResume => {
                v.paused = !v.paused;
                if v.paused {
                    ctl.pause()
                } else {
                    ctl.resume()
                }
            }
            Action::Step => {
                if !v.paused {
                    v.paused = true;
                    ctl.pause();
                }
                ctl.step();
            }
            Action::SwitchDispatch => {
                let now = self.live.dispatch.unwrap_or(Dispatch::Mega);
                ctl.set_dispatch(if now == Dispatch::Mega {
                    Dispatch::Multi
                } else {
                    Dispatch::Mega
                });
            }
            Action::SeekSlowest => ctl.seek_slowest(),
            Action::Restart => ctl.restart(),
            Action::Record => {
                let recording = ctl.toggle_record();
                if !recording {
                    self.live.note(
                        crate::state::Severity::Warn,
                        "recording: only a live session can be recorded (use `baro-top record` or the recording itself)".into(),
                    );
                }
            }
            _ => {}
        }
    }

    /// The statistics' scope: all passes, the window, a range (its ends at the flame's pass).
    fn scope(&mut self, a: Action) {
        match a {
            Action::Scope => {
                let last = self.shown().passes.back().map_or(0, |p| p.pass);
                self.view.scope = match self.view.scope {
                    Scope::All => Scope::Window,
                    Scope::Window => Scope::Range(last.saturating_sub(WINDOW as u64 - 1), last),
                    Scope::Range(..) => Scope::All,
                }
            }
            Action::RangeStart | Action::RangeEnd => {
                let p = self.flame_frame().map_or(0, |f| f.pass);
                let (lo, hi) = match self.view.scope {
                    Scope::Range(lo, hi) => (lo, hi),
                    _ => (p, p),
                };
                self.view.scope = if a == Action::RangeStart {
                    Scope::Range(p, hi.max(p))
                } else {
                    Scope::Range(lo.min(p), p)
                };
            }
            _ => {}
        }
    }

    /// Show pass `p` in the flame chart and keep its frame while pinned.
    pub fn pin(&mut self, p: u64) {
        self.view.pick = Pick::Pass(p);
        for d in [Some(&mut self.live), self.frozen.as_mut()]
            .into_iter()
            .flatten()
        {
            if let Some(f) = d.frame_by_pass(p).cloned() {
                d.pinned = Some(f);
            }
        }
    }

    /// Recompute the derived rows if the data or the view changed.
    pub fn prepare(&mut self) {
        let key = (self.shown().generation, self.view.generation);
        let d = &self.derived;
        let frames = self.shown().frames;
        let fresh =
            d.at.is_some_and(|t| t.elapsed() < REFRESH) && frames < d.frames + REFRESH_PASSES;
        if d.key == key || (d.key.1 == key.1 && fresh && d.frames > 0) {
            return;
        }
        self.derived = derive(self.shown(), &self.view);
        self.derived.key = key;
        self.derived.frames = frames;
        self.derived.at = Some(std::time::Instant::now());
    }
}

fn zoom(v: &mut View, factor: f64, at: f64) {
    let w = (v.zoom.1 * factor).clamp(1e-4, 1.0);
    let rel = ((at - v.zoom.0) / v.zoom.1).clamp(0.0, 1.0);
    v.zoom = ((at - rel * w).clamp(0.0, 1.0 - w), w);
}

fn pan(v: &mut View, by: f64) {
    v.zoom.0 = (v.zoom.0 + by * v.zoom.1).clamp(0.0, 1.0 - v.zoom.1);
    v.cursor.0 = v.cursor.0.clamp(v.zoom.0, v.zoom.0 + v.zoom.1);
}

/// Mouse wheel over the flame chart: zoom around fraction `at`.
pub fn wheel(v: &mut View, up: bool, at: f64) {
    v.generation += 1;
    v.cursor.0 = at;
    zoom(v, if up { 0.5 } else { 2.0 }, at);
}

fn derive(d: &Data, v: &View) -> Derived {
    let (Some(run), Some(stats)) = (&d.run, &d.stats) else {
        return Derived::default();
    };
    let range = match v.scope {
        Scope::Range(lo, hi) => Some((lo, hi)),
        _ => None,
    };
    let sel = stats.selected(range, run.grid);
    let all = |h: &[hdrhistogram::Histogram<u32>]| h.iter().map(Pcts::of).collect::<Vec<_>>();
    let (busy, charged, kb, kc, bars, pass, passes) = match v.scope {
        Scope::All => (
            all(&stats.busy),
            all(&stats.charged),
            all(&stats.kind_busy),
            all(&stats.kind_charged),
            stats
                .barrier
                .iter()
                .map(|h| [Pcts::of(&h[0]), Pcts::of(&h[1]), Pcts::of(&h[2])])
                .collect(),
            Pcts::of(&stats.pass),
            stats.pass.len(),
        ),
        _ => (
            sel.busy.clone(),
            sel.charged.clone(),
            sel.kind_busy.clone(),
            sel.kind_charged.clone(),
            sel.barrier.clone(),
            sel.pass,
            sel.passes,
        ),
    };
    let share = |ns: u64| {
        if pass.p50 > 0 {
            ns as f64 / pass.p50 as f64
        } else {
            0.0
        }
    };
    let mut rows = if v.by_kind {
        kind_rows(d, run, &kb, &kc, share)
    } else {
        stage_rows(d, run, &busy, &charged, share)
    };
    let key = |r: &StageRow| match v.sort.0 {
        SortCol::Order => r.order as u64,
        SortCol::Busy => r.busy.p50,
        SortCol::Charged => r.charged.p50,
        SortCol::Gap => r.charged.p50.saturating_sub(r.busy.p50),
        SortCol::P99 => r.busy.p99,
    };
    rows.sort_by_key(key);
    if v.sort.1 {
        rows.reverse();
    }

    let (barriers, wait) = barrier_rows(run, &bars);

    let attribution = attribution(run, &sel);
    Derived {
        stages: rows,
        barriers,
        barrier_share: share(wait),
        pass,
        attribution,
        passes,
        ..Default::default()
    }
}

/// One row per stage kind that ran: its busy and charged percentiles (`kb`, `kc`), its share
/// of the pass and its bandwidth (the kind's weight bytes over its median busy time).
fn kind_rows(
    d: &Data,
    run: &RunDetails,
    kb: &[Pcts],
    kc: &[Pcts],
    share: impl Fn(u64) -> f64,
) -> Vec<StageRow> {
    let mut rows = vec![];
    for (i, k) in StageKind::ALL.iter().enumerate() {
        let (b, c) = (kb[i], kc[i]);
        if b.n == 0 {
            continue;
        }
        let bytes: u64 = run
            .stages
            .iter()
            .filter(|s| s.kind == *k)
            .map(|s| d.meta.weight_bytes.get(s.id as usize).copied().unwrap_or(0))
            .fold(0, u64::saturating_add);
        rows.push(StageRow {
            name: k.name().into(),
            kind: *k,
            order: i,
            busy: b,
            charged: c,
            share: share(b.p50),
            bw: rate(bytes, b.p50),
            bw_charged: rate(bytes, c.p50),
        });
    }
    rows
}

/// `bytes` over `ns`, bytes/s; `None` without either.
fn rate(bytes: u64, ns: u64) -> Option<f64> {
    (bytes > 0 && ns > 0).then(|| bytes as f64 * 1e9 / ns as f64)
}

/// One row per stage that ran, as [`kind_rows`] per kind.
fn stage_rows(
    d: &Data,
    run: &RunDetails,
    busy: &[Pcts],
    charged: &[Pcts],
    share: impl Fn(u64) -> f64,
) -> Vec<StageRow> {
    let mut rows = vec![];
    for s in &run.stages {
        let i = s.id as usize;
        let (Some(b), Some(c)) = (busy.get(i), charged.get(i)) else {
            continue;
        };
        let (b, c) = (*b, *c);
        if b.n == 0 {
            continue;
        }
        let bytes = d.meta.weight_bytes.get(i).copied().unwrap_or(0);
        rows.push(StageRow {
            name: s.name.clone(),
            kind: s.kind,
            order: i,
            busy: b,
            charged: c,
            share: share(b.p50),
            bw: rate(bytes, b.p50),
            bw_charged: rate(bytes, c.p50),
        });
    }
    rows
}

/// One row per barrier level that was seen, and their summed median wait (arrival spread and
/// release).
fn barrier_rows(run: &RunDetails, bars: &[[Pcts; 3]]) -> (Vec<BarrierRow>, u64) {
    let mut barriers = vec![];
    let mut wait: u64 = 0;
    for (l, p) in bars.iter().enumerate() {
        let p = *p;
        if p[0].n == 0 {
            continue;
        }
        wait = wait.saturating_add(p[0].p50.saturating_add(p[1].p50));
        barriers.push(BarrierRow {
            level: l as u32,
            name: run.level_name(l as u32).into_owned().into(),
            p,
        });
    }
    (barriers, wait)
}

/// Attribution: over the sliding window (or the chosen range), whatever the table shows;
/// the analysis decides, the view only formats.
fn attribution(run: &RunDetails, sel: &Selected) -> Vec<String> {
    let cost = |sid: u32| {
        let (b, c) = (sel.busy.get(sid as usize)?, sel.charged.get(sid as usize)?);
        (b.n > 0).then(|| StageCost {
            busy_ns: b.p50,
            charged_ns: c.p50,
            slowest_ns: sel
                .slowest
                .get(sid as usize)
                .filter(|s| s.n > 0)
                .map(|s| s.p50),
        })
    };
    let last = |l: u32| sel.last.get(l as usize).copied().flatten().map(|(w, _)| w);
    let straggler = analysis::straggler(&sel.last_all, sel.barriers_seen, run.grid, sel.passes);
    // A run without stage times says why first (its device clock does not count ns).
    run.device_clock_off
        .iter()
        .cloned()
        .chain(straggler.iter().map(ToString::to_string))
        .chain(
            analysis::tails(run, cost, last)
                .iter()
                .map(ToString::to_string),
        )
        .collect()
}
