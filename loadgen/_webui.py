"""The web UI's start form: a bad host or --xfer-* value is answered with the page's own error message
(Locust would start a run that shows RUNNING with no user, and file the error under Exceptions)."""

from __future__ import annotations

import logging

from flask import Response, jsonify, request

from loadgen._options import BY_KEY
from loadgen._process import current
from loadgen._users import check_host

log = logging.getLogger("xfer")


def _form_problems() -> list[str]:
    problems = []
    host = request.form.get("host")
    if host is not None or not current().environment.host:
        try:
            check_host(host)
        except ValueError as e:
            problems.append(str(e))
    for dest, text in request.form.items():
        opt = BY_KEY.get(dest.removeprefix("xfer_")) if dest.startswith("xfer_") else None
        if opt is not None:
            try:
                opt.parse(text)
            except ValueError as e:
                problems.append(str(e))
    return problems


def refuse_bad_swarm() -> Response | None:
    """A Flask before_request hook: None lets the request through."""
    if request.method != "POST" or not request.path.endswith("/swarm"):
        return None
    problems = _form_problems()
    if not problems:
        return None
    message = "; ".join(problems)
    log.error("web UI: swarm refused: %s", message)
    return jsonify({"success": False, "message": message, "host": current().environment.host})
