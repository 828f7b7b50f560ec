# Locust with the xferbench Python packages (py_client, generated xfer/ stubs, loadgen) in a venv.
# docker-compose.yml also mounts loadgen/ at /xferbench/loadgen, so locustfile edits need no rebuild.
# Build context: the repository root (docker-compose.yml sets it).
#
# The base image is a build argument: Python's image, or a bare Debian (debootstrap) where Debian's python3
# is installed first. Two ways to get the packages:
#   default (last stage, `pypi`): `pip install .` from PyPI;
#   `--target host`: wheels built on this machine (`pip wheel . -w build/wheels`), installed with
#     --no-index — what `xferbench images build` uses (no registry, no PyPI inside the build).
ARG BASE=python:3.11.11-slim-bookworm

FROM ${BASE} AS python
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1 PATH=/opt/venv/bin:$PATH
RUN if ! command -v python3 >/dev/null; then \
      apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && python3 -m venv /opt/venv \
 && useradd --system --uid 10001 --create-home locust
WORKDIR /xferbench
COPY loadgen/ loadgen/
EXPOSE 8089 5557 9646 9647
ENTRYPOINT ["locust"]
CMD ["-f", "/xferbench/loadgen"]

FROM python AS host
COPY build/wheels/ /tmp/wheels/
RUN pip install --no-index --find-links /tmp/wheels xferbench && rm -rf /tmp/wheels
USER locust

FROM python AS pypi
COPY pyproject.toml README.md ./
COPY py_client/ py_client/
COPY xfer/ xfer/
COPY xferbench/ xferbench/
RUN pip install .
USER locust
