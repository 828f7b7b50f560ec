"""loadgen: Locust users for xferbench, and the contract of their `--xfer-*` options.

`locust -f loadgen/` runs them (locustfile.py). Other code uses the options through this package only:

    import loadgen
    loadgen.option("sizes").text("64KiB")                    # checked command-line text, or ValueError
    loadgen.command_line({"sizes": "64KiB", "inflight": 4})  # ["--xfer-sizes", "64KiB", "--xfer-inflight", "4"]

Importing the package does not import Locust (and so does not monkey-patch the importer with gevent).
"""

from loadgen._options import BY_KEY as OPTIONS_BY_KEY
from loadgen._options import OPTIONS, XferOption, command_line, option

__all__ = ["OPTIONS", "OPTIONS_BY_KEY", "XferOption", "command_line", "option"]
