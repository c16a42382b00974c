"""``python -m biascheck.cli``: the ``biascheck`` command."""

import sys

from biascheck.cli.main import main

sys.exit(main())
