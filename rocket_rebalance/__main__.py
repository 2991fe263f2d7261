"""``python -m rocket_rebalance`` is the ``rocket-rebalance`` command."""

import sys

from rocket_rebalance.cli import main

sys.exit(main())
