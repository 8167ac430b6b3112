#!/usr/bin/env bash
# Regenerates docs/img/timeline.png and docs/img/flamegraph.png from the
# bundled example (examples/shop), so the pictures in the docs stay those
# of the current page. Needs a JDK, node, playwright-core in target/npm
# (.ci/run installs it) and /usr/bin/chromium.
#   scripts/screenshots.sh            # debug build
#   PROFILE=release scripts/screenshots.sh
set -euo pipefail
cd "$(dirname "$0")/.."
profile=${PROFILE:-debug}
if [ "$profile" = release ]; then cargo build --release -p vmview-agent -p vmview-cli; else cargo build -p vmview-agent -p vmview-cli; fi
bin=target/$profile/vmview
mkdir -p target/examples/shop
javac -g -d target/examples/shop examples/shop/src/shop/*.java
"$bin" record --classes 'shop.*' -o target/examples/shop-shots.vmv -- java -cp target/examples/shop shop.Main >/dev/null
out=$(mktemp)
"$bin" serve target/examples/shop-shots.vmv --port 0 >"$out" &
pid=$!
trap 'kill $pid 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 100); do grep -q http "$out" && break; sleep 0.1; done
url=$(grep -o 'http://[^ ]*' "$out")
node - "$url" "$PWD/target/npm" "$PWD/docs/img" <<'JS'
const [url, npm, dir] = process.argv.slice(2);
const { chromium } = require(npm + '/node_modules/playwright-core');
(async () => {
  const b = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--headless', '--no-sandbox', '--disable-gpu'] });
  const p = await b.newPage({ viewport: { width: 1280, height: 560 } });
  await p.goto(url + '#view=timeline');
  await p.waitForSelector('#view-timeline[data-frame]');
  await p.waitForTimeout(300);
  await p.screenshot({ path: dir + '/timeline.png' });
  await p.click('#tabs button[data-view="flamegraph"]');
  await p.waitForSelector('#view-flamegraph[data-ready="1"]');
  await p.fill('#fg-search', 'Inventory');
  await p.waitForTimeout(200);
  await p.screenshot({ path: dir + '/flamegraph.png' });
  await b.close();
})().catch((e) => { console.error(e); process.exit(1); });
JS
echo "wrote docs/img/timeline.png docs/img/flamegraph.png"
