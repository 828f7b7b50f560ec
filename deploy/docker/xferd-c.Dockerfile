# xferd-c: built with the same Makefile as on a workstation; the runtime image carries every allocator
# library it can choose (--alloc glibc|jemalloc|tcmalloc|mimalloc|pool), from Debian's packages.
# Build context: the repository root (docker-compose.yml sets it).
#
# Two ways to get the binary (the base image is a build argument either way):
#   default (last stage, `source`): compiled in a build stage from the same base;
#   `--target host`: build/bin/xferd-c from this machine (`make build`, Debian 12 like the image) —
#     what `xferbench images build` uses with BASE=localhost/xferbench/debian-base:bookworm (debootstrap).
ARG BASE=debian:12.11-slim

FROM ${BASE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libprotobuf-c1 zlib1g libdeflate0 libssl3 \
      libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home xferd
USER xferd
EXPOSE 7071 9102
ENTRYPOINT ["/usr/local/bin/xferd-c"]
CMD ["--frame-addr=0.0.0.0:7071", "--metrics-addr=0.0.0.0:9102"]

# Before the build stage: a build that stops here compiles nothing.
FROM runtime AS host
COPY build/bin/xferd-c /usr/local/bin/xferd-c

FROM ${BASE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential pkg-config libprotobuf-c-dev zlib1g-dev libdeflate-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY servers/c/ servers/c/
# What --version prints (no .git in the build context): `--build-arg XFERD_VERSION=$(git describe --always --dirty)`.
ARG XFERD_VERSION=unknown
RUN make -C servers/c -j2 VERSION=${XFERD_VERSION} && install -D build/bin/xferd-c /out/xferd-c

FROM runtime AS source
COPY --from=build /out/xferd-c /usr/local/bin/xferd-c
