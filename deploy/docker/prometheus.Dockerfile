# Prometheus from Debian's `prometheus` package (no registry image needed), with the repository's
# configuration and recording rules baked in (deploy/prometheus/).
# Build context: the repository root (docker-compose.yml sets it).
ARG BASE=debian:12.11-slim
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o prometheus -g prometheus /prometheus
COPY deploy/prometheus/ /etc/prometheus/
USER prometheus
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus", \
     "--web.listen-address=0.0.0.0:9090", "--web.enable-lifecycle"]
