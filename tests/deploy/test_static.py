"""deploy/ checked without load: promtool, the compose file, Dockerfiles, dashboards, the stack CLI."""

from __future__ import annotations

import importlib.resources
import json
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.deploy.promcheck import DASHBOARDS, DEPLOY, ROOT, load_dashboard, panels, variables
from xferbench import cli
from xferbench.config import servers
from xferbench.measure import targets
from xferbench.run.process import free_port
from xferbench.tools import stack

PROM_DIR = DEPLOY / "prometheus"
COMPOSE = DEPLOY / "docker-compose.yml"
DOCKERFILES = sorted((DEPLOY / "docker").glob("*.Dockerfile"))
PROVISIONING = DEPLOY / "grafana" / "provisioning"

def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["promtool", *args], capture_output=True, text=True, timeout=60)


# ------------------------------------------------------------------------------------------ Prometheus


def test_promtool_accepts_the_config() -> None:
    r = promtool("check", "config", str(PROM_DIR / "prometheus.yml"))
    assert r.returncode == 0, r.stdout + r.stderr


def test_promtool_accepts_the_rules() -> None:
    rules = sorted((PROM_DIR / "rules").glob("*.yml"))
    assert rules
    r = promtool("check", "rules", *map(str, rules))
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_configs_servers_are_the_registrys() -> None:
    """prometheus.yml's server targets are written from xferbench/config/servers.py (`xferbench stack config`)."""
    text = (PROM_DIR / "prometheus.yml").read_text()
    assert stack.with_registry_targets(text) == text, \
        "deploy/prometheus/prometheus.yml's servers differ from the registry's: run `xferbench stack config`"
    assert cli.main(["stack", "config", "--check"]) == 0
    stale = text.replace(f"{stack.GEN_END}\n", f"  - targets: [\"gone:1\"]\n{stack.GEN_END}\n")
    assert "gone:1" not in stack.with_registry_targets(stale)


def test_promtool_accepts_the_local_rewrite(tmp_path: Path) -> None:
    cfg = stack.local_config(targets_dir=tmp_path / "targets", scrape_interval="1s",
                             services={"locust-worker": ["127.0.0.1:9647"]})
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(cfg))
    r = promtool("check", "config", str(path))
    assert r.returncode == 0, r.stdout + r.stderr


def test_local_rewrite_points_every_job_at_this_machine(tmp_path: Path) -> None:
    cfg = stack.local_config(targets_dir=tmp_path / "t", prometheus_addr="127.0.0.1:19090",
                             services={"xferd-go": ["127.0.0.1:1"], "locust-worker": ["127.0.0.1:2"]})
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    targets = {j: [t for g in job.get("static_configs", []) for t in g["targets"]] for j, job in jobs.items()}
    assert targets["xferd"] == ["127.0.0.1:1", "127.0.0.1:9102"]
    assert targets["locust"] == ["127.0.0.1:9646", "127.0.0.1:2"]
    assert targets["prometheus"] == ["127.0.0.1:19090"]
    assert all("dns_sd_configs" not in j for j in jobs.values())
    assert [g["labels"]["server"] for g in jobs["xferd"]["static_configs"]] == ["xferd-go", "xferd-c"]
    assert all(Path(f).is_absolute() for j in jobs.values() for s in j.get("file_sd_configs", [])
               for f in s["files"])
    assert all(Path(r).is_absolute() for r in cfg["rule_files"])
    assert cfg["global"]["scrape_interval"] == "5s"  # unchanged unless asked


def test_local_rewrite_refuses_an_unknown_service(tmp_path: Path) -> None:
    src = tmp_path / "p.yml"
    src.write_text(yaml.safe_dump({"scrape_configs": [
        {"job_name": "x", "static_configs": [{"targets": ["mystery:1234"]}]}]}))
    with pytest.raises(stack.StackError, match="mystery"):
        stack.local_config(src=src, targets_dir=tmp_path)


def test_write_targets_is_file_sd_json(tmp_path: Path) -> None:
    p = targets.write_targets(tmp_path, "xferd-cell1", ["127.0.0.1:5"], {"server": "xferd-c"})
    assert json.loads(p.read_text()) == [{"targets": ["127.0.0.1:5"], "labels": {"server": "xferd-c"}}]
    with pytest.raises(targets.TargetFileError, match="must start with one of xferd-"):
        targets.write_targets(tmp_path, "cell1", [], {})


def test_stack_up_status_down(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The CLI round trip: up returns once ready, file discovery picks up a dropped target, down stops it.
    Through `cli.main` in this process (Prometheus is a real child process all the same); the command as a
    process, `python -m xferbench stack up|status|down`, is tests/tools/test_stack.py's."""
    listen = f"127.0.0.1:{free_port()}"
    d = ["--dir", str(tmp_path)]
    try:
        assert cli.main(["stack", "up", *d, "--listen", listen, "--scrape-interval", "1s",
                         "--target", "xferd-c=", "--target", "locust-master="]) == 0, capsys.readouterr()
        with urllib.request.urlopen(f"http://{listen}/-/ready", timeout=5) as r:
            assert r.status == 200
        targets.write_targets(tmp_path / "targets", "xferd-extra", [listen], {"server": "extra"})
        from tests.deploy.promcheck import PromAPI
        found = PromAPI(f"http://{listen}").wait_for('up{server="extra"}', 20.0)
        assert found, "a target file dropped in targets/ was not discovered"
        capsys.readouterr()
        assert cli.main(["stack", "status", *d]) == 0
        st = capsys.readouterr().out
        assert listen in st, st
    finally:
        down = cli.main(["stack", "down", *d])
    assert down == 0, capsys.readouterr()
    assert not (tmp_path / "prometheus.pid").exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://{listen}/-/ready", timeout=2)


# ------------------------------------------------------------------------------------------ Grafana


def test_dashboards_are_generated_from_the_script(tmp_path: Path) -> None:
    gen = DEPLOY / "grafana" / "gen_dashboards.py"
    src = gen.read_text().replace('OUT = Path(__file__).resolve().parent / "dashboards"',
                                  f"OUT = Path({str(tmp_path)!r})")
    script = tmp_path / "gen.py"
    script.write_text(src)
    subprocess.run([sys.executable, str(script)], check=True, timeout=60)
    for path in DASHBOARDS:
        assert (tmp_path / path.name).read_text() == path.read_text(), \
            f"{path.name} differs from gen_dashboards.py's output: run it and commit the result"
    assert sorted(p.name for p in tmp_path.glob("*.json")) == [p.name for p in DASHBOARDS]


def test_provisioned_datasource_uid_is_the_one_dashboards_use() -> None:
    ds = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yml").read_text())["datasources"]
    uids = {d["uid"] for d in ds if d["type"] == "prometheus"}
    assert len(uids) == 1
    for path in DASHBOARDS:
        d = load_dashboard(path)
        used = {p["datasource"]["uid"] for p in panels(d) if "datasource" in p}
        used |= {t["datasource"]["uid"] for p in panels(d) for t in p.get("targets", [])}
        used |= {v["datasource"]["uid"] for v in variables(d)}
        assert used == uids, f"{path.name} uses datasources {used}, provisioned {uids}"


def test_dashboard_provider_path_is_where_compose_mounts_the_dashboards() -> None:
    prov = yaml.safe_load((PROVISIONING / "dashboards" / "xferbench.yml").read_text())
    path = prov["providers"][0]["options"]["path"]
    compose = yaml.safe_load(COMPOSE.read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{path}:ro" in mounts


@pytest.mark.parametrize("path", DASHBOARDS, ids=[p.stem for p in DASHBOARDS])
def test_dashboard_shape(path: Path) -> None:
    d = load_dashboard(path)
    ps = list(panels(d))
    assert d["uid"].startswith("xferbench-") and len(d["uid"]) <= 40
    ids = [p["id"] for p in d["panels"]] + [p["id"] for r in d["panels"] for p in r.get("panels", [])]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for p in ps:
        assert p.get("targets"), f"panel {p['title']!r} has no queries"
        assert all(t.get("expr") and t.get("refId") for t in p["targets"])
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24
    names = [v["name"] for v in variables(d)]
    assert {"server", "config"} <= set(names)
    for p in ps:
        for t in p["targets"]:
            used = set(re.findall(r"\$(\w+)", t["expr"])) - {"__rate_interval", "__interval", "__range"}
            assert used <= set(names), f"{p['title']}: undefined variables {used - set(names)}"


# ------------------------------------------------------------------------------------------ compose


def compose_schema() -> dict:
    files = importlib.resources.files("check_jsonschema.builtin_schemas.vendor")
    return json.loads(files.joinpath("compose-spec.json").read_text())


def test_compose_file_matches_the_compose_spec() -> None:
    """Validated against the Compose Specification's JSON schema (the one check-jsonschema ships)."""
    doc = yaml.safe_load(COMPOSE.read_text())
    schema = compose_schema()
    jsonschema.validators.validator_for(schema)(schema).validate(doc)


def test_docker_compose_config() -> None:
    """docker-compose itself (1.29, which the bootstrap installs and the compose-stack test drives) accepts the
    file: interpolation, merge and its own schema, beyond the Compose Specification's JSON schema above."""
    exe = shutil.which("docker-compose")
    assert exe, "docker-compose is not installed (scripts/bootstrap.sh installs it); this test does not skip"
    r = subprocess.run([exe, "-f", str(COMPOSE), "-p", "xferbench", "config", "--quiet"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_compose_stack_shape() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    services = doc["services"]
    assert {"xferd-go", "xferd-c", "locust-master", "locust-worker", "prometheus", "grafana"} <= set(services)
    assert list(doc["networks"]) == ["xferbench"]
    for name, s in services.items():
        assert s.get("networks") == ["xferbench"], f"{name} must be on the one private network only"
        image = s.get("image", "")
        if "build" not in s:
            tag = image.rpartition(":")[2]
            assert ":" in image and tag not in ("latest", "") and re.search(r"\d", tag), \
                f"{name}: image {image!r} is not pinned to a version"
        for p in s.get("ports", []):
            assert str(p).startswith("127.0.0.1:"), f"{name}: port {p} is published beyond loopback"
        assert "container_name" not in s or name != "locust-worker", "a container_name stops scaling"
    worker = services["locust-worker"]
    assert "--worker" in worker["command"] and "--master-host=locust-master" in worker["command"]
    assert any(v.endswith(":/xferbench/loadgen:ro") for v in worker["volumes"])
    env = services["grafana"]["environment"]
    assert env["GF_AUTH_ANONYMOUS_ENABLED"] == "true" and env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert "--web.enable-lifecycle" in services["prometheus"]["command"]
    # The Prometheus config's DNS names are compose services; its static targets too.
    prom = yaml.safe_load((PROM_DIR / "prometheus.yml").read_text())
    for job in prom["scrape_configs"]:
        for dns in job.get("dns_sd_configs", []):
            assert set(dns["names"]) <= set(services)
        for g in job.get("static_configs", []):
            for t in g["targets"]:
                host = t.rpartition(":")[0]
                assert host in services or host == "localhost", f"{t}: no such compose service"


def test_compose_build_files_and_mounts_exist() -> None:
    doc = yaml.safe_load(COMPOSE.read_text())
    for name, s in doc["services"].items():
        b = s.get("build")
        if b:
            ctx = (DEPLOY / b["context"]).resolve()
            assert ctx.is_dir(), f"{name}: build context {ctx} missing"
            assert (ctx / b["dockerfile"]).is_file(), f"{name}: {b['dockerfile']} missing"
        for v in s.get("volumes", []):
            src = v.split(":")[0]
            if src.startswith("."):
                assert (DEPLOY / src).exists(), f"{name}: mounted {src} missing"


# ------------------------------------------------------------------------------------------ Dockerfiles


def _instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


@pytest.mark.parametrize("path", DOCKERFILES, ids=[p.stem for p in DOCKERFILES])
def test_dockerfile_copies_paths_that_exist(path: Path) -> None:
    """Build context is the repository root; every COPY source (other than --from stages) must exist."""
    for word, rest in _instructions(path):
        if word not in ("COPY", "ADD"):
            continue
        args = rest.split()
        if any(a.startswith("--from=") for a in args):
            continue
        sources = [a for a in args if not a.startswith("--")][:-1]
        assert sources, f"{path.name}: COPY without a source: {rest}"
        for s in sources:
            if s.startswith("build/"):  # made by `make build` / `xferbench images build` (the `host` target)
                assert s.removeprefix("build/").split("/")[0] in ("bin", "wheels"), f"{path.name}: COPY {s}"
                continue
            assert (ROOT / s).exists(), f"{path.name}: COPY {s} — no such path in the repository"


@pytest.mark.parametrize("path", DOCKERFILES, ids=[p.stem for p in DOCKERFILES])
def test_dockerfile_base_images_are_pinned(path: Path) -> None:
    """Every FROM is a pinned tag, an ARG whose default is one (the base is a build argument), or a stage."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    for word, rest in _instructions(path):
        if word == "ARG" and "=" in rest:
            k, _, v = rest.partition("=")
            args[k] = v
        if word == "FROM":
            words = rest.split()
            image = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m[1], m[0]), words[0])
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])
            if image in stages:
                continue
            tag = image.rpartition(":")[2] if ":" in image else ""
            assert re.search(r"\d+\.\d+", tag), f"{path.name}: FROM {words[0]} is not pinned to a version"


def test_c_runtime_image_carries_every_allocator() -> None:
    text = (DEPLOY / "docker" / "xferd-c.Dockerfile").read_text()
    runtime = text.split(" AS runtime", 1)[1].split("FROM ", 1)[0]  # what the host and source targets share
    for lib in ("libjemalloc2", "libtcmalloc-minimal4", "libmimalloc2.0"):
        assert lib in runtime, f"the xferd-c runtime image lacks {lib}"
    assert "FROM runtime AS host" in text and "FROM runtime AS source" in text


IMAGED = [s for s in servers.SERVERS.values() if s.image is not None]


@pytest.mark.parametrize("spec", IMAGED, ids=[s.name for s in IMAGED])
def test_images_and_compose_listen_on_the_registrys_ports(spec: servers.ServerSpec) -> None:
    """A default port is written once, in the server's registry entry: its Dockerfile (EXPOSE, the default CMD) and
    its compose service (listeners, published ports) only repeat it, and are held to it here."""
    ports = set(spec.ports.values())
    listen = {f"--{k}-addr=0.0.0.0:{p}" for k, p in spec.ports.items()}
    ins = _instructions(DEPLOY / "docker" / f"{spec.image.name}.Dockerfile")
    assert {int(p) for w, rest in ins if w == "EXPOSE" for p in rest.split()} == ports
    assert [set(json.loads(rest)) for w, rest in ins if w == "CMD"] == [listen]
    service = yaml.safe_load(COMPOSE.read_text())["services"][spec.name]
    assert listen <= set(service["command"]), service["command"]
    published = {int(p.rpartition(":")[2]) for p in service["ports"]}
    defaults = {int(m) for p in service["ports"] for m in re.findall(r":-(\d+)\}", p)}
    assert published == ports and defaults == ports, service["ports"]
    # Every address of the service elsewhere in compose (Locust's default host, say) is one of its listeners.
    for port in re.findall(rf"\b{re.escape(spec.name)}:(\d+)", COMPOSE.read_text()):
        assert int(port) in ports, f"{spec.name}:{port} in docker-compose.yml"
