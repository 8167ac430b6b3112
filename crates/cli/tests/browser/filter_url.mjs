// Opens vmview's page (a report file or `vmview serve`) once per filter
// given in the URL, as a shared link would carry it, and prints one JSON
// line: per filter, the count shown or the error under the filter box, and
// how long the page took. A page whose script hangs fails at the timeout.
//
// node filter_url.mjs '{"npm": DIR, "url": URL, "filters": [EXPR…], "timeout_ms": N}'
import { createRequire } from 'node:module';

const spec = JSON.parse(process.argv[2]);
const require = createRequire(spec.npm + '/');
const { chromium } = require('playwright-core');
const out = { results: [], errors: [] };
const browser = await chromium.launch({
  executablePath: spec.chromium || '/usr/bin/chromium',
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  timeout: 30000,
});
try {
  for (const expr of spec.filters) {
    const page = await browser.newPage();
    page.setDefaultTimeout(spec.timeout_ms || 20000);
    page.on('pageerror', (e) => out.errors.push(String(e)));
    const t = Date.now();
    const r = { filter: expr };
    try {
      await page.goto(spec.url + '#filter=' + encodeURIComponent(expr));
      await page.waitForFunction(() => {
        const c = document.querySelector('#count');
        const err = document.querySelector('#error');
        return (err && !err.hidden) || (c && c.dataset.complete === '1' && c.textContent.includes('matches'));
      });
      const err = await page.$eval('#error', (e) => (e.hidden ? null : e.textContent));
      if (err) r.error = err; else r.count = Number(await page.getAttribute('#count', 'data-count'));
    } catch (e) {
      r.failure = String(e && e.message || e).split('\n')[0];
    }
    r.ms = Date.now() - t;
    out.results.push(r);
    await page.close({ runBeforeUnload: false }).catch(() => {});
  }
} catch (e) {
  out.failure = String(e && e.stack || e);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
