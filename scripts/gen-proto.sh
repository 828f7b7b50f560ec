#!/usr/bin/env bash
# Generates the Go, Python and C code of proto/xfer/v1/*.proto under OUT (default: the repository),
# at the paths where it is committed. The sync test runs it into a temporary folder and diffs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root}
tools=$root/build/tools
protos=(xfer/v1/file_transfer.proto xfer/v1/frame.proto)

# Pinned generator versions: the generated files name them, so a different version shows as a diff.
PROTOC_GEN_GO=google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.11
PROTOC_GEN_GO_GRPC=google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.1

mkdir -p "$tools"
[ -x "$tools/protoc-gen-go" ] || GOBIN=$tools go install "$PROTOC_GEN_GO"
[ -x "$tools/protoc-gen-go-grpc" ] || GOBIN=$tools go install "$PROTOC_GEN_GO_GRPC"

cd "$root/proto"
go_out=$out/servers/go
py_out=$out
c_out=$out/servers/c/gen
mkdir -p "$go_out" "$py_out/xfer/v1" "$c_out"

PATH=$tools:$PATH protoc -I . \
  --go_out="$go_out" --go_opt=module=xferbench/servers/go \
  --go-grpc_out="$go_out" --go-grpc_opt=module=xferbench/servers/go \
  "${protos[@]}"
# module= strips the module path from go_package, leaving the files in servers/go/gen/xferv1.

"${PYTHON:-$root/.venv/bin/python}" -m grpc_tools.protoc -I . \
  --python_out="$py_out" --pyi_out="$py_out" --grpc_python_out="$py_out" "${protos[@]}"
touch "$py_out/xfer/__init__.py" "$py_out/xfer/v1/__init__.py"

protoc-c -I . --c_out="$c_out" "${protos[@]}"
