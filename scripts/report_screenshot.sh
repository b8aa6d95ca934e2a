#!/usr/bin/env bash
# Regenerate docs/figures/report.png, the README's example of report.html, from the current code: the exact Pareto
# search of bert-large over the reduced space (64 devices, global batch 512; 14 s with a warm cache on 2 cores), then
# a headless Chromium screenshot of its report. Run from the repository root.
set -euo pipefail
out=$(mktemp -d)
python -m search.phaze --workload bert-large --space reduced --devices 64 --batch 512 --objectives throughput,area \
    --out "$out" --quiet > /dev/null
chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking --disable-sync \
    --user-data-dir="$out/profile" --window-size=1400,1360 --virtual-time-budget=5000 \
    --screenshot=docs/figures/report.png "file://$out/report.html" 2> /dev/null
echo "wrote docs/figures/report.png from $out/report.html"
