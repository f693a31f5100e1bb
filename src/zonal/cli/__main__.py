"""``python -m zonal.cli``: the ``zonal`` command."""

import sys

from zonal.cli import main

sys.exit(main())
