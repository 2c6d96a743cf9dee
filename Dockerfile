# fsnotes: a sandboxed MCP notes server, served over stdio.
#
#   docker run -i --rm --read-only --network none --cap-drop ALL \
#     --security-opt no-new-privileges --user "$(id -u):$(id -g)" \
#     -v "$HOME/notes:/notes" -v "$HOME/.local/state/fsnotes:/state" IMAGE
#
# With the setup page (docs/setup.md, "Connecting folders at run time"): drop --network none,
# publish the page on the host's loopback only, and bind it on all container interfaces:
#   ... -p 127.0.0.1:8765:8765 -e FSNOTES_SETUP_BIND=0.0.0.0 \
#     -e FSNOTES_WORKSPACE=/notes/personal -e FSNOTES_SETUP_ALLOW=/notes IMAGE
# Granting at a terminal instead (docs/setup.md, the Docker grant example): --entrypoint fsnotes
# IMAGE grant ..., with the server's mounts, FSNOTES_WORKSPACE, FSNOTES_SETUP_ALLOW and
# FSNOTES_PRINCIPAL (the default workspace /notes would overlap every folder below it).
#
# Over Streamable HTTP (docs/docker.md, docs/http.md): make a token with the image, then serve on all
# container interfaces, published on the host's loopback only:
#   docker run --rm ... -v "$HOME/.local/state/fsnotes:/state" --entrypoint fsnotes IMAGE \
#     token add --principal ada
#   docker run --rm --read-only --cap-drop ALL --security-opt no-new-privileges \
#     --user "$(id -u):$(id -g)" -p 127.0.0.1:8080:8080 -e FSNOTES_HTTP=0.0.0.0:8080 \
#     -e FSNOTES_HTTP_EXPOSE=1 -e FSNOTES_PRINCIPAL=ada -v ... IMAGE
#
# BASE_IMAGE: any Debian-like image with python3 >= 3.11. CI overrides it with a local
# debootstrap + `docker import` image because no registry is reachable there.
ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- stage 1: build the fsnotes wheel and install it with its runtime deps into a venv
# (with the [setup], [http], [postgres] and [oauth] extras: the setup page's and the HTTP
# transport's stack, the PostgreSQL driver for shared state and the JOSE library for OAuth
# access tokens, each imported only when configured; a team deployment needs the last two,
# docs/team.md, "Shared state: several instances")
FROM ${BASE_IMAGE} AS wheels
COPY . /src
# Offline when the context carries wheels/ (prepared by .ci/docker.sh): Debian's python3
# has no pip or ensurepip, so pip runs straight from its wheel. Online otherwise (the
# default base image has pip). compileall: the runtime root filesystem is read-only and
# the jail forbids writes outside the workspaces, so .pyc files must exist beforehand.
RUN set -eu; \
    if [ -d /src/wheels ]; then \
        python3 -m venv --without-pip /opt/venv; \
        pip_whl=$(ls /src/wheels/pip-*.whl); \
        pip="/opt/venv/bin/python $pip_whl/pip"; \
        $pip wheel -q --no-index --find-links /src/wheels --no-deps -w /tmp/dist /src; \
        $pip install -q --no-index --find-links /src/wheels --no-compile "$(ls /tmp/dist/fsnotes-*.whl)[setup,http,postgres,oauth]"; \
    else \
        python3 -m venv --without-pip /opt/venv; \
        python3 -m pip wheel -q --no-deps -w /tmp/dist /src; \
        python3 -m pip --python /opt/venv/bin/python install -q --no-compile "$(ls /tmp/dist/fsnotes-*.whl)[setup,http,postgres,oauth]"; \
    fi; \
    /opt/venv/bin/python -m compileall -q /opt/venv/lib

# --- stage 2: the runtime, only the venv on top of the base
FROM ${BASE_IMAGE} AS runtime
COPY --from=wheels /opt/venv /opt/venv
# uid 10001: not a uid any base image uses. /notes and /state are mount points; they are
# owned by the default user so the image also works without --user.
RUN useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin fsnotes \
    && mkdir -p /notes /state \
    && chown 10001:10001 /notes /state
ENV PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    FSNOTES_WORKSPACE=/notes \
    FSNOTES_STATE_DIR=/state
# The MCP registry checks that an image published under a server.json name carries it.
LABEL io.modelcontextprotocol.server.name="io.github.fsnotes/fsnotes"
USER 10001:10001
WORKDIR /notes
# stdio transport: run with -i and never -t (a TTY would mangle JSON-RPC on stdout).
ENTRYPOINT ["fsnotes", "serve"]
