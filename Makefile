# Entry points (see README): `make demo`, `make test` (the whole suite, what CI runs) and
# `make check` (the contributors' inner loop). Each creates .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: demo test check lint typecheck pytest peers sysdeps bench bench-vault bench-quality clean \
	conformance docs docs-check image image-offline bundle

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
	$(VENV)/bin/ruff format --check sandbox fsnotes tests benchmarks deploy

typecheck: $(STAMP)
	$(VENV)/bin/mypy --strict sandbox fsnotes deploy/mcpb/build.py

# Every test but the Docker ones, which docker-test runs with its private daemon (deselected
# here rather than skipped: they are not skipped, they run in the next step).
pytest: $(STAMP)
	$(PY) -m pytest -m "not docker"

# The documentation site (mkdocs.yml, docs/; MkDocs and its Material theme come with .[dev],
# from the docs extra) into site/.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The same build with --strict into a temporary directory, removed afterwards: a link to a
# missing page or anchor, or a page left out of the nav, fails `make test`.
docs-check: $(STAMP)
	@d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir "$$d" && echo "docs: mkdocs build --strict passed"

# The whole suite: lint, types, the docs site built strictly, tests, then the Docker image
# built and tested with a private daemon (loudly SKIPPED where Docker cannot run at all).
test: $(STAMP) peers sysdeps lint typecheck docs-check pytest docker-test

# The fast inner loop: lint, types, and the tests that need no service beyond the Python dev
# install (no PostgreSQL, HAProxy, node peers, Docker or chromium: the `service` and `docker`
# markers, tests/conftest.py) in the folders that test the modules themselves; under 3
# minutes on the 2-core machine. Left to `make test`, which stays the whole suite: tests/e2e,
# tests/transport, tests/setup and tests/interop (real servers driven over the wire: most of
# the suite's time), the hypothesis property tests below (thousands of generated cases each)
# and the kill-mid-write crash tests (each kills real writers many times).
CHECK_TESTS := tests/protocol tests/runtime tests/sandbox tests/notes tests/security tests/state tests/app \
	tests/jail tests/registry tests/test_package_exports.py
CHECK_SKIP := $(addprefix --ignore=tests/,sandbox/test_uri_properties.py \
	sandbox/test_root_crash.py notes/index/test_related_property.py \
	notes/index/test_search_property.py notes/text/test_links_property.py \
	protocol/test_protocol_linecost.py)
# Three multi-process race tests, a fifth of check's time, also left to `make test`: the
# 240 simultaneous starts that catch an intermittent SQLite lock race (30 s under load),
# the two-process nonce claim (state_contract's eight-process claim stays here, the same
# guarantee), and the walk-resolver run of the two-process confirmation (the race is in the
# replay store, not the resolver; the openat2 run stays). docs/testing.md lists them too.
CHECK_DESELECT := $(foreach t,\
	state/test_statedir.py::test_simultaneous_server_starts_on_fresh_state_dirs_all_succeed \
	state/test_replay.py::test_two_processes_claim_the_same_nonce_once \
	notes/tools/test_delete_flow.py::test_two_processes_given_one_confirmation_execute_it_once[walk],\
	'--deselect=tests/$(t)')
check: $(STAMP) lint typecheck
	$(PY) -m pytest -q -p no:cacheprovider -m "not docker and not service" $(CHECK_SKIP) \
		$(CHECK_DESELECT) $(CHECK_TESTS)

# The MCP Bundle for desktop hosts (docs/hosts.md): dist/fsnotes-VERSION.mcpb, validated and
# packed with the official mcpb CLI from the node peers, fsnotes and its dependencies in its
# own server/lib, for this machine's platform and Python minor version (deploy/mcpb/build.py).
# tests/registry/test_mcpb_bundle.py builds it the same way and starts it as a host would.
bundle: $(STAMP) peers
	$(PY) deploy/mcpb/build.py

bench: $(STAMP)
	$(PY) benchmarks/run_all.py

# Large vaults (issue 11): 1k and 10k notes by default (also part of `make bench`); the
# full run, about 10 minutes: make bench-vault SIZES=1000,10000,100000
bench-vault: $(STAMP)
	$(PY) benchmarks/bench_vault.py $(if $(SIZES),--sizes $(SIZES))

# Search quality on the CISI test collection (issue 22), beside plain BM25 in the same run;
# the collection is read from CISI (default ../shared/data/cisi), never shipped here.
bench-quality: $(STAMP)
	$(PY) -c 'import bm25s, tantivy' 2>/dev/null || $(PY) -m pip install -q -e '.[quality]'
	$(PY) benchmarks/bench_quality.py $(CISI)

# Also what `make test` leaves outside the checkout: .ci/docker.sh's private daemon (stopped
# first, by its pid) and its work files in $$FSNOTES_CI_DIR (/var/tmp/fsnotes-ci: the daemon's
# images, the debootstrap base, the build context and wheel cache, about 470 MB).
clean:
	.ci/docker.sh clean
	rm -rf $(VENV) site build/mcpb dist/fsnotes-*.mcpb tests/peers/node_modules tests/peers/conformance/node_modules \
		.pytest_cache .mypy_cache .ruff_cache

# Builds the Docker image with a private dockerd and tests it (.ci/docker.sh); the daemon
# is stopped by PID afterwards even when a step fails. Prints SKIPPED where Docker cannot run.
.PHONY: docker-test
docker-test: $(STAMP)
	.ci/docker.sh up && { eval "$$(.ci/docker.sh env)" && $(PY) -m pytest -m docker tests/docker; }; \
	status=$$?; .ci/docker.sh down; exit $$status

# The Docker image as the README's Docker section builds it. `make image` starts from the
# python base image on Docker Hub; `make image-offline` needs no Docker Hub: a Debian base
# made with debootstrap (as root) and imported, the wheels from the package index, built
# with --network none as CI builds it (.ci/docker.sh image). IMAGE names the result.
IMAGE ?= fsnotes
image:
	docker build -t $(IMAGE) .

image-offline: $(STAMP)
	.ci/docker.sh image $(IMAGE)
