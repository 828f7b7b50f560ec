# xferd-c: built with the same Makefile as on a workstation; the runtime image carries every allocator
# library it can choose (--alloc glibc|jemalloc|tcmalloc|mimalloc|pool).
# Build context: the repository root (docker-compose.yml sets it).
FROM debian:12.11-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential libprotobuf-c-dev zlib1g-dev libdeflate-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY servers/c/ servers/c/
# What --version prints (no .git in the build context): `--build-arg XFERD_VERSION=$(git describe --always --dirty)`.
ARG XFERD_VERSION=unknown
RUN make -C servers/c -j2 VERSION=${XFERD_VERSION} && install -D build/bin/xferd-c /out/xferd-c

FROM debian:12.11-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libprotobuf-c1 zlib1g libdeflate0 \
      libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home xferd
COPY --from=build /out/xferd-c /usr/local/bin/xferd-c
USER xferd
EXPOSE 7071 9102
ENTRYPOINT ["/usr/local/bin/xferd-c"]
CMD ["--frame-addr=0.0.0.0:7071", "--metrics-addr=0.0.0.0:9102"]
