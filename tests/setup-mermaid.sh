#!/bin/sh
# Sets up what tests/mermaid.rs needs: Debian's chromium and mermaid-cli
# (npm) in tests/.node. Idempotent: skips whatever is already installed.
# Puppeteer's own browser download is skipped because CI machines often
# cannot reach it; the puppeteer config points mmdc at Debian's chromium.
set -eu

dir="$(cd "$(dirname "$0")" && pwd)/.node"
chromium=/usr/bin/chromium

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

if [ ! -x "$chromium" ]; then
    # Update the package lists only when they don't know chromium yet.
    if ! apt-cache policy chromium 2>/dev/null | grep -q 'Candidate: [0-9]'; then
        as_root apt-get update
    fi
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
fi

if [ ! -x "$dir/node_modules/.bin/mmdc" ]; then
    mkdir -p "$dir"
    PUPPETEER_SKIP_DOWNLOAD=1 npm install --prefix "$dir" --no-audit --no-fund @mermaid-js/mermaid-cli
fi

cat > "$dir/puppeteer.json" <<JSON
{"executablePath":"$chromium","args":["--no-sandbox","--headless","--disable-gpu","--disable-background-networking","--disable-component-update","--disable-sync","--no-first-run"]}
JSON
echo "mermaid-cli ready: $dir/node_modules/.bin/mmdc -p $dir/puppeteer.json"
