"""A researcher's own activation through train.py, without editing gelujax.

The activation lives in a module outside the repository (``user_pkg/acts.py`` in a temporary
folder, the folder the commands run from); train.py takes it as
``--activation=user_pkg.acts:function`` and scripts as `gelujax.register_activation`.
reproduce.py's ``--activations=gelu,module:function`` is test_reproduce_cli.py's
``test_run_from_a_users_folder_it_writes_there_alone_and_says_how_to_run_it_again``.
"""

import hashlib
import json
import os
import subprocess
import sys
import zipfile

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from run_mains import run_mains
from tiny_task import write_mnist_files

import gelujax
from benchmarks import faults
from gelujax import engine, tasks
from gelujax import workdir as workdirs

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "experiments", "train.py")
TASK = "--task=tiny_mnist(data_options={'validation_size': 32})"
GRID = ("--seeds=2", "--learning_rates=1e-3", "--compilation_cache=none")

ACTS = """
import flax.linen as nn
import jax.numpy as jnp
from flax import nnx
from jax.scipy.stats import norm


def my_relu(x):
  return jnp.maximum(x, 0.0)


def squareplus(x, b=4.0):
  return 0.5 * (x + jnp.sqrt(x * x + b))


def summed(x):
  return x.sum()


def to_float16(x):
  return x.astype(jnp.float16)


def raises(x):
  raise RuntimeError("not today")


def square_root(x):  # NaN below 0: every member diverged, "Lower the learning rates"
  return jnp.sqrt(x)


def sign(x):  # NaN at 0 alone
  return x / jnp.abs(x)


def float32_only(x):  # jax.scipy's norm.cdf takes no bfloat16
  return x * norm.cdf(1.702 * x)


class ScaledTanh(nn.Module):  # parameters of its own: alpha, learned
  start: float = 1.0

  @nn.compact
  def __call__(self, x):
    alpha = self.param("alpha", lambda key: jnp.asarray(self.start, jnp.float32))
    return (alpha * jnp.tanh(x)).astype(x.dtype)


class NNXScaledTanh(nnx.Module):
  def __init__(self, start=1.0, *, rngs):
    self.alpha = nnx.Param(jnp.asarray(start, jnp.float32))

  def __call__(self, x):
    return (self.alpha[...] * jnp.tanh(x)).astype(x.dtype)


class NotAModule:
  pass


NOT_A_FUNCTION = 3
"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
  """A folder holding the user's package and MNIST-format files."""
  root = tmp_path_factory.mktemp("user")
  (root / "user_pkg").mkdir()
  (root / "user_pkg" / "__init__.py").write_text("")
  (root / "user_pkg" / "acts.py").write_text(ACTS)
  write_mnist_files(str(root / "mnist"))
  return root


def train(lab, workdir, *flags, cwd=None, path=(), split=False):
  """train.py in a fresh process run from the user's folder (which is not on PYTHONPATH), with
  ``path`` after gelujax's root on PYTHONPATH; its default workdir, under that folder, where
  ``workdir`` is None; with ``split``, without the suite's XLA_FLAGS, so that the command
  splits the CPU into devices itself."""
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, *map(str, path)]), JAX_PLATFORMS="cpu")
  if split:
    env.pop("XLA_FLAGS", None)
  return subprocess.run(
    [sys.executable, TRAIN, TASK, f"--data_dir={lab / 'mnist'}",
     *([f"--workdir={workdir}"] if workdir else []), *GRID, *flags],
    cwd=cwd or lab, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip


def test_a_users_function_trains_as_the_same_function_of_gelujax_and_is_recorded(lab):
  """``user_pkg.acts:my_relu`` trains the members ``relu`` trains, to float32 rounding (another
  program: gelujax's relu has its own derivative rule), and config.json records its module,
  function and source file's sha256. Checking a user's function runs JAX; the command splits
  the CPU first, so its grid gets the devices a grid of gelujax's own gets
  (`gelujax.host.choose_cpu_devices`)."""
  from gelujax import host

  devices = host.choose_cpu_devices(2, host.host_cores())
  mine, theirs = lab / "mine", lab / "theirs"
  for workdir, activation in ((mine, "user_pkg.acts:my_relu"), (theirs, "relu")):
    result = train(lab, workdir, "--epochs=2", f"--activation={activation}", split=True)
    assert result.returncode == 0, result.stderr
    assert f"2 members on a mesh of {devices} (members)" in result.stderr, activation
  records, expected = workdirs.read_metrics(str(mine)), workdirs.read_metrics(str(theirs))
  assert len(records) == len(expected) == 4
  for record, want in zip(records, expected, strict=True):
    for key in ("train_loss", "validation_loss", "test_loss", "test_error"):
      np.testing.assert_allclose(record[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)
  config = json.loads((mine / "config.json").read_text())
  source, package = lab / "user_pkg" / "acts.py", lab / "user_pkg" / "__init__.py"
  assert config["activation"] == "user_pkg.acts:my_relu"
  assert config["activation_source"] == {
    "module": "user_pkg.acts",
    "function": "my_relu",
    "file": str(source),
    "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
    "imports": [
      {"module": "user_pkg", "file": str(package), "sha256": hashlib.sha256(b"").hexdigest()}
    ],
  }
  assert "activation_source" not in json.loads((theirs / "config.json").read_text())


HELPER_ACTS = """
import jax.numpy as jnp
from jax.scipy.stats import norm

from helperpkg.consts import K


def squareplus(x, b=1.0):
  return 0.5 * (x + jnp.sqrt(x * x + b * K))
"""


def test_a_resume_after_a_module_the_activation_imports_changed_is_refused_untouched(lab, tmp_path):
  """The activation (a function with an argument, ``squareplus(b=1.0)``) lives in a module that
  imports ``helperpkg.consts``, which imports ``helperpkg.scale``: config.json records each of
  the user's files the import ran (not the installed packages'), an unchanged resume goes on,
  and a resume after any of them changed, even two imports away, or after the activation's own
  file changed, is refused in one line naming the file; the run's files are left as they
  were."""
  (tmp_path / "helperpkg").mkdir()
  init, consts, scale = (tmp_path / "helperpkg" / n for n in ("__init__.py", "consts.py",
                                                               "scale.py"))  # fmt: skip
  init.write_text("")
  consts.write_text("from helperpkg.scale import S\n\nK = 1.0 * S\n")
  scale.write_text("S = 1.0\n")
  source = tmp_path / "helper_acts.py"
  source.write_text(HELPER_ACTS)
  workdir, flags = tmp_path / "run", ("--activation=helper_acts:squareplus(b=1.0)",)
  assert train(lab, workdir, "--epochs=1", *flags, cwd=tmp_path).returncode == 0
  recorded = json.loads((workdir / "config.json").read_text())["activation_source"]["imports"]
  assert recorded == [
    {"module": module, "file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    for module, path in (("helperpkg", init), ("helperpkg.consts", consts),
                         ("helperpkg.scale", scale))
  ]  # fmt: skip
  resumed = train(lab, workdir, "--epochs=2", *flags, cwd=tmp_path)  # unchanged: resumes
  assert resumed.returncode == 0, resumed.stderr
  edits = (
    (scale, "S = 2.5\n"),
    (consts, "from helperpkg.scale import S\n\nK = 2.5\n"),
    (source, HELPER_ACTS.replace("0.5 *", "0.25 *")),
  )
  for path, edit in edits:
    before, old = path.read_text(), hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    path.write_text(edit)
    files = faults.results(workdir)
    refused = train(lab, workdir, "--epochs=3", *flags, cwd=tmp_path)
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr
    [line] = refused.stderr.strip().splitlines()
    new = hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    assert line.startswith(f"train.py: error: Workdir {workdir} holds another run "), line
    assert str(path) in line and f"sha256 {old}" in line and new in line, line
    if path == source:
      assert (
        f"the activation's source helper_acts.squareplus in {source} sha256 {old} (now "
        f"helper_acts.squareplus in {source} sha256 {new}): its code changed" in line
      ), line
    assert faults.results(workdir) == files
    path.write_text(before)


def test_the_users_imports_are_found_however_they_were_imported(tmp_path, monkeypatch):
  """A relative import, one by ``importlib``, one in the function's body, and a helper that
  another activation's module imported first: each is recorded; the installed packages the
  modules import (NumPy) are not."""
  package = tmp_path / "imports_pkg"
  package.mkdir()
  for name, text in (("__init__", ""), ("shared", "X = 1.0\n"), ("rel", "from . import shared\n"),
                     ("dyn", "Z = 1.0\n"), ("lazy", "W = 1.0\n")):  # fmt: skip
    (package / f"{name}.py").write_text(text)
  (tmp_path / "imports_acts_one.py").write_text(
    "import importlib\n\nimport numpy as np\n\nfrom imports_pkg import rel\n\n"
    "importlib.import_module('imports_pkg.dyn')\nPI = np.pi\n\n\n"
    "def f(x):\n  from imports_pkg import lazy\n\n  return x * lazy.W\n"
  )
  (tmp_path / "imports_acts_two.py").write_text(
    "from imports_pkg.shared import X\n\n\ndef g(x):\n  return x * X\n"
  )
  monkeypatch.syspath_prepend(str(tmp_path))

  def imported(spec):
    return [r["module"] for r in gelujax.specs.activation_source(spec)["imports"]]

  assert imported("imports_acts_one:f") == [
    "imports_pkg", "imports_pkg.dyn", "imports_pkg.lazy", "imports_pkg.rel", "imports_pkg.shared"
  ]  # fmt: skip
  assert imported("imports_acts_two:g") == ["imports_pkg", "imports_pkg.shared"]


def test_an_activation_imported_from_a_zip_trains_and_records_its_source(lab, tmp_path):
  """``PYTHONPATH=acts.zip``: Python imports the module from the archive, where no file can be
  opened at its ``__file__``; the run trains, records the sha256 of the module's source as the
  archive holds it, and refuses a resume once the archive holds another."""
  archive, workdir = tmp_path / "acts.zip", tmp_path / "run"

  def pack(source):
    with zipfile.ZipFile(archive, "w") as z:
      z.writestr("zipped_acts.py", source)

  pack(ACTS)
  flags = ("--activation=zipped_acts:squareplus",)
  result = train(lab, workdir, "--epochs=1", *flags, cwd=tmp_path, path=[archive])
  assert result.returncode == 0, result.stderr
  assert len(workdirs.read_metrics(str(workdir))) == 2
  source = json.loads((workdir / "config.json").read_text())["activation_source"]
  assert source["module"] == "zipped_acts" and source["function"] == "squareplus"
  assert source["file"] == str(archive / "zipped_acts.py")
  assert source["sha256"] == hashlib.sha256(ACTS.encode()).hexdigest()
  pack(ACTS.replace("0.5 *", "0.25 *"))
  refused = train(lab, workdir, "--epochs=2", *flags, cwd=tmp_path, path=[archive])
  assert refused.returncode == 1
  assert "the activation's source zipped_acts.squareplus in " in refused.stderr
  assert "its code changed since the run trained with it" in refused.stderr


# Each refused before any data is read: the --data_dir given does not exist.
BAD = [
  ("user_pkg.nowhere:f", "module 'user_pkg.nowhere' does not import (ModuleNotFoundError"),
  ("user_pkg.acts:nothing", "has no 'nothing'"),
  ("user_pkg.acts:NOT_A_FUNCTION", "user_pkg.acts.NOT_A_FUNCTION is a int, not a function"),
  ("user_pkg.acts:squareplus(c=1)", "does not take {'c': 1}"),
  ("user_pkg.acts:summed", "maps a float32 array of shape (3, 4) to float32 of shape ()"),
  ("user_pkg.acts:to_float16", "maps a float32 array of shape (3, 4) to float16 of shape (3, 4)"),
  ("user_pkg.acts:raises", "raised RuntimeError: not today when called on a float32 array"),
  ("user_pkg.acts:NotAModule", "NotAModule is a class, neither a Linen module"),
  ("user_pkg.acts:ScaledTanh(begin=1)", "got an unexpected keyword argument 'begin' when"),
  (
    "user_pkg.acts:square_root",
    "activation 'user_pkg.acts:square_root' returns nan for the finite input -4.0 (float32); an "
    "activation must be finite wherever its input is, or every member that meets such an input "
    "diverges.",
  ),
  ("user_pkg.acts:sign", "activation 'user_pkg.acts:sign' returns nan for the finite input 0.0"),
  ("user_pkg.acts:__import__('os')", "Cannot parse \"__import__('os')\""),
  ("__import__('os'):system", "Cannot parse"),
]


# A function that takes float32 but not bfloat16 (test_a_function_is_checked_in_the_runs_dtype_
# alone trains it in float32), in a bfloat16 run: the command line, run with BAD's.
FLOAT32_ONLY = ("--epochs=1", "--activation=user_pkg.acts:float32_only")


def test_an_activation_that_cannot_be_used_is_refused_in_one_paragraph_before_any_data(lab):
  """Each of BAD; and, in the same process, a bfloat16 run of a function that takes float32
  alone, refused in one line that names the run's dtype, before a file of the run is written."""
  runs = [
    [TASK, f"--activation={spec}", "--data_dir=/no/such/folder", f"--workdir={lab / f'bad{i}'}"]
    for i, (spec, _) in enumerate(BAD)
  ]
  bf16 = [TASK, f"--data_dir={lab / 'mnist'}", f"--workdir={lab / 'bf16'}", *GRID,
          *FLOAT32_ONLY, "--dtype=bfloat16"]  # fmt: skip
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  *ended_bad, refused = run_mains(TRAIN, [*runs, bf16], env, lab)
  for (spec, needle), (i, ended) in zip(BAD, enumerate(ended_bad), strict=True):
    assert isinstance(ended.code, str) and "\n" not in ended.code, (spec, ended)
    assert ended.code.startswith(f"train.py: error: --activation {spec!r} is not valid"), spec
    assert needle in ended.code, (spec, ended.code)
    assert not (lab / f"bad{i}").exists()
  line = refused.code
  assert isinstance(line, str) and "\n" not in line, refused
  assert "Traceback" not in refused.stderr, refused.stderr[-2000:]
  assert line.startswith("train.py: error: activation 'user_pkg.acts:float32_only' raised "), line
  expected = "on a bfloat16 array of shape (3, 4) (this run computes in bfloat16: --dtype)"
  assert expected in line, line
  assert not (lab / "bf16").exists()


def test_a_function_is_checked_in_the_runs_dtype_alone(lab):
  """A function that takes float32 but not bfloat16 trains in a float32 run (it was refused:
  every function was probed in bfloat16 too). A bfloat16 run of it is refused in one line that
  names the run's dtype: the test above, in its process of refusals."""
  trained = train(lab, lab / "f32", *FLOAT32_ONLY)
  assert trained.returncode == 0, trained.stderr[-2000:]
  assert len(workdirs.read_metrics(str(lab / "f32"))) == 2


@pytest.mark.parametrize("spec", ["ScaledTanh(start=2.0)", "NNXScaledTanh(start=2.0)"])
def test_an_activation_with_parameters_trains_them_through_the_command(lab, spec):
  """A Linen module class, and an NNX one (wrapped for the Linen model), with a parameter of
  its own: each hidden layer's activation keeps an alpha, one per member, which starts at 2.0
  and is trained (it moves)."""
  workdir = lab / f"param-{spec.split('(')[0]}"
  result = train(lab, workdir, "--epochs=1", f"--activation=user_pkg.acts:{spec}", path=[lab])
  assert result.returncode == 0, result.stderr[-3000:]
  sys.path.insert(0, str(lab))
  try:
    task = tasks.read_task(str(workdir))
    parts = tasks.build(task, task.load_data(str(lab / "mnist")))
    _, state = engine.restore(parts, str(workdir))
  finally:
    sys.path.remove(str(lab))
  alphas = [
    np.asarray(leaf)
    for path, leaf in jax.tree_util.tree_leaves_with_path(state.params)
    if "alpha" in jax.tree_util.keystr(path)
  ]
  assert len(alphas) >= 1 and all(a.shape == (2,) for a in alphas)  # one per member
  assert all(np.all(a != np.float32(2.0)) for a in alphas), alphas  # trained


def test_gelujax_nnx_takes_a_users_nnx_class_by_spec(lab, monkeypatch):
  """gelujax.nnx.Activation builds the user's NNX class with the spec's arguments and rngs
  (0.5 tanh(x), by NumPy); a Linen class, or no rngs, is refused in one sentence."""
  from flax import nnx

  from gelujax import nnx as gelujax_nnx

  monkeypatch.syspath_prepend(str(lab))
  spec = "user_pkg.acts:NNXScaledTanh(start=0.5)"
  x = np.linspace(-3, 3, 7, dtype=np.float32)
  layer = gelujax_nnx.Activation(spec, rngs=nnx.Rngs(0))
  np.testing.assert_allclose(layer(x), 0.5 * np.tanh(x.astype(np.float64)), rtol=1e-6)
  assert float(layer.nnx_scaled_tanh.alpha[...]) == 0.5
  with pytest.raises(ValueError, match="is an NNX module class with parameters; pass rngs"):
    gelujax_nnx.Activation(spec)
  with pytest.raises(ValueError, match=r"is a Linen module class; gelujax\.nnx models take"):
    gelujax_nnx.Activation("user_pkg.acts:ScaledTanh", rngs=nnx.Rngs(0))


def test_register_activation_for_scripts():
  def halved(x):
    return 0.5 * x

  gelujax.register_activation("halved_for_a_test", halved)
  assert gelujax.get_activation("halved_for_a_test") is halved
  out = gelujax.Activation("halved_for_a_test").apply({}, jnp.arange(3.0))
  np.testing.assert_array_equal(out, [0.0, 0.5, 1.0])
  source = gelujax.specs.activation_source("halved_for_a_test")
  with open(__file__, "rb") as f:
    digest = hashlib.sha256(f.read()).hexdigest()
  imports = source.pop("imports")
  assert source == {
    "module": __name__,
    "function": "test_register_activation_for_scripts.<locals>.halved",
    "file": __file__,
    "sha256": digest,
  }
  # This file's imports of the repository's own modules, not gelujax's or installed packages'.
  assert [record["module"] for record in imports] == ["benchmarks.faults", "run_mains", "tiny_task"]
  for record in imports:
    with open(record["file"], "rb") as f:
      assert record["sha256"] == hashlib.sha256(f.read()).hexdigest()
  with pytest.raises(ValueError, match="'halved_for_a_test' is already registered"):
    gelujax.register_activation("halved_for_a_test", halved)
  with pytest.raises(ValueError, match="'gelu' is already registered"):
    gelujax.register_activation("gelu", halved)
  with pytest.raises(ValueError, match=r"maps a float32 array of shape \(3, 4\) to float32 of"):
    gelujax.register_activation("summed_for_a_test", jnp.sum)
  with pytest.raises(ValueError, match="not an identifier"):
    gelujax.register_activation("a:b", halved)
  with pytest.raises(ValueError) as error:
    gelujax.register_activation("reciprocal_for_a_test", jnp.reciprocal)
  assert str(error.value) == (
    "activation 'reciprocal_for_a_test' returns inf for the finite input 0.0 (float32); an "
    "activation must be finite wherever its input is, or every member that meets such an input "
    "diverges."
  )
  assert "reciprocal_for_a_test" not in gelujax.activation_names()


ENV_ACTS = """
import os

import jax


def swish(x):  # beta read from the environment when the activation is traced
  return x * jax.nn.sigmoid(float(os.environ.get("SWISH_BETA", "1.0")) * x)
"""


def test_a_resume_that_would_train_another_function_is_refused_whatever_changed_it(lab, tmp_path):
  """The module reads its beta from an environment variable: its file, and so its sha256, never
  change, but what it computes does. config.json records the function's values and derivatives
  at fixed points (SciPy's reference below), and a resume that computes others is refused in one
  line naming the first point that moved, the run untouched; with the same beta it resumes."""
  from scipy import special

  (tmp_path / "envacts.py").write_text(ENV_ACTS)
  workdir, flags = tmp_path / "run", ("--activation=envacts:swish",)
  first = train(lab, workdir, "--epochs=1", *flags, cwd=tmp_path, path=[tmp_path])
  assert first.returncode == 0, first.stderr
  recorded = json.loads((workdir / "config.json").read_text())["activation_fingerprint"]
  x = np.asarray(recorded["points"], np.float64)
  np.testing.assert_allclose(recorded["values"], x * special.expit(x), rtol=2e-6, atol=1e-30)
  slope = special.expit(x) * (1 + x * (1 - special.expit(x)))
  np.testing.assert_allclose(recorded["derivatives"], slope, rtol=2e-6, atol=1e-30)
  metrics = (workdir / "metrics.jsonl").read_bytes()
  env = {"SWISH_BETA": "1.5"}
  before = dict(os.environ)
  os.environ.update(env)
  try:
    refused = train(lab, workdir, "--epochs=2", *flags, cwd=tmp_path, path=[tmp_path])
  finally:
    os.environ.clear()
    os.environ.update(before)
  assert refused.returncode == 1
  line = refused.stderr.strip().splitlines()[-1]
  assert line.startswith(f"train.py: error: Workdir {workdir} holds another run ")
  assert "what the activation envacts:swish computes: its value at -8: -0.00268" in line
  assert "a resume would train another function than the run's first epochs did" in line
  assert (workdir / "metrics.jsonl").read_bytes() == metrics
  resumed = train(lab, workdir, "--epochs=2", *flags, cwd=tmp_path, path=[tmp_path])
  assert resumed.returncode == 0, resumed.stderr


def test_every_way_in_imports_the_run_folders_module_first(lab, tmp_path):
  """A module named ``acts`` in the folder the command runs in and another ``acts`` on
  PYTHONPATH: the console script, ``python -m gelujax.train`` and the script all train (and
  record) the run folder's, as the docs say."""
  import shutil

  here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
  for folder, body in ((here, "def act(x):\n  return x * (x > 0)\n"),
                       (elsewhere, "def act(x):\n  return x\n")):  # fmt: skip
    folder.mkdir()
    (folder / "acts.py").write_text(body)
  console = shutil.which("gelujax")
  assert console, "the gelujax console script is installed (pip install -e .)"
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(elsewhere)]), JAX_PLATFORMS="cpu")
  flags = [TASK, f"--data_dir={lab / 'mnist'}", "--activation=acts:act", "--epochs=1", *GRID]
  for name, command in (
    ("console", [console, "train"]),
    ("module", [sys.executable, "-m", "gelujax.train"]),
    ("script", [sys.executable, TRAIN]),
  ):
    done = subprocess.run(
      [*command, *flags, f"--workdir={tmp_path / name}"], cwd=here, env=env,
      capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, (name, done.stderr[-2000:])
    config = json.loads((tmp_path / name / "config.json").read_text())
    assert config["activation_source"]["file"] == str(here / "acts.py"), name
