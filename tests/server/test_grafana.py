"""docs/grafana/sqew.json: every PromQL query, legend and variable in the dashboard names only
metrics and labels that a live sqew server exports (its /metrics after some traffic, the canary
on), so the dashboard cannot drift from the metrics."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

import sqew
from sqew import testing

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "sqew.json"
FUNCTIONS = {
    "abs", "avg", "ceil", "clamp_min", "count", "delta", "floor", "histogram_quantile",
    "increase", "irate", "label_values", "max", "min", "quantile", "rate", "round", "sum",
    "topk", "vector",
}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset"}
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
MATCHERS = re.compile(r"\{([^{}]*)\}")
MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"(?:[^\"\\]|\\.)*\"")
IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")


class Exported:
    """The metric (sample) names and label names of an exposition."""

    def __init__(self, text: str) -> None:
        self.metrics: set[str] = set()
        self.labels: set[str] = set()
        for family in text_string_to_metric_families(text):
            self.metrics.add(family.name)
            for sample in family.samples:
                self.metrics.add(sample.name)
                self.labels.update(sample.labels)


def names_in(expr: str) -> tuple[set[str], set[str]]:
    """The metric names and label names a PromQL expression (with Grafana variables) uses."""
    text = re.sub(r"\$\{?\w+\}?", "x", expr)  # $queue, ${datasource}, $__rate_interval
    text = re.sub(r"\"(?:[^\"\\]|\\.)*\"", '""', text)  # strings (may hold braces)
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    labels: set[str] = set()
    for body in MATCHERS.findall(text):
        found = MATCHER.findall(body)
        assert found or not body.strip(), f"unparsed label matchers {body!r} in {expr!r}"
        labels.update(found)
    text = MATCHERS.sub(" ", text)
    for group in GROUPING.findall(text):
        labels.update(n.strip() for n in group.split(",") if n.strip())
    text = GROUPING.sub(" ", text)
    text = text.replace('""', " ")
    metrics: set[str] = set()
    for m in IDENT.finditer(text):
        word, rest = m.group(), text[m.end():].lstrip()
        if word in KEYWORDS:
            continue
        if rest.startswith("("):
            assert word in FUNCTIONS, f"unknown function {word!r} in {expr!r}"
            continue
        if re.fullmatch(r"\d+(\.\d+)?", word) or word == "x":
            continue
        metrics.add(word)
    if expr.startswith("label_values("):  # label_values(metric, label)
        metric, label = (part.strip() for part in expr[len("label_values("):-1].split(","))
        return {metric}, {label}
    return metrics, labels


def queries(dashboard: dict[str, Any]) -> Iterator[tuple[str, str, set[str]]]:
    """``(where, expr, legend labels)`` of every panel target and query variable."""
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            legend = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
            yield panel["title"], target["expr"], legend
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            yield f"${variable['name']}", variable["query"]["query"], set()


@pytest.fixture(scope="module")
def exported() -> Iterator[Exported]:
    with (testing.serve(canary_interval_s=0.05, canary_replica="r") as server,
          sqew.Client(server.url) as client):
        client.create_queue("g")
        client.enqueue("g", 1, idempotency_key="k")
        client.enqueue("g", 1, idempotency_key="k")  # a duplicate
        for m in client.poll("g", wait_ms=100):
            client.ack("g", m.id, m.token)
        refused = httpx.post(f"{server.url}/queues/g/poll", params={"batch": 0}, timeout=10)
        assert refused.status_code == 400  # a refusal, by reason
        deadline = time.monotonic() + 15
        while "sqew_canary_latency_seconds_count{" not in (
                text := httpx.get(f"{server.url}/metrics", timeout=10).text):
            assert time.monotonic() < deadline, "no canary round"
            time.sleep(0.05)
        yield Exported(text)


def test_every_query_names_exported_metrics_and_labels(exported: Exported) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    seen: set[str] = set()
    for where, expr, legend in queries(dashboard):
        metrics, labels = names_in(expr)
        assert metrics, f"{where}: no metric in {expr!r}"
        assert metrics <= exported.metrics, f"{where}: {metrics - exported.metrics} not exported"
        assert labels | legend <= exported.labels, (
            f"{where}: labels {(labels | legend) - exported.labels} not exported")
        seen |= metrics
    # The dashboard covers what the docs promise: depths, ages, rates, refusals, requests,
    # transactions and the canary.
    for name in ("sqew_queue_ready", "sqew_queue_oldest_ready_age_seconds",
                 "sqew_queue_enqueued_total", "sqew_rejected_total",
                 "sqew_http_request_duration_seconds_bucket",
                 "sqew_db_transaction_seconds_bucket", "sqew_canary_latency_seconds_bucket",
                 "sqew_canary_failures_total"):
        assert name in seen, f"no panel shows {name}"


def test_the_parser_sees_a_wrong_name() -> None:
    metrics, labels = names_in(
        'sum by (reason) (rate(sqew_nope_total{queue=~"$queue"}[$__rate_interval]))')
    assert (metrics, labels) == ({"sqew_nope_total"}, {"reason", "queue"})
