"""`python -m tests.support.cudasim [OPTIONS] strassenbench COMMAND ...`: a CLI command on a CPU device."""

import sys

from .install import main

sys.exit(main())
