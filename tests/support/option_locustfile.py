"""A user locustfile with an option of its own, as `[load] options` passes it (tests/run/test_preflight.py):
`--greeting` is added to Locust's parser, and Locust stops before any user starts unless it is "hello"."""

import sys
from typing import Any

from locust import HttpUser, constant_throughput, events, task


@events.init_command_line_parser.add_listener
def _options(parser: Any) -> None:
    parser.add_argument("--greeting", default="", help="must be hello")


@events.init.add_listener
def _check(environment: Any, **_kw: Any) -> None:
    got = environment.parsed_options.greeting
    if got != "hello":
        sys.stderr.write(f"option_locustfile: error: --greeting is {got!r}, expected 'hello'\n")
        sys.exit(2)


class GreetingUser(HttpUser):
    wait_time = constant_throughput(20)

    @task
    def index(self) -> None:
        self.client.get("/")
