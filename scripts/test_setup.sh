#!/usr/bin/env bash
# What the test suite needs beyond Python packages: a headless Chromium, which renders report/index.html
# (tests/report/test_report_render.py). Installed from the distribution's packages when missing (Debian/Ubuntu, as
# root or with password-less sudo); elsewhere install Chromium yourself, or the render test is skipped.
set -euo pipefail
for browser in chromium chromium-browser google-chrome; do
  if command -v "$browser" >/dev/null 2>&1; then
    exit 0
  fi
done
if command -v apt-get >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if sudo -n true 2>/dev/null; then sudo="sudo -n"; else sudo="none"; fi
  fi
  if [ "$sudo" != "none" ]; then
    echo "scripts/test_setup.sh: installing Chromium (apt-get) for the report's render test" >&2
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
    command -v chromium >/dev/null
    exit 0
  fi
fi
echo "scripts/test_setup.sh: no Chromium, and it cannot be installed here: the report's render test will be" \
  "skipped (install chromium to run it)" >&2
