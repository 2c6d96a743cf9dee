# Two entry points (see README): `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck pytest peers sysdeps bench bench-vault clean conformance docs docs-check

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "fsnotes needs Python 3.11 or newer")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(PY) -m fsnotes.app.demo

# Node-based test peers (TypeScript SDK client, Inspector, oidc-provider for the OAuth tests);
# skipped with a reason if npm is absent.
peers:
	$(PYTHON) tests/peers/install.py

# bubblewrap, chromium and postgresql-15 for the launcher, page and shared-state tests
# (installed from Debian when root; skipped loudly otherwise)
sysdeps:
	.ci/sysdeps.sh

# The official MCP conformance suite (0.2.0-alpha.12 at 2026-07-28, 0.1.16 at 2025-11-25) over
# Streamable HTTP against the test fixture and against `fsnotes serve --http`, printing the
# suite's own output and then the scores (tests/interop/test_conformance.py asserts them).
conformance: $(STAMP) peers
	$(PY) -m tests.interop.conformance

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check sandbox fsnotes tests benchmarks

typecheck: $(STAMP)
	$(VENV)/bin/mypy --strict sandbox fsnotes/protocol fsnotes/transport fsnotes/notes fsnotes/security fsnotes/state fsnotes/setup fsnotes/_exports.py fsnotes/app/config.py fsnotes/app/config_tokens.py fsnotes/app/server.py fsnotes/app/cli_grant.py fsnotes/app/cli_audit.py fsnotes/app/cli_token.py fsnotes/app/doctor.py

pytest: $(STAMP)
	$(PY) -m pytest

# The documentation site (mkdocs.yml, docs/; MkDocs and its Material theme come with .[dev],
# from the docs extra) into site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The same build with --strict into a temporary directory, removed afterwards: a link to a
# missing page or anchor, or a page left out of the nav, fails `make test`.
docs-check: $(STAMP)
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir "$$d" && echo "docs: mkdocs build --strict passed"

# The whole suite: lint, types, the docs site built strictly, tests (the Docker ones skip
# here), then the Docker image built and tested with a private daemon (loudly SKIPPED where
# Docker cannot run at all).
test: $(STAMP) peers sysdeps lint typecheck docs-check pytest docker-test

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

# Large vaults (issue 11): 1k and 10k notes by default (also part of `make bench`); the
# full run, about 10 minutes: make bench-vault SIZES=1000,10000,100000
bench-vault: $(STAMP)
	$(PY) benchmarks/bench_vault.py $(if $(SIZES),--sizes $(SIZES))

clean:
	rm -rf $(VENV) site tests/peers/node_modules .pytest_cache .mypy_cache .ruff_cache

# Builds the Docker image with a private dockerd and tests it (.ci/docker.sh); the daemon
# is stopped by PID afterwards even when a step fails. Prints SKIPPED where Docker cannot run.
.PHONY: docker-test
docker-test: $(STAMP)
	.ci/docker.sh up && { eval "$$(.ci/docker.sh env)" && $(PY) -m pytest -m docker tests/docker; }; \
	status=$$?; .ci/docker.sh down; exit $$status
