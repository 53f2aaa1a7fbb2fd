//! Key bindings: the default table ([`DEFAULTS`]: action, config name, keys, what it does),
//! remapping from a layout/config file's `[keys]` table, and key lookup. The help overlay
//! (`?`) is generated from the live [`Keymap`], so it always shows the real bindings.
//!
//! Key spellings: a single character (`q`, `?`, `.`, `+`), or one of `Esc Enter Tab BackTab
//! Space Left Right Up Down PageUp PageDown Home End F1`–`F12`, optionally prefixed `Ctrl-`.
//! A remapped action loses its default keys; every other action keeps them.

use std::collections::BTreeMap;
use std::fmt;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use crate::action::Action;

/// One default binding.
#[derive(Clone, Copy, Debug)]
pub struct Binding {
    /// The action.
    pub action: Action,
    /// Its name in `[keys]`.
    pub name: &'static str,
    /// Default keys.
    pub keys: &'static [&'static str],
    /// One line for the help overlay.
    pub help: &'static str,
}

macro_rules! b {
    ($a:ident, $n:literal, [$($k:literal),*], $h:literal) => {
        Binding { action: Action::$a, name: $n, keys: &[$($k),*], help: $h }
    };
}

/// The default bindings, in help order.
pub const DEFAULTS: &[Binding] = &[
    b!(
        Quit,
        "quit",
        ["q", "Esc", "Ctrl-c"],
        "quit (restores the terminal)"
    ),
    b!(Help, "help", ["?", "F1"], "this help"),
    b!(
        Freeze,
        "freeze",
        ["f"],
        "freeze the display (capture goes on)"
    ),
    b!(PauseResume, "pause", ["Space"], "pause / resume the engine"),
    b!(Step, "step", ["."], "run one pass (paused)"),
    b!(
        SwitchDispatch,
        "dispatch",
        ["m"],
        "switch dispatch mega <-> multi"
    ),
    b!(Expand, "expand", ["e"], "expand the focused panel"),
    b!(FocusNext, "focus_next", ["Tab"], "focus next panel"),
    b!(FocusPrev, "focus_prev", ["BackTab"], "focus previous panel"),
    b!(Left, "left", ["Left", "h"], "cursor left / older pass"),
    b!(Right, "right", ["Right", "l"], "cursor right / newer pass"),
    b!(Up, "up", ["Up", "k"], "cursor / selection up"),
    b!(Down, "down", ["Down", "j"], "cursor / selection down"),
    b!(ZoomIn, "zoom_in", ["+", "="], "zoom in (also mouse wheel)"),
    b!(ZoomOut, "zoom_out", ["-"], "zoom out"),
    b!(PanLeft, "pan_left", ["<", ","], "pan left"),
    b!(PanRight, "pan_right", [">"], "pan right"),
    b!(ZoomReset, "zoom_reset", ["0"], "whole pass"),
    b!(PickLatest, "latest", ["L"], "flame: latest pass"),
    b!(PickSlowest, "slowest", ["S"], "flame: slowest recent pass"),
    b!(Pin, "pin", ["p"], "flame: pin the shown pass"),
    b!(
        GroupToggle,
        "group",
        ["g"],
        "flame rows: workgroups / stages"
    ),
    b!(Sort, "sort", ["s"], "stage table: sort column"),
    b!(SortReverse, "reverse", ["v"], "stage table: reverse sort"),
    b!(ByKind, "by_kind", ["K"], "stage table: by stage / by kind"),
    b!(Scope, "scope", ["w"], "statistics: all / window / range"),
    b!(
        RangeStart,
        "range_start",
        ["["],
        "range starts at the shown pass"
    ),
    b!(RangeEnd, "range_end", ["]"], "range ends at the shown pass"),
    b!(Seek, "seek", [], "replay: seek to a pass (digits, Enter)"),
    b!(
        SeekSlowest,
        "seek_slowest",
        [],
        "replay: jump to the slowest pass"
    ),
    b!(
        Restart,
        "restart",
        [],
        "replay: restart from the first pass"
    ),
    b!(
        Record,
        "record",
        ["r"],
        "live: start / stop recording to a .baro file"
    ),
];

impl Action {
    /// The action's name in the `[keys]` table of a layout/config file.
    pub fn name(self) -> &'static str {
        DEFAULTS
            .iter()
            .find(|b| b.action == self)
            .map_or("?", |b| b.name)
    }
}

/// What a replay binds on top of [`DEFAULTS`] (a layout's `[keys]` still wins): `g` seeks
/// (group toggle moves to `G`), `Z` jumps to the slowest pass, `R` restarts; recording (a
/// live session's) is unbound. Live runs leave the replay actions unbound (and out of the
/// help).
pub const REPLAY_KEYS: &[(&str, &[&str])] = &[
    ("seek", &["g"]),
    ("group", &["G"]),
    ("seek_slowest", &["Z"]),
    ("restart", &["R"]),
    ("record", &[]),
];

/// A key: code plus whether Ctrl is held (Shift is part of the character).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key {
    code: KeyCodeOrd,
    ctrl: bool,
}

/// `KeyCode` subset with an order (for a stable map).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum KeyCodeOrd {
    Char(char),
    F(u8),
    Named(u8),
}

const NAMED: [(&str, KeyCode); 11] = [
    ("Esc", KeyCode::Esc),
    ("Enter", KeyCode::Enter),
    ("Tab", KeyCode::Tab),
    ("BackTab", KeyCode::BackTab),
    ("Left", KeyCode::Left),
    ("Right", KeyCode::Right),
    ("Up", KeyCode::Up),
    ("Down", KeyCode::Down),
    ("PageUp", KeyCode::PageUp),
    ("PageDown", KeyCode::PageDown),
    ("Home", KeyCode::Home),
];

impl Key {
    /// Parse a key spelling (module doc).
    pub fn parse(s: &str) -> Result<Key, String> {
        let (ctrl, rest) = match s.strip_prefix("Ctrl-") {
            Some(r) => (true, r),
            None => (false, s),
        };
        let code = if rest == "Space" {
            KeyCodeOrd::Char(' ')
        } else if let Some(i) = NAMED.iter().position(|(n, _)| *n == rest) {
            KeyCodeOrd::Named(i as u8)
        } else if let Some(n) = rest.strip_prefix('F').and_then(|n| n.parse::<u8>().ok()) {
            if !(1..=12).contains(&n) {
                return Err(format!("no key F{n} (F1..F12)"));
            }
            KeyCodeOrd::F(n)
        } else {
            let mut cs = rest.chars();
            match (cs.next(), cs.next()) {
                (Some(c), None) if !c.is_control() => KeyCodeOrd::Char(c),
                _ => return Err(format!("unknown key {s:?} (a character, or Esc, Enter, Tab, BackTab, Space, arrows, PageUp/Down, Home, F1-F12, with an optional Ctrl- prefix)")),
            }
        };
        Ok(Key { code, ctrl })
    }

    /// The key of a terminal key event (`None` for keys no binding can name).
    pub fn from_event(e: &KeyEvent) -> Option<Key> {
        let ctrl = e.modifiers.contains(KeyModifiers::CONTROL);
        let code = match e.code {
            KeyCode::Char(c) => KeyCodeOrd::Char(c),
            KeyCode::F(n) => KeyCodeOrd::F(n),
            c => KeyCodeOrd::Named(NAMED.iter().position(|(_, k)| *k == c)? as u8),
        };
        Some(Key { code, ctrl })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("Ctrl-")?;
        }
        match self.code {
            KeyCodeOrd::Char(' ') => f.write_str("Space"),
            KeyCodeOrd::Char(c) => write!(f, "{c}"),
            KeyCodeOrd::F(n) => write!(f, "F{n}"),
            KeyCodeOrd::Named(i) => f.write_str(NAMED.get(i as usize).map_or("?", |n| n.0)),
        }
    }
}

/// The bindings in force.
#[derive(Clone, Debug)]
pub struct Keymap {
    by_key: BTreeMap<Key, Action>,
    by_action: Vec<(Action, Vec<Key>)>,
}

impl Default for Keymap {
    fn default() -> Self {
        Keymap::with_overrides(&BTreeMap::new()).unwrap_or_else(|_| Keymap {
            by_key: BTreeMap::new(),
            by_action: vec![],
        })
    }
}

impl Keymap {
    /// Defaults with `overrides` (action name → keys) applied. Errors name the action or key.
    pub fn with_overrides(overrides: &BTreeMap<String, Vec<String>>) -> Result<Keymap, String> {
        for name in overrides.keys() {
            if !DEFAULTS.iter().any(|b| b.name == name) {
                let names: Vec<_> = DEFAULTS.iter().map(|b| b.name).collect();
                return Err(format!(
                    "unknown action {name:?} in [keys] (one of {})",
                    names.join(", ")
                ));
            }
        }
        let mut by_key = BTreeMap::new();
        let mut by_action = vec![];
        for b in DEFAULTS {
            let keys: Vec<Key> = match overrides.get(b.name) {
                Some(ks) => ks.iter().map(|k| Key::parse(k)).collect::<Result<_, _>>()?,
                None => b
                    .keys
                    .iter()
                    .map(|k| Key::parse(k))
                    .collect::<Result<_, _>>()?,
            };
            by_action.push((b.action, keys));
        }
        // Overridden actions claim their keys first, so a remap can take a default's key.
        let order = by_action
            .iter()
            .filter(|(a, _)| overrides.contains_key(a.name()));
        let rest = by_action
            .iter()
            .filter(|(a, _)| !overrides.contains_key(a.name()));
        for (a, keys) in order.chain(rest) {
            for k in keys {
                by_key.entry(*k).or_insert(*a);
            }
        }
        // Ctrl-c always quits: a layout may add quit keys, never take this one away.
        let ctrl_c = Key {
            code: KeyCodeOrd::Char('c'),
            ctrl: true,
        };
        if let Some(a) = by_key.get(&ctrl_c).filter(|a| **a != Action::Quit) {
            return Err(format!(
                "[keys] binds Ctrl-c to {:?}: Ctrl-c always quits (bind another key)",
                a.name()
            ));
        }
        by_key.insert(ctrl_c, Action::Quit);
        // A default key taken by a remap is no longer listed under its old action.
        for (a, keys) in &mut by_action {
            keys.retain(|k| by_key.get(k) == Some(a));
        }
        if let Some((_, ks)) = by_action.iter_mut().find(|(a, _)| *a == Action::Quit) {
            if ks.is_empty() {
                return Err(
                    "[keys] leaves quit without a key: bind one, e.g. quit = [\"q\"] (Ctrl-c always quits too)"
                        .into(),
                );
            }
            if !ks.contains(&ctrl_c) {
                ks.push(ctrl_c);
            }
        }
        Ok(Keymap { by_key, by_action })
    }

    /// The bindings of a replay: [`REPLAY_KEYS`], then `overrides` on top.
    pub fn for_replay(overrides: &BTreeMap<String, Vec<String>>) -> Result<Keymap, String> {
        let mut all: BTreeMap<String, Vec<String>> = REPLAY_KEYS
            .iter()
            .map(|(a, ks)| (a.to_string(), ks.iter().map(|k| k.to_string()).collect()))
            .collect();
        all.extend(overrides.clone());
        Keymap::with_overrides(&all)
    }

    /// Whether any key is bound to `a`.
    pub fn bound(&self, a: Action) -> bool {
        self.by_action
            .iter()
            .any(|(x, ks)| *x == a && !ks.is_empty())
    }

    /// The action bound to a key event.
    pub fn action(&self, e: &KeyEvent) -> Option<Action> {
        self.by_key.get(&Key::from_event(e)?).copied()
    }

    /// The keys of an action, as the help overlay and footer spell them (`q/Esc`).
    pub fn keys_of(&self, a: Action) -> String {
        self.by_action
            .iter()
            .find(|(x, _)| *x == a)
            .map(|(_, ks)| {
                ks.iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .unwrap_or_default()
    }

    /// The first key of an action (footer hints).
    pub fn first_key(&self, a: Action) -> Option<String> {
        self.by_action
            .iter()
            .find(|(x, _)| *x == a)
            .and_then(|(_, ks)| ks.first())
            .map(|k| k.to_string())
    }
}
