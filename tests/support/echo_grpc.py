"""A server written by someone else, for `server = "command"`: the FileTransfer service's Echo over gRPC and
nothing more (no /metrics, no ready line). Usage: python -m tests.support.echo_grpc PORT; it says "serving
on PORT" once listening."""

from __future__ import annotations

import signal
import sys
from concurrent import futures

import grpc

from xfer.v1 import file_transfer_pb2 as pb
from xfer.v1 import file_transfer_pb2_grpc as pb_grpc


class Echo(pb_grpc.FileTransferServicer):
    def Echo(self, request: pb.EchoRequest, context: grpc.ServicerContext) -> pb.EchoResponse:
        return pb.EchoResponse(payload=request.payload)


def main() -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_FileTransferServicer_to_server(Echo(), server)
    server.add_insecure_port(f"127.0.0.1:{sys.argv[1]}")
    server.start()
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))  # the runner stops it with SIGTERM: exit 0
    print(f"serving on {sys.argv[1]}", flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
