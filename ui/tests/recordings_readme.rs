//! recordings/README.md's table keeps the facts of every shipped recording equal to what the
//! files contain: passes, the power modes as `baro-top diff` counts them (its offline
//! classifier: fast / slow / unknown), the passes the recording labelled contended (what the
//! replay's header counts as `contended N/M`), and whether `replay` shows the SYNTHETIC
//! banner. The `what` and `how it was made` cells are prose and kept as written.
//!
//! `BLESS=1 cargo test --release -p baro-ui --test recordings_readme` rewrites the fact
//! cells (and adds a row for a new file); without `BLESS` the test fails on any difference,
//! naming the file and the cell.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use baro_telemetry::recording::{diff, Reader};
use baro_telemetry::Telemetry;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../recordings")
}

/// The table's head; the first five columns are generated.
const HEAD: [&str; 2] = [
    "| file | passes | power (`diff`: fast / slow / unknown) | contended | banner | what | how it was made |",
    "|---|---|---|---|---|---|---|",
];

/// The generated cells of one recording.
fn facts(path: &Path) -> [String; 4] {
    let open = || Reader::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let rep = diff::compare(&mut open(), &mut open()).unwrap();
    assert!(
        rep.a.damage.is_none(),
        "{}: {:?}",
        path.display(),
        rep.a.damage
    );
    let r = open();
    let synthetic = baro_ui::replay::is_synthetic(r.header());
    let (mut passes, mut contended) = (0u64, 0u64);
    for m in r {
        if let Telemetry::Frame(f) = m.unwrap() {
            passes += 1;
            contended += u64::from(!f.contention.is_quiet());
        }
    }
    assert_eq!(passes, rep.a.passes, "{}", path.display());
    let m = rep.a.modes;
    [
        passes.to_string(),
        format!("{} / {} / {}", m.fast, m.slow, m.unknown),
        format!("{contended} of {passes}"),
        if synthetic { "SYNTHETIC" } else { "—" }.to_string(),
    ]
}

/// The cells of a table row (`| a | b |` → `[a, b]`); cells hold no ` | `.
fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split(" | ").map(|c| c.trim().to_string()).collect()
}

#[test]
fn the_recordings_readme_table_says_what_the_files_contain() {
    let readme = dir().join("README.md");
    let text = std::fs::read_to_string(&readme).unwrap();
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            n.ends_with(".baro").then_some(n)
        })
        .collect();
    files.sort();
    let lines: Vec<&str> = text.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.starts_with("| file |"))
        .expect("recordings/README.md has a table starting `| file |`");
    let end = lines[start..]
        .iter()
        .position(|l| !l.starts_with('|'))
        .map_or(lines.len(), |n| start + n);
    let mut rows: Vec<(String, Vec<String>)> = lines[start + 2..end]
        .iter()
        .map(|l| {
            let c = cells(l);
            (c[0].trim_matches('`').to_string(), c)
        })
        .collect();
    let mut wrong = vec![];
    let mut out: Vec<String> = HEAD.iter().map(|s| s.to_string()).collect();
    for f in &files {
        if !rows.iter().any(|(n, _)| n == f) {
            wrong.push(format!("{f}: no row"));
            rows.push((f.clone(), vec![format!("`{f}`"), "?".into(), "?".into()]));
        }
    }
    for (name, c) in &rows {
        if !files.contains(name) {
            wrong.push(format!(
                "{name}: a row for a file that is not in recordings/"
            ));
            continue;
        }
        let want = facts(&dir().join(name));
        let n = c.len();
        // A row of the new shape has 7 cells; prose is the last two either way.
        let prose = &c[n.saturating_sub(2)..];
        if n != 7 {
            wrong.push(format!("{name}: {n} cells, not 7"));
        } else {
            for (i, (have, want)) in c[1..5].iter().zip(&want).enumerate() {
                if have != want {
                    let col = HEAD[0].split(" | ").nth(i + 1).unwrap_or("?");
                    wrong.push(format!("{name}: {col} says {have:?}, the file {want:?}"));
                }
            }
        }
        out.push(format!(
            "| `{name}` | {} | {} |",
            want.join(" | "),
            prose.join(" | ")
        ));
    }
    if std::env::var_os("BLESS").is_some() {
        let mut new: Vec<String> = lines[..start].iter().map(|s| s.to_string()).collect();
        new.extend(out);
        new.extend(lines[end..].iter().map(|s| s.to_string()));
        std::fs::write(&readme, new.join("\n") + "\n").unwrap();
        return;
    }
    assert_eq!(lines[start..start + 2], HEAD, "the table's head");
    assert!(
        wrong.is_empty(),
        "recordings/README.md disagrees with the files (BLESS=1 cargo test --release -p baro-ui --test recordings_readme rewrites it):\n{}",
        wrong.join("\n")
    );
}
