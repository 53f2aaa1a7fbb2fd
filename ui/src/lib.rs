//! baro-ui: baro-top's dashboard, fed only by the telemetry stream
//! (`baro_telemetry::Telemetry` over a crossbeam channel) and steering its producer only
//! through [`action::Control`], which speaks telemetry's control vocabulary
//! (`baro_telemetry::control::Command`: pause, resume, step, stop, set dispatch, seek,
//! restart), so the live session, a replay and the synthetic producer all drive the same
//! screen.
//!
//! It depends on baro-telemetry and the terminal crates, never on baro-engine: the build
//! enforces what the screen may know (nothing of Vulkan, models or sessions), and the
//! dashboard builds, tests and benches on a machine without a GPU. The live session's
//! control (`SessionControl`) lives in the baro-top binary, which has the engine.
//!
//! The producers that need no engine live here, not in telemetry: [`replay`] (a `.baro`
//! recording played back on a thread) and [`synthetic`] (generated telemetry on a thread).
//! Both are steered through [`action::Control`] and answer through its notes and
//! [`action::ProducerStatus`] (banner, position) for this crate's header and log, and only
//! the dashboard and baro-top's `replay`/`live --synthetic`/`bench ui` use them; telemetry
//! keeps the plain data they are made of (the recording reader, `synth`'s frames), with no
//! threads or screen state.
//!
//! Modules: [`state`] (ingested data) · [`stats`] (hdrhistograms, windows, the stream's summary) · [`view`] (view
//! state, actions applied, derived rows) · [`action`] / [`keymap`] (what keys do) ·
//! [`layout`] (layout files) · [`theme`] (colours, glyphs) · [`text`] (sanitising, clipped
//! drawing) · [`panels`] (one module per panel) · [`screen`] (the whole screen) ·
//! [`terminal`] (raw mode guard, panic hook, signals) · [`app`] (event loop) · [`headless`]
//! (the headless lines and the closing summary) · [`synthetic`] (a producer without a GPU) ·
//! [`replay`] (a recording played back) · [`demo`] (the synthetic demo recording) ·
//! [`bench`] (the dashboard's own cost, for `cargo bench -p baro-ui` and `baro-top bench ui`) ·
//! [`flame_cache`] (what the flame chart keeps between draws).
#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod action;
pub mod app;
pub mod bench;
pub mod demo;
pub mod flame_cache;
pub mod headless;
pub mod keymap;
pub mod layout;
pub mod panels;
pub mod replay;
pub mod screen;
pub mod state;
pub mod stats;
pub mod synthetic;
pub mod terminal;
pub mod text;
pub mod theme;
pub mod view;
