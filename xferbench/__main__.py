import sys

from xferbench.cli import main

sys.exit(main())
