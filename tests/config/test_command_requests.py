"""A command server's own request series ([servers.requests], xferbench/config/series.py): read when the experiment
is read, refused there when they are not PromQL's simple selectors or have no /metrics to come from, recorded
with the cell; the selectors' label tests as PromQL's. Figures from them: tests/thirdparty/test_etcd_requests.py."""

from __future__ import annotations

import tomllib

import pytest

from xferbench import config as xe
from xferbench.config import series

HEAD = '[experiment]\nname = "r"\n[load]\ntransport = "grpc"\n[[servers]]\nserver = "command"\n'
COMMAND = 'command = ["build/bin/xferd-go", "--grpc-addr", "127.0.0.1:{port}", "--metrics-addr", "127.0.0.1:{m_port}"]\n'
METRICS = 'metrics = "http://127.0.0.1:{m_port}/metrics"\n'


def _parse(requests: str, metrics: str = METRICS) -> xe.Experiment:
    return xe.parse(tomllib.loads(HEAD + COMMAND + metrics + "[servers.requests]\n" + requests), "r.toml")


def test_a_mapping_is_read_and_recorded_with_the_cell() -> None:
    exp = _parse(
        "counter = 'grpc_server_handled_total{grpc_type=\"unary\", grpc_service=~\"etcdserverpb\\\\..*\"}'\n"
        "errors = 'grpc_code!=\"OK\"'\nlatency = \"grpc_server_handling_seconds\"\n"
    )
    (cell,) = exp.cells
    assert cell.kind.requests is not None
    rq = cell.kind.requests
    assert rq.counter.name == "grpc_server_handled_total" and rq.latency == series.Selector("grpc_server_handling_seconds")
    assert rq.names == ("grpc_server_handled_total", "grpc_server_handling_seconds")
    assert cell.config()["command"]["requests"] == {
        "counter": 'grpc_server_handled_total{grpc_type="unary",grpc_service=~"etcdserverpb\\..*"}',
        "errors": 'grpc_code!="OK"',
        "latency": "grpc_server_handling_seconds",
    }
    ok = {"grpc_type": "unary", "grpc_service": "etcdserverpb.KV", "grpc_code": "OK"}
    assert rq.counter(ok) and not rq.is_error(ok)
    assert rq.is_error({**ok, "grpc_code": "InvalidArgument"})
    assert not rq.counter({**ok, "grpc_type": "bidi_stream"}) and not rq.counter({**ok, "grpc_service": "x.etcdserverpb.KV"})


def test_a_cell_without_a_mapping_records_none_and_figures_read_ours() -> None:
    (cell,) = xe.parse(tomllib.loads(HEAD + COMMAND + METRICS), "r.toml").cells
    assert cell.kind.requests is None and "requests" not in cell.config()["command"]
    assert str(series.OURS.counter) == "xfer_requests_total" and series.OURS.latency is not None
    assert series.OURS.is_error({"code": "not_found"}) and not series.OURS.is_error({"code": "ok"})


@pytest.mark.parametrize(
    ("labels", "test", "passes"),
    [
        ({"a": "b"}, 'a="b"', True),
        ({}, 'a=""', True),  # a label a series lacks is the empty string, as in PromQL
        ({}, 'a!="b"', True),
        ({"a": "b"}, 'a!="b"', False),
        ({"a": "abc"}, 'a=~"a.c"', True),
        ({"a": "xabc"}, 'a=~"a.c"', False),  # anchored at both ends
        ({"a": "abc"}, 'a!~"a.*"', False),
        ({"a": "say \"hi\""}, 'a="say \\"hi\\""', True),
    ],
)
def test_label_tests_behave_as_promqls(labels: dict[str, str], test: str, passes: bool) -> None:
    assert series.selector("m{" + test + "}")(labels) is passes


@pytest.mark.parametrize(
    ("requests", "said"),
    [
        ("errors = 'grpc_code!=\"OK\"'\n", "requests.counter: required"),
        ("counter = 'grpc_server_handled_total{grpc_type=unary}'\n", 'expected label="value"'),
        ("counter = '2xx_total'\n", "expected a metric name"),
        ("counter = 'm{a=\"b\"'\n", "expected a metric name"),
        ("counter = 'm{a=\"b\" b=\"c\"}'\n", "expected a comma"),
        ("counter = 'm{a=~\"(\"}'\n", "not a regular expression"),
        ("counter = 5\n", "requests.counter = 5: expected a string"),
        ("counter = 'm'\nerrors = ''\n", "requests.errors = '': expected label tests"),
        ("counter = 'm'\nerrors = 'grpc_code!=OK'\n", "requests.errors = 'grpc_code!=OK'"),
        ("counter = 'm'\nlatency = 'h_bucket'\n", "the histogram's name without _bucket"),
        ("counter = 'm'\nrate = 'x'\n", "requests.rate: unknown key; allowed: counter, errors, latency"),
    ],
)
def test_what_is_not_a_simple_selector_is_refused_at_config_time(requests: str, said: str) -> None:
    with pytest.raises(xe.ExperimentError) as e:
        _parse(requests)
    assert said in str(e.value) and "servers[0]" in str(e.value), str(e.value)


def test_a_mapping_without_metrics_is_refused() -> None:
    with pytest.raises(xe.ExperimentError, match="requests: names series of the server's /metrics, which needs the metrics"):
        _parse("counter = 'grpc_server_handled_total'\n", metrics="")
