r"""Issue 19's end-to-end check on real bytes: a mirror served over HTTP, downloaded and loaded.

For every data set of `gelujax.data.published.PUBLISHED` whose published files exist on this
machine, this puts those exact bytes in a mirror folder (``<mirror>/<dataset>/<published
name>``), serves the folder over HTTP on 127.0.0.1, and runs the user's command in a process of
its own:

  GELUJAX_DATA_MIRROR=http://127.0.0.1:PORT/ python -m gelujax.data download NAME... \
    --data_dir CACHE

then loads each data set from ``CACHE`` with `gelujax.data.load` and prints its split sizes
beside the paper's (shared/PAPER.md). Where the published files come from:

* Fashion-MNIST: Debian's ``dataset-fashion-mnist`` with each published gzip header put back
  (`gelujax.data.checksums.published_gzip_header`), which gives the published files byte for
  byte;
* Twitter POS: the ARK splits in ``--twpos DIR`` (default ``../shared/data/twpos``);
* any data set whose published files are in ``--from DIR/<dataset>/``.

A data set with no real copy here is listed as not checked, never replaced by a fixture.

  python benchmarks/mirror_check.py [--from DIR] [--twpos DIR] [--report FILE]
"""

import argparse
import contextlib
import functools
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import reports

from gelujax import data
from gelujax.data import checksums, mnist, published

ROOT = Path(__file__).resolve().parent.parent
# The split sizes shared/PAPER.md gives (train / validation / test examples; Twitter: tokens).
PAPER_SIZES = {
  "mnist": (55_000, 5_000, 10_000),
  "fashion_mnist": (55_000, 5_000, 10_000),
  "cifar10": (45_000, 5_000, 10_000),
  "cifar100": (45_000, 5_000, 10_000),
  "twitter_pos": (14_619, 4_823, 7_152),
}
SPLITS = ("train", "validation", "test")


def real_copy(dataset: str, sources: Path | None, twpos: Path) -> dict[str, bytes] | None:
  """The published files of ``dataset`` as bytes, from a real copy on this machine, or None."""
  spec = published.lookup(dataset)
  folders = [sources / dataset] if sources else []
  if dataset == "twitter_pos":
    folders.append(twpos)
  for folder in folders:
    if all((folder / f.name).is_file() for f in spec.files):
      return {f.name: (folder / f.name).read_bytes() for f in spec.files}
  debian = mnist.DEBIAN_FASHION_MNIST
  if dataset == "fashion_mnist" and all((debian / f.name).is_file() for f in spec.files):
    return {
      f.name: checksums.published_gzip_header(f) + (debian / f.name).read_bytes()[10:]
      for f in spec.files
    }
  return None


class _Quiet(http.server.SimpleHTTPRequestHandler):
  def log_message(self, *args):  # The download's own progress lines say what was fetched.
    pass


@contextlib.contextmanager
def serving(folder: Path):
  """An HTTP server on 127.0.0.1 serving ``folder``; yields its URL."""
  handler = functools.partial(_Quiet, directory=str(folder))
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{server.server_address[1]}/"
  finally:
    server.shutdown()
    server.server_close()


def sizes(dataset: str, splits: data.Splits) -> tuple[int, ...]:
  """Examples per split (tokens for Twitter POS, where each example is a token's window)."""
  return tuple(len(next(iter(splits[name].values()))) for name in SPLITS)


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--from", dest="sources", type=Path, default=None)
  parser.add_argument("--twpos", type=Path, default=ROOT.parent / "shared" / "data" / "twpos")
  parser.add_argument("--report", type=Path, default=ROOT / "benchmarks/results/mirror_check.md")
  args = parser.parse_args()
  rows, missing, failed = [], [], False
  with tempfile.TemporaryDirectory() as tmp:
    mirror, cache = Path(tmp, "mirror"), Path(tmp, "cache")
    present = []
    for dataset in published.PUBLISHED:
      files = real_copy(dataset, args.sources, args.twpos)
      if files is None:
        missing.append(dataset)
        continue
      present.append(dataset)
      (mirror / dataset).mkdir(parents=True)
      for name, body in files.items():
        (mirror / dataset / name).write_bytes(body)
    with serving(mirror) as url:
      env = {**os.environ, "GELUJAX_DATA_MIRROR": url}
      env.pop("GELUJAX_OFFLINE", None)
      command = [sys.executable, "-m", "gelujax.data", "download", *present, "--data_dir", cache]
      done = subprocess.run(command, env=env, capture_output=True, text=True)
    print(done.stderr[-2000:], end="", file=sys.stderr)
    print(done.stdout, end="")
    if done.returncode:
      print(f"mirror_check: the download command failed (exit {done.returncode}).")
      return 1
    for dataset in present:
      splits = data.load(dataset, data_dir=cache)
      got = sizes(dataset, splits)
      agree = got == PAPER_SIZES[dataset]
      failed |= not agree
      record = splits.info["record"]
      rows.append((dataset, got, PAPER_SIZES[dataset], agree, record["verified"]))
    shutil.rmtree(cache, ignore_errors=True)
  record = {
    **reports.stamp("python benchmarks/mirror_check.py"),
  }
  lines = [
    *reports.header("Data sets downloaded from a mirror of their real files (issue 19)", record),
    "Each data set's published files, served over HTTP on 127.0.0.1 as "
    "`$GELUJAX_DATA_MIRROR/<dataset>/<file>`, fetched by `python -m gelujax.data download` "
    "(sha256 and size checked against `gelujax.data.published.PUBLISHED`), then loaded.",
    "",
    "| data set | split sizes loaded (train / val / test) | shared/PAPER.md | agree | verified |",
    "|---|---|---|---|---|",
  ]
  for dataset, got, paper, agree, verified in rows:
    fmt = " / ".join
    lines.append(
      f"| {dataset} | {fmt(map(str, got))} | {fmt(map(str, paper))} | "
      f"{'yes' if agree else 'NO'} | {verified} |"
    )
  if missing:
    lines += [
      "",
      f"Not checked: {', '.join(missing)}: no copy of their published files on this machine "
      "(no network here but the package registries); their downloads are tested only with "
      "fixtures served the same way (`tests/test_download.py`). TIMIT is never downloaded.",
    ]
  args.report.write_text("\n".join(lines) + "\n")
  print("\n".join(lines))
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
