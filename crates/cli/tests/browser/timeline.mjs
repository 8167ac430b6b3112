// Drives the Timeline and Flame graph views in headless Chromium on the
// trace of crates/cli/tests/timeline.rs and prints what it saw as one JSON
// line: the page's model of what it drew (window.__vmviewTimeline,
// window.__vmviewFlame), after zooming, panning, hovering, clicking and
// selecting a range. Screenshots go to spec.shots.
import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const spec = JSON.parse(process.argv[2]);
const require = createRequire(spec.npm + '/');
const { chromium } = require('playwright-core');

mkdirSync(spec.shots, { recursive: true });
const out = { console: [], errors: [], requests: [] };
const browser = await chromium.launch({
  executablePath: spec.chromium || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  timeout: 30000,
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 760 } });
  page.setDefaultTimeout(20000);
  page.on('console', (m) => out.console.push(m.type() + ': ' + m.text()));
  page.on('pageerror', (e) => out.errors.push(String(e)));
  const shot = (what) => page.screenshot({ path: join(spec.shots, spec.name + '-' + what + '.png') });
  const tl = () => page.evaluate(() => window.__vmviewTimeline);
  const frame = async () => Number(await page.getAttribute('#view-timeline', 'data-frame') || 0);
  // Waits for a frame drawn from an answer newer than frame `n`.
  const next = async (n) => page.waitForFunction((k) => Number(document.querySelector('#view-timeline').dataset.frame || 0) > k, n);

  await page.goto(spec.url);
  await page.waitForSelector('body[data-ready="1"]');
  await page.waitForSelector('#view-timeline[data-frame]');
  let m = await tl();
  out.tracks = m.tracks.map((t) => t.name);
  out.alpha_levels = m.slices.filter((s) => s.track === 'alpha').map((s) => s.level);
  out.beta_methods = m.slices.filter((s) => s.track !== 'alpha').map((s) => s.method);
  out.whole = [m.data_from, m.data_to];
  await shot('whole');

  // W zooms in (at the centre), D pans right.
  await page.focus('#tl-canvas');
  let n = await frame();
  await page.keyboard.press('w');
  await page.keyboard.press('w');
  await next(n);
  await page.waitForTimeout(200);
  m = await tl();
  out.zoomed = [m.from, m.to];
  n = await frame();
  await page.keyboard.press('d');
  await next(n);
  m = await tl();
  out.panned = [m.from, m.to];
  // The wheel zooms in around the mouse.
  const box = await page.locator('#tl-canvas').boundingBox();
  await page.mouse.move(box.x + 600, box.y + 60);
  n = await frame();
  await page.mouse.wheel(0, -300);
  await next(n);
  m = await tl();
  out.wheeled_span = m.to - m.from;
  await page.click('#tl-reset');
  await page.waitForFunction(() => window.__vmviewTimeline.from === 0 && window.__vmviewTimeline.slices.length >= 11);
  await page.waitForTimeout(300);
  m = await tl();

  // Hover step(3): its argument and return value.
  const step3 = m.slices.find((s) => s.track === 'alpha' && s.level === 1 && s.start === 4100000);
  await page.mouse.move(box.x + step3.x + step3.w / 2, box.y + step3.y + step3.h / 2);
  await page.waitForFunction(() => document.querySelector('#tl-tip').textContent.includes('returned'));
  out.tip = await page.textContent('#tl-tip');
  await shot('hover');

  // Click it: the Events view opens on that CALL.
  out.clicked_id = step3.id;
  await page.mouse.click(box.x + step3.x + step3.w / 2, box.y + step3.y + step3.h / 2);
  await page.waitForSelector('#view-events:not([hidden])');
  await page.waitForSelector('#rows .row.sel');
  out.opened_id = Number(await page.getAttribute('#rows .row.sel', 'data-id'));
  out.opened_type = await page.textContent('#rows .row.sel .badge').catch(() => null);

  // The flame graph of the whole trace, its search, a click to zoom.
  await page.click('#tabs button[data-view="flamegraph"]');
  await page.waitForSelector('#view-flamegraph[data-ready="1"]');
  let f = await page.evaluate(() => window.__vmviewFlame);
  const stepFrame = (fl) => fl.frames.find((x) => x.name === 'demo.inner.Work.step' && x.canvas === 'fg-canvas');
  out.flame_whole_step_calls = stepFrame(f).calls;
  await page.fill('#fg-search', 'Work.step');
  await page.waitForFunction(() => document.querySelector('#fg-match').textContent.includes('%'));
  out.flame_match = await page.textContent('#fg-match');
  await shot('flame-search');
  await page.fill('#fg-search', '');
  f = await page.evaluate(() => window.__vmviewFlame);
  const fbox = await page.locator('#fg-canvas').boundingBox();
  const run = f.frames.find((x) => x.name === 'demo.Outer.run' && x.canvas === 'fg-canvas' && x.w > 200);
  await page.mouse.click(fbox.x + run.x + 50, fbox.y + run.y + 5);
  f = await page.evaluate(() => window.__vmviewFlame);
  out.flame_zoom = f.zoom;
  // The CPU weight (the trace has metrics), then back to wall time.
  await page.click('#fg-reset');
  await page.selectOption('#fg-weight', 'cpu');
  out.flame_cpu_total = await page.evaluate(() => window.__vmviewFlame.total);
  await page.selectOption('#fg-weight', 'time');
  await page.mouse.click(fbox.x + run.x + 50, fbox.y + run.y + 5);
  f = await page.evaluate(() => window.__vmviewFlame);
  // Callers and callees of step().
  const st = stepFrame(f);
  await page.mouse.click(fbox.x + st.x + st.w / 2, fbox.y + st.y + 5);
  await page.click('#fg-sandwich');
  f = await page.evaluate(() => window.__vmviewFlame);
  out.sandwich_callers = f.frames.filter((x) => x.canvas === 'fg-canvas2').sort((a, b) => a.depth - b.depth).map((x) => x.name);
  await shot('flame-sandwich');

  // Select a range on the timeline (Shift+drag) around steps 1 and 2.
  await page.click('#tabs button[data-view="timeline"]');
  await page.waitForFunction(() => window.__vmviewTimeline.slices.length >= 11);
  m = await tl();
  const s1 = m.slices.find((s) => s.track === 'alpha' && s.level === 1 && s.start === 2100000);
  const s2 = m.slices.find((s) => s.track === 'alpha' && s.level === 1 && s.start === 3100000);
  const y = box.y + s1.y + 4;
  await page.keyboard.down('Shift');
  await page.mouse.move(box.x + s1.x - 3, y);
  await page.mouse.down();
  await page.mouse.move(box.x + s2.x + s2.w + 3, y, { steps: 5 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  out.range = (await tl()).range;
  await shot('range');
  await page.click('#tabs button[data-view="flamegraph"]');
  await page.waitForSelector('#view-flamegraph[data-ready="1"]');
  f = await page.evaluate(() => window.__vmviewFlame);
  const rs = stepFrame(f);
  out.flame_range_step_calls = rs ? rs.calls : null;
  out.flame_range_step_ns = rs ? rs.total_ns : null;
  out.flame_range = f.range;
  await shot('flame-range');

  await page.waitForTimeout(200);
  out.pwned = await page.evaluate(() => (window.__pwned === undefined ? null : String(window.__pwned)));
  out.injected = await page.locator('img, svg, b').count();
} catch (e) {
  out.failure = String(e && e.stack || e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
