//! baro-engine: everything baro-top knows about models and the GPU, and nothing about terminals.
//!
//! - [`quant`]: ggml tensor types and block layouts (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
//!   Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS) with reference dequantize (and quantize where ggml's
//!   reference algorithm is reproduced bit for bit).
//! - [`gguf`]: strict GGUF v2/v3 reader (mmap) and writer.
//! - [`tokenizer`]: SentencePiece-style BPE as llama2.c's run.c does it, from GGUF metadata or
//!   a llama2.c `tok*.bin`.
//! - [`sampler`]: run.c's sampler (argmax, temperature, top-p, xorshift RNG).
//! - [`llama2c`]: llama2.c checkpoint import.
//! - [`model`]: the llama configuration and weights as the decoders consume them.
//! - [`reference`]: the plain f32 CPU decoder every GPU result is checked against.
//! - [`kv`]: the KV cache's storage type (f32, the reference path, or f16).
//! - [`synth`]: deterministic synthetic models of any llama shape ([`rng`]: their random stream).
//! - [`device`], [`session`], [`gate`], [`bench`]: what the app uses to reach the GPU (open
//!   and list devices; a live decode session with commands and sinks; the correctness gate;
//!   the paired throughput bench). [`vulkan`] stays behind them.
//! - [`sensors`]: the sensor thread (CPU, other GPU clients, clocks) and the host GPU lock.

#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod act;
pub mod bench;
pub mod blob;
pub mod device;
pub mod error;
pub mod gate;
pub mod generate;
pub mod gguf;
mod input;
pub mod kv;
pub mod llama2c;
pub mod model;
pub mod quant;
pub mod reference;
pub mod rng;
pub mod sampler;
pub mod sensors;
pub mod session;
pub mod synth;
pub mod tokenizer;
pub mod vulkan;

pub use error::{Error, ErrorKind, Result};

/// The telemetry stream's types (the `baro-telemetry` crate), re-exported.
pub use baro_telemetry as telemetry;
