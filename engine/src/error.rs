//! The engine's error type. Every variant carries what a user needs to act on it: which file,
//! which tensor or field, which offset, which pass and its fail word. [`Error::kind`] sorts
//! them into the few classes a UI acts on differently ([`ErrorKind`]).

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
    /// A pass failed its checks (the fail word fired); the decoder's state for this sequence
    /// cannot be trusted.
    #[error("pass {pass} failed: {}", fail.line)]
    PassFailed {
        /// The pass.
        pass: u64,
        /// Its fail word and printed line.
        fail: Box<baro_telemetry::FailReport>,
    },
    /// The engine thread could not be started, panicked, or went away.
    #[error("engine thread: {0}")]
    EngineThread(String),
}

/// What kind of error it is, for a UI to act on (retry, pick another model, stop, report).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// The device was lost: reopen it (a new context) or give up.
    DeviceLost,
    /// A submission missed its watchdog: the device is abandoned; the process should exit.
    Watchdog,
    /// A pass's fail word fired.
    PassFailed,
    /// A model or tokenizer file is malformed (the message says what and where).
    Format,
    /// The engine thread failed.
    EngineThread,
    /// Reading or writing a file failed.
    Io,
    /// A bad argument or option.
    Invalid,
    /// Any other Vulkan failure.
    Vulkan,
}

impl Error {
    /// The class of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Io { .. } => ErrorKind::Io,
            Error::Gguf { .. } | Error::Llama2c(_) | Error::Tokenizer(_) | Error::Model(_) => {
                ErrorKind::Format
            }
            Error::Invalid(_) => ErrorKind::Invalid,
            Error::Vulkan(_) => ErrorKind::Vulkan,
            Error::DeviceLost(_) => ErrorKind::DeviceLost,
            Error::Watchdog(_) => ErrorKind::Watchdog,
            Error::PassFailed { .. } => ErrorKind::PassFailed,
            Error::EngineThread(_) => ErrorKind::EngineThread,
        }
    }

    /// The same error with `what` (the step that was under way) before its message; its
    /// class ([`Error::kind`]) is kept. A pass's fail report and an I/O error's path are
    /// left as they are: they already say where.
    pub fn during(self, what: &str) -> Self {
        match self {
            Error::Llama2c(m) => Error::Llama2c(format!("{what}: {m}")),
            Error::Tokenizer(m) => Error::Tokenizer(format!("{what}: {m}")),
            Error::Model(m) => Error::Model(format!("{what}: {m}")),
            Error::Invalid(m) => Error::Invalid(format!("{what}: {m}")),
            Error::Vulkan(m) => Error::Vulkan(format!("{what}: {m}")),
            Error::DeviceLost(m) => Error::DeviceLost(format!("{what}: {m}")),
            Error::Watchdog(m) => Error::Watchdog(format!("{what}: {m}")),
            Error::EngineThread(m) => Error::EngineThread(format!("{what}: {m}")),
            Error::Gguf { offset, msg } => Error::Gguf {
                offset,
                msg: format!("{what}: {msg}"),
            },
            e @ (Error::Io { .. } | Error::PassFailed { .. }) => e,
        }
    }

    /// Wrap an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            cause: source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_falls_in_the_class_a_ui_acts_on_and_keeps_it_under_context() {
        let fail = baro_telemetry::FailReport::new(
            baro_telemetry::FailWord {
                bits: baro_telemetry::fail::bits::TIMEOUT,
                grid: 2,
                ..Default::default()
            },
            |_| "qkv.l0",
        );
        let cases = [
            (
                Error::io("/x", std::io::Error::other("gone")),
                ErrorKind::Io,
            ),
            (
                Error::Gguf {
                    offset: 8,
                    msg: "bad".into(),
                },
                ErrorKind::Format,
            ),
            (Error::Llama2c("bad".into()), ErrorKind::Format),
            (Error::Tokenizer("bad".into()), ErrorKind::Format),
            (Error::Model("bad".into()), ErrorKind::Format),
            (Error::Invalid("bad".into()), ErrorKind::Invalid),
            (Error::Vulkan("bad".into()), ErrorKind::Vulkan),
            (Error::DeviceLost("x".into()), ErrorKind::DeviceLost),
            (Error::Watchdog("x".into()), ErrorKind::Watchdog),
            (
                Error::PassFailed {
                    pass: 3,
                    fail: Box::new(fail),
                },
                ErrorKind::PassFailed,
            ),
            (Error::EngineThread("x".into()), ErrorKind::EngineThread),
        ];
        for (e, k) in cases {
            assert_eq!(e.kind(), k, "{e}");
            let plain = e.to_string();
            let d = e.during("measuring the clock");
            assert_eq!(d.kind(), k, "{d}: `during` changed the class");
            let s = d.to_string();
            match k {
                // Their messages already say where (the path, the pass).
                ErrorKind::Io | ErrorKind::PassFailed => assert_eq!(s, plain),
                _ => assert!(
                    s.contains("measuring the clock: ")
                        && s.ends_with(plain.rsplit(": ").next().unwrap()),
                    "{s}"
                ),
            }
        }
    }

    #[test]
    fn a_failed_pass_names_the_pass_and_prints_its_fail_word() {
        let fail = baro_telemetry::FailReport::new(
            baro_telemetry::FailWord {
                bits: baro_telemetry::fail::bits::TIMEOUT,
                grid: 2,
                level: Some(0),
                ..Default::default()
            },
            |_| "qkv.l0",
        );
        let e = Error::PassFailed {
            pass: 3,
            fail: Box::new(fail),
        };
        let s = e.to_string();
        assert!(
            s.starts_with("pass 3 failed: fail-word 0x00000001 FAIL") && s.contains("qkv.l0"),
            "{s}"
        );
    }
}
