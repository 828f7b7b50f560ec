"""Reading dashboards and rules the way Grafana and Prometheus do, and asking a real Prometheus about them."""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
DASHBOARDS = sorted((DEPLOY / "grafana" / "dashboards").glob("*.json"))
RULE_FILES = sorted((DEPLOY / "prometheus" / "rules").glob("*.yml"))

# Grafana's built-in interval variables, as a dashboard would resolve them over a short test run.
GRAFANA_BUILTINS = {"$__rate_interval": "1m", "$__interval": "5s", "$__range": "5m"}
REGEX_SPECIAL = set("\\.+*?()|[]{}^$")
LABEL_VALUES = re.compile(r"^label_values\((?:(?P<selector>.+),\s*)?(?P<label>\w+)\)$", re.S)


@dataclass(frozen=True)
class PanelQuery:
    dashboard: str
    panel: str
    ref: str
    expr: str

    @property
    def name(self) -> str:
        return f"{self.dashboard} / {self.panel} / {self.ref}"


def load_dashboard(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def panels(dashboard: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows unfolded: a collapsed row keeps its panels inside itself."""
    for p in dashboard.get("panels", []):
        if p.get("type") == "row":
            yield from p.get("panels", [])
        else:
            yield p
            yield from p.get("panels", [])


def panel_queries(path: Path) -> list[PanelQuery]:
    d = load_dashboard(path)
    return [PanelQuery(d["uid"], p.get("title", "?"), t.get("refId", "?"), t["expr"])
            for p in panels(d) for t in p.get("targets", []) if t.get("expr")]


def variables(dashboard: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(dashboard.get("templating", {}).get("list", []))


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """Grafana's substitution of $name / ${name} / [[name]] (longest names first) and the built-ins."""
    for k, v in GRAFANA_BUILTINS.items():
        expr = expr.replace(k, v)
    for name in sorted(values, key=len, reverse=True):
        v = values[name]
        expr = expr.replace("${" + name + "}", v).replace("[[" + name + "]]", v)
        expr = re.sub(r"\$" + re.escape(name) + r"(?![A-Za-z0-9_])", lambda _m, v=v: v, expr)
    return expr


def regex_literal(value: str) -> str:
    """A label value as a regex that matches only itself, written inside a PromQL double-quoted string
    (so the regex's backslash is itself escaped, as Grafana does)."""
    return "".join("\\\\" + c if c in REGEX_SPECIAL else c for c in value)


def rule_exprs() -> list[tuple[str, str]]:
    out = []
    for f in RULE_FILES:
        for g in yaml.safe_load(f.read_text())["groups"]:
            out += [(r.get("record") or r.get("alert"), r["expr"]) for r in g["rules"]]
    return out


class PromAPI:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _get(self, path: str, params: Mapping[str, str] | list[tuple[str, str]]) -> Any:
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen(f"{self.url}{path}?{q}", timeout=10) as r:
            body = json.loads(r.read())
        if body.get("status") != "success":
            raise AssertionError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self._get("/api/v1/query", {"query": expr})
        if data["resultType"] not in ("vector", "matrix"):
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def query_range(self, expr: str, start: float, end: float, step: str = "1s") -> list[dict[str, Any]]:
        """The series `expr` returns at any step of [start, end] (as a Grafana panel over that range)."""
        data = self._get("/api/v1/query_range",
                         {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": step})
        return list(data["result"])

    def label_values(self, label: str, selector: str | None) -> list[str]:
        params: list[tuple[str, str]] = [("match[]", selector)] if selector else []
        return sorted(self._get(f"/api/v1/label/{label}/values", params))

    def variable_values(self, query: str) -> list[str]:
        """Grafana's `label_values([selector,] label)` template query."""
        m = LABEL_VALUES.match(query.strip())
        if not m:
            raise AssertionError(f"unsupported template query {query!r}")
        return self.label_values(m["label"], m["selector"])

    def wait_for(self, expr: str, timeout: float, min_series: int = 1) -> list[dict[str, Any]]:
        """Polls an instant query until it returns `min_series` series (Prometheus scrapes every second)."""
        deadline = time.monotonic() + timeout
        while True:
            res = self.query(expr)
            if len(res) >= min_series or time.monotonic() > deadline:
                return res
            time.sleep(0.25)


def resolve_variables(api: PromAPI, dashboard: Mapping[str, Any], pick: Mapping[str, str] | None = None
                      ) -> dict[str, str]:
    """Values for every template variable, in order (later queries may use earlier variables).

    `pick` chooses a concrete value for a variable (it must be among the values Prometheus offers); every
    other variable gets its All value, as the dashboards open by default.
    """
    values: dict[str, str] = {}
    for v in variables(dashboard):
        q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
        offered = api.variable_values(substitute(q, values))
        assert offered, f"{dashboard['uid']}: variable ${v['name']} ({q}) has no values"
        if pick and v["name"] in pick:
            assert pick[v["name"]] in offered, f"${v['name']}={pick[v['name']]!r} not among {offered}"
            values[v["name"]] = regex_literal(pick[v["name"]])
        else:
            values[v["name"]] = v.get("allValue") or "(" + "|".join(map(regex_literal, offered)) + ")"
    return values
