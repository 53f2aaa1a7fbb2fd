//! docs/cli.md is the flag reference, generated from the binary's own `--help` of every
//! subcommand (nested ones too): this test rebuilds it and fails when the file differs, so the
//! reference never drifts from the flags. `BARO_BLESS=1` rewrites the file instead.

use std::path::Path;
use std::process::Command;

fn help(path: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(path)
        .arg("--help")
        // clap wraps to the terminal: a fixed width keeps the text the same on every machine.
        .env("COLUMNS", "100")
        .env_remove("NO_COLOR")
        .output()
        .expect("baro-top runs");
    assert!(o.status.success(), "{path:?} --help failed");
    String::from_utf8(o.stdout).expect("help is UTF-8")
}

/// The subcommands a help text lists under `Commands:` (without clap's `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|c| c != "help")
        .collect()
}

fn section(out: &mut String, path: &[&str]) {
    let text = help(path);
    let name = std::iter::once("baro-top")
        .chain(path.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    out.push_str(&format!(
        "\n## `{name}`\n\n```text\n{}\n```\n",
        text.trim_end()
    ));
    for sub in subcommands(&text) {
        let mut p = path.to_vec();
        p.push(&sub);
        section(out, &p);
    }
}

#[test]
fn docs_cli_md_is_the_help_of_every_subcommand() {
    let mut want = String::from(
        "# Command-line reference\n\nGenerated from `baro-top … --help` of every subcommand by \
         app/tests/docs_cli.rs, which fails when this file differs from the binary \
         (`BARO_BLESS=1 cargo test --release -p baro-top --test docs_cli` rewrites it).\n",
    );
    section(&mut want, &[]);
    assert!(
        want.contains("## `baro-top model gen`") && want.contains("## `baro-top bench ab`"),
        "nested subcommands missing:\n{want}"
    );
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/cli.md");
    let have = std::fs::read_to_string(&file).unwrap_or_default();
    if have != want && std::env::var_os("BARO_BLESS").is_some() {
        std::fs::write(&file, &want).expect("write docs/cli.md");
        return;
    }
    assert!(
        have == want,
        "docs/cli.md differs from the binary's --help (BARO_BLESS=1 rewrites it)"
    );
}
