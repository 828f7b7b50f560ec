"""`python -m py_client …`: see py_client.cli."""

import sys

from py_client.cli import main

sys.exit(main())
