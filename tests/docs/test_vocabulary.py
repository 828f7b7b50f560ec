"""docs/DESIGN.md's tables are the names: the real servers' and the real client's `/metrics`, and every
dashboard query and recording rule under deploy/, use exactly the metric and label names written there,
and every metric written there is really exported."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from py_client import XferError, connect
from tests.deploy.promcheck import DASHBOARDS, LABEL_VALUES, panel_queries, rule_exprs, variables
from tests.deploy.promcheck import load_dashboard as load_json
from tests.docs import design
from tests.docs.promql_names import Names, names
from tests.loadgen.support import run_locust
from tests.support.server_help import help_flags, help_text
from tests.support.servers import running_server
from tests.support.tls import make_tls_files

SCRAPE_TIMEOUT_S = 10.0
# Labels whose values the Labels table enumerates completely (code is checked against PROTOCOL.md).
ENUMERATED = ("transport", "method", "direction", "server", "allocator", "pool")


@dataclass(frozen=True)
class Family:
    name: str  # as DESIGN.md writes it: counters with their _total
    type: str
    labels: frozenset[str]
    values: dict[str, frozenset[str]]
    has_samples: bool


def families(text: str) -> dict[str, Family]:
    out = {}
    for f in text_string_to_metric_families(text):
        name = f.name + "_total" if f.type == "counter" else f.name
        samples = [s for s in f.samples if not s.name.endswith("_created")]
        keys = {k for s in samples for k in s.labels} - design.IMPLICIT_LABELS
        values = {k: frozenset(s.labels[k] for s in samples if k in s.labels) for k in keys}
        out[name] = Family(name, f.type, frozenset(keys), values, bool(samples))
    return out


def scrape(url: str) -> dict[str, Family]:
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as r:
        return families(r.read().decode())


def exercise(target: str) -> None:
    """A call of every kind, and one that fails (not_found), so every labelled series exists."""
    with connect(target, timeout=SCRAPE_TIMEOUT_S) as c:
        c.upload("vocab.bin", b"x" * 5000, chunk_size=1024)
        c.stat("vocab.bin")
        c.download("gen:4096:1", chunk_size=1024)
        c.echo(b"hello")
        c.meta([("b", "2"), ("a", "1")])
        with pytest.raises(XferError):
            c.stat("missing.bin")


@pytest.fixture(scope="module")
def exposed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Family]]]:
    """server -> its scrapes after real calls: xferd-go (both transports), xferd-go and xferd-c with TLS listeners
    (whose figures only a TLS listener exports, every series from 0), xferd-c with glibc, with mimalloc (whose
    statistics are other gauges) and with the pool (its own xfer_alloc_* counters)."""
    out: dict[str, list[dict[str, Family]]] = {"xferd-go": [], "xferd-c": []}
    tls = [*make_tls_files(tmp_path_factory.mktemp("tls")).server_args(), "--tls-frame-addr=127.0.0.1:0",
           "--tls-grpc-addr=127.0.0.1:0"]
    for name, args, transports in (("xferd-go", [], ("grpc", "frame")), ("xferd-go", tls, ("frame",)),
                                   ("xferd-c", [], ("frame",)),
                                   ("xferd-c", [*tls[:-1]], ("frame",)),
                                   ("xferd-c", ["--alloc=mimalloc"], ("frame",)),
                                   ("xferd-c", ["--alloc=pool"], ("frame",))):
        with running_server(name, args) as s:
            for t in transports:
                exercise(s.target(t))
            out[name].append(scrape(s.metrics_url))
    return out


def check_family(fam: Family, doc: design.MetricDoc, who: str) -> list[str]:
    problems = []
    if fam.type not in doc.type:
        problems.append(f"{who}: {fam.name} is a {fam.type}, DESIGN.md says {doc.type}")
    if fam.has_samples and fam.labels != doc.labels:
        problems.append(f"{who}: {fam.name} has labels {sorted(fam.labels)}, DESIGN.md says {sorted(doc.labels)}")
    return problems


def check_values(fam: Family, who: str) -> list[str]:
    documented = design.labels()
    problems = []
    for label in ENUMERATED:
        extra = fam.values.get(label, frozenset()) - documented[label]
        if extra:
            problems.append(f"{who}: {fam.name}{{{label}}} takes {sorted(extra)}, not in DESIGN.md's Labels")
    codes = {"ok"} | design.protocol_codes() | documented["code"]
    extra = fam.values.get("code", frozenset()) - codes
    if extra:
        problems.append(f"{who}: {fam.name}{{code}} takes {sorted(extra)}: neither ok nor a PROTOCOL.md code")
    return problems


@pytest.mark.parametrize("server", design.SERVER_NAMES)
def test_every_server_metric_is_documented(exposed: dict[str, list[dict[str, Family]]], server: str) -> None:
    doc = design.server_metrics()
    problems = []
    for scraped in exposed[server]:
        for fam in scraped.values():
            if fam.name not in doc or server not in doc[fam.name].exporters:
                problems.append(f"{server} exports {fam.name}, which DESIGN.md does not list for it")
                continue
            problems += check_family(fam, doc[fam.name], server)
            problems += check_values(fam, server)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("server", design.SERVER_NAMES)
def test_every_documented_server_metric_is_exported(exposed: dict[str, list[dict[str, Family]]], server: str) -> None:
    seen = {name for scraped in exposed[server] for name in scraped}
    missing = sorted(n for n, d in design.server_metrics().items() if server in d.exporters and n not in seen)
    assert not missing, f"DESIGN.md lists these for {server}, which does not export them: {missing}"


def test_a_failed_call_is_counted_with_its_protocol_code(exposed: dict[str, list[dict[str, Family]]]) -> None:
    """The calls above include a `not_found`: the code label's check has something to bite on."""
    for server, scrapes in exposed.items():
        codes = set().union(*(s["xfer_requests_total"].values["code"] for s in scrapes))
        assert {"ok", "not_found"} <= codes, f"{server}: {codes}"


@pytest.mark.parametrize("server", design.SERVER_NAMES)
def test_every_flag_is_documented(server: str) -> None:
    written = design.design_text() + design.PROTOCOL.read_text()
    flags = help_flags(help_text(server))
    assert flags, f"{server} --help lists no flags"
    missing = sorted(f"--{f}" for f in flags if f"--{f}" not in written)
    assert not missing, f"{server} flags in neither docs/DESIGN.md nor proto/PROTOCOL.md: {missing}"


# ------------------------------------------------------------------------------------ dashboards, rules


def deploy_names() -> list[tuple[str, Names]]:
    """(where, the names it uses) of every dashboard panel and template variable and every recording rule."""
    out = []
    for path in DASHBOARDS:
        out += [(q.name, names(q.expr)) for q in panel_queries(path)]
        for v in variables(load_json(path)):
            query = v.get("query")
            text = query.get("query", "") if isinstance(query, dict) else str(query or "")
            m = LABEL_VALUES.match(text.strip())
            assert m, f"{path.name} variable {v.get('name')}: unexpected query {text!r}"
            used = names(m["selector"] or "")
            used.labels.add(m["label"])
            out.append((f"{path.name} variable {v['name']}", used))
    out += [(f"rule {record}", names(expr)) for record, expr in rule_exprs()]
    return out


def documented_series() -> set[str]:
    return set(design.server_metrics()) | set(design.client_metrics()) | design.recorded_series()


def test_deploy_queries_use_documented_metric_names() -> None:
    known = documented_series()
    histograms = {n for n, d in (design.server_metrics() | design.client_metrics()).items()
                  if "histogram" in d.type or "summary" in d.type}
    problems = []
    for where, used in deploy_names():
        for metric in used.metrics:
            if design.family_of(metric, histograms) not in known:
                problems.append(f"{where}: {metric}")
    assert not problems, "metric names not in docs/DESIGN.md:\n" + "\n".join(problems)


def test_deploy_queries_use_documented_labels() -> None:
    known = set(design.labels()) | design.IMPLICIT_LABELS
    problems = [f"{where}: {label}" for where, used in deploy_names() for label in used.labels - known]
    assert not problems, "label names not in docs/DESIGN.md's Labels:\n" + "\n".join(problems)


def test_recording_rules_are_the_documented_ones() -> None:
    recorded = {record for record, _expr in rule_exprs()}
    assert recorded == design.recorded_series(), (
        f"in the rules only: {sorted(recorded - design.recorded_series())}; "
        f"in DESIGN.md only: {sorted(design.recorded_series() - recorded)}")


# ------------------------------------------------------------------------------------------ the client


@pytest.fixture(scope="module")
def client_families(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Family]:
    """The final /metrics of a short local Locust run against xferd-go, every user class running."""
    dump = tmp_path_factory.mktemp("client-metrics")
    with running_server("xferd-go") as s:
        r = run_locust(["--headless", "--host", s.target("grpc"), "-u", "3", "-r", "3", "-t", "3s",
                        "--xfer-sizes", "64KiB", "--xfer-chunk", "16KiB", "--xfer-metrics-port", "0",
                        "--xfer-metrics-dump", str(dump)], timeout=60)
    assert r.returncode == 0, r.stderr[-3000:]
    dumps = sorted(Path(dump).glob("*.prom"))
    assert len(dumps) == 1, f"one local Locust process, one dump: {dumps}"
    return families(dumps[0].read_text())


def test_client_metrics_are_the_documented_ones(client_families: dict[str, Family]) -> None:
    requests = client_families["xfer_client_requests_total"]
    assert "code" in requests.labels and "result" not in requests.labels, requests.labels
    doc = design.client_metrics()
    problems = []
    for fam in client_families.values():
        if fam.name not in doc:
            problems.append(f"Locust exports {fam.name}, which DESIGN.md's Client metrics do not list")
            continue
        problems += check_family(fam, doc[fam.name], "Locust")
        problems += check_values(fam, "Locust")
    local = {n for n, d in doc.items() if "master" not in d.exported_by}
    problems += [f"DESIGN.md lists {n}, which a local Locust does not export" for n in sorted(local - set(client_families))]
    assert not problems, "\n".join(problems)
