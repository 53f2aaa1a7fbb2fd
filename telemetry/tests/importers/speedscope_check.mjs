// Imports Trace Event JSON files with speedscope's own importer (the npm package's bundle,
// run under node) and prints, per file, one JSON line: the profiles speedscope built (one per
// thread: name, calls, deepest nesting), and every warning its importer printed ("Tried to
// end …", "… was still open at end of profile"). Used by telemetry/tests/it/trace_importers.rs.
//
// The bundle is a browser app: its importer is reached by cutting the final render call and
// exposing `importProfileGroupFromText` (found by its unminified property name), with the
// few browser globals its module code touches at load stubbed out.
import fs from 'node:fs';
import path from 'node:path';
import vm from 'node:vm';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const dir = path.join(process.env.BARO_SPEEDSCOPE_DIR || path.join(here, 'node_modules'), 'speedscope/dist/release');
const bundle = fs.readdirSync(dir).find((f) => /^speedscope-.*\.js$/.test(f));
if (!bundle) throw new Error(`no speedscope bundle in ${dir}`);
const src = fs.readFileSync(path.join(dir, bundle), 'utf8');
const found = src.match(/async function ([\w$]+)\(t,e\)\{return\(await [\w$]+\)\.importProfileGroupFromText\(t,e\)\}/);
const cut = src.lastIndexOf('console.log(`speedscope v');
if (!found || cut < 0) throw new Error(`speedscope bundle ${bundle}: importer entry point not found`);
const patched = src.slice(0, cut) + `globalThis.__baroImport=${found[1]};})();`;

let warnings = [];
const quiet = () => {};
const ctx = {
  console: { log: quiet, info: quiet, debug: quiet, error: (...a) => warnings.push(a.join(' ')), warn: (...a) => warnings.push(a.join(' ')) },
  TextDecoder, TextEncoder, setTimeout, clearTimeout, URL, performance,
  location: { hash: '', protocol: 'file:', href: 'file:///baro-top' },
  localStorage: {},
  matchMedia: () => ({ matches: false, addEventListener: quiet, addListener: quiet }),
  navigator: { userAgent: 'node', platform: 'linux' },
  addEventListener: quiet,
  requestAnimationFrame: (f) => setTimeout(f, 0),
  devicePixelRatio: 1,
};
ctx.window = ctx;
ctx.self = ctx;
ctx.globalThis = ctx;
vm.createContext(ctx);
vm.runInContext(patched, ctx, { filename: bundle });

for (const file of process.argv.slice(2)) {
  warnings = [];
  let bytes = fs.readFileSync(file);
  if (file.endsWith('.gz')) bytes = zlib.gunzipSync(bytes);
  const group = await ctx.__baroImport(path.basename(file).replace(/\.gz$/, ''), bytes.toString('utf8'));
  const profiles = [];
  for (const p of group ? group.profiles : []) {
    let depth = 0;
    let maxDepth = 0;
    let calls = 0;
    p.forEachCall(
      () => {
        calls += 1;
        depth += 1;
        maxDepth = Math.max(maxDepth, depth);
      },
      () => {
        depth -= 1;
      },
    );
    profiles.push({ name: p.getName(), calls, max_depth: maxDepth });
  }
  console.log(JSON.stringify({
    file,
    imported: group != null,
    profiles,
    tried_to_end: warnings.filter((w) => w.includes('Tried to end')).length,
    left_open: warnings.filter((w) => w.includes('still open at end of profile')).length,
    warnings: warnings.slice(0, 20),
    warning_count: warnings.length,
  }));
}
