"""A Locust worker that does not run loadgen: it has loadgen's EchoUser by name, so a loadgen master can hand
it users, but never says hello. It prints its worker id at init for the test to find in the master's warning."""

from typing import Any

from locust import User, constant, events, task


class EchoUser(User):
    wait_time = constant(0.1)

    @task
    def idle(self) -> None:
        pass


@events.init.add_listener
def _print_id(runner: Any, **_kw: Any) -> None:
    print(f"foreign-worker-id {runner.client_id}", flush=True)
