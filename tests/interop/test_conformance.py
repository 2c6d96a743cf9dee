"""The official MCP conformance suite, both versions, against the fixture and the product over
Streamable HTTP (tests/interop/conformance.py runs them; ``make conformance`` prints the same).

The fixture must pass every scenario each version scores: 37 at 2026-07-28 (0.2.0-alpha.12,
``--requirements 2026-07-28``) and 30 at 2025-11-25 (0.1.16); and every scenario the 2026-07-28
run executes without scoring (its 13 ``not_scored`` server scenarios), except those PENDING
names, and the report shows each of the 50. The product must pass every scenario that needs no
test tool, except the checks KNOWN_FAILURES names with its reason, and those must still fail
exactly so (a list that can go stale is not a list of reasons).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.interop import conformance
from tests.interop.conformance import PENDING, PRODUCT_SCENARIOS, SUITES, Run

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

WHY_NOT = conformance.missing()
if WHY_NOT is not None:
    pytest.skip(f"conformance suite not runnable: {WHY_NOT}", allow_module_level=True)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[tuple[str, str], Run]]:
    output: list[str] = []
    done = conformance.run_all(echo=output.append)
    yield {(run.server, run.suite.revision): run for run in done}


def explain(run: Run) -> str:
    return conformance.report([run])


@pytest.mark.parametrize("revision", [s.revision for s in SUITES])
def test_the_fixture_passes_every_scenario_the_suite_scores(
    runs: dict[tuple[str, str], Run], revision: str
) -> None:
    run = runs[("fixture", revision)]
    assert run.score() == (run.suite.scored, run.suite.scored), explain(run)
    assert not run.unexpected(), explain(run)


def test_every_scenario_the_2026_run_executes_is_reported_and_held(
    runs: dict[tuple[str, str], Run],
) -> None:
    run = runs[("fixture", "2026-07-28")]
    # The requirements file's server leg: 37 scored, 13 run unscored (extensions, pending).
    assert (len(run.scored), len(run.unscored)) == (37, 13), explain(run)
    assert sorted(run.outcomes) == sorted([*run.scored, *run.unscored]), explain(run)
    text = explain(run)
    for name in run.outcomes:
        assert f" {name}: " in text, f"{name} missing from the report:\n{text}"
    held_unscored = [n for n in run.unscored if n not in PENDING]
    assert held_unscored and set(held_unscored) <= set(run.held()), text
    failing = [n for n in held_unscored if not run.outcomes[n].passed]
    assert not failing, text


@pytest.mark.parametrize("revision", [s.revision for s in SUITES])
def test_the_product_passes_every_scenario_that_needs_no_test_tool(
    runs: dict[tuple[str, str], Run], revision: str
) -> None:
    run = runs[("product", revision)]
    assert sorted(run.outcomes) == sorted(PRODUCT_SCENARIOS[revision]), explain(run)
    assert not run.unexpected(), explain(run)


# The Tasks extension's scenarios (io.modelcontextprotocol/tasks, SEP-2663): the 2026-07-28
# run executes them without scoring them (its requirements file lists them as pending
# against the suite's own reference fixture); ours must pass every one of them.
TASKS_SCENARIOS = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)


@pytest.mark.parametrize("scenario", TASKS_SCENARIOS)
def test_the_fixture_passes_the_tasks_extension_scenarios(
    runs: dict[tuple[str, str], Run], scenario: str
) -> None:
    run = runs[("fixture", "2026-07-28")]
    outcome = run.outcomes.get(scenario)
    assert outcome is not None, f"the suite did not run {scenario}"
    assert outcome.passed, outcome.failures
