"""``python -m gelujax.data``: the data command line (:func:`gelujax.download.main`)."""

import sys

from gelujax import download

if __name__ == "__main__":
  sys.exit(download.main())
