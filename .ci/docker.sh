#!/usr/bin/env bash
# Docker pipeline for CI on a machine with no image registry: a private dockerd, a base
# image made with debootstrap + `docker import`, and the project image built offline.
#
#   .ci/docker.sh up     install docker.io/debootstrap/bubblewrap if missing, start the
#                        private daemon, build (or reuse) the base image, build the image
#   .ci/docker.sh env    print `export ...` lines for the tests (DOCKER_HOST, image, cli)
#   .ci/docker.sh down   stop the private daemon by its PID
#   .ci/docker.sh image [TAG]
#                        for people (`make image-offline`): build the image as `up` does, on
#                        the Docker the environment names (not a private daemon), without
#                        Docker Hub; fails loudly instead of skipping
#   .ci/docker.sh clean  `down`, then remove every work file (`make clean` calls it)
#
# Idempotent and loud. Where Docker cannot run at all (not root, apt unreachable, the
# daemon does not start) it prints "SKIPPED: <reason>", records the reason for `env`
# (the docker tests then skip with it) and exits 0. Any other failure exits non-zero.
# Work files live outside the repository, under $FSNOTES_CI_DIR (/var/tmp/fsnotes-ci).
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
CI_DIR=${FSNOTES_CI_DIR:-/var/tmp/fsnotes-ci}
D="$CI_DIR/docker"                 # daemon roots, socket, pidfile, log
SOCK="$D/docker.sock"
PIDFILE="$D/dockerd.pid"
ENV_FILE="$CI_DIR/env"
BASE_TAG=local/fsnotes-base:bookworm
BASE_TAR="$CI_DIR/base-bookworm-python3.tar"   # rootfs tarball, reused between runs
IMAGE_TAG=${FSNOTES_IMAGE_TAG:-local/fsnotes:ci}
DEBIAN_MIRROR=${FSNOTES_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# dockerd is ready within a second here (sandbox.md E); 60 s leaves room for a busy host.
DAEMON_READY_TIMEOUT_S=60
# dockerd exits within a few seconds of SIGTERM once its containers are gone.
DAEMON_STOP_TIMEOUT_S=30

log() { printf '[docker.sh %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

skip() {
    # Loud, never silent: the banner goes to stderr and the reason to the env file.
    printf '\n==================================================================\n' >&2
    printf 'SKIPPED: %s\n' "$1" >&2
    printf '==================================================================\n\n' >&2
    if ! { mkdir -p "$CI_DIR" && printf 'export FSNOTES_DOCKER_SKIPPED=%q\n' "$1" >"$ENV_FILE"; } \
        2>/dev/null; then
        echo "(could not record the reason in $ENV_FILE; the docker tests will say 'not set')" >&2
    fi
    exit 0
}

# The docker.io package's client matches its daemon; a newer client elsewhere on PATH
# (e.g. /usr/local/bin) also works but is not what we tested against.
docker_cli() {
    if [[ -x /usr/bin/docker ]]; then echo /usr/bin/docker; else command -v docker; fi
}

dk() { DOCKER_HOST="unix://$SOCK" "$(docker_cli)" "$@"; }

daemon_pid() {
    [[ -s "$PIDFILE" ]] || return 1
    local pid
    pid=$(<"$PIDFILE")
    kill -0 "$pid" 2>/dev/null || return 1
    echo "$pid"
}

apt_updated=0
apt_install() {
    # apt_install <command-that-must-exist> <package>...
    local need=$1
    shift
    command -v "$need" >/dev/null 2>&1 && return 0
    if [[ $apt_updated == 0 ]]; then
        log "apt-get update (once)"
        apt-get update -qq || return 1
        apt_updated=1
    fi
    log "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" \
        >/dev/null || return 1
}

install_tools() {
    command -v apt-get >/dev/null || skip "no apt-get: cannot install docker.io/debootstrap"
    apt_install dockerd docker.io || skip "apt could not install docker.io (mirror unreachable?)"
    apt_install debootstrap debootstrap || skip "apt could not install debootstrap"
    # bubblewrap is for tests/jail (the non-Docker launcher); failure only costs those tests.
    apt_install bwrap bubblewrap || log "WARNING: bubblewrap not installed; bwrap tests will skip"
}

start_daemon() {
    if pid=$(daemon_pid); then
        log "dockerd already running (pid $pid)"
        return 0
    fi
    mkdir -p "$D/data" "$D/exec"
    rm -f "$SOCK" "$PIDFILE"
    log "starting dockerd (data root $D/data, socket $SOCK)"
    # --bridge=none/--iptables=false: no docker0 and no NAT rules on the host; the tests
    # only use --network none. setsid: the daemon outlives this script, `down` stops it.
    setsid dockerd \
        --data-root "$D/data" --exec-root "$D/exec" --pidfile "$PIDFILE" \
        --host "unix://$SOCK" --bridge=none --iptables=false --ip-forward=false \
        --ip-masq=false >"$D/dockerd.log" 2>&1 </dev/null &
    local waited=0
    until dk version >/dev/null 2>&1; do
        if ((waited >= DAEMON_READY_TIMEOUT_S * 10)); then
            tail -n 20 "$D/dockerd.log" >&2 || true
            stop_daemon || true
            skip "dockerd did not become ready in ${DAEMON_READY_TIMEOUT_S}s (log: $D/dockerd.log)"
        fi
        if ! kill -0 $! 2>/dev/null; then
            tail -n 20 "$D/dockerd.log" >&2 || true
            skip "dockerd exited at start-up (log: $D/dockerd.log)"
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    log "dockerd ready (pid $(<"$PIDFILE"), $((waited / 10)).$((waited % 10))s)"
}

stop_daemon() {
    local pid
    if ! pid=$(daemon_pid); then
        log "no private dockerd running"
        return 0
    fi
    log "stopping dockerd (pid $pid)"
    kill -TERM "$pid"
    local waited=0
    while kill -0 "$pid" 2>/dev/null; do
        if ((waited >= DAEMON_STOP_TIMEOUT_S * 10)); then
            log "dockerd (pid $pid) ignored SIGTERM for ${DAEMON_STOP_TIMEOUT_S}s; sending SIGKILL"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.1
        waited=$((waited + 1))
    done
    log "dockerd stopped"
}

build_base() {
    if dk image inspect "$BASE_TAG" >/dev/null 2>&1; then
        log "base image $BASE_TAG present in the daemon: reused"
        return 0
    fi
    if [[ ! -s "$BASE_TAR" ]]; then
        local rootfs="$CI_DIR/rootfs"
        rm -rf "$rootfs"
        log "debootstrap --variant=minbase --include=python3 bookworm (about a minute)"
        debootstrap --variant=minbase --include=python3 bookworm "$rootfs" "$DEBIAN_MIRROR" \
            >"$CI_DIR/debootstrap.log" 2>&1 ||
            skip "debootstrap failed (mirror unreachable?), log: $CI_DIR/debootstrap.log"
        chroot "$rootfs" apt-get clean
        rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin
        tar -C "$rootfs" -cf "$BASE_TAR.part" .
        mv "$BASE_TAR.part" "$BASE_TAR"
        rm -rf "$rootfs"
        log "base rootfs cached in $BASE_TAR ($(du -h "$BASE_TAR" | cut -f1))"
    else
        log "base rootfs tarball reused: $BASE_TAR"
    fi
    dk import "$BASE_TAR" "$BASE_TAG" >/dev/null
    log "imported $BASE_TAG"
}

prepare_context() {
    # The build context is a copy of the working tree (tracked and untracked files that git
    # does not ignore) plus wheels/: the runtime dependencies, pip and setuptools, so the
    # Dockerfile can install offline with --network none.
    local ctx="$CI_DIR/context"
    rm -rf "$ctx"
    mkdir -p "$ctx/wheels"
    (cd "$REPO" && git ls-files -z --cached --others --exclude-standard |
        xargs -0 -r sh -c 'for f; do [ -e "$f" ] && printf "%s\0" "$f"; done' sh |
        tar --null -T - -cf -) | tar -C "$ctx" -xf -
    local py="$REPO/.venv/bin/python"
    [[ -x $py ]] || py=python3
    local deps
    deps=$("$py" - "$REPO/pyproject.toml" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    project = tomllib.load(f)["project"]
# The image carries the optional stacks the Dockerfile installs (its [setup,http,postgres,oauth]).
extras = project["optional-dependencies"]
print("\n".join(project["dependencies"] + [
    req for name in ("setup", "http", "postgres", "oauth") for req in extras[name]
]))
EOF
    )
    local wheel_cache="$CI_DIR/wheel-cache"
    mkdir -p "$wheel_cache"
    log "pip wheel: runtime deps + pip + setuptools -> context/wheels"
    # shellcheck disable=SC2086  # one requirement per line, none contains spaces
    "$py" -m pip wheel -q --disable-pip-version-check --cache-dir "$wheel_cache" \
        -w "$ctx/wheels" pip setuptools $deps ||
        skip "pip could not fetch the runtime dependencies (package index unreachable?)"
}

build_image() {
    prepare_context
    log "docker build --network none --build-arg BASE_IMAGE=$BASE_TAG -t $IMAGE_TAG"
    dk build -q --network none --build-arg "BASE_IMAGE=$BASE_TAG" -t "$IMAGE_TAG" \
        "$CI_DIR/context" >/dev/null
    log "built $IMAGE_TAG ($(dk image inspect -f '{{.Size}}' "$IMAGE_TAG" | awk '{printf "%d MB", $1/1e6}'))"
}

write_env() {
    {
        printf 'export DOCKER_HOST=%q\n' "unix://$SOCK"
        printf 'export FSNOTES_DOCKER_IMAGE=%q\n' "$IMAGE_TAG"
        printf 'export FSNOTES_DOCKER_CLI=%q\n' "$(docker_cli)"
    } >"$ENV_FILE"
}

cmd_up() {
    local t0=$SECONDS
    [[ $(id -u) == 0 ]] || skip "not root: a private dockerd needs root (uid $(id -u))"
    mkdir -p "$CI_DIR"
    rm -f "$ENV_FILE"
    install_tools
    start_daemon
    build_base
    build_image
    write_env
    log "up: done in $((SECONDS - t0))s"
}

cmd_env() {
    if [[ -s "$ENV_FILE" ]]; then
        cat "$ENV_FILE"
    else
        printf 'export FSNOTES_DOCKER_SKIPPED=%q\n' "'.ci/docker.sh up' has not run"
    fi
}

cmd_down() {
    stop_daemon
    rm -f "$ENV_FILE"
}

cmd_image() {
    # The user's own Docker, and failures that stop the build with the reason (a person
    # asked for this image: a SKIPPED banner and exit 0 would hide that nothing was built).
    dk() { "$(docker_cli)" "$@"; }
    skip() {
        echo "fsnotes image: $1" >&2
        exit 1
    }
    IMAGE_TAG=${1:-fsnotes}
    command -v "$(docker_cli)" >/dev/null 2>&1 || skip "no docker command on PATH"
    dk version >/dev/null 2>&1 || skip "docker cannot reach its daemon (is it running? DOCKER_HOST?)"
    mkdir -p "$CI_DIR"
    if ! dk image inspect "$BASE_TAG" >/dev/null 2>&1 && [[ ! -s "$BASE_TAR" ]]; then
        [[ $(id -u) == 0 ]] || skip "debootstrap needs root to make the base image: run as root (sudo make image-offline)"
        apt_install debootstrap debootstrap || skip "apt could not install debootstrap"
    fi
    build_base
    build_image
    log "built $IMAGE_TAG without Docker Hub: base $BASE_TAG (debootstrap), wheels from the package index"
}

cmd_clean() {
    # The daemon first: its data root holds overlay mounts that must be gone before rm.
    stop_daemon
    if [[ -d "$D/exec" || -d "$D/data" ]]; then
        # Mounts a killed daemon left behind (none after a clean stop).
        { grep -o " $D/[^ ]*" /proc/self/mounts 2>/dev/null || true; } | sort -r |
            while read -r mnt; do umount -l "$mnt" 2>/dev/null || true; done
    fi
    if [[ -d "$CI_DIR" ]]; then
        log "removing $CI_DIR ($(du -sh "$CI_DIR" 2>/dev/null | cut -f1))"
        rm -rf "$CI_DIR"
    fi
}

case "${1:-}" in
up) cmd_up ;;
env) cmd_env ;;
down) cmd_down ;;
image) cmd_image "${2:-}" ;;
clean) cmd_clean ;;
*)
    echo "usage: $0 up|env|down|image [TAG]|clean" >&2
    exit 2
    ;;
esac
