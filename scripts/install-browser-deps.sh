#!/usr/bin/env bash
# Installs what the real-browser tests in tests/browser need:
#   - Debian's Chromium at /usr/bin/chromium, with apt-get, only if it is missing ('apt-get update'
#     runs only when the package lists on the machine cannot install it);
#   - tests/browser's npm packages, exactly as package-lock.json pins them (playwright-core only,
#     which never downloads a browser of its own: the tests point it at /usr/bin/chromium).
# Idempotent: run it as often as you like. Then:
#   cargo build -p herald && (cd tests/browser && node --test)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
chromium=/usr/bin/chromium

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_install_chromium() {
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium
}

if [ -x "$chromium" ]; then
  echo "install-browser-deps: chromium already installed"
else
  echo "install-browser-deps: installing chromium (apt-get)"
  # With no package lists (a fresh machine) or stale ones (an install that fails to download),
  # update them first and try again.
  if ! apt-cache show chromium >/dev/null 2>&1 || ! apt_install_chromium; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    apt_install_chromium
  fi
  [ -x "$chromium" ] || { echo "install-browser-deps: $chromium missing after install" >&2; exit 1; }
fi
"$chromium" --version || true

echo "install-browser-deps: npm ci in tests/browser"
cd "$root/tests/browser"
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund
