#!/usr/bin/env bash
# Installs the Debian packages the tests need. Idempotent: installs nothing when
# everything is present, and runs `apt-get update` only when a package is missing.
# Runs as root on a fresh Debian machine (or via sudo when not root), no stdin.
#
#   prometheus  /usr/bin/prometheus (dashboards e2e test) and /usr/bin/promtool
#               (`promtool check rules` on dashboards/alerts.yaml)
#   redis-server /usr/bin/redis-server (limiter/fleet tests: the shared quota
#               on a real Redis, started by the tests on 127.0.0.1)
#   chromium-headless-shell /usr/bin/chromium-headless-shell (bench
#               TestReportInBrowser and TestRealAWSChartInBrowser: the HTML
#               report and the real binaries' chart in a real browser)
set -euo pipefail

packages=(prometheus redis-server chromium-headless-shell)
# Each package and the file that shows it is installed.
declare -A provides=([prometheus]=/usr/bin/promtool [redis-server]=/usr/bin/redis-server [chromium-headless-shell]=/usr/bin/chromium-headless-shell)

missing=()
for p in "${packages[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || [ ! -x "${provides[$p]}" ]; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo=(sudo -n)
	else
		echo "setup: need root to install: ${missing[*]}" >&2
		exit 1
	fi
fi

export DEBIAN_FRONTEND=noninteractive
echo "setup: installing ${missing[*]}" >&2
"${sudo[@]}" apt-get update -q </dev/null
"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null

# The Debian packages start prometheus and redis services where an init system
# runs; the tests start their own on other ports, so they are left alone.
for p in "${missing[@]}"; do
	if [ ! -x "${provides[$p]}" ]; then
		echo "setup: $p installed but ${provides[$p]} is missing" >&2
		exit 1
	fi
done
