//! A one-layer Q4_0 model 4096 wide (baro_engine::kv::KV_AUTO_F16_DIM): the narrowest width
//! whose q8 runs take the f16 KV cache under `--kv auto`. 27 MB, a few seconds a pass on
//! lavapipe.

/// `model gen` arguments writing it to `out`.
pub fn gen_args(out: &str) -> Vec<&str> {
    vec![
        "model",
        "gen",
        "--shape",
        "tiny",
        "--dim",
        "4096",
        "--hidden",
        "256",
        "--layers",
        "1",
        "--heads",
        "32",
        "--kv-heads",
        "8",
        "--vocab",
        "512",
        "--seq",
        "64",
        "--quant",
        "q4_0",
        "-o",
        out,
    ]
}
