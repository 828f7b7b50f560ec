"""What one Locust master carries: workers and merged request rate, measured in the lab (docs/EXPERIMENTS.md,
"Sizing a run past one machine").

    make lab-up && .venv/bin/python scripts/studies/lab_master.py [--workers 2,4,8,16] [--duration 10]; make lab-down

For each total number of workers (half on lab2, half on lab3, both on CPU 1 of 2), one closed-loop run (--mix) of
xferd-c on lab1 (CPU 0), 4 users per worker, through `xferbench run`; prints per run the merged client rate, the
master's own CPU (its process tree here, read by the runner: `gen_cpu_cores_psutil`), that CPU per 1,000 requests/s,
the workers' CPU per host and whether a host saturated. The master's CPU against the workers' count and the rate
says where one master stops: at one core.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SSH_CONFIG = ROOT / "build" / "lab" / "ssh_config"

EXPERIMENT = """
[experiment]
name = "lab-master-{workers}"
repeats = 1
warmup_s = 3
duet = false

[hosts.lab1]
ssh = "lab1"
ssh_config = "{ssh_config}"
[hosts.lab2]
ssh = "lab2"
ssh_config = "{ssh_config}"
[hosts.lab3]
ssh = "lab3"
ssh_config = "{ssh_config}"

[load]
hosts = ["lab2", "lab3"]
processes = {per_host}
mode = "closed"
users = {users}
spawn_rate = {users}
duration_s = {duration}
mix = "{mix}"
sizes = "{sizes}"
chunk = "64KiB"
transport = "frame"

[[servers]]
server = "xferd-c"
host = "lab1"
"""


def one(workers: int, duration: int, out: Path, mix: str, sizes: str) -> dict[str, object]:
    per_host = workers // 2
    exp = out / f"master-{workers}.toml"
    exp.write_text(EXPERIMENT.format(workers=workers, ssh_config=SSH_CONFIG, per_host=per_host, users=4 * workers,
                                     duration=duration, mix=mix, sizes=sizes))
    run = out / f"run-{workers}"
    shutil.rmtree(run, ignore_errors=True)  # xferbench run refuses an --out that exists
    subprocess.run([str(ROOT / ".venv" / "bin" / "xferbench"), "run", str(exp), "--out", str(run)], cwd=ROOT,
                   check=True, stdout=subprocess.DEVNULL)
    row = json.loads((run / "runs.jsonl").read_text().splitlines()[0])
    if row.get("status") != "ok":
        raise SystemExit(f"{workers} workers: {row.get('error')}")
    hosts = row.get("load_hosts") or {}
    return {
        "workers": workers,
        "qps": row["client_qps"],
        "master_cores": row["gen_cpu_cores_psutil"],
        "hosts": {h: (f["gen_cpu_cores"], f["saturated"]) for h, f in hosts.items()},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--workers", default="2,4,8,16", help="total workers per run, even (default 2,4,8,16)")
    p.add_argument("--duration", type=int, default=10, help="measured seconds per run (default 10)")
    p.add_argument("--out", type=Path, default=ROOT / "build" / "lab-master")
    p.add_argument("--mix", default="echo:1", help="the users' mix (default echo:1)")
    p.add_argument("--sizes", default="64KiB", help="file sizes of uploads and downloads (default 64KiB)")
    args = p.parse_args()
    if not SSH_CONFIG.exists():
        print(f"{SSH_CONFIG} is missing: `make lab-up` first", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("workers  merged req/s  master cores  master millicores per 1k req/s  workers' cores per host (saturated)")
    for n in (int(w) for w in args.workers.split(",")):
        r = one(n, args.duration, args.out, args.mix, args.sizes)
        qps, master = float(r["qps"]), float(r["master_cores"])  # type: ignore[arg-type]
        hosts = ", ".join(f"{h} {c:.2f}{' SATURATED' if s else ''}" for h, (c, s) in r["hosts"].items())  # type: ignore[attr-defined]
        print(f"{n:7d}  {qps:12.0f}  {master:12.3f}  {1e6 * master / qps:31.1f}  {hosts}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
