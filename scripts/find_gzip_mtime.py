r"""Finds the gzip header times of the published Fashion-MNIST files from Debian's copies.

Debian's ``dataset-fashion-mnist`` files are 23 or 24 bytes shorter than the published ones:
its build re-wrote each gzip header (the file name dropped, the time set to the build's) and
kept the compressed data. With the published header put back (flags FNAME, the original time,
no extra flags, Unix, the name), a file's sha256 is the published one; only the time is
unknown. This searches it: the smallest file over the month Fashion-MNIST was published
(August 2017), the others within two hours of it, each candidate checked against the published
sha256 of `gelujax.data.published.PUBLISHED`, where the times found are kept (``gzip_mtime``).

  python scripts/find_gzip_mtime.py   # about 15 s on one core

prints, on the Debian 0.0~git20200523.55506a9-1 package:

  t10k-labels-idx1-ubyte.gz 1504176627 (2017-08-31 10:50:27 UTC)
  train-labels-idx1-ubyte.gz 1504176606 (2017-08-31 10:50:06 UTC)
  t10k-images-idx3-ubyte.gz 1504176627 (2017-08-31 10:50:27 UTC)
  train-images-idx3-ubyte.gz 1504176606 (2017-08-31 10:50:06 UTC)
"""

import dataclasses
import datetime
import hashlib
import sys
from collections.abc import Iterable
from pathlib import Path

from gelujax.data import checksums, mnist, published

_UTC = datetime.UTC


def find_mtime(path: Path, file: published.PublishedFile, times: Iterable[int]) -> int | None:
  """The time in ``times`` that, in the published header, gives ``file``'s sha256."""
  body = path.read_bytes()
  if body[:4] != b"\x1f\x8b\x08\x00":
    raise ValueError(f"{path}: not a gzip file with a header of no optional fields.")
  target = bytes.fromhex(file.sha256)
  for mtime in times:
    header = checksums.published_gzip_header(dataclasses.replace(file, gzip_mtime=mtime))
    if hashlib.sha256(header + body[10:]).digest() == target:
      return mtime
  return None


def main() -> int:
  files = sorted(published.PUBLISHED["fashion_mnist"].files, key=lambda f: f.size)
  start = int(datetime.datetime(2017, 8, 1, tzinfo=_UTC).timestamp())
  end = int(datetime.datetime(2017, 9, 1, tzinfo=_UTC).timestamp())
  found = None
  for file in files:
    # The others were written within seconds of the first: nearest times first.
    times = (
      range(start, end)
      if found is None
      else sorted(range(found - 7200, found + 7200), key=lambda t: abs(t - found))
    )
    mtime = find_mtime(mnist.DEBIAN_FASHION_MNIST / file.name, file, times)
    if mtime is None:
      print(f"{file.name}: no time in the range gives the published sha256", file=sys.stderr)
      return 1
    found = mtime
    when = datetime.datetime.fromtimestamp(mtime, _UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    print(f"{file.name} {mtime} ({when})", flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main())
