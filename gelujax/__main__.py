"""``python -m gelujax``: the ``gelujax`` command (:func:`gelujax.cli.main`), for an environment
whose scripts folder is not on the PATH."""

import sys

from gelujax.cli import main

if __name__ == "__main__":
  sys.exit(main())
