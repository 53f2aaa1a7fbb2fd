//! Compiles the GLSL compute shaders in `../shaders` to SPIR-V with glslang (no cmake, no
//! python), so `cargo build` alone produces a binary with its kernels embedded.
//!
//! `#include "file"` is resolved here, textually, relative to `shaders/`, so every stage body
//! is written once and shared by the megakernel and the multi-dispatch path.

use std::path::{Path, PathBuf};

fn expand(dir: &Path, file: &str, depth: usize, deps: &mut Vec<PathBuf>) -> String {
    assert!(depth < 8, "shader includes nested too deep at {file}");
    let path = dir.join(file);
    let src = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    deps.push(path);
    let mut out = String::new();
    for line in src.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("#include") {
            let name = rest.trim().trim_matches('"');
            out.push_str(&expand(dir, name, depth + 1, deps));
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

fn compile(name: &str, src: &str, defines: &[(&str, Option<&str>)]) -> Vec<u32> {
    use glslang::{
        Compiler, CompilerOptions, ShaderInput, ShaderSource, ShaderStage, SourceLanguage,
        SpirvVersion, Target, VulkanVersion,
    };
    let compiler = Compiler::acquire().expect("glslang initialisation");
    let source = ShaderSource::from(src.to_string());
    let opts = CompilerOptions {
        source_language: SourceLanguage::GLSL,
        target: Target::Vulkan {
            version: VulkanVersion::Vulkan1_2,
            spirv_version: SpirvVersion::SPIRV1_5,
        },
        version_profile: None,
        messages: glslang::ShaderMessage::DEFAULT,
    };
    let input = ShaderInput::new(&source, ShaderStage::Compute, &opts, Some(defines), None)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let shader = compiler
        .create_shader(input)
        .unwrap_or_else(|e| panic!("{name}: GLSL error:\n{e}"));
    shader
        .compile()
        .unwrap_or_else(|e| panic!("{name}: SPIR-V generation failed: {e}"))
}

fn main() {
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let shaders = manifest.join("../shaders");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let mut deps = Vec::new();
    let src = expand(&shaders, "decode.comp", 0, &mut deps);
    // GPUs: Vulkan memory model, with and without the device clock. CPU devices (lavapipe):
    // GLSL450 model (see shaders/layout.glsl for why), with and without the clock.
    for (file, defines) in [
        ("decode.spv", vec![]),
        ("decode_noclock.spv", vec![("NO_CLOCK", None)]),
        ("decode_cpu.spv", vec![("CPU_MODEL", None)]),
        (
            "decode_cpu_noclock.spv",
            vec![("CPU_MODEL", None), ("NO_CLOCK", None)],
        ),
    ] {
        let words = compile(file, &src, &defines);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(out.join(file), bytes).expect("writing SPIR-V");
    }
    for d in deps {
        println!("cargo:rerun-if-changed={}", d.display());
    }
    println!("cargo:rerun-if-changed=build.rs");
}
