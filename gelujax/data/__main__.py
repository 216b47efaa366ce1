"""``python -m gelujax.data``: the data command line. ``download NAME... [--data_dir DIR]``
fetches and verifies data sets into the cache ahead of time (:func:`gelujax.data.download.fetch`);
a set already on this machine (wherever :func:`gelujax.data.load` finds it without the network;
with ``--data_dir``, in that folder) is named where it is and not downloaded. ``list`` shows where
:func:`gelujax.data.load` would read each one, without the network
(:func:`gelujax.data.describe_sources`)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gelujax import data
from gelujax.data import checksums, download, published


def main(argv: Sequence[str] | None = None, prog: str = "python -m gelujax.data") -> int:
  """``python -m gelujax.data download NAME... [--data_dir DIR]`` or ``... list``; ``prog`` is
  how its help and errors name it (``gelujax data``, from the ``gelujax`` command)."""
  parser = argparse.ArgumentParser(
    prog=prog,
    description="Fetch gelujax's data sets ahead of time, or list what the cache holds.",
  )
  commands = parser.add_subparsers(dest="command", required=True)
  fetching = commands.add_parser(
    "download", help="download, verify (and extract) data sets into the cache"
  )
  fetching.add_argument("names", nargs="+", metavar="NAME", help=", ".join(published.PUBLISHED))
  listing = commands.add_parser(
    "list", help="show where each data set would be read from (the loader, without the network)"
  )
  into = "; the sets are downloaded into it unless it holds them, wherever else they are"
  for command, more in ((fetching, into), (listing, "")):
    command.add_argument(
      "--data_dir",
      default=None,
      help=f"the cache folder (default: ${published.DATA_DIR_VARIABLE}, else "
      f"{published.DEFAULT_CACHE}){more}",
    )
  args = parser.parse_args(argv)
  root = published.cache_root(args.data_dir)
  try:
    if args.command == "list":
      mirror = os.environ.get(published.MIRROR_VARIABLE)
      print(
        f"cache {root}; mirror {mirror or 'none'}; offline {published.is_offline()}", flush=True
      )
      print(_as_options("\n".join(data.describe_sources(root))))
      return 0
    for name in args.names:
      published.lookup(name)
    for name in args.names:
      here = _already_here(name, root, anywhere=args.data_dir is None)
      if here is not None:
        print(f"{name}: {here}", flush=True)
        continue
      if published.is_offline():
        raise ValueError(
          f"{published.OFFLINE_VARIABLE}={os.environ[published.OFFLINE_VARIABLE]} forbids the "
          f"network, so {name} cannot be downloaded. {published.where_to_put(name, root)}"
        )
      try:
        entry = download.fetch(name, root)
      except checksums.NotFound as e:
        raise ValueError(
          f"Cannot download {name}: {e}. {published.where_to_put(name, root)}"
        ) from None
      print(f"{name}: {entry.folder}: {entry.record['verified']}.", flush=True)
  except ValueError as e:
    print(f"{prog}: error: {_as_options(' '.join(str(e).split()))}", file=sys.stderr)
    return 1
  except KeyboardInterrupt:
    print(
      f"{prog}: interrupted; a partial file is kept as <file>.part and the same "
      "command resumes it.",
      file=sys.stderr,
    )
    return 130
  return 0


def _already_here(name: str, root: Path, *, anywhere: bool) -> str | None:
  """Where ``name`` already is, as a line to print, or None where it is to be downloaded:
  ``anywhere``, wherever `gelujax.data.load` finds it without the network (the cache ``root``
  included); otherwise only in ``root``, the folder asked for."""
  if not anywhere:
    try:
      entry = checksums.verified(name, root)
    except checksums.NotFound:
      return None
    return f"already in {entry.folder}: {entry.record['verified']}; nothing downloaded."
  try:
    record = data.load(name, network=False, cache=root).info["record"]
  except data.NoSource:
    return None
  return (
    f"already on this machine, where gelujax.data.load reads it: {record['source']}; "
    f"{record['verified']}; nothing downloaded (--data_dir DIR downloads a copy into DIR)."
  )


def _as_options(text: str) -> str:
  """The library's words as this command line's: the library names the argument
  (`` `data_dir` ``), the command line its option (``--data_dir``)."""
  return text.replace("`data_dir`", "--data_dir")


if __name__ == "__main__":
  sys.exit(main())
