"""Several instances behind HAProxy (tests/balancer.py, the deployment the tests start): a
confirmed delete across two instances, and requests per second through the balancer with three
instances against one.

Same run, one durable PostgreSQL 15 (``fsync=on``, tests/pgcluster.py) holding both
deployments' stores, one 4 KiB note. Measured:

- a confirmed ``notes_delete`` whose first round instance A answers and whose retry instance B
  executes (sent to each directly): p50 and p99 of the retry (seal check, the audit intent, the
  history copy, the claim in PostgreSQL, the unlink) and of both rounds;
- ``notes_read`` from 16 concurrent keep-alive clients through the balancer (bench_http's
  client, in this process), in front of three instances and of one; the two deployments
  alternate round by round so that the machine's noise falls on both. The scaling ratio is
  requests per second with three over with one. On the 2-core development machine, the
  instances, HAProxy, PostgreSQL and the client share two cores: the ratio says what a second
  and third process buy there, not what three machines would.

Usage: python benchmarks/bench_deploy.py [--deletes N] [--calls N] [--rounds N]
Writes benchmarks/results/deploy.json. Not a timed test: the machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import balancer  # noqa: E402
import pgcluster  # noqa: E402
from bench_http import measure, prepared, stats  # noqa: E402

from tests.transport.http_support import Raw, answer_of  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "deploy.json"
NOTE = ("# Benchmark note\n\n" + "Some prose with a [[Link]] and a #tag.\n" * 120)[:4096]
CONCURRENT = 16
FORM = {"elicitation": {"form": {}}}


class Endpoint:
    def __init__(self, url: str) -> None:
        self.url = url


def _tool(raw: Raw, args: dict[str, Any], **extra: Any) -> dict[str, Any]:
    body = raw.request("tools/call", {"name": "notes_delete", "arguments": args, **extra}, FORM)
    response = raw.post(body)
    response.raise_for_status()
    return dict(answer_of(response)["result"])


def deletes_across_two(d: balancer.Deployment, count: int) -> dict[str, Any]:
    """``count`` confirmed deletes, asked of instance a and executed by instance b."""
    a = Raw(Endpoint(d.instances["a"].server.url), d.token)  # type: ignore[arg-type]
    b = Raw(Endpoint(d.instances["b"].server.url), d.token)  # type: ignore[arg-type]
    retries: list[float] = []
    totals: list[float] = []
    try:
        for i in range(count + 3):  # the first three warm both instances
            rel = f"del-{i}.md"
            note = d.notes / rel
            note.write_text(NOTE)
            args = {"uri": note.as_uri()}
            started = time.perf_counter()
            first = _tool(a, args)
            ((key, _),) = first["inputRequests"].items()
            answer = {
                "inputResponses": {
                    key: {"action": "accept", "content": {"note_id": rel, "confirm": True}}
                },
                "requestState": first["requestState"],
            }
            asked = time.perf_counter()
            done = _tool(b, args, **answer)
            ended = time.perf_counter()
            assert done["structuredContent"]["deleted"] is True, done
            assert not note.exists()
            if i >= 3:
                retries.append(ended - asked)
                totals.append(ended - started)
    finally:
        a.close()
        b.close()

    def summary(values: list[float]) -> dict[str, float]:
        ordered = sorted(values)
        return {
            "p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 2),
        }

    return {"retry_on_b": summary(retries), "both_rounds": summary(totals), "samples": count}


def run(deletes: int, calls: int, rounds: int) -> dict[str, Any]:
    report: dict[str, Any] = {
        "benchmark": "deploy",
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "cpus": os.cpu_count(),
        "clients": CONCURRENT,
        "calls_per_client_per_round": calls,
        "rounds": rounds,
    }
    with (
        tempfile.TemporaryDirectory() as tmp,
        pgcluster.running(durable=True) as cluster,
    ):
        root = Path(os.path.realpath(tmp))
        setups: dict[int, balancer.Deployment] = {}
        try:
            for count in (3, 1):
                home = root / f"n{count}"
                (home / "notes").mkdir(parents=True)
                (home / "notes" / "note.md").write_text(NOTE)
                setups[count] = balancer.Deployment(
                    home, home / "notes", cluster.new_database(), count
                )
            report["confirmed_delete_across_two_instances"] = deletes_across_two(setups[3], deletes)
            samples: dict[int, tuple[list[float], float]] = {3: ([], 0.0), 1: ([], 0.0)}
            for _ in range(rounds):
                for count, d in setups.items():
                    uri = (d.notes / "note.md").as_uri()
                    requests = prepared(balancer_host(d), d.token, "notes_read", {"uri": uri})
                    lat, wall = asyncio.run(
                        measure(
                            "127.0.0.1", d.lb_port, requests, CONCURRENT, calls, b"Benchmark note"
                        )
                    )
                    got, total = samples[count]
                    samples[count] = (got + lat, total + wall)
        finally:
            for d in setups.values():
                d.close()
    report["read_through_balancer"] = {
        f"instances_{count}": stats(*samples[count]) for count in (3, 1)
    }
    three = report["read_through_balancer"]["instances_3"]["requests_per_s"]
    one = report["read_through_balancer"]["instances_1"]["requests_per_s"]
    report["scaling_ratio_3_over_1"] = round(three / one, 3)
    return report


def balancer_host(d: balancer.Deployment) -> str:
    return f"127.0.0.1:{d.lb_port}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deletes", type=int, default=40)
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    why = balancer.missing()
    if why is not None:
        print(f"SKIPPED: {why}")
        return 0
    report = run(args.deletes, args.calls, args.rounds)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    delete = report["confirmed_delete_across_two_instances"]
    print(f"{'confirmed delete, asked of a, executed by b':<46}{'p50':>9}{'p99':>9}")
    for name in ("retry_on_b", "both_rounds"):
        s = delete[name]
        print(f"  {name:<44}{s['p50_ms']:>7.2f}ms{s['p99_ms']:>7.2f}ms")
    print(f"{f'notes_read through HAProxy, {CONCURRENT} clients':<46}{'p50':>9}{'p99':>9}"
          f"{'req/s':>9}")  # fmt: skip
    for count in (3, 1):
        s = report["read_through_balancer"][f"instances_{count}"]
        label = f"  {count} instance{'s' if count > 1 else ''}"
        print(f"{label:<46}{s['p50_ms']:>7.2f}ms{s['p99_ms']:>7.2f}ms"
              f"{s['requests_per_s']:>9.0f}")  # fmt: skip
    print(f"scaling ratio (3 instances / 1): {report['scaling_ratio_3_over_1']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
