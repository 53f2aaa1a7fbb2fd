//! baro-top's dashboard, fed only by the telemetry stream.
#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod action;
pub mod keymap;
pub mod state;
pub mod stats;
pub mod synthetic;
pub mod text;
pub mod theme;
pub mod view;
