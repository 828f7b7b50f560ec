"""Prometheus file-discovery targets: the one writer of the JSON files a Prometheus watches.

deploy/prometheus/prometheus.yml reads `targets/xferd-*.json` and `targets/xferbench-*.json` into its
`xferd` job and `targets/locust-*.json` into its `locust` job, so a file's name says which job scrapes
it. `xferbench run --prometheus` registers each run's server and each Locust while they live; a person
can drop files there too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

# The file name prefixes the repository's Prometheus config watches, by the job they feed.
JOB_PREFIXES = {"xferd": ("xferd-", "xferbench-"), "locust": ("locust-",)}

Unregister = Callable[[], None]
Register = Callable[[str, str, Mapping[str, str]], Unregister]  # (job, host:port, labels) → unregister


class TargetFileError(ValueError):
    """A target file the repository's Prometheus config would never read."""


def file_stem(job: str, addr: str) -> str:
    """`locust-127.0.0.1_9650`: the job's prefix and the address, safe as a file name."""
    if job not in JOB_PREFIXES:
        raise TargetFileError(f"no scrape job {job!r}; the config's jobs are {', '.join(JOB_PREFIXES)}")
    return JOB_PREFIXES[job][0] + addr.replace(":", "_").replace("/", "_")


def write_targets(directory: Path, name: str, targets: Sequence[str], labels: Mapping[str, str]) -> Path:
    """Writes one target group as `<directory>/<name>.json`; Prometheus picks it up within a second or two.

    `name` must start with a prefix of JOB_PREFIXES, as the config's patterns do. The write is atomic (a
    rename), so Prometheus never reads half a file.
    """
    prefixes = tuple(p for ps in JOB_PREFIXES.values() for p in ps)
    if not name.startswith(prefixes):
        raise TargetFileError(f"target file {name!r} must start with one of {', '.join(prefixes)}")
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps([{"targets": list(targets), "labels": dict(labels)}], indent=2) + "\n")
    os.replace(tmp, path)
    return path


def remove_targets(directory: Path, name: str) -> None:
    (directory / f"{name}.json").unlink(missing_ok=True)


class FileSDRegistry:
    """Registers one target per file in a folder a Prometheus watches (`--prometheus-sd DIR`, or the local
    stack's `targets/`). Calling it returns the function that removes the target again."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)

    def __call__(self, job: str, addr: str, labels: Mapping[str, str]) -> Unregister:
        name = file_stem(job, addr)
        write_targets(self.dir, name, [addr], labels)
        return lambda: remove_targets(self.dir, name)
