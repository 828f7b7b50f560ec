"""xferbench: the experiment runner."""

import os

# Before anything imports grpc (the probe resolves gRPC methods in the runner's own process, which then forks
# servers and Locust): grpc's fork handlers can deadlock a later fork inside subprocess.Popen
# (grpc/grpc#37259), and the runner only ever forks to exec, which needs no fork support.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
