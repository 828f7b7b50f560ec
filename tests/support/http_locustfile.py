"""A user's own locustfile, as `[load] locustfile` runs it (tests/run/test_user_load.py): a plain HTTP
user against `python -m http.server`, the way a user outside this repository would write one. The runner
gives it the server's address as `--host http://127.0.0.1:PORT`; a short wait keeps the request count small
enough that the server's log can be counted line by line."""

from locust import HttpUser, constant_throughput, task


class PageUser(HttpUser):
    wait_time = constant_throughput(50)  # at most 50 requests a second per user

    @task
    def index(self) -> None:
        self.client.get("/")
