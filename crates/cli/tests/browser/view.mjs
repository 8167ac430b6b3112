// Drives vmview's browser view in headless Chromium (playwright-core) and
// prints what it saw as one JSON line; crates/cli/tests/view.rs runs it and
// checks the numbers against `vmview search --count`.
//
// node view.mjs '{"url": ..., "shots": DIR, "name": ..., "filter": EXPR,
//                 "search": EXPR, "hostile": bool, "only_views": [VIEW…]}'
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
  // Playwright starts Chromium with a new, empty profile directory of its own.
  timeout: 30000,
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 760 } });
  page.setDefaultTimeout(15000);
  page.on('console', (m) => out.console.push(m.type() + ': ' + m.text()));
  page.on('pageerror', (e) => out.errors.push(String(e)));
  page.on('request', (r) => out.requests.push(r.url()));
  const shot = (what) => page.screenshot({ path: join(spec.shots, spec.name + '-' + what + '.png') });
  const count = async () => Number(await page.getAttribute('#count', 'data-count'));
  const settled = async () => page.waitForFunction(() => document.querySelector('#count').dataset.complete === '1');
  const visitView = async (v) => {
    await page.click('#tabs button[data-view="' + v + '"]');
    await page.waitForSelector('#view-' + v + '[data-ready="1"]');
    if (v === 'flamegraph') out.flame_frames = Number(await page.getAttribute('#view-flamegraph', 'data-frames'));
    if (v === 'timeline') {
      await page.waitForSelector('#view-timeline[data-frame]');
      out.timeline_slices = await page.evaluate(() => window.__vmviewTimeline.slices.length);
      out.timeline_tracks = await page.evaluate(() => window.__vmviewTimeline.tracks.map((t) => t.name));
    }
    out.views[v] = (await page.textContent('#view-' + v)).slice(0, 4000);
    await shot(v);
  };

  await page.goto(spec.url);
  await page.waitForSelector('body[data-ready="1"]');
  await settled();
  out.total = await count();
  out.rows_in_dom = await page.locator('#rows .row').count();
  await shot('events');

  // A trace recorded for some views only: visit those and nothing else.
  if (spec.only_views) {
    out.views = {};
    for (const v of spec.only_views) await visitView(v);
  } else {
    // A bad expression: an error that points at the column, the list kept.
    await page.fill('#filter', 'type == CALX');
    await page.waitForSelector('#error:not([hidden])');
    out.error_text = await page.textContent('#error');

    // The filter: the count changes.
    await page.fill('#filter', spec.filter);
    await page.waitForFunction((n) => {
      const c = document.querySelector('#count');
      return c.dataset.complete === '1' && c.textContent.includes('matches') && document.querySelector('#error').hidden;
    }, out.total);
    await page.waitForSelector('#rows .row[data-id]');
    out.filtered = await count();
    out.filtered_first_ids = await page.$$eval('#rows .row[data-id]', (rs) => rs.slice(0, 5).map((r) => Number(r.dataset.id)));
    await shot('filtered');

    // Search inside the filtered list: marks, next, next, previous.
    if (spec.search) {
      await page.fill('#search', spec.search);
      await page.waitForTimeout(400);
      out.marked_rows = await page.locator('#rows .row.mark').count();
      const info = async () => page.textContent('#searchinfo');
      const waitStep = async (rank) => page.waitForFunction((r) => document.querySelector('#searchinfo').textContent.startsWith('match ' + r + ' '), rank);
      await page.click('#next'); await waitStep(1); out.step1 = await info();
      out.step1_id = Number(await page.getAttribute('#searchinfo', 'data-id'));
      await page.click('#next'); await waitStep(2); out.step2 = await info();
      out.step2_id = Number(await page.getAttribute('#searchinfo', 'data-id'));
      out.step2_selected_marked = await page.locator('#rows .row.sel.mark').count();
      await page.click('#prev'); await waitStep(1); out.step3 = await info();
      await shot('search');
    }

    // Click a filtered event: its context in the whole trace.
    const target = out.filtered_first_ids[Math.min(1, out.filtered_first_ids.length - 1)];
    await page.click('#rows .row[data-id="' + target + '"]');
    await page.waitForSelector('#context:not([hidden])');
    await page.waitForFunction((id) => !!document.querySelector('#rows .row.sel[data-id="' + id + '"]'), target);
    await settled();
    out.context_target = target;
    out.context_count = await count();
    out.context_ids = await page.$$eval('#rows .row[data-id]', (rs) => rs.map((r) => Number(r.dataset.id)));
    out.hash_in_context = await page.evaluate(() => location.hash);
    await shot('context');
    // ↓ selects the next event of the whole trace.
    await page.focus('#list');
    await page.keyboard.press('ArrowDown');
    await page.waitForFunction((id) => { const s = document.querySelector('#rows .row.sel'); return s && Number(s.dataset.id) !== id; }, target);
    out.arrow_down = Number(await page.getAttribute('#rows .row.sel', 'data-id'));

    // Back, then a shared URL: the state comes back from the hash.
    await page.click('#back');
    await page.waitForSelector('#context', { state: 'hidden' });
    const shared = spec.url.split('#')[0] + '#filter=' + encodeURIComponent(spec.filter) + '&event=' + target;
    const page2 = await browser.newPage({ viewport: { width: 1280, height: 760 } });
    page2.on('pageerror', (e) => out.errors.push(String(e)));
    await page2.goto(shared);
    await page2.waitForSelector('body[data-ready="1"]');
    out.shared_filter = await page2.inputValue('#filter');
    await page2.waitForSelector('#rows .row.sel');
    out.shared_selected = Number(await page2.getAttribute('#rows .row.sel', 'data-id'));
    await page2.close();

    // One click on a field value filters on it.
    await page.click('#rows .row[data-id="' + target + '"]');
    await page.waitForSelector('#context:not([hidden])');
    const clause = await page.getAttribute('#detail .val[data-clause^="type == "]', 'data-clause');
    await page.click('#detail .val[data-clause^="type == "]');
    await page.waitForFunction((c) => document.querySelector('#filter').value.endsWith(c), clause);
    out.one_click_filter = await page.inputValue('#filter');

    // Every view.
    out.views = {};
    for (const v of ['timeline', 'exceptions', 'calltree', 'flamegraph', 'locks', 'threads', 'reactions', 'stats']) await visitView(v);
  }

  if (spec.hostile) {
    // Show every hostile string in the list and in the detail pane: step
    // through all calls, returns and throws of the whole trace.
    await page.click('#tabs button[data-view="events"]');
    await page.fill('#filter', '');
    await page.waitForFunction(() => document.querySelector('#count').textContent.includes('events'));
    await page.fill('#search', 'type in [THROW, CALL, RETURN, THREAD_START]');
    await page.waitForTimeout(400);
    out.hostile_steps = 0;
    for (let k = 1; k <= 60; k++) {
      const before = await page.textContent('#searchinfo');
      await page.click('#next');
      await page.waitForFunction((b) => document.querySelector('#searchinfo').textContent !== b, before);
      if ((await page.textContent('#searchinfo')).startsWith('no later')) break;
      out.hostile_steps = k;
    }
    out.hostile_detail_text = await page.textContent('#detail');
    out.hostile_rows_text = await page.textContent('#rows');
    await shot('hostile');
  }
  // The filter language of the page's source (Rust behind serve, the
  // JavaScript port in a report) on further expressions.
  out.parity = {};
  if (spec.parity && spec.parity.length) {
    await page.click('#tabs button[data-view="events"]');
    for (const expr of spec.parity) {
      const before = await page.getAttribute('#count', 'data-count') + await page.textContent('#count');
      await page.fill('#filter', expr);
      await page.waitForFunction((b) => {
        const c = document.querySelector('#count');
        return (c.dataset.count + c.textContent !== b || !document.querySelector('#error').hidden) && c.dataset.complete === '1';
      }, before).catch(() => {});
      await page.waitForTimeout(300);
      out.parity[expr] = (await page.isVisible('#error')) ? 'error: ' + await page.textContent('#error') : await count();
    }
  }
  await page.waitForTimeout(300);
  out.pwned = await page.evaluate(() => (window.__pwned === undefined ? null : String(window.__pwned)));
  out.title = await page.title();
  out.img_elements = await page.locator('img').count();
  out.script_elements = await page.$$eval('script', (s) => s.length);
} catch (e) {
  out.failure = String(e && e.stack || e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
