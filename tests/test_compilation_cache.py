"""Programs reused from the compilation cache are never stale: what changes an activation changes
what trains, however it reaches the trace.

Each probe runs the real way: two processes on one cache folder, the second with something
changed that no file's name, size or time shows (an environment variable the user's module
reads, a constant a script hands to `gelujax.register_activation`, the module's file edited to
the same size with its time put back). The second run must train what a fresh compile of the
same command trains (``--compilation_cache=none``), bit for bit: the same program compiled on
the same machine. And it must differ from the first run, or the probe proves nothing.

A damaged entry of JAX's own cache is the other half: one cut short is replaced, in one line; a
swapped one fails in one line that names the cache and the way around it.
"""

import json
import os
import subprocess
import sys

import pytest
from tiny_task import write_mnist_files

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "experiments", "train.py")
FLAGS = (
  "--task=tiny_mnist(data_options={'validation_size': 32})",
  "--seeds=1",
  "--learning_rates=1e-2",
  "--epochs=1",
)

ENV_MODULE = """
import os

import jax.numpy as jnp

B = float(os.environ.get("SQ_B", "4.0"))


def squareplus(x):
  return 0.5 * (x + jnp.sqrt(x * x + B))
"""

FILE_MODULE = """
import jax.numpy as jnp


def squareplus(x):
  return 0.5 * (x + jnp.sqrt(x * x + {b}))
"""

SCRIPT = """
import functools
import sys

import jax.numpy as jnp

import gelujax
from gelujax import engine, host, tasks
from gelujax.members import Members


def squareplus(x, b):
  return 0.5 * (x + jnp.sqrt(x * x + b))


host.enable_compilation_cache(sys.argv[3])
gelujax.register_activation("sq", functools.partial(squareplus, b=float(sys.argv[1])))
spec = tasks.get("tiny_mnist").replace(
  activation="sq", epochs=1, data_options={"validation_size": 32}
)
parts = tasks.build(spec, spec.load_data(sys.argv[4]))
engine.fit(parts, sys.argv[2], Members((1e-2,), (0,)))
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
  root = tmp_path_factory.mktemp("cache_probes")
  write_mnist_files(str(root / "mnist"))
  return root


def _run(command, cwd, **env):
  result = subprocess.run(
    command,
    cwd=cwd,
    env=dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu", **env),
    capture_output=True,
    text=True,
    timeout=300,
  )
  assert result.returncode == 0, result.stderr[-3000:]
  return result


def _train(lab, workdir, cache, **env):
  return _run(
    [sys.executable, TRAIN, *FLAGS, "--activation=acts:squareplus",
     f"--data_dir={lab / 'mnist'}", f"--workdir={lab / workdir}", f"--compilation_cache={cache}"],
    cwd=lab, **env,
  )  # fmt: skip


def _losses(workdir):
  return [json.loads(line)["train_loss"] for line in (workdir / "metrics.jsonl").open()]


def test_an_environment_variable_the_activation_reads_is_not_served_stale(lab):
  (lab / "acts.py").write_text(ENV_MODULE)
  cache = lab / "env-cache"
  _train(lab, "env-4", cache, SQ_B="4.0")
  _train(lab, "env-100", cache, SQ_B="100.0")
  _train(lab, "env-100-fresh", "none", SQ_B="100.0")
  assert _losses(lab / "env-100") == _losses(lab / "env-100-fresh")
  assert _losses(lab / "env-100") != _losses(lab / "env-4")


def test_a_file_edited_to_the_same_size_and_time_is_not_served_stale(lab):
  module = lab / "acts.py"
  module.write_text(FILE_MODULE.format(b="4.0"))
  stat = module.stat()
  cache = lab / "file-cache"
  _train(lab, "file-4", cache)
  module.write_text(FILE_MODULE.format(b="9.0"))  # The same size.
  os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # As `touch -r`, `cp -p` do.
  assert module.stat().st_size == stat.st_size
  _train(lab, "file-9", cache)
  _train(lab, "file-9-fresh", "none")
  assert _losses(lab / "file-9") == _losses(lab / "file-9-fresh")
  assert _losses(lab / "file-9") != _losses(lab / "file-4")


def test_a_registered_partial_is_not_served_stale(lab):
  """A script registers ``functools.partial(squareplus, b=...)`` with its b from argv."""
  script = lab / "script.py"
  script.write_text(SCRIPT)
  cache = lab / "script-cache"
  for b, workdir, folder in (("4", "sq-4", cache), ("100", "sq-100", cache),
                             ("100", "sq-100-fresh", "none")):  # fmt: skip
    _run([sys.executable, str(script), b, str(lab / workdir), str(folder), str(lab / "mnist")],
         cwd=lab)  # fmt: skip
  assert _losses(lab / "sq-100") == _losses(lab / "sq-100-fresh")
  assert _losses(lab / "sq-100") != _losses(lab / "sq-4")
