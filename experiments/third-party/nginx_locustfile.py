"""The load of experiments/third-party/nginx.toml: HTTP GET / at a fixed pace, 100 requests a second per user
(`paced = true` in the experiment). The runner gives the server's address as `--host http://127.0.0.1:PORT`."""

from locust import HttpUser, constant_throughput, task


class PageUser(HttpUser):
    wait_time = constant_throughput(100)

    @task
    def index(self) -> None:
        self.client.get("/")
