# xferd-go: built in the Go image, run from a slim Debian image as an unprivileged user.
# Build context: the repository root (docker-compose.yml sets it).
FROM golang:1.25.4-bookworm AS build
WORKDIR /src/servers/go
COPY servers/go/go.mod servers/go/go.sum ./
RUN go mod download
COPY servers/go/ ./
# What --version prints (no .git in the build context): `--build-arg XFERD_VERSION=$(git describe --always --dirty)`.
ARG XFERD_VERSION=unknown
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${XFERD_VERSION}" -o /out/xferd-go ./cmd/xferd-go

FROM debian:12.11-slim
RUN useradd --system --uid 10001 --no-create-home xferd
COPY --from=build /out/xferd-go /usr/local/bin/xferd-go
USER xferd
EXPOSE 50051 7070 9101
ENTRYPOINT ["/usr/local/bin/xferd-go"]
CMD ["--grpc-addr=0.0.0.0:50051", "--frame-addr=0.0.0.0:7070", "--metrics-addr=0.0.0.0:9101"]
