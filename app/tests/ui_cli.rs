//! `baro-top live` from the outside: flags that would not be honoured are refused, never
//! silently accepted; with stdout not a terminal it prints one line per pass and says so once.
#![allow(clippy::unwrap_used)]

use std::process::Command;

fn baro(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn synthetic_only_and_engine_only_flags_are_refused_where_they_would_be_ignored() {
    // --rate paces the synthetic producer; the engine decodes as fast as it can.
    let o = baro(&["live", "--rate", "10"]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--rate is only honoured with --synthetic"),
        "{err}"
    );
    for (args, flag) in [
        (&["--prompt", "Once"][..], "--prompt"),
        (&["--wg-size", "64"][..], "--wg-size"),
        (&["--device", "0"][..], "--device"),
        (&["--metrics", "127.0.0.1:0"][..], "--metrics"),
        (&["--no-instrument"][..], "--no-instrument"),
    ] {
        let mut a = vec!["live", "--synthetic"];
        a.extend_from_slice(args);
        let o = baro(&a);
        assert_eq!(o.status.code(), Some(2), "{a:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{flag} is not honoured with --synthetic")),
            "{a:?}: {err}"
        );
    }
}

#[test]
fn model_with_synthetic_is_refused_not_ignored() {
    let o = baro(&["live", "--synthetic", "--model", "x.gguf"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--model is not honoured"));
}

#[test]
fn a_bad_layout_names_the_file_line_and_problem() {
    let dir = std::env::temp_dir().join(format!("baro-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("bad.toml");
    std::fs::write(&f, "[[row]]\nheight = 3\npanels = [\"flam\"]\n").unwrap();
    let o = baro(&["live", "--synthetic", "--layout", f.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.toml, line 3: unknown panel \"flam\""),
        "{err}"
    );
    let o = baro(&["live", "--synthetic", "--layout", "nosuch"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("no such preset"));
}

#[test]
fn piped_stdout_gets_headless_lines_and_one_note_on_stderr() {
    let o = baro(&["live", "--synthetic", "--passes", "5", "--rate", "1000"]);
    assert_eq!(o.status.code(), Some(0));
    let out = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<_> = out.lines().collect();
    assert!(lines[0].starts_with("start: "), "{out}");
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("pass ")).count(),
        5,
        "{out}"
    );
    assert!(
        lines
            .iter()
            .all(|l| !l.starts_with("pass ") || l.contains("fail-word 0x00000000 PASS")),
        "{out}"
    );
    assert!(lines[lines.len() - 2].starts_with("end: 5 passes"), "{out}");
    assert!(
        lines.last().unwrap().starts_with("summary: 5 passes"),
        "{out}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.matches("not a terminal").count(), 1, "{err}");
}
