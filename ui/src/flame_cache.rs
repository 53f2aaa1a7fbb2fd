//! What the flame chart ([`crate::panels::flame`]) keeps between draws: the last pass's
//! extents and raster, held in [`crate::view::UiState`]. A module of its own below both, so
//! the view's state holds the cache without naming a panel.

use std::sync::{Arc, Mutex};

use baro_telemetry::spans::MISSING;
use baro_telemetry::Frame;

/// Each stage's and each barrier level's time extent in one pass (first stamp, last stamp;
/// `(u32::MAX, 0)` where nothing was stamped), computed once per pass so a zoomed-in window
/// skips every stage that cannot reach it without reading its spans.
pub(crate) struct Extents {
    pub(crate) stage: Vec<(u32, u32)>,
    pub(crate) level: Vec<(u32, u32)>,
}

impl Extents {
    fn of(f: &Frame) -> Extents {
        let sp = &f.spans;
        let ext = |(a, b): (&[u32], &[u32])| {
            a.iter().zip(b).fold((u32::MAX, 0), |(lo, hi), (&a, &b)| {
                if a == MISSING || b == MISSING {
                    (lo, hi)
                } else {
                    (lo.min(a), hi.max(b))
                }
            })
        };
        Extents {
            stage: (0..sp.stages())
                .map(|s| sp.stage_stamps(s).map_or((u32::MAX, 0), ext))
                .collect(),
            level: (0..sp.levels())
                .map(|l| sp.level_stamps(l).map_or((u32::MAX, 0), ext))
                .collect(),
        }
    }
}

/// Everything a raster depends on: the frame (by identity and pass), the time window, the
/// plot size, the grouping and the scroll position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Key {
    pub(crate) frame: usize,
    pub(crate) pass: u64,
    pub(crate) kinds: (usize, usize),
    pub(crate) window: (u64, u64),
    pub(crate) cols: usize,
    pub(crate) scroll: usize,
    pub(crate) nrows: usize,
    pub(crate) by_stage: bool,
    pub(crate) band: u32,
}

/// What the flame chart derived from the pass it last drew, kept between draws (in
/// [`crate::view::UiState`]): the pass's [`Extents`] and the raster of cell codes for one
/// window. A redraw with nothing changed (a cursor move, another panel's update) reuses the
/// raster; a new pass, zoom, pan, resize, scroll or grouping rasterises once.
#[derive(Default)]
pub struct FlameCache {
    inner: Mutex<CacheInner>,
}

#[derive(Default)]
struct CacheInner {
    extents: Option<(usize, u64, Arc<Extents>)>,
    raster: Option<(Key, Arc<Vec<u8>>)>,
    rasterised: u64,
    /// Coverage arrays reused from raster to raster (megabytes at 400×100: allocating them
    /// afresh costs a page fault per page).
    scratch: Scratch,
}

/// A raster's working arrays.
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) part: Vec<u32>,
    pub(crate) full: Vec<i32>,
}

impl FlameCache {
    /// Rasters computed so far (a redraw served from the cache adds none).
    pub fn rasterised(&self) -> u64 {
        self.lock().rasterised
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        // The cache holds no invariant a panic elsewhere could break.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The raster for `key`, computed by `make` from the pass's extents only when missing.
    pub(crate) fn raster(
        &self,
        f: &Arc<Frame>,
        key: Key,
        make: impl FnOnce(&Extents, &mut Scratch) -> Vec<u8>,
    ) -> Arc<Vec<u8>> {
        let mut c = self.lock();
        if let Some((k, r)) = &c.raster {
            if *k == key {
                return r.clone();
            }
        }
        let id = Arc::as_ptr(f) as usize;
        let ext = match &c.extents {
            Some((i, p, e)) if *i == id && *p == f.pass => e.clone(),
            _ => {
                let e = Arc::new(Extents::of(f));
                c.extents = Some((id, f.pass, e.clone()));
                e
            }
        };
        let r = Arc::new(make(&ext, &mut c.scratch));
        c.raster = Some((key, r.clone()));
        c.rasterised += 1;
        r
    }
}
