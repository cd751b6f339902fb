"""``python -m ppir.cli``: the same as the ``ppir`` command."""

import sys

from ppir.cli.main import main

sys.exit(main())
