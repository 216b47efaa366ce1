"""The test processes run JAX as the entry points configure it, before any test starts it.

`experiments/train.py` calls `gelujax.host.configure_cpu` before JAX starts, and the XLA
flags it leaves change how some products round; so does, on this jaxlib, whether ``XLA_FLAGS``
names the device count at all. The tests that compare a run made in their own process with one
made by train.py in a subprocess give both the same flags: one device, named in ``XLA_FLAGS`` as
the subprocesses' is (a count already there is kept), then `configure_cpu`'s own.

No test reaches the network for data (`no_network_data`).

Compiled programs go to a temporary folder, removed at the end, never to the user's cache: JAX's
own ``JAX_COMPILATION_CACHE_DIR``, which the scripts' ``--compilation_cache`` default follows and
which every process a test starts inherits. Each pytest-xdist worker keeps a folder of its own
inside the one of the process that started them: JAX writes an entry in place, so a process
that loads a program while another process writes the same entry reads it cut short, warns
("Error reading persistent compilation cache entry") and compiles anew; a worker's processes run
one test at a time, the two workers' side by side. (Processes a test kills mid-run keep a cache
of their own for the same reason: a kill can leave an entry cut short.) The test processes keep
every program, however fast it compiled, as the scripts do
(`gelujax.host.enable_compilation_cache`): many tests train the same tiny grids, and a program
loaded from the cache is the one compiled (a fit of the reference grid takes a quarter of the
time the second time).

Tests marked ``mount`` mount tmpfs disks; see `pytest_runtest_setup`.

The longest modules run first (`pytest_collection_modifyitems`), by their seconds in
``tests/module_seconds.json``: ``--dist loadscope`` hands each pytest-xdist worker whole modules
in collection order (pyproject turns off its own reordering), so the last modules, run while the
other worker may have nothing left, are short ones. A module not in the file (or every module,
without the file) runs last. The file holds what a quiet run of the README's test command took,
module by module: that command rewrites it with ``GELUJAX_MODULE_SECONDS=write`` set.
"""

import atexit
import collections
import functools
import json
import os
import shutil
import signal
import tempfile

import pytest

# A shell starts a background job (`pytest ... &`) with SIGINT ignored, and a process inherits an
# ignored signal: the processes the tests interrupt with SIGINT would never see it. Restored here,
# so that they start with SIGINT's default, as from a terminal.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
  signal.signal(signal.SIGINT, signal.default_int_handler)

if "PYTEST_XDIST_WORKER" not in os.environ:
  _CACHE = tempfile.mkdtemp(prefix="gelujax-tests-jax-cache-")
  atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE
else:
  _CACHE = os.path.join(os.environ["JAX_COMPILATION_CACHE_DIR"], os.environ["PYTEST_XDIST_WORKER"])
  os.makedirs(_CACHE, exist_ok=True)
  os.environ["JAX_COMPILATION_CACHE_DIR"] = _CACHE

import jax  # After the cache folder is set, as host.

from gelujax import host  # After the cache folder is set: it reads it.

if "--xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (
    f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count=1".strip()
  )
host.configure_cpu("auto", 1)
# The thresholds only, not `host.enable_compilation_cache`: its count of programs loaded from the
# cache would change what an error of a script's main called in this process says.
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


@pytest.fixture(autouse=True)
def no_network_data(monkeypatch, tmp_path_factory):
  """No test downloads a data set or reads the user's data cache: the cache is a fresh folder
  and the network is off (the download tests turn it on for their 127.0.0.1 server)."""
  monkeypatch.setenv("GELUJAX_OFFLINE", "1")
  monkeypatch.setenv("GELUJAX_DATA_DIR", str(tmp_path_factory.mktemp("data_cache")))
  monkeypatch.delenv("GELUJAX_DATA_MIRROR", raising=False)


@functools.cache
def _can_mount() -> bool:
  from benchmarks import faults

  return faults.can_mount()


def pytest_runtest_setup(item: pytest.Item) -> None:
  """Tests marked ``mount`` mount tmpfs disks: they run as root (as in CI) whether or not the
  mount works, so that a failing mount fails them; elsewhere, only when this process may mount."""
  if item.get_closest_marker("mount") and os.geteuid() != 0 and not _can_mount():
    pytest.skip("mounts a tmpfs: needs root or CAP_SYS_ADMIN (CI runs as root)")


MODULE_SECONDS = os.path.join(os.path.dirname(__file__), "module_seconds.json")
_seconds: collections.Counter[str] = collections.Counter()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
  """Modules in order of their seconds in `MODULE_SECONDS`, longest first; each module's tests
  in their own order."""
  try:
    with open(MODULE_SECONDS) as f:
      seconds = json.load(f)
  except FileNotFoundError:
    seconds = {}
  items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], 0.0))  # stable


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
  _seconds[report.nodeid.split("::")[0]] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
  """With ``GELUJAX_MODULE_SECONDS=write``, the controller (pytest-xdist's, or the only
  process) rewrites `MODULE_SECONDS` with this run's seconds of each module (setup, call and
  teardown of its tests)."""
  if (
    os.environ.get("GELUJAX_MODULE_SECONDS") == "write" and "PYTEST_XDIST_WORKER" not in os.environ
  ):
    with open(MODULE_SECONDS, "w") as f:
      json.dump({k: round(v, 1) for k, v in _seconds.most_common()}, f, indent=1)
      f.write("\n")
