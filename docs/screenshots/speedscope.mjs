// Screenshot of a Trace Event JSON in speedscope (the npm package's app, loaded from disk in
// Debian's headless chromium): opens the file, moves to the profile (thread) whose name
// contains PROFILE, zooms in ZOOM times ('=' key, then pans to the start), writes OUT.png.
// Usage: node speedscope.mjs TRACE.json PROFILE OUT.png [ZOOM]
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const [trace, profile, out, zoom = '0'] = process.argv.slice(2);
const here = path.dirname(fileURLToPath(import.meta.url));
const app = path.join(here, 'node_modules/speedscope/dist/release/index.html');
// speedscope's own way to open a local file (its CLI does the same): a script that hands the
// file to the app, named in the URL's #localProfilePath.
const loader = path.resolve(out + '.load.js');
const b64 = fs.readFileSync(trace).toString('base64');
fs.writeFileSync(loader, `speedscope.loadFileFromBase64(${JSON.stringify(path.basename(trace))}, ${JSON.stringify(b64)})`);
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--allow-file-access-from-files', '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
  defaultViewport: { width: 1400, height: 260 },
});
try {
  const page = await browser.newPage();
  const warnings = [];
  page.on('console', (m) => warnings.push(m.text()));
  await page.goto(`file://${app}#localProfilePath=${loader}`);
  const current = () => page.evaluate(() => document.body.innerText);
  await page.waitForFunction(() => document.body.innerText.includes('(tid '), { timeout: 60000 });
  for (let i = 0; i < 200 && !(await current()).includes(profile); i++) {
    await page.keyboard.press('n');
    await new Promise((r) => setTimeout(r, 100));
  }
  if (!(await current()).includes(profile)) throw new Error(`no profile ${profile}`);
  await new Promise((r) => setTimeout(r, 1000));
  await page.mouse.move(10, 180);
  for (let i = 0; i < Number(zoom); i++) {
    await page.keyboard.press('=');
    await new Promise((r) => setTimeout(r, 200));
  }
  for (let i = 0; i < 40 * Number(zoom); i++) await page.keyboard.press('ArrowLeft');
  await new Promise((r) => setTimeout(r, 1500));
  await page.screenshot({ path: out });
  const bad = warnings.filter((w) => w.includes('Tried to end') || w.includes('still open'));
  console.log(`${out}: ${bad.length} importer warnings`);
} finally {
  await browser.close();
  fs.rmSync(loader, { force: true });
}
