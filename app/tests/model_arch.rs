//! `model gen --arch/--head-dim/--llama3-rope/--rope-scale` make every architecture baro-top
//! decodes, `model info` shows what a file's math is, and `generate` decodes them (CPU).

use std::path::PathBuf;
use std::process::{Command, Output};

fn baro(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_baro-top"))
        .args(args)
        .output()
        .expect("baro-top runs")
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

struct Dir(PathBuf);
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn dir(tag: &str) -> Dir {
    let d = std::env::temp_dir().join(format!("baro-model-arch-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("dir");
    Dir(d)
}

fn gen(d: &Dir, name: &str, extra: &[&str]) -> String {
    let p = d.0.join(name);
    let p = p.to_str().expect("utf-8 path").to_string();
    let mut a = vec![
        "model",
        "gen",
        "--layers",
        "1",
        "--margin-steps",
        "0",
        "-o",
        &p,
    ];
    a.extend_from_slice(extra);
    ok(&baro(&a));
    p
}

#[test]
fn model_gen_makes_each_architecture_and_model_info_names_its_parts() {
    let d = dir("gen");
    let q3 = gen(&d, "q3.gguf", &["--arch", "qwen3", "--head-dim", "32"]);
    let info = ok(&baro(&["model", "info", &q3]));
    assert!(info.contains("arch       qwen3:"), "{info}");
    assert!(
        info.contains("head_size 32 (attention.key_length)"),
        "{info}"
    );
    assert!(info.contains("per-head q/k norms"), "{info}");
    assert!(info.contains("NEOX pairs"), "{info}");
    assert!(info.contains("blk.0.attn_k_norm.weight"), "{info}");

    let q2 = gen(&d, "q2.gguf", &["--arch", "qwen2"]);
    let info = ok(&baro(&["model", "info", &q2]));
    assert!(
        info.contains("arch       qwen2:") && info.contains("q/k/v biases"),
        "{info}"
    );
    assert!(info.contains("blk.0.attn_v.bias"), "{info}");

    let l3 = gen(
        &d,
        "l3.gguf",
        &["--llama3-rope", "3.2", "--rope-scale", "2"],
    );
    let info = ok(&baro(&["model", "info", &l3]));
    assert!(info.contains("arch       llama:"), "{info}");
    assert!(info.contains("adjacent pairs"), "{info}");
    assert!(info.contains("linear factor 2"), "{info}");
    assert!(
        info.contains("llama3 rope_freqs (8 factors, 1..32)"),
        "{info}"
    );
    assert!(info.contains("rope_freqs.weight"), "{info}");

    // Each decodes on the CPU reference.
    for m in [&q3, &q2, &l3] {
        let out = ok(&baro(&["generate", "-m", m, "-n", "6"]));
        assert!(!out.is_empty(), "{m}");
    }
}

#[test]
fn model_gen_refuses_llama3_rope_outside_llama_and_an_unknown_arch_by_name() {
    let d = dir("refuse");
    let p = d.0.join("x.gguf");
    let p = p.to_str().expect("utf-8 path");
    let o = baro(&[
        "model",
        "gen",
        "--arch",
        "qwen2",
        "--llama3-rope",
        "3.1",
        "-o",
        p,
    ]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--llama3-rope") && e.contains("qwen2"), "{e}");
    let o = baro(&["model", "gen", "--arch", "gemma2", "-o", p]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("gemma2"));
    let o = baro(&["model", "gen", "--llama3-rope", "8,4,1,8192", "-o", p]);
    assert!(!o.status.success(), "LOW >= HIGH");
    assert!(!std::path::Path::new(p).exists(), "nothing written");
}
