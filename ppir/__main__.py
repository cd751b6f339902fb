"""``python -m ppir``: the same as the ``ppir`` command (and ``python -m ppir.cli``)."""

import sys

from ppir.cli.main import main

sys.exit(main())
