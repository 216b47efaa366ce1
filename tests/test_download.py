"""Tests for gelujax.data.download (with the table and checksums it fetches against) and the
cache and download sources of gelujax.data.

No test touches the internet: an HTTP server on 127.0.0.1, started here, serves fixture files
in the real formats (ARK text, gzipped IDX, a CIFAR python tarball) under test checksums put in
`published.PUBLISHED` for the test, and causes every fault the real way (a 404, a connection
closed mid-file, a slow transfer, a second process, SIGINT). Two tests use real data: Debian's
Fashion-MNIST (this project's install puts it there) and the ARK Twitter files where this
machine has them.
"""

import gzip
import hashlib
import http.server
import io
import json
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from tiny_task import write_mnist_files

from gelujax import data, engine, tasks
from gelujax import workdir as workdirs
from gelujax.data import checksums, download, mnist, published, sources, twitter
from gelujax.data.__main__ import main as data_main
from gelujax.members import Members

ROOT = Path(__file__).resolve().parent.parent
TAGS = twitter.TWITTER_TAGS
DEBIAN = mnist.DEBIAN_FASHION_MNIST


# ------------------------------------------------------------------------ the server


class Server:
  """An HTTP/1.1 server on 127.0.0.1 serving ``files`` (URL path -> bytes), with faults.

  ``missing``: paths answered 404. ``drop_after``: path -> bytes after which the connection is
  closed mid-file, once. ``ranges``: whether Range requests are honoured. ``hold``: an Event
  the first response body waits for after its first KiB (a slow transfer). ``requests``: (path,
  Range header, status) of every request, in order.
  """

  def __init__(self, files: dict[str, bytes]):
    self.files = dict(files)
    self.missing: set[str] = set()
    self.drop_after: dict[str, int] = {}
    self.ranges = True
    self.hold: threading.Event | None = None
    self.requests: list[tuple[str, str | None, int]] = []
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):
      protocol_version = "HTTP/1.1"

      def log_message(self, *args):
        pass

      def do_GET(self):
        server.handle(self)

    self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.httpd.daemon_threads = True
    self.thread = threading.Thread(
      target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    self.thread.start()

  def url(self, prefix: str) -> str:
    return f"http://127.0.0.1:{self.httpd.server_port}/{prefix}"

  def gets(self, status: int | None = None) -> list[str]:
    return [path for path, _, s in self.requests if status is None or s == status]

  def handle(self, handler) -> None:
    path, requested = handler.path, handler.headers.get("Range")
    body = self.files.get(path)
    if body is None or path in self.missing:
      self.requests.append((path, requested, 404))
      handler.send_error(404)
      return
    start = 0
    if requested and self.ranges:
      start = int(requested.removeprefix("bytes=").split("-")[0])
      handler.send_response(206)
      handler.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
    else:
      handler.send_response(200)
    self.requests.append((path, requested, 206 if requested and self.ranges else 200))
    handler.send_header("Content-Length", str(len(body) - start))
    handler.end_headers()
    end = self.drop_after.pop(path, len(body))
    hold, self.hold = self.hold, None
    for offset in range(start, end, 1024):
      handler.wfile.write(body[offset : min(offset + 1024, end)])
      if hold is not None:
        handler.wfile.flush()
        hold.wait(60)
        hold = None
    handler.wfile.flush()
    if end < len(body):  # Closed mid-file, as a dropped connection is.
      handler.close_connection = True
      handler.connection.shutdown(socket.SHUT_RDWR)

  def close(self):
    self.httpd.shutdown()
    self.httpd.server_close()


@pytest.fixture
def online(monkeypatch):
  """The network allowed, and 127.0.0.1 reached directly (never through a proxy)."""
  monkeypatch.delenv("GELUJAX_OFFLINE", raising=False)
  monkeypatch.setenv("no_proxy", "127.0.0.1")
  monkeypatch.setenv("NO_PROXY", "127.0.0.1")
  monkeypatch.setattr(download, "BACKOFF_SECONDS", 0.01)


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
  root = tmp_path / "cache"
  monkeypatch.setenv("GELUJAX_DATA_DIR", str(root))
  return root


@pytest.fixture
def no_debian(monkeypatch, tmp_path):
  monkeypatch.setattr(mnist, "DEBIAN_FASHION_MNIST", tmp_path / "no-debian")


def publish(monkeypatch, server: Server, dataset: str, files: dict[str, bytes], **options):
  """Serves ``files`` at /published/<name> and makes them ``dataset``'s published files, with
  their sha256 and sizes (computed here with hashlib)."""
  for name, body in files.items():
    server.files[f"/published/{name}"] = body
  entry = published.Published(
    files=tuple(
      published.PublishedFile(name, hashlib.sha256(body).hexdigest(), len(body))
      for name, body in files.items()
    ),
    locations=(server.url("published/"),),
    **options,
  )
  monkeypatch.setitem(published.PUBLISHED, dataset, entry)
  return entry


@pytest.fixture
def server():
  s = Server({})
  yield s
  s.close()


# ---------------------------------------------------------------------- fixture files


def ark_text(tweets: list[list[tuple[str, str]]]) -> bytes:
  return "".join("".join(f"{w}\t{t}\n" for w, t in tweet) + "\n" for tweet in tweets).encode()


def twitter_files() -> dict[str, bytes]:
  """Three small ARK files: 3 / 2 / 1 tweets of 4 / 3 / 2 tokens."""
  rng = np.random.default_rng(0)
  words = ["ikr", "smh", "he", "asked", "fir", "yo", "last", "name", ":)", "@user", "lol"]

  def tweets(n, length):
    return [
      [(words[rng.integers(len(words))], TAGS[rng.integers(len(TAGS))]) for _ in range(length)]
      for _ in range(n)
    ]

  return {
    "oct27.train": ark_text(tweets(3, 4)),
    "oct27.dev": ark_text(tweets(2, 3)),
    "oct27.test": ark_text(tweets(1, 2)),
  }


def cifar_batch(images: np.ndarray, labels: np.ndarray) -> bytes:
  """A batch as the official (Python 2) pickles: bytes keys, CHW rows of 3072 bytes."""
  rows = images.transpose(0, 3, 1, 2).reshape(len(images), -1)
  batch = {b"batch_label": b"fixture", b"data": rows, b"labels": [int(v) for v in labels]}
  return pickle.dumps(batch, protocol=2)


def tar_gz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
    for info, body in members:
      if body is not None:
        info.size = len(body)
      tar.addfile(info, io.BytesIO(body) if body is not None else None)
  return buffer.getvalue()


def file_member(name: str) -> tarfile.TarInfo:
  info = tarfile.TarInfo(name)
  info.mode = 0o644
  return info


def cifar10_tarball() -> tuple[bytes, np.ndarray, np.ndarray]:
  """cifar-10-python.tar.gz in the published layout: 12 images, 2 per batch."""
  rng = np.random.default_rng(1)
  images = rng.integers(0, 256, (12, 32, 32, 3), dtype=np.uint8)
  labels = np.arange(12) % 10
  folder = tarfile.TarInfo("cifar-10-batches-py")
  folder.type, folder.mode = tarfile.DIRTYPE, 0o755
  members = [(folder, None)]
  names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
  for i, name in enumerate(names):
    part = slice(2 * i, 2 * i + 2)
    members.append(
      (file_member(f"cifar-10-batches-py/{name}"), cifar_batch(images[part], labels[part]))
    )
  meta = pickle.dumps({b"label_names": [b"c%d" % i for i in range(10)]}, protocol=2)
  members.append((file_member("cifar-10-batches-py/batches.meta"), meta))
  members.append((file_member("cifar-10-batches-py/readme.html"), b"<html>fixture</html>"))
  return tar_gz(members), images, labels


def tokens_and_tweets(text: bytes) -> tuple[int, int]:
  """Token lines and blank-line separated tweets of an ARK file, counted by hand."""
  lines = text.decode().split("\n")
  tweets = [t for t in text.decode().split("\n\n") if t.strip()]
  return sum(1 for line in lines if line.strip()), len(tweets)


# ------------------------------------------------------------------- first use, caching


def test_fresh_download_verifies_caches_and_loads(server, online, cache, monkeypatch):
  files = twitter_files()
  publish(monkeypatch, server, "twitter_pos", files)
  splits = data.load("twitter_pos")
  for name, body in files.items():
    assert (cache / "twitter_pos" / name).read_bytes() == body
  assert not list((cache / "twitter_pos").glob("*.part"))
  assert server.gets() == [f"/published/{name}" for name in files]
  sizes = {k: len(v["targets"]) for k, v in splits.items()}
  assert sizes == {
    split: tokens_and_tweets(files[f"oct27.{f}"])[0]
    for split, f in (("train", "train"), ("validation", "dev"), ("test", "test"))
  }
  record = splits.info["record"]
  assert record["sha256"] == {name: hashlib.sha256(b).hexdigest() for name, b in files.items()}
  assert record["verified"].startswith("each of the 3 files matches its published sha256")
  assert record["source"] == f"ARK files {', '.join(str(cache / 'twitter_pos' / n) for n in files)}"

  server.requests.clear()  # A second load reads the cache, verified, and transfers nothing.
  again = data.load("twitter_pos")
  assert server.requests == []
  np.testing.assert_array_equal(again["train"]["inputs"], splits["train"]["inputs"])


def test_a_lock_that_is_a_folder_is_named_as_such_and_nothing_is_fetched(
  server, online, cache, monkeypatch
):
  publish(monkeypatch, server, "twitter_pos", twitter_files())
  (cache / "twitter_pos" / ".lock").mkdir(parents=True)
  with pytest.raises(ValueError) as error:
    data.load("twitter_pos")
  message = str(error.value)
  assert f"{cache}/twitter_pos/.lock, the lock of the data cache" in message, message
  assert "is a folder, not a file" in message and "rmdir" in message
  assert "you can write" not in message  # the cache is writable: that was the wrong advice
  assert server.gets() == []


def test_checksum_mismatch_deletes_the_file_and_names_url_expected_and_got(
  server, online, cache, monkeypatch
):
  files = twitter_files()
  publish(monkeypatch, server, "twitter_pos", files)
  served = files["oct27.dev"][:-3] + b"!!\n"  # Same size, other bytes.
  server.files["/published/oct27.dev"] = served
  with pytest.raises(ValueError) as error:
    data.load("twitter_pos")
  message = str(error.value)
  assert server.url("published/oct27.dev") in message
  assert f"sha256 is {hashlib.sha256(served).hexdigest()}" in message
  assert f"not the published {hashlib.sha256(files['oct27.dev']).hexdigest()}" in message
  assert "the file was deleted" in message and "\n" not in message
  # The cache as it was when looked in, before the download made it (it holds the verified
  # oct27.train now): never "(no such folder)" as if it were still so.
  assert f"the cache {cache / 'twitter_pos'} (no such folder, before the download)" in message
  assert (cache / "twitter_pos" / "oct27.train").read_bytes() == files["oct27.train"]
  assert not (cache / "twitter_pos" / "oct27.dev").exists()
  assert not (cache / "twitter_pos" / "oct27.dev.part").exists()


def test_a_404_on_the_mirror_goes_on_to_the_published_location(server, online, cache, monkeypatch):
  files = twitter_files()
  publish(monkeypatch, server, "twitter_pos", files)
  monkeypatch.setenv("GELUJAX_DATA_MIRROR", server.url("mirror"))
  server.files["/mirror/twitter_pos/oct27.dev"] = files["oct27.dev"]  # The mirror has one.
  splits = data.load("twitter_pos")
  assert server.requests == [
    ("/mirror/twitter_pos/oct27.train", None, 404),
    ("/published/oct27.train", None, 200),
    ("/mirror/twitter_pos/oct27.dev", None, 200),
    ("/mirror/twitter_pos/oct27.test", None, 404),
    ("/published/oct27.test", None, 200),
  ]
  assert len(splits["validation"]["targets"]) == tokens_and_tweets(files["oct27.dev"])[0]


@pytest.mark.parametrize("ranges", [True, False], ids=["resumed", "restarted"])
def test_a_connection_dropped_mid_file_is_retried_and_the_bytes_end_up_right(
  server, online, cache, monkeypatch, ranges
):
  files = twitter_files()
  files["oct27.train"] = files["oct27.train"] * 60  # ~8 KB, so the cut is mid-file.
  publish(monkeypatch, server, "twitter_pos", files)
  server.ranges = ranges
  cut = len(files["oct27.train"]) // 2 + 100
  server.drop_after["/published/oct27.train"] = cut
  data.load("twitter_pos")
  assert (cache / "twitter_pos" / "oct27.train").read_bytes() == files["oct27.train"]
  train = [r for r in server.requests if r[0] == "/published/oct27.train"]
  if ranges:  # The second request asks for the rest only.
    assert train == [("/published/oct27.train", None, 200),
                     ("/published/oct27.train", f"bytes={cut}-", 206)]  # fmt: skip
  else:  # The server ignores Range: the whole file again.
    assert train == [("/published/oct27.train", None, 200),
                     ("/published/oct27.train", f"bytes={cut}-", 200)]  # fmt: skip


def test_the_download_command_fetches_ahead_and_list_verifies(
  server, online, tmp_path, monkeypatch, capsys
):
  files = twitter_files()
  publish(monkeypatch, server, "twitter_pos", files)
  target = tmp_path / "prefetched"
  assert data_main(["download", "twitter_pos", "--data_dir", str(target)]) == 0
  assert (target / "twitter_pos" / "oct27.test").read_bytes() == files["oct27.test"]
  # The folder is then a --data_dir like any other, and its files are the published ones.
  splits = data.load("twitter_pos", target)
  assert (
    splits.info["record"]["verified"] == "each of the 3 files matches its published sha256 and size"
  )
  capsys.readouterr()
  assert data_main(["list", "--data_dir", str(target)]) == 0
  listing = capsys.readouterr().out.splitlines()
  folder = target / "twitter_pos"
  assert (
    f"twitter_pos       found     ARK files {folder / 'oct27.train'}, "
    f"{folder / 'oct27.dev'}, {folder / 'oct27.test'}; each of the 3 files matches its published "
    "sha256 and size (checked at this load)"
  ) in listing
  # Missing: every place the loader looks, in its order, the download not tried.
  (cifar,) = [line for line in listing if line.startswith("cifar10 ")]
  assert cifar.startswith("cifar10           missing   looked in: --data_dir (not given); TFDS ")
  assert f"; the cache {target / 'cifar10'} (no such folder); a download from " in cifar
  assert cifar.endswith(
    "https://www.cs.toronto.edu/~kriz/ (not tried: the network was not asked for)"
  )
  path = target / "twitter_pos" / "oct27.dev"
  path.write_bytes(path.read_bytes().replace(b"\t", b" ", 1))  # One byte changed on disk.
  data_main(["list", "--data_dir", str(target)])
  listing = capsys.readouterr().out
  damaged = f"{path} is damaged: sha256 {hashlib.sha256(path.read_bytes()).hexdigest()}"
  assert f"the cache {folder} ({damaged}" in listing
  # Fetching again replaces only the damaged file.
  server.requests.clear()
  assert data_main(["download", "twitter_pos", "--data_dir", str(target)]) == 0
  assert server.gets() == ["/published/oct27.dev"]
  assert path.read_bytes() == files["oct27.dev"]


def test_timit_is_never_downloaded(online, capsys):
  assert data_main(["download", "timit"]) == 1
  assert "licensed by the LDC" in capsys.readouterr().err


def test_a_mirror_that_is_not_a_url_is_named(online, cache, monkeypatch):
  monkeypatch.setenv("GELUJAX_DATA_MIRROR", "/srv/mirror")
  with pytest.raises(ValueError, match=r"GELUJAX_DATA_MIRROR='/srv/mirror' is not a URL"):
    data.load("twitter_pos")


# ---------------------------------------------------------------------------- archives


def test_a_cifar_tarball_is_extracted_verified_and_loaded(server, online, cache, monkeypatch):
  tarball, images, labels = cifar10_tarball()
  publish(monkeypatch, server, "cifar10", {"cifar-10-python.tar.gz": tarball},
          extracts_to="cifar-10-batches-py")  # fmt: skip
  monkeypatch.setattr(sources, "_read_tfds", _no_tfds)
  splits = data.load("cifar10", validation_size=2)
  np.testing.assert_array_equal(splits["validation"]["inputs"], images[:2])
  np.testing.assert_array_equal(splits["train"]["inputs"], images[2:10])
  np.testing.assert_array_equal(splits["test"]["targets"], labels[10:])
  folder = cache / "cifar10" / "cifar-10-batches-py"
  assert sorted(p.name for p in folder.iterdir()) == sorted(
    [*(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta", "readme.html",
     checksums.MANIFEST]
  )  # fmt: skip
  record = splits.info["record"]
  assert record["sha256"]["cifar-10-python.tar.gz"] == hashlib.sha256(tarball).hexdigest()
  assert (
    record["sha256"]["test_batch"]
    == hashlib.sha256((folder / "test_batch").read_bytes()).hexdigest()
  )
  # An extracted file damaged on disk is extracted again from the kept archive, with no transfer.
  server.requests.clear()
  batch = folder / "data_batch_3"
  batch.write_bytes(batch.read_bytes()[:-1] + b"\x00")
  again = data.load("cifar10", validation_size=2)
  assert server.requests == []
  np.testing.assert_array_equal(again["train"]["inputs"], images[2:10])


def _no_tfds(*args, **kwargs):
  raise checksums.NotFound("no prepared copy")


def symlink_member() -> tarfile.TarInfo:
  info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
  info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
  return info


def device_member() -> tarfile.TarInfo:
  info = tarfile.TarInfo("cifar-10-batches-py/data_batch_1")
  info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
  return info


@pytest.mark.parametrize(
  ("member", "message"),
  [
    (lambda: (file_member("../escaped"), b"x"), r"member '../escaped' lies outside the folder"),
    (
      lambda: (file_member("cifar-10-batches-py/../../escaped"), b"x"),
      r"member 'cifar-10-batches-py/../../escaped' lies outside the folder",
    ),
    (lambda: (file_member("/tmp/escaped"), b"x"), r"member '/tmp/escaped' lies outside"),
    (lambda: (symlink_member(), None), r"is a symbolic link \(to '/etc/passwd'\)"),
    (lambda: (device_member(), None), r"is a device"),
  ],
  ids=["parent", "parent-inside", "absolute", "symlink", "device"],
)
def test_a_tarball_with_a_member_out_of_place_is_refused_and_nothing_extracted(
  server, online, cache, monkeypatch, member, message
):
  good, _, _ = cifar10_tarball()
  with tarfile.open(fileobj=io.BytesIO(good)) as tar:
    members = [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]
  tarball = tar_gz([*members[:2], member(), *members[2:]])
  publish(monkeypatch, server, "cifar10", {"cifar-10-python.tar.gz": tarball},
          extracts_to="cifar-10-batches-py")  # fmt: skip
  monkeypatch.setattr(sources, "_read_tfds", _no_tfds)
  before = set(cache.parent.rglob("*"))
  with pytest.raises(ValueError, match=rf"{message}.*nothing was extracted"):
    data.load("cifar10")
  created = {p.relative_to(cache.parent) for p in set(cache.parent.rglob("*")) - before}
  # The verified archive is kept; nothing was extracted, in the cache or outside it.
  assert created == {
    Path("cache"), Path("cache/cifar10"), Path("cache/cifar10/.lock"),
    Path("cache/cifar10/cifar-10-python.tar.gz"),
  }  # fmt: skip
  assert not Path("/tmp/escaped").exists()


# --------------------------------------------------------------------------- processes


RUNNER = """
import json, sys
from gelujax import data
from gelujax.data import published
from gelujax.data.__main__ import main as data_main
for name, entry in json.loads(sys.argv[1]).items():
  published.PUBLISHED[name] = published.Published(
    files=tuple(published.PublishedFile(**f) for f in entry["files"]),
    locations=tuple(entry["locations"]),
  )
if sys.argv[2] == "load":
  splits = data.load(sys.argv[3])
  print(json.dumps({k: len(v["targets"]) for k, v in splits.items()}), flush=True)
else:
  sys.exit(data_main(sys.argv[3:]))
"""


def start_runner(tmp_path, entry: published.Published, *args: str) -> subprocess.Popen:
  """A separate Python process with ``entry`` as twitter_pos's published files."""
  script = tmp_path / "runner.py"
  script.write_text(RUNNER)
  table = {
    "twitter_pos": {
      "files": [vars(f) for f in entry.files],
      "locations": list(entry.locations),
    }
  }
  env = dict(os.environ, PYTHONPATH=str(ROOT))
  return subprocess.Popen(
    [sys.executable, str(script), json.dumps(table), *args],
    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
  )  # fmt: skip


def wait_for(condition, seconds: float = 60.0) -> None:
  deadline = time.time() + seconds
  while not condition():
    assert time.time() < deadline, "timed out"
    time.sleep(0.05)


@pytest.mark.e2e
def test_two_processes_fetch_once_and_both_load(server, online, cache, monkeypatch, tmp_path):
  files = twitter_files()
  files["oct27.train"] = files["oct27.train"] * 30
  entry = publish(monkeypatch, server, "twitter_pos", files)
  hold = server.hold = threading.Event()  # The first transfer stalls until the second waits.
  first = start_runner(tmp_path, entry, "load", "twitter_pos")
  wait_for(lambda: server.requests)
  second = start_runner(tmp_path, entry, "load", "twitter_pos")
  waiting = []
  for line in second.stderr:
    waiting.append(line)
    if "gelujax: waiting for process" in line:
      break
  assert f"waiting for process {first.pid} on host" in waiting[-1]
  hold.set()
  outputs = [p.communicate(timeout=120) for p in (first, second)]
  assert [p.returncode for p in (first, second)] == [0, 0], outputs
  sizes = [json.loads(out) for out, _ in outputs]
  assert (
    sizes[0]
    == sizes[1]
    == {
      "train": tokens_and_tweets(files["oct27.train"])[0],
      "validation": tokens_and_tweets(files["oct27.dev"])[0],
      "test": tokens_and_tweets(files["oct27.test"])[0],
    }
  )
  assert server.gets() == [f"/published/{name}" for name in files]  # One transfer each.


@pytest.mark.e2e
def test_sigint_mid_download_leaves_nothing_under_the_final_name_and_a_rerun_resumes(
  server, online, cache, monkeypatch, tmp_path
):
  files = twitter_files()
  files["oct27.train"] = files["oct27.train"] * 60
  entry = publish(monkeypatch, server, "twitter_pos", files)
  hold = server.hold = threading.Event()
  process = start_runner(tmp_path, entry, "download", "download", "twitter_pos")
  part = cache / "twitter_pos" / "oct27.train.part"
  wait_for(lambda: part.exists() and part.stat().st_size >= 1024)
  process.send_signal(signal.SIGINT)
  _, stderr = process.communicate(timeout=60)
  hold.set()
  assert process.returncode == 130, stderr
  assert "interrupted; a partial file is kept as <file>.part" in stderr
  assert not (cache / "twitter_pos" / "oct27.train").exists()
  assert 1024 <= part.stat().st_size < len(files["oct27.train"])
  kept = part.stat().st_size
  server.requests.clear()
  assert data_main(["download", "twitter_pos"]) == 0
  assert server.requests[0] == ("/published/oct27.train", f"bytes={kept}-", 206)
  assert (cache / "twitter_pos" / "oct27.train").read_bytes() == files["oct27.train"]
  assert not part.exists()


# ------------------------------------------------------------------ offline, --data_dir


def test_offline_never_touches_the_network_and_names_every_place(server, cache, monkeypatch):
  files = twitter_files()
  entry = publish(monkeypatch, server, "twitter_pos", files)
  monkeypatch.setenv("GELUJAX_DATA_MIRROR", server.url("mirror"))
  with pytest.raises(ValueError) as error:
    data.load("twitter_pos")
  message = str(error.value)
  assert server.requests == []
  assert "\n" not in message
  for needle in [
    "`data_dir` (not given)",
    f"the cache {cache / 'twitter_pos'} (no such folder)",
    "not tried: GELUJAX_OFFLINE=1 forbids the network",
    f"put the published files in {cache / 'twitter_pos'}/",
    server.url("mirror/twitter_pos/"),
    server.url("published/"),
    "python -m gelujax.data download twitter_pos",
    *(f"{f.name} (sha256 {f.sha256}, {f.size} bytes)" for f in entry.files),
  ]:
    assert needle in message
  # Files put there by hand, as the message says, are found offline.
  (cache / "twitter_pos").mkdir(parents=True)
  for name, body in files.items():
    (cache / "twitter_pos" / name).write_bytes(body)
  assert data.load("twitter_pos").info["record"]["verified"].startswith("each of the 3 files")
  assert server.requests == []


def test_offline_download_command_is_an_error(cache, capsys):
  assert data_main(["download", "twitter_pos"]) == 1
  assert "GELUJAX_OFFLINE=1 forbids the network" in capsys.readouterr().err


def cache_cifar10(root: Path) -> Path:
  """CIFAR-10 in the cache ``root`` as a download leaves it: the batches extracted, with the
  record of the real table's archive and each file's sha256 (here, of fixture batches: 5,005
  train images, the default validation split's 5,000 and 5 more, and 2 test images)."""
  folder = root / "cifar10" / "cifar-10-batches-py"
  folder.mkdir(parents=True)
  files = {}
  for i, name in enumerate([f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]):
    n = 5001 if i == 0 else 1 if i < 5 else 2
    body = cifar_batch(np.full((n, 32, 32, 3), i, np.uint8), np.arange(n) % 10)
    (folder / name).write_bytes(body)
    files[name] = [hashlib.sha256(body).hexdigest(), len(body)]
  (archive,) = published.PUBLISHED["cifar10"].files
  record = {"name": archive.name, "sha256": archive.sha256, "size": archive.size}
  (folder / checksums.MANIFEST).write_text(json.dumps({"archive": record, "files": files}))
  return folder


def run_data_command(*args: str, **env: str) -> subprocess.CompletedProcess:
  """``python -m gelujax.data ARGS`` as a user runs it (offline: the tests' environment)."""
  return subprocess.run(
    [sys.executable, "-m", "gelujax.data", *args],
    env=dict(os.environ, PYTHONPATH=str(ROOT), **env), capture_output=True, text=True, timeout=300,
  )  # fmt: skip


@pytest.mark.e2e
def test_downloading_a_set_already_here_names_where_it_is_and_touches_no_network(tmp_path, cache):
  folder = cache_cifar10(cache)
  assert "GELUJAX_OFFLINE" in os.environ  # The network is off: trying it would exit 1.
  result = run_data_command("download", "cifar10", TFDS_DATA_DIR=str(tmp_path / "no-tfds"))
  assert result.returncode == 0, result.stderr
  assert result.stdout == (
    f"cifar10: already on this machine, where gelujax.data.load reads it: python pickle batches "
    f"in {folder}; cifar-10-python.tar.gz matched its published sha256 and size when it was "
    "downloaded and extracted; each of its 6 extracted files matches the sha256 recorded then "
    "(checked at this load); nothing downloaded (--data_dir DIR downloads a copy into DIR).\n"
  )
  assert result.stderr == ""
  # --data_dir: the folder asked for holds it, or it is downloaded there (offline: refused).
  result = run_data_command("download", "cifar10", "--data_dir", str(cache))
  assert result.returncode == 0, result.stderr
  assert result.stdout.startswith(f"cifar10: already in {folder}: cifar-10-python.tar.gz ")
  result = run_data_command("download", "cifar10", "--data_dir", str(tmp_path / "elsewhere"))
  assert result.returncode == 1
  assert "GELUJAX_OFFLINE=1 forbids the network, so cifar10 cannot be downloaded" in result.stderr


@pytest.mark.skipif(not DEBIAN.is_dir(), reason="Debian's dataset-fashion-mnist is not installed")
@pytest.mark.e2e
def test_downloading_debians_fashion_mnist_names_it_and_touches_no_network():
  result = run_data_command("download", "fashion_mnist")
  assert result.returncode == 0, result.stderr
  assert result.stdout.startswith(
    f"fashion_mnist: already on this machine, where gelujax.data.load reads it: IDX files in "
    f"{DEBIAN}; each of the 4 files is the published file with its gzip header re-written"
  )


def test_a_data_dir_that_does_not_exist_is_an_error_naming_the_argument(tmp_path):
  missing = tmp_path / "nonexistent"
  with pytest.raises(ValueError, match=rf"`data_dir` {missing} does not exist"):
    data.load("fashion_mnist", missing)  # Debian's copy is there: never a silent fall-back.


def test_a_data_dir_without_the_data_set_is_an_error_naming_the_argument(tmp_path):
  (tmp_path / "other.txt").write_text("not a data set")
  with pytest.raises(ValueError) as error:
    data.load("fashion_mnist", tmp_path)
  message = str(error.value)
  assert message.startswith(f"Cannot load dataset 'fashion_mnist': `data_dir` {tmp_path} does "
                            "not hold it. Looked in: ")  # fmt: skip
  assert f"leave `data_dir` out to use Debian's copy in {mnist.DEBIAN_FASHION_MNIST}" in message
  assert f"python -m gelujax.data download fashion_mnist --data_dir {tmp_path}" in message


def train_tiny_mnist(tmp_path, *flags):
  """train.py's tiny_mnist in a fresh process, its workdir ``tmp_path/run``."""
  return subprocess.run(
    [sys.executable, str(ROOT / "experiments" / "train.py"), "--task=tiny_mnist", *flags,
     f"--workdir={tmp_path / 'run'}"],
    env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=300,
  )  # fmt: skip


@pytest.mark.e2e
def test_train_py_with_a_mistyped_data_dir_fails_in_one_line(tmp_path):
  missing = tmp_path / "nonexistent"
  result = train_tiny_mnist(tmp_path, "--dataset=fashion_mnist", f"--data_dir={missing}")
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith(f"train.py: error: --data_dir {missing} does not exist")
  assert not (tmp_path / "run").exists()


@pytest.mark.e2e
def test_train_py_offline_without_its_data_set_starts_with_the_task_s_set_here(tmp_path):
  write_mnist_files(str(tmp_path / "data" / "fashion_mnist"), num_train=5064, num_test=32)
  folder = tmp_path / "data"
  result = train_tiny_mnist(tmp_path, "--activation=gelu", f"--data_dir={folder}")
  assert result.returncode == 1
  last = result.stderr.strip().splitlines()[-1]
  assert last.startswith(
    f"train.py: error: Data set 'mnist' is not in --data_dir {folder}; task 'tiny_mnist' also "
    f"takes fashion_mnist, which is (IDX files in {folder / 'fashion_mnist'}): pick it with "
    f"--dataset=fashion_mnist. Cannot load dataset 'mnist': --data_dir {folder} does not hold "
    "it. Looked in: "
  )
  assert not (tmp_path / "run").exists()


def test_a_missing_data_set_names_the_task_s_sets_found_here_first(tmp_path, monkeypatch):
  monkeypatch.setattr(sources, "_read_tfds", _no_tfds)
  monkeypatch.setattr(mnist, "DEBIAN_FASHION_MNIST", tmp_path / "debian")
  spec = tasks.get("tiny_mnist")
  with pytest.raises(data.NoSource) as error:
    spec.load_data()  # None of the task's sets here: the message is the data set's own.
  assert str(error.value).startswith("Cannot load dataset 'mnist': no source has it. Looked in: ")
  write_mnist_files(str(tmp_path / "debian"), num_train=5064, num_test=32)
  with pytest.raises(data.NoSource) as error:
    spec.load_data()
  assert str(error.value).startswith(
    "Data set 'mnist' is not on this machine; task 'tiny_mnist' also takes fashion_mnist, which "
    f"is (IDX files in {tmp_path / 'debian'}): pick it with `dataset`=fashion_mnist. Cannot load "
    "dataset 'mnist': no source has it. Looked in: "
  )
  assert error.value.reasons[0] == ("`data_dir`", "not given")
  splits = spec.replace(dataset="fashion_mnist").load_data()  # What the message says to do.
  assert splits.info["source"] == f"IDX files in {tmp_path / 'debian'}"


# --------------------------------------------------------------------------- real data


def test_debian_fashion_mnist_is_verified_against_the_published_checksums():
  splits = data.load("fashion_mnist")
  record = splits.info["record"]
  assert record["source"] == f"IDX files in {mnist.DEBIAN_FASHION_MNIST}"
  assert record["verified"].startswith("each of the 4 files is the published file with its gzip")
  for name, digest in record["sha256"].items():
    assert hashlib.sha256((mnist.DEBIAN_FASHION_MNIST / name).read_bytes()).hexdigest() == digest


def test_the_mnist_checksums_are_those_tfds_publishes():
  """The table against an independent copy: TFDS's url_checksums files."""
  import tensorflow_datasets as tfds

  folder = Path(tfds.__file__).parent / "url_checksums"
  by_tfds = {}
  for path in (folder / "mnist.txt", folder / "fashion_mnist.txt"):
    for line in path.read_text().splitlines():
      url, size, sha256, _ = line.split("\t")
      by_tfds[url] = (sha256, int(size))
  for dataset in ("mnist", "fashion_mnist"):
    entry = published.PUBLISHED[dataset]
    for file in entry.files:
      assert by_tfds[entry.locations[0] + file.name] == (file.sha256, file.size)


def published_fashion_mnist() -> dict[str, bytes]:
  """The published Fashion-MNIST files, rebuilt from Debian's by hand: RFC 1952's header with
  the FNAME flag, the published time, XFL 0, OS 3 (Unix) and the name, then Debian's data."""
  files = {}
  for file in published.PUBLISHED["fashion_mnist"].files:
    debian = (DEBIAN / file.name).read_bytes()
    name = file.name.removesuffix(".gz").encode()
    header = b"\x1f\x8b\x08\x08" + struct.pack("<I", file.gzip_mtime) + b"\x00\x03" + name + b"\0"
    files[file.name] = header + debian[10:]
  return files


@pytest.mark.slow
def test_real_fashion_mnist_downloads_from_a_mirror_verified_with_the_paper_split(
  server, online, cache, monkeypatch, no_debian
):
  files = published_fashion_mnist()
  for name, body in files.items():
    assert len(body) == next(f.size for f in published.PUBLISHED["fashion_mnist"].files
                             if f.name == name)  # fmt: skip
    server.files[f"/mirror/fashion_mnist/{name}"] = body
  monkeypatch.setenv("GELUJAX_DATA_MIRROR", server.url("mirror"))
  monkeypatch.setattr(sources, "_read_tfds", _no_tfds)
  splits = data.load("fashion_mnist")  # The real table: the published checksums.
  assert server.gets(200) == [f"/mirror/fashion_mnist/{name}" for name in files]
  assert {k: len(v["targets"]) for k, v in splits.items()} == {
    "train": 55_000, "validation": 5_000, "test": 10_000
  }  # fmt: skip
  record = splits.info["record"]
  assert record["verified"].startswith("each of the 4 files matches its published sha256")
  assert record["sha256"] == {f.name: f.sha256 for f in published.PUBLISHED["fashion_mnist"].files}
  # The same images as Debian's copy, read through the other path.
  images = np.frombuffer(gzip.decompress(files["t10k-images-idx3-ubyte.gz"])[16:], np.uint8)
  np.testing.assert_array_equal(splits["test"]["inputs"].ravel(), images)


def test_a_run_records_its_data_source_and_an_old_config_without_it_resumes(tmp_path, capfd):
  write_mnist_files(str(tmp_path / "mnist"), num_train=96, num_test=32)
  spec = tasks.get("tiny_mnist(data_options={'validation_size': 32}, epochs=1)")
  members = Members((1e-3,), (0,))
  workdir = str(tmp_path / "run")
  splits = spec.load_data(str(tmp_path / "mnist"))
  engine.fit(tasks.build(spec, splits), workdir, members)
  first_line = capfd.readouterr().err.splitlines()[0]
  assert first_line.startswith(f"gelujax: data mnist: IDX files in {tmp_path / 'mnist'}; ")
  config = workdirs.read_json(os.path.join(workdir, "config.json"))
  expected = {
    name: hashlib.sha256((tmp_path / "mnist" / name).read_bytes()).hexdigest()
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                 "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
  }  # fmt: skip
  assert config["data"]["sha256"] == expected
  assert config["data"]["verified"].startswith("NOT VERIFIED: each of the 4 files differs")
  for digest in expected.values():
    assert digest[:12] in first_line
  # A config.json written before runs recorded their data resumes: the record is not identity.
  del config["data"]
  workdirs.write_json(os.path.join(workdir, "config.json"), config)
  identity = workdirs.identity(config)
  splits = spec.load_data(str(tmp_path / "mnist"))  # a fresh read, as a resuming run's
  engine.fit(tasks.build(spec.replace(epochs=2), splits), workdir, members)
  records = workdirs.read_metrics(workdir)
  assert [r["epoch"] for r in records] == [1.0, 2.0]
  resumed = workdirs.read_json(os.path.join(workdir, "config.json"))
  assert resumed["data"]["sha256"] == expected
  assert workdirs.identity(resumed) == identity
