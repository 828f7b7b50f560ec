"""xferbench load generation: upload, download, echo and meta users over gRPC or frame (see loadgen/README.md).

    locust -f loadgen/ --host grpc://127.0.0.1:50051       # or frame://127.0.0.1:7071

The only locustfile in loadgen/: Locust imports every .py file of the folder whose name does not start
with `_`, so the package's modules are `_`-named, and this file holds what Locust must see: the user
classes, the one shape (XferShape; with several, Locust silently takes the first) and the event hooks.
"""

from locust import events

from loadgen import _hooks
from loadgen._call_user import CallUser
from loadgen._meta_user import MetaUser
from loadgen._shape import XferShape
from loadgen._users import DownloadUser, EchoUser, UploadUser

_hooks.install(events)

__all__ = ["CallUser", "DownloadUser", "EchoUser", "MetaUser", "UploadUser", "XferShape"]
