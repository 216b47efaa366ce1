"""Tests for gelujax.study.grids: the runs a study trains, trained by the real trainer."""

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from tiny_task import write_mnist_files

from gelujax import host, tasks
from gelujax import workdir as workdirs
from gelujax.members import Members
from gelujax.paper import Design, design
from gelujax.study import grids, runs
from tests.fake_workdirs import constant, member, write_workdir

REPO = Path(__file__).resolve().parent.parent


def test_grid_names_suffix_only_other_dropout_rates():
  spec = tasks.get("mnist")
  made = grids.make_grids(spec, ["gelu", "relu"], [0.0, 0.5], [1e-3], Path("/o"))
  assert [g.name for g in made] == ["gelu", "relu", "gelu_dropout0.5", "relu_dropout0.5"]
  assert [(g.spec.activation, g.spec.dropout) for g in made] == [
    ("gelu", 0.0), ("relu", 0.0), ("gelu", 0.5), ("relu", 0.5)
  ]  # fmt: skip
  assert str(made[2].workdir) == "/o/runs/gelu_dropout0.5"
  with pytest.raises(tasks.SpecError):
    grids.make_grids(spec, ["swish"], [0.0], [1e-3], Path("/o"))


def row(name, selected, candidates=None):
  """A selection grid's row that selected ``selected`` (None: every member diverged)."""
  entry = selected and runs.LrRow(selected, 5, 0, list(range(5)), 1.0, {})
  candidates = candidates or ([selected] if selected else [])
  return runs.RunRow(
    name, name, 0.0, 3, "validation_loss", entry, [entry] if entry else [], candidates
  )


def test_evaluation_grids_train_fresh_seeds_at_the_selected_lr():
  spec = tasks.get("mnist").replace(dataset="fashion_mnist")
  selection = grids.make_grids(spec, ["gelu_tanh", "relu"], [0.0], [1e-3, 1e-4], Path("/o"))
  plan = design("mnist", 5)
  found = grids.evaluation_grids(
    "mnist", selection, [row("gelu_tanh", 1e-4), row("relu", None)], plan
  )
  # relu diverged everywhere: nothing to evaluate.
  (grid,) = found
  assert (grid.name, grid.workdir, grid.learning_rates) == (
    "gelu_tanh_eval", Path("/o/runs/gelu_tanh_eval"), (1e-4,)
  )  # fmt: skip
  # Its config.json: the selection grid's spec, one lr, the design's 10 evaluation seeds.
  config = workdirs.make_config(
    tasks.record(grid.spec), Members(grid.learning_rates, plan.evaluation_seeds)
  )
  assert (
    config["spec"]["activation"] == "gelu_tanh" and config["spec"]["dataset"] == "fashion_mnist"
  )
  assert [(m["seed"], m["learning_rate"]) for m in config["members"]] == [
    (s, 1e-4) for s in range(100, 110)
  ]
  # A design that selects nothing evaluates every lr.
  (grid,) = grids.evaluation_grids(
    "mnist_ae", selection[:1], [row("gelu_tanh", 1e-3)], Design((3, 4, 5), select_lr=False)
  )
  assert grid.learning_rates == (1e-3, 1e-4)


def test_every_candidate_lr_gets_its_evaluation_run():
  """The selected lr's evaluation run is <run>_eval; each other candidate lr's
  <run>_eval_lr<lr>, with the same evaluation seeds; the earlier design trains the selected lr
  alone."""
  spec = tasks.get("mnist").replace(dataset="fashion_mnist")
  selection = grids.make_grids(spec, ["gelu_tanh"], [0.0], [1e-3, 1e-4, 1e-5], Path("/o"))
  found = [row("gelu_tanh", 1e-4, candidates=[1e-4, 1e-3])]
  plan = design("mnist", 5)
  made = grids.evaluation_grids("mnist", selection, found, plan)
  assert [(g.name, g.workdir, g.learning_rates) for g in made] == [
    ("gelu_tanh_eval", Path("/o/runs/gelu_tanh_eval"), (1e-4,)),
    ("gelu_tanh_eval_lr0.001", Path("/o/runs/gelu_tanh_eval_lr0.001"), (1e-3,)),
  ]
  assert all(g.spec == selection[0].spec for g in made)
  earlier = dataclasses.replace(plan, candidates=False)
  assert [g.name for g in grids.evaluation_grids("mnist", selection, found, earlier)] == [
    "gelu_tanh_eval"
  ]
  # The names read back: each evaluation run belongs to its selection grid.
  assert runs.evaluated_run("gelu_tanh_eval_lr0.001") == "gelu_tanh"
  assert runs.evaluated_run("gelu_tanh_dropout0.5_eval") == "gelu_tanh_dropout0.5"
  assert runs.evaluated_run("gelu_tanh_dropout0.5_eval_lr1e-05") == "gelu_tanh_dropout0.5"
  assert runs.evaluated_run("gelu_tanh") is None and runs.evaluated_run("evaluation") is None


def test_cifar10_retrains_on_the_whole_train_file_at_the_selected_lr():
  spec = tasks.get("cifar10")
  selection = grids.make_grids(spec, ["gelu_tanh"], [0.5], spec.learning_rates, Path("/o"))
  assert selection[0].spec.data_options.get("train_on_all") is None
  (grid,) = grids.evaluation_grids(
    "cifar10", selection, [row("gelu_tanh", 1e-4)], design("cifar10", 3)
  )
  assert grid.learning_rates == (1e-4,)
  assert grid.spec.data_options["train_on_all"] is True
  assert grid.spec.activation == "gelu_tanh" and grid.spec.dropout == 0.5


def finished_grid(path, **options):
  members = [
    member(s, lr, train_loss=constant(0.1), validation_loss=constant(0.2))
    for lr in (1e-3, 1e-4)
    for s in range(3)
  ]
  return write_workdir(path, members, **options)


def test_finished_summary_and_grid_checks(tmp_path):
  lrs = (1e-3, 1e-4)
  partial = finished_grid(tmp_path / "partial", finished=False)
  assert grids.finished_summary(partial, Members(lrs, [0, 1, 2]), 3) is None
  done = finished_grid(tmp_path / "done")
  assert grids.finished_summary(done, Members(lrs, [0, 1, 2]), 3)["activation"] == "gelu"
  assert grids.finished_summary(tmp_path / "empty", Members([1e-3], [0]), 3) is None
  with pytest.raises(ValueError, match=r"different grid.*`out`"):
    grids.finished_summary(done, Members(lrs, [0, 1]), 3)
  with pytest.raises(ValueError, match=r"different grid"):
    grids.finished_summary(partial, Members(lrs[1:], [0, 1, 2]), 3)
  # A finished run asked for more epochs is resumed (not finished); fewer is an error.
  assert grids.finished_summary(done, Members(lrs, [0, 1, 2]), 5) is None
  with pytest.raises(ValueError, match=r"3 epochs, more than the 2 requested.*`epochs` 3"):
    grids.finished_summary(done, Members(lrs, [0, 1, 2]), 2)


# tiny_mnist on a small MNIST in IDX files (tests/tiny_task.py): 224 train, 32 validation and
# 64 test images.
TINY_MNIST = "tiny_mnist(activation='relu', epochs=1, data_options={'validation_size': 32})"


@pytest.fixture(scope="module")
def mnist_dir(tmp_path_factory) -> str:
  folder = str(tmp_path_factory.mktemp("data") / "mnist")
  write_mnist_files(folder)
  return folder


@pytest.mark.e2e
def test_run_grid_trains_then_skips_and_keeps_an_all_diverged_result(tmp_path, mnist_dir):
  spec = tasks.get(TINY_MNIST)
  workdir = tmp_path / "relu"
  # An lr of 1e30 sends every weight past float32's range within a step: all members diverge,
  # which the trainer reports by raising after writing the summary.
  members = Members([1e30], [0, 1])
  summary, trained = grids.run_grid(spec, workdir, members, data_dir=mnist_dir, progress=False)
  assert trained
  assert [m["diverged"] for m in summary["members"]] == [True, True]
  assert json.loads((workdir / "summary.json").read_text()) == summary
  metrics = (workdir / "metrics.jsonl").read_text()
  # Finished now, so a second call does not train (the metrics are not touched).
  again, trained = grids.run_grid(spec, workdir, members, data_dir=mnist_dir, progress=False)
  assert not trained and again == summary
  assert (workdir / "metrics.jsonl").read_text() == metrics
  row = runs.summarize_run(runs.load_run(workdir))
  assert row.selected is None


_READS: list[str] = []
FIELDS = dataclasses.fields(tasks.TaskSpec)


@dataclasses.dataclass(frozen=True)
class CountedSpec(tasks.TaskSpec):
  """A task counting its reads of the data."""

  def load_data(self, data_dir=None):
    _READS.append(self.activation)
    return super().load_data(data_dir)


@pytest.mark.e2e
def test_one_invocation_reads_each_data_set_once(tmp_path, mnist_dir):
  """A study's grids share one read of their data: the relu and gelu grids of tiny_mnist read
  it once, and train as a grid reading its own would (the same records)."""
  _READS.clear()
  spec = CountedSpec(**{f.name: getattr(tasks.get(TINY_MNIST), f.name) for f in FIELDS})
  made = [
    grids.Grid(a, spec.replace(activation=a), tmp_path / a, (1e-2,)) for a in ("relu", "gelu")
  ]
  grids.train_grids(made, seeds=[0], data_dir=mnist_dir, out=tmp_path)
  assert _READS == ["relu"]
  alone = tmp_path / "gelu_alone"
  gelu = spec.replace(activation="gelu")
  grids.run_grid(gelu, alone, Members([1e-2], [0]), data_dir=mnist_dir, progress=False)
  assert _READS == ["relu", "gelu"]
  assert (alone / "metrics.jsonl").read_text() == (tmp_path / "gelu" / "metrics.jsonl").read_text()


SCRIPT = """
import sys
sys.path[:0] = [{tests!r}, {repo!r}]
from pathlib import Path
from gelujax import tasks
from gelujax.study import grids
spec = tasks.get({task!r}).replace(activation="gelu", epochs=100000)
grid = grids.Grid("gelu", spec, Path({workdir!r}), (1e-2,))
grids.train_grids([grid], seeds=[0], data_dir={data_dir!r}, out=Path({out!r}))
"""


@pytest.mark.e2e
def test_a_grid_stopped_by_sigint_keeps_its_training_time(tmp_path, mnist_dir):
  (tmp_path / "timings.json").write_text(json.dumps({"gelu": 65.0}))
  workdir = tmp_path / "runs" / "gelu"
  cache = shutil.copytree(os.environ["JAX_COMPILATION_CACHE_DIR"], tmp_path / "cache")
  code = SCRIPT.format(
    tests=str(REPO / "tests"), repo=str(REPO), workdir=str(workdir), out=str(tmp_path),
    task=TINY_MNIST, data_dir=mnist_dir,
  )  # fmt: skip
  process = subprocess.Popen(
    [sys.executable, "-c", code], text=True,
    # A copy of the compilation cache (the signal may land while JAX writes an entry), which
    # holds the programs the test above compiled.
    env={**os.environ, "JAX_PLATFORMS": "cpu", "JAX_COMPILATION_CACHE_DIR": str(cache)},
    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
  )  # fmt: skip
  deadline = time.time() + 120
  metrics = workdir / "metrics.jsonl"
  while not (metrics.exists() and metrics.read_text().count("\n") >= 2):
    assert process.poll() is None and time.time() < deadline, process.communicate()
    time.sleep(0.2)
  process.send_signal(signal.SIGINT)
  _, stderr = process.communicate(timeout=120)
  # Python turns SIGINT into KeyboardInterrupt (or, mid-save, its subclass Interrupted); its
  # message is empty when the signal lands inside JAX (e.g. computing a compilation-cache key).
  assert process.returncode != 0 and re.search(
    r"^[\w.]*(KeyboardInterrupt|Interrupted)\b", stderr, re.M
  )
  timing = grids.read_timings(tmp_path)["gelu"]
  # The 65 s of the earlier invocation (written before machines were recorded), plus this one's.
  assert timing["seconds"] > 65.0
  assert len(timing["machines"]) == 1 and "jax " in timing["machines"][0]


@pytest.mark.e2e
def test_a_grid_that_fails_before_training_adds_no_time(tmp_path):
  (tmp_path / "timings.json").write_text(json.dumps({"gelu": {"seconds": 3.0, "machines": []}}))
  # The workdir holds another grid (seeds 0-2): refused before any training.
  workdir = finished_grid(tmp_path / "gelu")
  grid = grids.Grid("gelu", types.SimpleNamespace(epochs=3), workdir, (1e-3, 1e-4))
  with pytest.raises(ValueError, match="different grid"):
    grids.train_grids([grid], seeds=[0], data_dir=None, out=tmp_path)
  assert grids.read_timings(tmp_path) == {"gelu": {"seconds": 3.0, "machines": []}}
  assert host.describe_machine()  # The machine every recorded training names.
