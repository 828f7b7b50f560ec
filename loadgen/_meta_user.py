"""MetaUser: the small-object workload (PROTOCOL.md "Meta"), many small key/value entries per call.

Each user draws its entries once, from its own seeded random stream (--xfer-meta-entries of
--xfer-meta-size bytes per key and value), and sends the same entries every call: the cost measured is the
servers' decoding, map building, sorting and encoding, not the client's drawing.
"""

from __future__ import annotations

from loadgen._users import Begun, XferUser
from py_client import XferError, meta
from xfer.v1 import file_transfer_pb2 as pb


class MetaUser(XferUser):
    """Unary Meta calls; with --xfer-verify on, the sorted answer and its digest are checked."""

    method = "Meta"

    def on_start(self) -> None:
        super().on_start()
        cfg = self.xfer.config
        lo, hi = cfg.meta_size
        entries = meta.random_entries(cfg.meta_entries, lo, hi, self.rng)
        self.entries = meta.prepare(entries)  # the request and the answer it must get, made once
        self.entry_bytes = sum(len(k) + len(v) for k, v in entries)  # ASCII: characters are bytes

    def run_once(self) -> int:
        if not self.xfer.config.verify:
            self.client.meta(self.entries, check=False)
            return self.entry_bytes
        try:
            self.client.meta(self.entries)  # raises data_loss when the order or digest is wrong
        except XferError as e:
            if e.code == "data_loss":
                self.xfer.recorder.verify("Meta", False)
            raise
        self.xfer.recorder.verify("Meta", True)
        return self.entry_bytes

    def begin(self) -> Begun:
        request, entries, recorder = self.entries.request, self.entries, self.xfer.recorder

        def finish(resp: pb.MetaResponse) -> int:
            if self.xfer.config.verify:
                try:
                    meta.check_response(entries, resp)
                except XferError:
                    recorder.verify("Meta", False)
                    raise
                recorder.verify("Meta", True)
            return self.entry_bytes

        return (lambda aio: aio.meta(request)), finish
