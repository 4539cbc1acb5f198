"""``python -m jaxcert.cli``."""

import sys

from jaxcert.cli import main

sys.exit(main())
