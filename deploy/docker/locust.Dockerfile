# Locust with the xferbench Python packages (py_client, generated xfer/ stubs); the locustfiles are not
# baked in: docker-compose.yml mounts loadgen/ at /xferbench/loadgen, so edits need no rebuild.
# Build context: the repository root (docker-compose.yml sets it).
FROM python:3.11.11-slim-bookworm
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONUNBUFFERED=1
WORKDIR /xferbench
COPY pyproject.toml README.md ./
COPY py_client/ py_client/
COPY xfer/ xfer/
COPY xferbench/ xferbench/
COPY loadgen/ loadgen/
RUN pip install . && useradd --system --uid 10001 --create-home locust
USER locust
EXPOSE 8089 5557 9646
ENTRYPOINT ["locust"]
CMD ["-f", "/xferbench/loadgen"]
