#!/usr/bin/env bash
# Run a Python command (normally `fsnotes serve`) inside bubblewrap, outside containers.
#
#   sandbox/fsnotes-bwrap.sh --workspace ~/notes [--workspace DIR]... [--state-dir DIR] \
#       [--ro PATH]... -- python -m fsnotes serve --workspace ~/notes ...
#
# The command runs in new user, mount, pid, ipc, uts and cgroup namespaces, and a new
# network namespace (only a downed `lo`) unless FSNOTES_BWRAP_NET=1 (the setup page needs
# the network). Its filesystem is a fresh tmpfs holding only:
#   - the Python runtime of the given interpreter (prefixes, sys.path, the fsnotes and
#     sandbox packages), /usr, /etc/ld.so.cache and --ro paths: read-only;
#   - each --workspace and the --state-dir: read-write, at the same absolute path;
#   - a fresh /proc, a minimal /dev, an empty /tmp.
# No /etc/passwd, no home directory, nothing else of the host. All capabilities are
# dropped, the environment is cleared (PATH, LANG, LC_ALL, TZ and FSNOTES_* pass through),
# the sandbox dies with its parent, and --new-session keeps it from injecting input into
# the caller's terminal (TIOCSTI); stdin/stdout pipes pass through untouched, so stdio
# MCP works. Layer 3 inside (Landlock) is applied by the server itself.
#
# Needs bubblewrap (apt install bubblewrap) and unprivileged user namespaces (on Ubuntu
# 23.10+ AppArmor may forbid them for bwrap without a profile). Exit status: the
# command's, or 125 for a usage error, 127 when bwrap or the interpreter is missing.
set -euo pipefail

usage() {
    sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 125
}
die() {
    echo "fsnotes-bwrap: $1" >&2
    exit "${2:-125}"
}

rw=()
ro=()
while (($#)); do
    case $1 in
    --workspace | --state-dir)
        (($# >= 2)) || usage
        [[ -d $2 ]] || die "$1 $2: not a directory"
        rw+=("$(realpath -e -- "$2")")
        shift 2
        ;;
    --ro)
        (($# >= 2)) || usage
        [[ -e $2 ]] || die "--ro $2: does not exist"
        ro+=("$(realpath -e -- "$2")")
        shift 2
        ;;
    --)
        shift
        break
        ;;
    *) usage ;;
    esac
done
(($#)) || usage
((${#rw[@]})) || die "at least one --workspace is required"

bwrap=$(command -v bwrap) || die "bubblewrap (bwrap) is not installed" 127
python=$(command -v -- "$1") || die "interpreter not found: $1" 127
[[ $python == /* ]] || python="$PWD/$python" # a venv's python must keep its path

# Ask the interpreter (isolated mode: no cwd, no user site) where its runtime lives.
runtime=$("$python" -I - <<'EOF'
import importlib.util, os, sys
paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, *sys.path]
for name in ("fsnotes", "sandbox"):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        paths.extend(spec.submodule_search_locations)
for p in paths:
    if p and os.path.isabs(p) and os.path.exists(p) and os.path.realpath(p) != "/":
        print(os.path.realpath(p))
EOF
) || die "cannot query the runtime of $python"
mapfile -t runtime_paths < <(printf '%s\n' "$runtime" | sort -u)

args=(
    --unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-cgroup-try
    --die-with-parent --new-session --cap-drop ALL
    --hostname fsnotes
    --proc /proc --dev /dev --tmpfs /tmp
    --ro-bind /usr /usr
    --ro-bind-try /etc/ld.so.cache /etc/ld.so.cache
)
[[ ${FSNOTES_BWRAP_NET:-0} == 1 ]] || args+=(--unshare-net)

# Top-level directories: links into /usr on merged-/usr systems, real ones elsewhere.
for top in /bin /sbin /lib /lib32 /lib64 /libx32; do
    if [[ -L $top ]]; then
        args+=(--symlink "$(readlink "$top")" "$top")
    elif [[ -d $top ]]; then
        args+=(--ro-bind "$top" "$top")
    fi
done
for p in "${runtime_paths[@]}" "${ro[@]}"; do
    case $p in /usr | /usr/*) continue ;; esac # already bound
    args+=(--ro-bind "$p" "$p")
done
# Read-write binds last, so they win over a read-only bind of a parent directory.
for p in "${rw[@]}"; do
    args+=(--bind "$p" "$p")
done
args+=(--chdir "${rw[0]}")

# A clean environment: only what the runtime and fsnotes read.
args+=(--clearenv --setenv PATH "$(dirname "$python"):/usr/local/bin:/usr/bin:/bin"
    --setenv HOME /tmp --setenv PYTHONDONTWRITEBYTECODE 1)
for name in LANG LC_ALL TZ $(compgen -e FSNOTES_); do
    if [[ -n ${!name:-} && $name != FSNOTES_BWRAP_* ]]; then
        args+=(--setenv "$name" "${!name}")
    fi
done

shift
exec "$bwrap" "${args[@]}" -- "$python" "$@"
