"""The table of `scripts/soak.sh --overhead`, from its runs.

Usage: overhead.py RUNS_TSV

RUNS_TSV has one line per run: app, configuration, repetition, wall ms,
CPU ms (user + system of vmview and the JVM), requests/s (Jetty; `-`
otherwise), the events the trace holds (`-` for plain runs), the methods the
overhead budget demoted and its mean estimated overhead in basis points
(`-` when it reported none; older files lack both columns). Prints, per
application and configuration, the medians and their ratios to the same
application's plain runs, as a Markdown table.
"""

import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
order = []
for line in open(sys.argv[1]):
    fields = line.split()
    app, config, _rep, wall, cpu, rate, events = fields[:7]
    demoted, estimated = (fields[7:9] + ["-", "-"])[:2]
    if (app, config) not in runs:
        order.append((app, config))
    runs[(app, config)].append(
        (
            float(wall),
            float(cpu),
            None if rate == "-" else float(rate),
            None if events == "-" else int(events),
            None if demoted == "-" else int(demoted),
            None if estimated == "-" else int(estimated),
        )
    )


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(x, base):
    return f"{x / base:.2f}×" if x is not None and base else "–"


print(
    "| application | run | reps | wall (median) | CPU (median) | wall × plain | CPU × plain | requests/s | events "
    "| demoted | estimated overhead |"
)
print("|---|---|---|---|---|---|---|---|---|---|---|")
for app, config in order:
    rows = runs[(app, config)]
    wall, cpu = med([r[0] for r in rows]), med([r[1] for r in rows])
    rate, events = med([r[2] for r in rows]), med([r[3] for r in rows])
    plain = runs.get((app, "plain"), [])
    pwall, pcpu = med([r[0] for r in plain]), med([r[1] for r in plain])
    prate = med([r[2] for r in plain])
    rate_s = "–" if rate is None else f"{rate:,.0f}" + (f" ({rate / prate:.2f}×)" if prate and config != "plain" else "")
    events_s = "–" if events is None else f"{events:,.0f}"
    demoted, estimated = med([r[4] for r in rows]), med([r[5] for r in rows])
    demoted_s = "–" if demoted is None else f"{demoted:,.0f}"
    estimated_s = "–" if estimated is None else f"{estimated / 100:.1f}%"
    print(
        f"| {app} | {config} | {len(rows)} | {wall / 1000:.2f} s | {cpu / 1000:.2f} s | "
        f"{ratio(wall, pwall) if config != 'plain' else '1'} | {ratio(cpu, pcpu) if config != 'plain' else '1'} | "
        f"{rate_s} | {events_s} | {demoted_s} | {estimated_s} |"
    )
