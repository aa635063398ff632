"""``python -m lychee_ray.cli …`` runs the ``lychee-ray`` command."""

import sys

from lychee_ray.cli.main import main

sys.exit(main())
