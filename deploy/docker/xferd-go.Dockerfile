# xferd-go from a slim Debian image, as an unprivileged user.
# Build context: the repository root (docker-compose.yml sets it).
#
# Two ways to get the binary (the base image is a build argument either way):
#   default (last stage, `source`): built in the Go image — needs a registry;
#   `--target host`: build/bin/xferd-go from this machine (`make build`) — no registry, what
#     `xferbench images build` uses with BASE=localhost/xferbench/debian-base:bookworm (debootstrap).
ARG BASE=debian:12.11-slim
ARG GO_IMAGE=golang:1.25.4-bookworm

FROM ${BASE} AS runtime
RUN useradd --system --uid 10001 --no-create-home xferd
USER xferd
EXPOSE 50051 7070 9101
ENTRYPOINT ["/usr/local/bin/xferd-go"]
CMD ["--grpc-addr=0.0.0.0:50051", "--frame-addr=0.0.0.0:7070", "--metrics-addr=0.0.0.0:9101"]

# Before the Go stages: a build that stops here never needs the Go image.
FROM runtime AS host
COPY build/bin/xferd-go /usr/local/bin/xferd-go

FROM ${GO_IMAGE} AS build
WORKDIR /src/servers/go
COPY servers/go/go.mod servers/go/go.sum ./
RUN go mod download
COPY servers/go/ ./
# What --version prints (no .git in the build context): `--build-arg XFERD_VERSION=$(git describe --always --dirty)`.
ARG XFERD_VERSION=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${XFERD_VERSION}" -o /out/xferd-go ./cmd/xferd-go

FROM runtime AS source
COPY --from=build /out/xferd-go /usr/local/bin/xferd-go
