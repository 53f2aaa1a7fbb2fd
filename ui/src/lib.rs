//! baro-top's dashboard, fed only by the telemetry stream (`baro_telemetry::Telemetry` over a
//! crossbeam channel) and steering its producer only through [`action::Control`], so the live
//! session, a replay and the synthetic producer all drive the same screen.
//!
//! Modules: [`state`] (ingested data) · [`stats`] (hdrhistograms, windows) · [`view`] (view
//! state, actions applied, derived rows) · [`action`] / [`keymap`] (what keys do) ·
//! [`layout`] (layout files) · [`theme`] (colours, glyphs) · [`text`] (sanitising, clipped
//! drawing) · [`panels`] (one module per panel) · [`screen`] (the whole screen) ·
//! [`terminal`] (raw mode guard, panic hook, signals) · [`app`] (event loop) · [`headless`]
//! (the headless lines and the closing summary)
//! · [`synthetic`] (a producer without a GPU) · [`replay`] (a recording played back) · [`demo`] (the synthetic demo recording) ·
//! [`bench`] (the dashboard's own cost, for `cargo bench` and `baro-top bench ui`).
#![deny(missing_docs)]
#![cfg_attr(test, allow(clippy::unwrap_used))]

pub mod action;
pub mod app;
pub mod bench;
pub mod demo;
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
