"""`python -m flashtriton <command>`: the same commands as the `flashtriton` script
(flashtriton.cli), for an environment whose scripts directory is not on PATH."""

import sys

from flashtriton.cli import main

sys.exit(main())
