//! Layout files: which panels go where. Presets live in `layouts/*.toml` (embedded in the
//! binary, chosen with `--layout NAME`); a user file is `--layout PATH`.
//!
//! # Schema
//!
//! ```toml
//! min_width = 80          # below this size the screen says "need W×H" (default 40×12)
//! min_height = 24
//!
//! [[row]]                 # rows, top to bottom, under the header
//! height = 3              # lines (integer), "40%", "*" or "2*" (a share of what is left)
//! panels = ["navigator"]  # side by side: header navigator flame stages barriers
//!                         # attribution tokens log
//! widths = ["*"]          # optional, one per panel, same spellings as height
//!
//! [keys]                  # optional remapping: action name = [keys] (see keymap.rs)
//! freeze = ["F"]
//! ```
//!
//! The header is always the first row and the key-hint footer the last line. A bad file is
//! an error naming the file, line and problem, never a silent default.

use std::collections::BTreeMap;
use std::path::Path;

use ratatui::layout::{Constraint, Layout as RLayout, Rect};
use serde::Deserialize;
use toml::Spanned;

use crate::view::PanelId;

/// Presets shipped in `layouts/`, by name.
pub const PRESETS: [(&str, &str); 3] = [
    ("default", include_str!("../../layouts/default.toml")),
    ("flame", include_str!("../../layouts/flame.toml")),
    ("compact", include_str!("../../layouts/compact.toml")),
];

/// The largest layout file read (the presets are a few hundred bytes).
pub const MAX_FILE: u64 = 1 << 20;

/// A row or column size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// Lines / columns.
    Fixed(u16),
    /// Percent of the parent.
    Percent(u16),
    /// A share of what is left.
    Fill(u16),
}

impl Size {
    fn constraint(self) -> Constraint {
        match self {
            Size::Fixed(n) => Constraint::Length(n),
            Size::Percent(p) => Constraint::Percentage(p),
            Size::Fill(w) => Constraint::Fill(w),
        }
    }
}

/// One row.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// Height.
    pub height: Size,
    /// Panels with their widths.
    pub panels: Vec<(PanelId, Size)>,
}

/// A parsed layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// Name or path.
    pub name: String,
    /// Minimum terminal size.
    pub min: (u16, u16),
    /// Rows under the header.
    pub rows: Vec<Row>,
    /// Key overrides.
    pub keys: BTreeMap<String, Vec<String>>,
}

/// A layout file that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError {
    /// File (or preset name).
    pub file: String,
    /// 1-based line (0 = unknown).
    pub line: usize,
    /// What is wrong.
    pub problem: String,
}

impl std::fmt::Display for LayoutError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line > 0 {
            write!(
                f,
                "layout {}, line {}: {}",
                self.file, self.line, self.problem
            )
        } else {
            write!(f, "layout {}: {}", self.file, self.problem)
        }
    }
}

impl std::error::Error for LayoutError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLayout {
    min_width: Option<u16>,
    min_height: Option<u16>,
    row: Vec<RawRow>,
    #[serde(default)]
    keys: BTreeMap<String, Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRow {
    height: Spanned<toml::Value>,
    panels: Vec<Spanned<String>>,
    widths: Option<Spanned<Vec<toml::Value>>>,
}

fn size(v: &toml::Value) -> Result<Size, String> {
    let bad =
        || format!("size {v} is not lines (3), a percent (\"40%\") or a share (\"*\", \"2*\")");
    match v {
        toml::Value::Integer(n) if (1..=1000).contains(n) => Ok(Size::Fixed(*n as u16)),
        toml::Value::String(s) => {
            if let Some(p) = s.strip_suffix('%') {
                p.trim()
                    .parse::<u16>()
                    .ok()
                    .filter(|p| (1..=100).contains(p))
                    .map(Size::Percent)
                    .ok_or_else(bad)
            } else if let Some(w) = s.strip_suffix('*') {
                let w = if w.trim().is_empty() {
                    Ok(1)
                } else {
                    w.trim().parse::<u16>()
                };
                w.ok().filter(|w| *w >= 1).map(Size::Fill).ok_or_else(bad)
            } else {
                Err(bad())
            }
        }
        _ => Err(bad()),
    }
}

impl Layout {
    /// Parse `text` (named `file` in errors).
    pub fn parse(file: &str, text: &str) -> Result<Layout, LayoutError> {
        let line_of = |off: usize| text[..off.min(text.len())].matches('\n').count() + 1;
        let err = |line: usize, problem: String| LayoutError {
            file: file.into(),
            line,
            problem,
        };
        let raw: RawLayout = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(0, |s| line_of(s.start));
            err(line, e.message().to_string())
        })?;
        let mut rows = vec![];
        for r in &raw.row {
            let height =
                size(r.height.get_ref()).map_err(|p| err(line_of(r.height.span().start), p))?;
            let mut panels = vec![];
            for p in &r.panels {
                let id = PanelId::ALL
                    .iter()
                    .find(|(_, n)| *n == p.get_ref())
                    .map(|x| x.0)
                    .ok_or_else(|| {
                        let names: Vec<_> = PanelId::ALL.iter().map(|x| x.1).collect();
                        err(
                            line_of(p.span().start),
                            format!(
                                "unknown panel {:?} (one of {})",
                                p.get_ref(),
                                names.join(", ")
                            ),
                        )
                    })?;
                if id == PanelId::Header {
                    return Err(err(
                        line_of(p.span().start),
                        "the header is always the first row; leave it out".into(),
                    ));
                }
                panels.push((id, Size::Fill(1)));
            }
            if panels.is_empty() {
                return Err(err(
                    line_of(r.height.span().start),
                    "a row needs at least one panel".into(),
                ));
            }
            if let Some(w) = &r.widths {
                let line = line_of(w.span().start);
                if w.get_ref().len() != panels.len() {
                    return Err(err(
                        line,
                        format!("{} widths for {} panels", w.get_ref().len(), panels.len()),
                    ));
                }
                for (i, v) in w.get_ref().iter().enumerate() {
                    panels[i].1 = size(v).map_err(|p| err(line, p))?;
                }
            }
            rows.push(Row { height, panels });
        }
        if rows.is_empty() {
            return Err(err(0, "no [[row]]".into()));
        }
        crate::keymap::Keymap::with_overrides(&raw.keys).map_err(|p| {
            let line = text
                .lines()
                .position(|l| l.trim() == "[keys]")
                .map_or(0, |i| i + 1);
            err(line, p)
        })?;
        Ok(Layout {
            name: file.into(),
            min: (
                raw.min_width.unwrap_or(40).max(1),
                raw.min_height.unwrap_or(12).max(1),
            ),
            rows,
            keys: raw.keys,
        })
    }

    /// A preset by name, or a file by path (anything with a `/` or ending in `.toml`).
    pub fn load(name_or_path: &str) -> Result<Layout, LayoutError> {
        if let Some((n, t)) = PRESETS.iter().find(|(n, _)| *n == name_or_path) {
            return Layout::parse(n, t);
        }
        if name_or_path.contains('/')
            || name_or_path.ends_with(".toml")
            || Path::new(name_or_path).exists()
        {
            let text = baro_telemetry::input::read_text(
                Path::new(name_or_path),
                "--layout",
                MAX_FILE,
                false,
            )
            .map_err(|e| LayoutError {
                file: name_or_path.into(),
                line: 0,
                problem: format!("cannot read: {e}"),
            })?;
            return Layout::parse(name_or_path, &text);
        }
        let names: Vec<_> = PRESETS.iter().map(|p| p.0).collect();
        Err(LayoutError {
            file: name_or_path.into(),
            line: 0,
            problem: format!(
                "no such preset (one of {}) and no such file",
                names.join(", ")
            ),
        })
    }

    /// The default preset.
    pub fn default_preset() -> Layout {
        Layout::load("default").unwrap_or_else(|e| panic!("the default preset must parse: {e}"))
    }

    /// Panels in focus order (header first).
    pub fn panels(&self) -> Vec<PanelId> {
        let mut v = vec![PanelId::Header];
        v.extend(self.rows.iter().flat_map(|r| r.panels.iter().map(|p| p.0)));
        v
    }

    /// Where each body panel goes in `body`.
    pub fn place(&self, body: Rect) -> Vec<(PanelId, Rect)> {
        let rows = RLayout::vertical(self.rows.iter().map(|r| r.height.constraint())).split(body);
        let mut out = vec![];
        for (r, area) in self.rows.iter().zip(rows.iter()) {
            let cols = RLayout::horizontal(r.panels.iter().map(|p| p.1.constraint())).split(*area);
            for ((id, _), a) in r.panels.iter().zip(cols.iter()) {
                out.push((*id, *a));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_parses() {
        for (n, t) in PRESETS {
            Layout::parse(n, t).unwrap();
        }
    }

    #[test]
    fn unknown_panel_is_reported_with_file_and_line() {
        let e = Layout::parse("x.toml", "[[row]]\nheight = 3\npanels = [\"flme\"]\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(
            e.to_string()
                .starts_with("layout x.toml, line 3: unknown panel \"flme\""),
            "{e}"
        );
    }

    #[test]
    fn bad_size_and_bad_toml_and_bad_key_name_the_line() {
        let e = Layout::parse("y", "[[row]]\nheight = \"tall\"\npanels = [\"log\"]\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let e = Layout::parse("y", "[[row]]\nheight = 3\npanels = [\"log\"\n").unwrap_err();
        assert!(e.line >= 3, "{e}");
        let e = Layout::parse(
            "y",
            "[[row]]\nheight = 3\npanels = [\"log\"]\n[keys]\nfly = [\"x\"]\n",
        )
        .unwrap_err();
        assert_eq!(e.line, 4, "{e}");
        assert!(e.problem.contains("unknown action \"fly\""), "{e}");
    }
}
