"""A researcher's own model through train.py and reproduce.py, without editing gelujax.

The model lives in a module outside the repository (``user_models.py`` in a temporary folder,
the folder the commands run from); a task takes it as ``model="user_models:NnxMLP(width=8)"``
(``--task='tiny_mnist(model=...)'``): an NNX module class, bridged to the engine's Linen calling
convention by `gelujax.models.user.FromNNX`, or a Linen module class.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import flax
import jax
import numpy as np
import pytest
from run_mains import run_mains
from tiny_task import write_mnist_files

from gelujax import tasks
from gelujax import workdir as workdirs
from gelujax.models.user import FromNNX

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAIN = os.path.join(ROOT, "experiments", "train.py")
REPRODUCE = os.path.join(ROOT, "experiments", "reproduce.py")
GRID = ("--seeds=2", "--learning_rates=1e-3", "--compilation_cache=none")
NNX_MODEL = "user_models:NnxMLP(width=8)"

MODELS = """
import flax.linen as nn
import jax.numpy as jnp
from flax import nnx


class NnxMLP(nnx.Module):
  def __init__(self, *, activation, dropout, rngs, width=16, classes=10, inputs=784):
    self.hidden = nnx.Linear(inputs, width, rngs=rngs)
    self.drop = nnx.Dropout(dropout, rngs=rngs)
    self.out = nnx.Linear(width, classes, rngs=rngs)
    self.activation = activation

  def __call__(self, x, train: bool):
    x = x.reshape(x.shape[0], -1)
    x = self.drop(self.activation(self.hidden(x)), deterministic=not train)
    return self.out(x)


class LinenMLP(nn.Module):
  activation: object
  dropout: float = 0.0
  width: int = 16

  @nn.compact
  def __call__(self, x, train: bool):
    x = x.reshape(x.shape[0], -1)
    x = nn.Dropout(self.dropout, deterministic=not train)(self.activation(nn.Dense(self.width)(x)))
    return nn.Dense(10)(x)


class NoRngs(nnx.Module):
  def __init__(self, *, activation, dropout):
    self.activation = activation

  def __call__(self, x, train):
    return x


class NoTrain(nnx.Module):
  def __init__(self, *, activation, dropout, rngs):
    self.out = nnx.Linear(784, 10, rngs=rngs)

  def __call__(self, x):
    return self.out(x)


class LinenNoDropout(nn.Module):
  activation: object

  @nn.compact
  def __call__(self, x, train):
    return nn.Dense(10)(x)


class ScaledTanh(nnx.Module):
  # An activation with a parameter of its own: alpha tanh(x).

  def __init__(self, start=1.0, *, rngs):
    self.alpha = nnx.Param(jnp.asarray(start, jnp.float32))

  def __call__(self, x):
    return (self.alpha[...] * jnp.tanh(x)).astype(x.dtype)


class NotAModule:
  pass


NOT_A_CLASS = 3
"""


def task(model: str, **fields: str) -> str:
  options = "".join(f", {k}={v}" for k, v in fields.items())
  return f"--task=tiny_mnist(data_options={{'validation_size': 32}}, model={model!r}{options})"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
  """A folder holding the user's module and MNIST-format files; the module importable here."""
  root = tmp_path_factory.mktemp("user_model")
  (root / "user_models.py").write_text(MODELS)
  write_mnist_files(str(root / "mnist"))
  sys.path.insert(0, str(root))
  yield root
  sys.path.remove(str(root))


def train(lab, workdir, *flags, cwd=None):
  """train.py in a fresh process run from the user's folder (which is not on PYTHONPATH); its
  default workdir, under that folder, where ``workdir`` is None."""
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  where = [f"--workdir={workdir}"] if workdir else []
  return subprocess.run(
    [sys.executable, TRAIN, f"--data_dir={lab / 'mnist'}", *where, *GRID, *flags],
    cwd=cwd or lab, env=env, capture_output=True, text=True, timeout=300,
  )  # fmt: skip


# ---------------------------------------------------------------- through the command


# Two members of the user's NNX MLP with dropout, evaluated twice an epoch.
NNX_FLAGS = (task(NNX_MODEL, dropout="0.2", evals_per_epoch="2"),)


@pytest.fixture(scope="module")
def nnx_whole(lab):
  """An uninterrupted run of 2 epochs of the user's NNX model."""
  whole = lab / "nnx_whole"
  result = train(lab, whole, "--epochs=2", *NNX_FLAGS)
  assert result.returncode == 0, result.stderr[-3000:]
  return whole


@pytest.mark.e2e
def test_a_users_nnx_model_trains_and_records_its_source(lab, nnx_whole):
  """Both members' losses fall and config.json records the class's module and sha256; that a
  resumed run writes the uninterrupted run's metrics bit for bit (dropout drawn from the
  engine's dropout key) is the killed-run test's below, and extending a finished run through
  the command test_train_cli's `test_more_epochs_continue_a_finished_run`."""
  records = workdirs.read_metrics(str(nnx_whole))
  assert len(records) == 8
  for member in (0, 1):
    losses = [r["train_loss"] for r in records if r["member"] == member]
    assert losses[-1] < losses[0] - 0.05, (member, losses)
  config = json.loads((nnx_whole / "config.json").read_text())
  source = lab / "user_models.py"
  assert config["spec"]["model"] == NNX_MODEL
  assert config["model_source"] == {
    "module": "user_models",
    "function": "NnxMLP",
    "file": str(source),
    "sha256": hashlib.sha256(source.read_bytes()).hexdigest(),
    "imports": [],
  }


@pytest.mark.e2e
def test_a_users_nnx_model_killed_mid_epoch_resumes_to_the_uninterrupted_run(lab, nnx_whole):
  """SIGTERM (``kill``) the moment the middle of epoch 2 is recorded, then the same command:
  the run ends with the uninterrupted run's files, bit for bit."""
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  for attempt in range(3):  # a loaded machine may see the moment only after the run ended
    workdir = lab / f"nnx_killed_{attempt}"
    command = [sys.executable, TRAIN, f"--data_dir={lab / 'mnist'}", f"--workdir={workdir}",
               *GRID, "--epochs=2", *NNX_FLAGS]  # fmt: skip
    process = subprocess.Popen(
      command, cwd=lab, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    metrics, deadline = workdir / "metrics.jsonl", time.monotonic() + 240
    while process.poll() is None and time.monotonic() < deadline:
      if metrics.exists() and '"epoch": 1.5' in metrics.read_text():
        break
      time.sleep(0.001)
    hit = process.poll() is None
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=300)
    if hit:
      break
  assert hit, "the run ended before the middle of epoch 2 was seen"
  assert process.returncode == 128 + signal.SIGTERM, stderr
  assert stderr.strip().splitlines()[-1] == (
    "train.py: interrupted by SIGTERM; re-run the same command to resume."
  )
  resumed = subprocess.run(command, cwd=lab, env=env, capture_output=True, text=True, timeout=300)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  for name in ("metrics.jsonl", "summary.json"):
    assert (workdir / name).read_bytes() == (nnx_whole / name).read_bytes(), name


@pytest.mark.e2e
def test_a_users_linen_model_trains_in_a_default_workdir_named_after_it(lab):
  result = train(lab, None, "--epochs=1", task("user_models:LinenMLP(width=8)"))
  assert result.returncode == 0, result.stderr[-3000:]
  # Not the preset's default folder (tiny_mnist_mnist_gelu_tanh), which holds another run.
  workdir = lab / "workdirs" / "tiny_mnist_mnist_gelu_tanh_user_models_LinenMLP_width=8_"
  assert [p.name for p in (lab / "workdirs").iterdir()] == [workdir.name]
  assert len(workdirs.read_metrics(str(workdir))) == 2
  config = json.loads((workdir / "config.json").read_text())
  assert config["model_source"]["function"] == "LinenMLP"


@pytest.mark.e2e
def test_a_resume_after_the_models_file_changed_is_refused_untouched(lab, tmp_path):
  source = tmp_path / "user_models.py"
  source.write_text(MODELS)
  workdir = tmp_path / "run"
  flags = (task(NNX_MODEL),)
  assert train(lab, workdir, "--epochs=1", *flags, cwd=tmp_path).returncode == 0
  before = source.read_bytes()
  source.write_text(MODELS.replace("width=16", "width=17"))
  files = {p.name: p.read_bytes() for p in workdir.iterdir() if p.is_file() and p.name != "lock"}
  refused = train(lab, workdir, "--epochs=2", *flags, cwd=tmp_path)
  assert refused.returncode == 1
  [line] = refused.stderr.strip().splitlines()
  old, new = (hashlib.sha256(b).hexdigest()[:12] for b in (before, source.read_bytes()))
  assert line.startswith(f"train.py: error: Workdir {workdir} holds another run "), line
  assert (
    f"the model's source user_models.NnxMLP in {source} sha256 {old} (now "
    f"user_models.NnxMLP in {source} sha256 {new}): its code changed" in line
  ), line
  assert {p.name: p.read_bytes() for p in workdir.iterdir() if p.name in files} == files


# Each refused before any data is read: the --data_dir given does not exist.
BAD = [
  ("user_models:NotAModule", "user_models.NotAModule is a class, neither a Linen module class"),
  ("user_models:NOT_A_CLASS", "user_models.NOT_A_CLASS is a int, neither a Linen module class"),
  ("user_models:Nothing", "module 'user_models' ("),
  ("no_such_models:MLP", "module 'no_such_models' does not import (ModuleNotFoundError"),
  ("user_models:NoRngs", "does not take the keyword arguments activation, dropout, rngs"),
  ("user_models:NnxMLP(depth=2)", "(got an unexpected keyword argument 'depth')"),
  ("user_models:LinenNoDropout", "LinenNoDropout does not take the keyword arguments activation"),
  ("user_models:NoTrain", "user_models.NoTrain.__call__(self, x) takes no train"),
  ("user_models:NnxMLP(__import__('os'))", "model \"user_models:NnxMLP(__import__('os'))\" cannot"),
]


@pytest.mark.e2e
def test_a_model_that_cannot_be_used_is_refused_in_one_paragraph_before_any_data(lab):
  """Each of BAD; and, in the same process, a model whose outputs do not fit the objective,
  refused in one line before the first step (its data are read: the real --data_dir)."""
  runs = [
    [task(spec), "--data_dir=/no/such/folder", f"--workdir={lab / f'bad{i}'}", *GRID]
    for i, (spec, _) in enumerate(BAD)
  ]
  workdir = lab / "three_classes"
  three_classes = [f"--data_dir={lab / 'mnist'}", f"--workdir={workdir}", *GRID,
                   task("user_models:NnxMLP(classes=3)")]  # fmt: skip
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  *ended_bad, refused = run_mains(TRAIN, [*runs, three_classes], env, lab)
  for (spec, needle), (i, ended) in zip(BAD, enumerate(ended_bad), strict=True):
    assert isinstance(ended.code, str) and "\n" not in ended.code, (spec, ended)
    assert ended.code.startswith("train.py: error: --task "), (spec, ended.code)
    assert f"sets field 'model' to {spec!r}: expected a model preset among" in ended.code, spec
    assert needle in ended.code, (spec, ended.code)
    assert not (lab / f"bad{i}").exists()
  # Outputs that do not fit the objective: the one line on stderr, nothing else there.
  line = refused.code
  assert isinstance(line, str) and "\n" not in line and refused.stderr == "", refused
  assert line.startswith(
    "train.py: error: model 'user_models:NnxMLP(classes=3)' gives outputs of shape [2, 3] in "
    "evaluation for a batch of inputs of shape [2, 28, 28, 1]; objective 'classification' "
    "takes one array of [batch, classes] = [2, at least 10]"
  ), line
  assert not workdir.exists()


@pytest.mark.e2e
def test_reproduce_passes_the_users_model_through(lab):
  out = lab / "results"
  env = dict(os.environ, PYTHONPATH=ROOT, JAX_PLATFORMS="cpu")
  result = subprocess.run(
    [sys.executable, REPRODUCE, task(NNX_MODEL), f"--data_dir={lab / 'mnist'}",
     "--activations=gelu,relu", "--seeds=2", "--evaluation_seeds=2", "--learning_rates=1e-3",
     "--epochs=1", f"--out={out}", "--compilation_cache=none"],
    cwd=lab, env=env, capture_output=True, text=True, timeout=600,
  )  # fmt: skip
  assert result.returncode == 0, result.stderr[-3000:]
  runs = sorted(p.name for p in (out / "runs").iterdir())
  assert runs == ["gelu", "gelu_eval", "relu", "relu_eval"]
  for run in runs:
    config = json.loads((out / "runs" / run / "config.json").read_text())
    assert config["spec"]["model"] == NNX_MODEL, run
    assert config["model_source"]["function"] == "NnxMLP", run
  readme = (out / "README.md").read_text()
  assert f"- Task tiny_mnist: model {NNX_MODEL}, batch size 32, 1 epochs" in readme
  assert f"- model: {NNX_MODEL!r} instead of the paper's 'mlp_tiny'." in readme
  # The model's class, file and sha256 as the runs imported it, and where they imported it from.
  source = lab / "user_models.py"
  assert (
    f"- Model {NNX_MODEL}: `NnxMLP` of `{source}` (sha256 "
    f"{hashlib.sha256(source.read_bytes()).hexdigest()}), imported from the folder `{lab}` (the "
    "commands above import it from there: run them in that folder, or with it on PYTHONPATH)"
  ) in readme.splitlines()


# ---------------------------------------------------------------- in this process


def test_an_nnx_models_forward_pass_is_numpys_of_the_same_weights(lab):
  spec = tasks.get("tiny_mnist").replace(model=NNX_MODEL, activation="relu", dropout=0.5)
  model = spec.build_model()
  assert isinstance(model, FromNNX)
  x = np.random.default_rng(0).normal(size=(5, 784)).astype(np.float32)
  variables = model.init(
    {"params": jax.random.key(1), "dropout": jax.random.key(2)}, x, train=False
  )
  got = np.asarray(model.apply(variables, x, train=False), np.float64)
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), variables["params"])
  hidden = np.maximum(x.astype(np.float64) @ p["hidden"]["kernel"] + p["hidden"]["bias"], 0)
  want = hidden @ p["out"]["kernel"] + p["out"]["bias"]
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  # Parameters from the engine's params stream: another key, other parameters.
  other = model.init({"params": jax.random.key(3), "dropout": jax.random.key(2)}, x, train=False)
  assert not np.allclose(other["params"]["hidden"]["kernel"], p["hidden"]["kernel"])


def test_an_nnx_models_dropout_draws_from_the_dropout_stream(lab):
  model = tasks.get("tiny_mnist").replace(model=NNX_MODEL, dropout=0.5).build_model()
  x = np.ones((4, 784), np.float32)
  variables = model.init(
    {"params": jax.random.key(0), "dropout": jax.random.key(0)}, x, train=False
  )

  def trained(key):
    return np.asarray(model.apply(variables, x, train=True, rngs={"dropout": key}))

  np.testing.assert_array_equal(trained(jax.random.key(7)), trained(jax.random.key(7)))
  assert not np.array_equal(trained(jax.random.key(7)), trained(jax.random.key(8)))
  # Without a dropout key training is refused as a Linen model's dropout refuses it, which the
  # engine reads as a model that draws randomness (it logs the training loss dropout off).
  with pytest.raises(flax.errors.InvalidRngError, match='needs PRNG for "dropout"'):
    model.apply(variables, x, train=True)


def test_an_nnx_model_takes_an_nnx_activation_class_whose_parameter_is_the_models(lab):
  """An NNX activation class of the user's own is constructed with the model's rngs and given
  to the NNX model, whose parameters then hold its alpha: the forward pass is NumPy's
  out(2 tanh(hidden(x))) of the same weights."""
  spec = tasks.get("tiny_mnist").replace(
    model=NNX_MODEL, activation="user_models:ScaledTanh(start=2.0)"
  )
  model = spec.build_model()
  x = np.random.default_rng(0).normal(size=(5, 784)).astype(np.float32)
  variables = model.init({"params": jax.random.key(1)}, x, train=False)
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), variables["params"])
  assert p["activation"]["alpha"] == 2.0
  hidden = 2.0 * np.tanh(x.astype(np.float64) @ p["hidden"]["kernel"] + p["hidden"]["bias"])
  want = hidden @ p["out"]["kernel"] + p["out"]["bias"]
  got = np.asarray(model.apply(variables, x, train=False), np.float64)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  # The parameter is the model's: another alpha, another output.
  moved = {**variables["params"], "activation": {"alpha": np.float32(0.5)}}
  halved = np.asarray(model.apply({"params": moved}, x, train=False), np.float64)
  want = 0.25 * (hidden @ p["out"]["kernel"]) + p["out"]["bias"]
  np.testing.assert_allclose(halved, want, rtol=1e-5, atol=1e-5)


def test_an_nnx_model_refuses_a_linen_activation_class_naming_what_would_work(lab):
  spec = tasks.get("tiny_mnist").replace(activation="learnable_gelu")
  with pytest.raises(ValueError) as refused:
    spec.replace(model=NNX_MODEL)
  assert str(refused.value) == (
    "TaskSpec 'tiny_mnist': --activation 'learnable_gelu' is a Linen module class "
    "(gelujax.linen.LearnableGELU), and --task's model 'user_models:NnxMLP(width=8)' an NNX "
    "module class, which takes its activation as NNX: a function of an array (such as 'gelu', "
    "or module:function of your own), or an NNX module class of your own (module:Class, an "
    "nnx.Module whose __init__ takes rngs), constructed with the model's rngs, its parameters "
    "training with the model; or make the model a Linen module class, which takes Linen "
    "activation classes."
  )


def test_a_users_model_goes_through_tasks_build_with_its_record(lab):
  spec = tasks.get("tiny_mnist").replace(model="user_models:LinenMLP(width=4)")
  record = tasks.record(spec)
  assert record["model_source"]["module"] == "user_models"
  assert "model_source" not in tasks.record(tasks.get("tiny_mnist"))  # presets: unchanged
  config = workdirs.make_config(record, spec_members(spec))
  preset = workdirs.make_config(tasks.record(tasks.get("tiny_mnist")), spec_members(spec))
  assert config["model_source"] == record["model_source"]
  changed = {**config, "model_source": {**config["model_source"], "sha256": "0" * 64}}
  assert workdirs.identity(changed) != workdirs.identity(config) != workdirs.identity(preset)


def spec_members(spec):
  from gelujax.members import Members

  return Members(spec.learning_rates, tuple(range(spec.seeds)))
