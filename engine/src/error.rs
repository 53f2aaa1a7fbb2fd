//! The engine's error type. Every variant carries what a user needs to act on it: which file,
//! which tensor or field, which offset.

use std::path::PathBuf;

/// Result alias used across the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything the engine can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    #[error("{}: {cause}", path.display())]
    Io {
        /// The file involved.
        path: PathBuf,
        /// The OS error (shown in the message, so not also chained as a source).
        cause: std::io::Error,
    },
    /// A GGUF file is malformed. `offset` is the byte offset where the problem was found.
    #[error("gguf: at byte {offset:#x}: {msg}")]
    Gguf {
        /// Byte offset into the file.
        offset: u64,
        /// What is wrong, naming the field or tensor.
        msg: String,
    },
    /// A llama2.c checkpoint or tokenizer file is malformed.
    #[error("llama2.c: {0}")]
    Llama2c(String),
    /// The tokenizer cannot be built or used.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The model's metadata or tensors do not describe a usable llama model.
    #[error("model: {0}")]
    Model(String),
    /// A bad argument (shape, quantisation, option) from the caller.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// Vulkan setup or execution failed.
    #[error("vulkan: {0}")]
    Vulkan(String),
    /// The device was lost (reset, or the driver gave up on the context).
    #[error("vulkan: {0}")]
    DeviceLost(String),
    /// Work on the device missed its watchdog; the device is abandoned (never waited for).
    #[error("watchdog: {0}")]
    Watchdog(String),
}

impl Error {
    /// Wrap an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause: source,
        }
    }
}
