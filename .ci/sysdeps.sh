#!/usr/bin/env bash
# System packages the test suite uses before the Docker step: bubblewrap (the non-Docker
# jail launcher, tests/jail and tests/e2e). Installed from Debian when missing and when we
# are root with apt; otherwise a loud note, and those tests skip with their reason.
set -u
if command -v bwrap >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "NOTE: bubblewrap is missing and cannot be installed here (not root or no apt-get);" \
        "the bwrap launcher tests will be skipped" >&2
    exit 0
fi
echo "[sysdeps] apt-get install bubblewrap" >&2
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
        --no-install-recommends bubblewrap >/dev/null; }; then
    echo "NOTE: apt-get could not install bubblewrap; the bwrap launcher tests will be skipped" >&2
fi
exit 0
