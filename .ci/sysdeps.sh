#!/usr/bin/env bash
# System packages the test suite uses before the Docker step: bubblewrap (the non-Docker
# jail launcher, tests/jail and tests/e2e), chromium (headless screenshots of the setup
# page and a real-browser submit, tests/setup/test_page_screenshot.py; about 12 s to install
# from Debian bookworm on a warm apt cache) and postgresql-15 (the shared-state backend's
# tests start their own cluster from its binaries, tests/pgcluster.py; the package's own
# cluster service is not used) and haproxy (2.6, the load balancer the deployment tests start
# in front of three instances, tests/balancer.py; the package's own service is not used either).
# Installed from Debian when missing and when we are root with
# apt; otherwise a loud note, and those tests skip with their reason.
set -u
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 \
    || missing+=(chromium)
[ -x /usr/lib/postgresql/15/bin/initdb ] || missing+=(postgresql-15)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "NOTE: ${missing[*]} missing and cannot be installed here (not root or no apt-get);" \
        "the tests that need them will be skipped" >&2
    exit 0
fi
echo "[sysdeps] apt-get install ${missing[*]}" >&2
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends "${missing[@]}" >/dev/null; }; then
    echo "NOTE: apt-get could not install ${missing[*]}; the tests that need them will be" \
        "skipped" >&2
fi
exit 0
