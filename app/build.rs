//! Records the git commit baro-top is built from (`BARO_COMMIT`), for recordings' headers and
//! `--version` style reports; `unknown` outside a git checkout. Picks the recording embedded
//! for `baro-top` on a machine with no Vulkan device (`BARO_DEMO_RECORDING`, its path, and
//! `BARO_DEMO_NAME`): the first of [`DEMOS`] in `recordings/` that exists and is under 2 MiB;
//! an empty file (and an empty name) where none does.

/// Recordings that may be embedded, preferred first.
const DEMOS: [&str; 3] = [
    "h200-llama1b-mega.baro",
    "lavapipe-stories260k.baro",
    "synthetic-demo.baro",
];

/// The most a recording may add to the binary.
const MAX_EMBED: u64 = 2 << 20;

fn demo() {
    let manifest =
        std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let dir = manifest.join("../recordings");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut chosen = None;
    for name in DEMOS {
        let p = dir.join(name);
        let Ok(m) = std::fs::metadata(&p) else {
            continue;
        };
        println!("cargo:rerun-if-changed={}", p.display());
        if m.len() >= MAX_EMBED {
            println!(
                "cargo:warning=recordings/{name} is {} bytes (at most {MAX_EMBED} are embedded): not embedded",
                m.len()
            );
            continue;
        }
        chosen = Some((p, name));
        break;
    }
    let (path, name) = match chosen {
        Some((p, n)) => (p, format!("recordings/{n}")),
        None => {
            let out = std::path::PathBuf::from(std::env::var("OUT_DIR").unwrap_or_default())
                .join("no-demo.baro");
            let _ = std::fs::write(&out, b"");
            (out, String::new())
        }
    };
    println!("cargo:rustc-env=BARO_DEMO_RECORDING={}", path.display());
    println!("cargo:rustc-env=BARO_DEMO_NAME={name}");
}

fn main() {
    demo();
    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    let dirty = std::process::Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    println!(
        "cargo:rustc-env=BARO_COMMIT={commit}{}",
        if dirty { "-dirty" } else { "" }
    );
    println!("cargo:rerun-if-changed=../.git/HEAD");
    println!("cargo:rerun-if-changed=../.git/index");
}
