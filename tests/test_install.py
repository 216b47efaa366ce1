"""gelujax installed as users install it: a wheel, used from another directory.

The wheel is built from a copy of what a source distribution holds (pyproject.toml, README.md,
LICENSE, gelujax/) and installed with ``pip install --no-deps --target`` into a folder of its
own. The processes that use it run with ``python -S`` and ``PYTHONPATH`` naming that folder and
this environment's site-packages: ``-S`` keeps ``site`` from running the ``.pth`` files there,
among them the editable install's import finder, which would serve any module the wheel lacks
from the checkout (a wheel missing ``gelujax.engine`` passed a test run beside it).
"""

import configparser
import json
import os
import shutil
import site
import subprocess
import sys
import zipfile

import pytest
from tiny_task import write_mnist_files

import gelujax

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "gelujax")


def checkout_modules() -> list[str]:
  """Every module and package of the checkout's gelujax/, by its dotted name."""
  names = []
  for parent, dirs, files in os.walk(PACKAGE):
    dirs[:] = [d for d in dirs if d != "__pycache__"]
    prefix = os.path.relpath(parent, ROOT).replace(os.sep, ".")
    names += [
      prefix if f == "__init__.py" else f"{prefix}.{f[:-3]}" for f in files if f.endswith(".py")
    ]
  return sorted(names)


def build_wheel(tmp_path) -> str:
  """The wheel of what a source distribution of the checkout holds, built by pip."""
  source = tmp_path / "gelujax-source"  # pip's build fails in a folder named "src"
  source.mkdir()
  for name in ("pyproject.toml", "README.md", "LICENSE"):
    shutil.copy(os.path.join(ROOT, name), source)
  shutil.copytree(PACKAGE, source / "gelujax", ignore=shutil.ignore_patterns("__pycache__"))
  subprocess.run(
    [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
     "--wheel-dir", str(tmp_path / "dist"), str(source)],
    check=True, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  (wheel,) = (tmp_path / "dist").iterdir()
  return str(wheel)


def isolated_env(installed: str) -> dict[str, str]:
  """A process that sees the installed folder and this environment's packages, not the
  checkout (run with ``python -S``)."""
  env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
  paths = [installed, *site.getsitepackages()]
  return dict(env, PYTHONPATH=os.pathsep.join(paths), JAX_PLATFORMS="cpu")


IMPORT_ALL = """
import importlib, json, sys
names = json.loads(sys.argv[1])
files = {name: importlib.import_module(name).__file__ for name in names}
import gelujax
print(json.dumps({"files": files, "version": gelujax.__version__}))
"""
# A command's module defines its absl flags when imported, and absl keeps one set of flags a
# process: the two commands, whose flags share names, are imported in processes of their own.
APART = "gelujax.cli.reproduce"


@pytest.fixture(scope="module")
def wheel_install(tmp_path_factory):
  """``(wheel, installed)``: the checkout's wheel, and the folder it is installed into."""
  tmp_path = tmp_path_factory.mktemp("wheel")
  wheel = build_wheel(tmp_path)
  installed = tmp_path / "installed"
  subprocess.run(
    [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
     "--target", str(installed), wheel],
    check=True, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  return wheel, installed


def test_a_wheel_installed_elsewhere_holds_every_module_and_trains(wheel_install, tmp_path):
  wheel, installed = wheel_install
  with zipfile.ZipFile(wheel) as archive:
    listed = set(archive.namelist())
    metadata = archive.read(f"gelujax-{gelujax.__version__}.dist-info/METADATA").decode()
  assert "gelujax/py.typed" in listed
  assert f"gelujax-{gelujax.__version__}.dist-info/licenses/LICENSE" in listed
  assert f"\nVersion: {gelujax.__version__}\n" in metadata
  assert "\nLicense-Expression: Apache-2.0\n" in metadata
  elsewhere = tmp_path / "elsewhere"
  elsewhere.mkdir()
  env = isolated_env(str(installed))
  names = checkout_modules()
  assert {"gelujax.engine.fit", "gelujax.study.pipeline", "gelujax.registry", APART} <= set(names)
  imported = {"files": {}}
  for group in ([n for n in names if n != APART], [APART]):
    result = subprocess.run(
      [sys.executable, "-S", "-c", IMPORT_ALL, json.dumps(group)],
      cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout.splitlines()[-1])
    imported = {"files": {**imported["files"], **found["files"]}, "version": found["version"]}
  assert imported["version"] == gelujax.__version__
  assert set(imported["files"]) == set(names)
  for name, file in imported["files"].items():
    assert file.startswith(str(installed) + os.sep), (name, file)
  # experiments/train.py run from another directory trains through the installed package.
  write_mnist_files(str(tmp_path / "mnist"))
  workdir = tmp_path / "run"
  result = subprocess.run(
    [sys.executable, "-S", os.path.join(ROOT, "experiments", "train.py"),
     "--task=tiny_mnist(data_options={'validation_size': 32})", "--epochs=1", "--seeds=1",
     f"--data_dir={tmp_path / 'mnist'}", f"--workdir={workdir}", "--compilation_cache=none"],
    cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["epochs"] == 1 and len(summary["members"]) == 1
  assert not os.listdir(elsewhere)  # nothing written where it ran


def test_the_wheels_gelujax_command_trains_from_a_folder_outside_any_checkout(
  wheel_install, tmp_path
):
  """The issue's user: the wheel alone, a folder of their own, and the command line. The
  console script is run as pip generated it from the wheel's entry point (with ``python -S``,
  as every process here), and ``python -m gelujax.train`` is the same command: it trains here
  (the console script's ``gelujax train`` trains from the user's folder in the NNX model's test
  below)."""
  wheel, installed = wheel_install
  with zipfile.ZipFile(wheel) as archive:
    entry_points = archive.read(f"gelujax-{gelujax.__version__}.dist-info/entry_points.txt")
  declared = configparser.ConfigParser()
  declared.read_string(entry_points.decode())
  assert dict(declared["console_scripts"]) == {"gelujax": "gelujax.cli:main"}
  script = installed / "bin" / "gelujax"
  assert "from gelujax.cli import main" in script.read_text()
  env = isolated_env(str(installed))
  data = tmp_path / "fashion"
  write_mnist_files(str(data), num_train=5_256)  # tiny_mnist keeps 5,000 for validation
  listed = subprocess.run(
    [sys.executable, "-S", str(script), "--help"],
    cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert listed.returncode == 0, listed.stderr
  commands = listed.stdout.split("commands:\n", 1)[1].split("\n\n", 1)[0]
  assert [line.split()[0] for line in commands.splitlines()] == [
    "train",
    "reproduce",
    "data",
    "sample",
  ]
  mine = tmp_path / "module"  # the user's folder, outside any checkout
  mine.mkdir()
  result = subprocess.run(
    [sys.executable, "-S", "-m", "gelujax.train", "--task=tiny_mnist", "--dataset=fashion_mnist",
     "--epochs=1", f"--data_dir={data}", "--compilation_cache=none"],
    cwd=mine, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  assert os.listdir(mine) == ["workdirs"]
  workdir = mine / "workdirs" / "tiny_mnist_fashion_mnist_gelu_tanh"
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["epochs"] == 1 and len(summary["members"]) == 2
  refused = subprocess.run(
    [sys.executable, "-S", "-m", "gelujax.train", "--task=tiny_mnist", "--epochs=0"],
    cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert refused.returncode == 1
  assert refused.stderr.startswith("python -m gelujax.train: error: --epochs 0 is not valid")


MYMODELS = """
from flax import nnx


class MLP(nnx.Module):
  def __init__(self, *, activation, dropout, rngs, width=8):
    self.hidden = nnx.Linear(784, width, rngs=rngs)
    self.drop = nnx.Dropout(dropout, rngs=rngs)
    self.out = nnx.Linear(width, 10, rngs=rngs)
    self.activation = activation

  def __call__(self, x, train: bool):
    x = self.activation(self.hidden(x.reshape(x.shape[0], -1)))
    return self.out(self.drop(x, deterministic=not train))
"""


MYNNXACTS = """
import jax.numpy as jnp
from flax import nnx


class ScaledTanh(nnx.Module):
  def __init__(self, start=1.0, *, rngs):
    self.alpha = nnx.Param(jnp.asarray(start, jnp.float32))

  def __call__(self, x):
    return (self.alpha[...] * jnp.tanh(x)).astype(x.dtype)
"""
# Each member's alpha in a workdir's last checkpoint, restored by the wheel's gelujax.
ALPHAS = """
import json, sys
import jax, numpy as np
from gelujax import engine, tasks
workdir, data = sys.argv[1:]
task = tasks.read_task(workdir)
_, state = engine.restore(tasks.build(task, task.load_data(data)), workdir)
found = jax.tree_util.tree_leaves_with_path(state.params)
print(json.dumps({jax.tree_util.keystr(p): np.asarray(a).tolist() for p, a in found
                  if "alpha" in jax.tree_util.keystr(p)}))
"""


def test_the_wheels_gelujax_command_trains_the_users_nnx_model_from_the_users_folder(
  wheel_install, tmp_path
):
  """The wheel alone, and a folder of the user's own holding an NNX model of theirs and an NNX
  activation of theirs with a parameter: ``gelujax train`` imports both from that folder,
  trains them and records their sources; the activation's alpha, one per member, is in the
  trained state and moved from its start."""
  _, installed = wheel_install
  mine, data = tmp_path / "mine", tmp_path / "data"
  mine.mkdir()
  (mine / "mymodels.py").write_text(MYMODELS)
  (mine / "my_nnx_acts.py").write_text(MYNNXACTS)
  write_mnist_files(str(data), num_train=5_256)  # tiny_mnist keeps 5,000 for validation
  env = isolated_env(str(installed))
  result = subprocess.run(
    [sys.executable, "-S", str(installed / "bin" / "gelujax"), "train",
     "--task=tiny_mnist(model='mymodels:MLP', dropout=0.1)", "--dataset=fashion_mnist",
     "--activation=my_nnx_acts:ScaledTanh(start=2.0)", "--epochs=1", f"--data_dir={data}",
     "--compilation_cache=none"],
    cwd=mine, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  # Nothing written in the user's folder but the run's workdir (and Python's bytecode cache of
  # the user's modules).
  assert set(os.listdir(mine)) <= {"mymodels.py", "my_nnx_acts.py", "__pycache__", "workdirs"}
  (workdir,) = (mine / "workdirs").iterdir()
  assert workdir.name == "tiny_mnist_fashion_mnist_my_nnx_acts_ScaledTanh_start=2.0__mymodels_MLP"
  config = json.loads((workdir / "config.json").read_text())
  assert config["model_source"]["file"] == str(mine / "mymodels.py")
  assert config["activation_source"]["file"] == str(mine / "my_nnx_acts.py")
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["epochs"] == 1 and len(summary["members"]) == 2
  restored = subprocess.run(
    [sys.executable, "-S", "-c", ALPHAS, str(workdir), str(data)],
    cwd=mine, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip
  assert restored.returncode == 0, restored.stderr[-3000:]
  alphas = json.loads(restored.stdout.strip().splitlines()[-1])
  assert list(alphas) == ["['activation']['alpha']"]
  (members,) = alphas.values()
  assert len(members) == 2 and all(a != 2.0 for a in members), members  # trained: it moved


MYACTS = """
import jax.numpy as jnp


def squareplus(x, b=4.0):
  return 0.5 * (x + jnp.sqrt(x * x + b))
"""


@pytest.mark.slow
def test_the_wheels_reproduce_compares_the_users_activation_with_gelu_in_the_users_folder(
  wheel_install, tmp_path
):
  """The issue's command with the wheel alone, from a folder of the user's own holding their
  module: everything it writes is under that folder, the checkout is as it was, and its
  summary compares squareplus with gelu on the evaluation seeds. One epoch and 2 evaluation
  seeds (the grid's shape: one compile): the comparison's numbers, its seeds, differences and
  finite intervals, are the checkout's reproduce.py's as much as the wheel's, and
  test_reproduce_cli's users-folder test asserts them on the same flags at 6 seeds."""
  _, installed = wheel_install
  script = installed / "bin" / "gelujax"
  mine, data = tmp_path / "mine", tmp_path / "data"
  mine.mkdir()
  (mine / "myacts.py").write_text(MYACTS)
  write_mnist_files(str(data), num_train=5_064, num_test=100)
  status = ["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=all"]
  before = subprocess.run(status, capture_output=True, text=True, check=True).stdout
  result = subprocess.run(
    [sys.executable, "-S", str(script), "reproduce", "--task=tiny_mnist",
     "--dataset=fashion_mnist", "--activations=gelu,myacts:squareplus", "--epochs=1",
     "--evaluation_seeds=2", f"--data_dir={data}", "--compilation_cache=none"],
    cwd=mine, env=isolated_env(str(installed)), capture_output=True, text=True, timeout=900,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  assert subprocess.run(status, capture_output=True, text=True, check=True).stdout == before
  assert set(os.listdir(mine)) <= {"myacts.py", "__pycache__", "results"}
  out = mine / "results" / "fashion_mnist" / "tiny_mnist"
  summary = json.loads((out / "summary.json").read_text())
  (against,) = [
    e for e in summary["exploratory"]
    if (e["run"], e["baseline"], e["metric"]) == ("myacts_squareplus", "gelu", "best.test_error")
  ]  # fmt: skip
  assert against["seeds"] == "evaluation seeds"
  assert against["paired"]["seeds"] == [100, 101]
