"""Tests for gelujax.study (tables, figures and README from workdirs) and experiments/reproduce.py's
flags."""

import dataclasses
import json
import os
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np
import pytest

from gelujax import study, tasks, writers
from tests.fake_workdirs import constant, member, write_workdir

SEEDS = [0, 1, 2]
LRS = [1e-3, 1e-4]


def write_grid(out, name, activation, dropout, train_losses, test_errors):
  """A finished run; validation losses make lr 1e-3 best for every seed."""
  members = [
    member(
      seed,
      lr,
      train_loss=[1.0, 0.5, train_losses[i][seed]],
      validation_loss=[0.4, 0.2 + i, 0.3 + i],
      validation_error=constant(0.05),
      test_loss=constant(0.25),
      test_error=constant(test_errors[i][seed]),
    )
    for i, lr in enumerate(LRS)
    for seed in SEEDS
  ]
  write_workdir(out / "runs" / name, members, activation=activation, dropout=dropout)
  spec = types.SimpleNamespace(epochs=3, activation=activation, dropout=dropout)
  return study.Grid(name, spec, out / "runs" / name, tuple(LRS))


def mnist_grids(out):
  """gelu_tanh and relu without dropout, gelu_tanh with dropout 0.5 (lr 1e-3 selected)."""
  return [
    write_grid(
      out,
      "gelu_tanh",
      "gelu_tanh",
      0.0,
      [[0.010, 0.006, 0.008], [1, 1, 1]],
      [[0.02, 0.03, 0.04], [0.5, 0.5, 0.5]],
    ),
    write_grid(
      out,
      "relu",
      "relu",
      0.0,
      [[0.004, 0.002, 0.003], [1, 1, 1]],
      [[0.03, 0.03, 0.03], [0.5, 0.5, 0.5]],
    ),
    write_grid(
      out,
      "gelu_tanh_dropout0.5",
      "gelu_tanh",
      0.5,
      [[0.05, 0.04, 0.06], [1, 1, 1]],
      [[0.01, 0.01, 0.01], [0.5, 0.5, 0.5]],
    ),
  ]


def test_mnist_table_figure_findings_and_summary(tmp_path):
  out = tmp_path / "out"
  grids = mnist_grids(out)
  result = study.reproduce_runs("mnist", grids, out, seeds=SEEDS, data_dir=None)
  lines = (out / "table.md").read_text().splitlines()
  assert (out / "table.md").read_text() == result.table
  # Paper numbers (Fig. 2) beside ours: medians of the final train losses at lr 1e-3, and the
  # test error (%) at each member's best-validation epoch (epoch 2). lr 1e-3's best validation
  # losses (0.2) lie below lr 1e-4's (0.4) in every seed: p = 2 / C(6, 3) = 0.1, and Holm over
  # the file's 7 tests (2 + 1 rankings of final train loss, 2 of the best-epoch metrics at
  # dropout 0, 3 selections; the GELU-baseline pairs are those rankings' tests) gives 0.7.
  selection = (
    "0.001 over 0.0001: within the seed spread (p = 0.1, Holm 0.7, no seed overlaps, 2 tied "
    "values (mid-ranks))"
  )
  assert (
    f"| gelu_tanh | 0.001 | 0/3 | 0/3 | 0.008 | 0.008 | 0.008 ± 0.002 | 3 | 0.25 | {selection} |"
    in lines
  )
  assert (
    f"| relu | 0.001 | 0/3 | 0/3 | 0.007 | 0.003 | 0.003 ± 0.001 | 3 | 0.25 | {selection} |"
    in lines
  )
  assert "| relu | 0.0001 | 0/3 | 0/3 | 0.4 (validation_loss) | 1 |" in lines
  # Ranked within each dropout rate: relu's train losses (0.002-0.004) all lie below
  # gelu_tanh's (0.006-0.010): the smallest p of 3 seeds a side, 0.1, not below 0.05.
  dropout_0 = lines.index("### Dropout 0, selected lr")
  assert lines[dropout_0 + 4 : dropout_0 + 6] == [
    "| final train log loss (nats) | 1 | relu | 0.003 | 0.002–0.004 |  |",
    "|  | 2 | gelu_tanh | 0.008 | 0.006–0.01 | within the seed spread (p = 0.1, Holm 0.7, no "
    "seed overlaps) |",
  ]
  assert "### Dropout 0.5, selected lr" in lines
  summary = json.loads((out / "summary.json").read_text())
  assert summary["report"]["metric"] == "final.train_loss"
  assert [r["run"] for r in summary["rows"]] == [g.name for g in grids]
  assert summary["rows"][0]["selected"]["metrics"]["final.train_loss"]["median"] == 0.008
  assert summary["settings"]["seeds"] == SEEDS and summary["settings"]["epochs"] == 3
  assert summary["settings"]["dropout_rates"] == [0.0, 0.5]
  # Every test of the README is in the summary, each with its Holm-adjusted p over all.
  tests = summary["tests"]
  assert len(tests) == len({(t["scope"], t["metric"], t["a"], t["b"]) for t in tests}) == 7
  assert [t["holm"] for t in tests if t["p"] == pytest.approx(0.1)] == pytest.approx([0.7] * 4)
  findings = summary["findings"]
  assert findings["Tests"] == [
    f"- Tests: 0 of the {len(tests)} rank-sum tests of this README are beyond the seed spread "
    "after Holm's correction; 0 more have p < 0.05 before correction only. With 3 seeds a side "
    f"the smallest possible p is 0.1, and {len(tests)} x 0.1 >= 0.05: no test can pass the "
    "correction."
  ]
  paper = findings["The paper's claims"]
  assert paper[2] == (
    "- Paper [dropout 0, selected lr], final train log loss (nats): Fig. 2 has gelu_tanh below "
    "relu (its values: 0.008 vs 0.007); here gelu_tanh 0.008 vs relu 0.003: not reproduced, "
    "opposite order, within the seed spread (p = 0.1, Holm 0.7, no seed overlaps)."
  )
  assert result.findings == findings
  png = out / "loss_curves.png"
  assert png.read_bytes()[:4] == b"\x89PNG"
  assert any(f.startswith("loss_curves.png") for f in result.files)


def test_autoencoder_figure_has_a_panel_per_lr(tmp_path, monkeypatch):
  out = tmp_path / "ae"
  members = [
    member(seed, lr, train_loss=[0.03, 0.02, 0.01], test_loss=[0.04, 0.03, 0.02 + lr])
    for lr in LRS
    for seed in SEEDS
  ]
  workdir = write_workdir(
    out / "runs" / "elu",
    members,
    activation="elu",
    task="mnist_ae",
    select_metric="validation_loss",
  )
  grid = study.Grid("elu", types.SimpleNamespace(epochs=3), workdir, tuple(LRS))
  figures = []
  monkeypatch.setattr(study.plots, "save_figure", lambda fig, path: figures.append(fig) or path)
  table = study.reproduce_runs("mnist_ae", [grid], out, seeds=SEEDS, data_dir=None).table
  (fig,) = figures
  assert [ax.get_title() for ax in fig.axes] == ["learning rate 0.001", "learning rate 0.0001"]
  assert all(len(ax.lines) == 2 for ax in fig.axes)  # train and test MSE
  # The paper's numbers are for lr 1e-3: the table compares there, though selection on the
  # best test loss (no validation split) would pick lr 1e-4 (0.0201 < 0.021).
  assert "final test MSE, median over seeds at lr 0.001 (the paper's)" in table
  assert "| elu | 0.001 | 0/3 | 0/3 | 0.006 | 0.021 | 0.021 ± 0 |" in table
  assert "| elu | 0.0001 (selected) | 0/3 | 0/3 | 0.0201 (test_loss) | 0.0201 |" in table
  assert "retrained" not in table
  assert "The rows above are at the paper's lr 0.001" in table


def test_deviations_compare_the_runs_spec_with_the_paper_spec():
  paper = tasks.get("mnist")
  ours = writers.jsonable(
    dataclasses.asdict(paper.replace(dataset="fashion_mnist", epochs=2, batch_size=64))
  )
  deviations = study.list_deviations(
    "mnist",
    paper,
    ours,
    seeds=[0, 1],
    learning_rates=[1e-3],
    activations=["gelu", "relu", "elu"],
    dropout_rates=[0.0],
    noise=False,
  )
  assert deviations == [
    "Dataset: fashion_mnist instead of the paper's mnist.",
    "batch_size: 64 instead of the paper's 128.",
    "epochs: 2 instead of the paper's 50.",
    "(choice) Evaluations per epoch: 1 instead of the 3 of the authors' script (the paper "
    "states none); best-epoch values are picked among these evaluations.",
    "Runs per setting: 2 (seeds [0, 1]) instead of 5.",
    "Learning rates: [0.001] instead of the paper's [0.001, 0.0001, 1e-05].",
    "Dropout rates: [0.0] instead of [0.0, 0.5].",
    "Activations of the paper not run: gelu_tanh.",
    "Activations added that the paper reports no numbers for: gelu (the paper's GELU is "
    "`gelu_tanh`; `gelu` is the exact erf form).",
  ]
  same = study.list_deviations(
    "mnist",
    paper,
    writers.jsonable(dataclasses.asdict(paper.replace(evals_per_epoch=3))),
    seeds=range(5),
    learning_rates=paper.learning_rates,
    activations=["gelu_tanh", "relu", "elu"],
    dropout_rates=[0.0, 0.5],
    noise=False,
  )
  assert same == ["evals_per_epoch: 3 instead of the paper's 1."]


def test_grid_names_suffix_only_other_dropout_rates():
  spec = types.SimpleNamespace(dropout=0.0, replace=lambda **kw: types.SimpleNamespace(**kw))
  grids = study.make_grids(spec, ["gelu", "relu"], [0.0, 0.5], [1e-3], Path("/o"))
  assert [g.name for g in grids] == ["gelu", "relu", "gelu_dropout0.5", "relu_dropout0.5"]
  assert [g.spec.dropout for g in grids] == [0.0, 0.0, 0.5, 0.5]
  assert str(grids[2].workdir) == "/o/runs/gelu_dropout0.5"


def test_cifar10_table_reports_the_runs_retrained_at_the_selected_lr(tmp_path):
  out = tmp_path / "cifar10"
  # Selection on validation picks lr 1e-3 (validation 0.2 < 1.2) for gelu_tanh.
  grid = write_grid(
    out, "gelu_tanh", "gelu_tanh", 0.5, [[0.1] * 3, [0.1] * 3], [[0.5] * 3, [0.5] * 3]
  )
  spec = tasks.get("cifar10").replace(activation="gelu_tanh", epochs=3)
  grid = dataclasses.replace(grid, spec=spec)
  # The retrained run exists finished, at that lr only, without a validation split.
  retrained = [
    member(
      seed, 1e-3, train_loss=constant(0.1), test_loss=constant(0.3), test_error=[0.2, 0.1, error]
    )
    for seed, error in zip(SEEDS, (0.08, 0.0789, 0.07), strict=True)
  ]
  write_workdir(
    out / "runs" / "gelu_tanh_train_on_all",
    retrained,
    activation="gelu_tanh",
    dropout=0.5,
    task="cifar10",
    dataset="cifar10",
  )
  table = study.reproduce_runs("cifar10", [grid], out, seeds=SEEDS, data_dir=None).table
  # Final test errors 8, 7.89, 7 (%) -> median 7.89, beside the paper's 7.89.
  assert "| gelu_tanh | 0.001 | 0/3 | 0/3 | 7.89 | 7.89 | 7.63 ± 0.55 |" in table
  assert "| gelu_tanh | 0.0001 | 0/3 | 0/3 | 0.4 (validation_loss) |" in table
  assert table.startswith(
    "# cifar10: test error (%), median over seeds at the lr selected on validation_loss"
  )
  summary = json.loads((out / "summary.json").read_text())
  assert summary["rows"][0]["run"] == "gelu_tanh"
  assert summary["selection_rows"][0]["selected"]["learning_rate"] == 1e-3


def test_readme_records_what_ran(tmp_path):
  # relu's entry is in the format written before machines were recorded: bare seconds.
  timings = {"gelu": {"seconds": 65.4, "machines": ["box A", "box B"]}, "relu": 12.0}
  timings |= {"elu": {"seconds": 3.0, "machines": ["box A", "box B"]}}
  (tmp_path / "timings.json").write_text(json.dumps(timings))
  study.write_readme(
    tmp_path,
    title="GELU paper reproduction: mnist on fashion_mnist",
    command="python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --epochs=3",
    settings=["Seeds: 0, 1"],
    trained=False,
    deviations=[],
    files=["table.md: the table below"],
    sections={"Tests": ["- Tests: 0 of the 0 rank-sum tests."]},
    table="# mnist: table\n\n| run |\n|---|\n",
  )
  text = (tmp_path / "README.md").read_text()
  lines = text.splitlines()
  assert lines[0] == "# GELU paper reproduction: mnist on fashion_mnist"
  assert "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --epochs=3" in lines
  # The render command keeps what finds the result (task, dataset), not what trains it.
  assert "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --render" in lines
  assert "- Seeds: 0, 1" in lines
  written = next(line for line in lines if line.startswith("- Written "))
  assert "by an invocation that rendered without training, on " in written
  assert "devices: " in written and "cores" in written and "jax " in written
  assert (
    "- Training time per run (summed over the invocations that trained it): gelu 65 s, "
    "relu 12 s, elu 3 s." in lines
  )
  trained_on = lines.index("- Trained on:")
  assert lines[trained_on + 1 : trained_on + 3] == [
    "  - gelu, elu: box A | then | box B",
    "  - relu: not recorded (trained before machines were recorded)",
  ]
  deviations = lines.index("## Deviations from the paper's protocol")
  assert lines[deviations + 2] == "- None."
  findings = lines.index("## Findings")
  tests = ["### Tests", "", "- Tests: 0 of the 0 rank-sum tests."]
  assert lines[findings + 4 : findings + 7] == tests
  assert lines[-4:] == ["## mnist: table", "", "| run |", "|---|"]


def test_reproduce_command_leaves_defaults_out(tmp_path):
  paper = tasks.get("mnist")
  settings = {
    "task": "mnist",
    "dataset": "fashion_mnist",
    "epochs": 50,
    "activations": list(study.DEFAULT_ACTIVATIONS),
    "seeds": [0, 1, 2, 3, 4],
    "learning_rates": [1e-3, 1e-4, 1e-5],
    "dropout_rates": [0.0, 0.5],
    "spec": {"data_options": {}},
  }
  root = tmp_path
  out = root / "results" / "fashion_mnist" / "mnist"
  command = study.reproduce_command(settings, paper, out=out, root=root)
  assert command == "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist"
  settings |= {"epochs": 2, "activations": ["relu"], "seeds": [7], "learning_rates": [1e-3]}
  command = study.reproduce_command(settings, paper, out=root / "elsewhere", root=root)
  assert command == (
    "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --epochs=2 "
    "--activations=relu --seeds=7, --learning_rates=0.001 --out=elsewhere"
  )
  assert study.render_command(command) == (
    "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --out=elsewhere --render"
  )
  settings |= {"task": "mnist_noise", "dropout_rates": [0.0], "seeds": [0, 1, 2]}
  assert "--seeds=3 " in study.reproduce_command(settings, paper, out=out, root=root)


def snapshot(folder):
  """Every file under ``folder`` (path -> bytes)."""
  return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_render_trains_nothing_and_keeps_the_runs_files(tmp_path, monkeypatch):
  root = tmp_path
  out = root / "results" / "fashion_mnist" / "mnist"
  mnist_grids(out)
  runs = snapshot(out / "runs")

  def no_training(*args, **kwargs):
    raise AssertionError("--render trained")

  monkeypatch.setattr(study.sweep, "run_grid", no_training)
  (root / "README.md").write_text(
    f"# x\n\n{study.OVERVIEW_BEGIN}\nold\n{study.OVERVIEW_END}\nend\n"
  )
  study.reproduce("mnist", root=root, dataset="fashion_mnist", render=True)
  assert snapshot(out / "runs") == runs
  readme = (out / "README.md").read_text()
  # The settings come from the runs' files: 3 epochs, seeds 0-2, lrs 1e-3 and 1e-4.
  assert (
    "python experiments/reproduce.py --task=mnist --dataset=fashion_mnist --epochs=3 "
    "--activations=gelu_tanh,relu --seeds=3 --learning_rates=0.001,0.0001" in readme
  )
  assert "- Dropout rates: 0, 0.5" in readme
  assert "rendered without training" in readme
  # The top-level README's overview is rewritten from the result's summary, nothing else.
  top = (root / "README.md").read_text()
  assert top.startswith(f"# x\n\n{study.OVERVIEW_BEGIN}\n- [`results/fashion_mnist/mnist/`]")
  assert top.endswith(f"{study.OVERVIEW_END}\nend\n")
  summary = json.loads((out / "summary.json").read_text())
  assert "  " + summary["findings"]["Tests"][0] in top.splitlines()
  # Rendered again: the same findings and tables.
  study.reproduce("mnist", root=root, dataset="fashion_mnist", render=True)
  assert json.loads((out / "summary.json").read_text()) == summary
  assert snapshot(out / "runs") == runs


@pytest.mark.parametrize(
  ("options", "message"),
  [
    ({"seeds": ["2"]}, "--render reads every setting from the runs' files"),
    ({"epochs": 3}, "leave out --epochs"),
    ({}, "holds no runs to render"),
  ],
)
def test_render_refuses_settings_and_empty_results(tmp_path, options, message):
  with pytest.raises(ValueError, match=message):
    study.reproduce("mnist", root=tmp_path, render=True, **options)


# ------------------------------------------------------------------ end to end, real trainer

REPO = Path(__file__).resolve().parent.parent


def write_idx(path, array):
  """An uncompressed IDX file: zero, zero, dtype 0x08 (ubyte), rank, big-endian dims, data."""
  array = np.asarray(array, np.uint8)
  header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
    int(d).to_bytes(4, "big") for d in array.shape
  )
  path.write_bytes(header + array.tobytes())


def write_tiny_mnist(folder, n_train, n_test):
  """MNIST-format files whose class is the brightness of one 7x7 block (learnable fast)."""
  rng = np.random.default_rng(0)
  for prefix, n in (("train", n_train), ("t10k", n_test)):
    labels = rng.integers(0, 10, n)
    images = rng.integers(0, 60, (n, 28, 28))
    for i, label in enumerate(labels):
      row, col = divmod(int(label), 4)
      images[i, 7 * row : 7 * row + 7, 7 * col : 7 * col + 7] += 190
    write_idx(folder / f"{prefix}-images-idx3-ubyte", images)
    write_idx(folder / f"{prefix}-labels-idx1-ubyte", labels)


def run_reproduce(*flags, cache, expect_success=True):
  """Runs experiments/reproduce.py in a fresh process; returns its stdout (or, with
  ``expect_success=False``, the CompletedProcess)."""
  env = {
    **os.environ,
    "JAX_PLATFORMS": "cpu",
    # This checkout's gelujax, whichever checkout the package is installed from.
    "PYTHONPATH": str(REPO),
    # Later invocations re-use the compilations of earlier ones.
    "JAX_COMPILATION_CACHE_DIR": str(cache),
    "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
    "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0",
  }
  result = subprocess.run(
    [sys.executable, "experiments/reproduce.py", *flags],
    cwd=REPO,
    env=env,
    capture_output=True,
    text=True,
    timeout=300,
  )
  if not expect_success:
    return result
  assert result.returncode == 0, result.stderr[-3000:]
  return result.stdout


@pytest.mark.parametrize(
  ("flag", "message"),
  [
    ("--task=no_such", "no_such"),
    ("--activations=gelu,swish", "--activations 'swish' is not valid for task 'tiny_mnist'"),
    ("--dropout_rates=0,1.5", "--dropout_rates 1.5 is not valid for task 'tiny_mnist'"),
    ("--dataset=cifar10", "--dataset 'cifar10' is not valid for task 'tiny_mnist'"),
    ("--seeds=0", "--seeds '0' is a count"),
    ("--render", "--render: "),
  ],
)
def test_bad_flags_fail_in_one_line_and_write_nothing(tmp_path, flag, message):
  out = tmp_path / "out"
  flags = ["--task=tiny_mnist", flag] if not flag.startswith("--task") else [flag]
  result = run_reproduce(*flags, f"--out={out}", cache=tmp_path / "cache", expect_success=False)
  assert result.returncode == 1
  assert result.stderr.startswith("reproduce.py: error: ") and result.stderr.count("\n") == 1
  assert message in result.stderr
  assert not out.exists()


def read_metrics(workdir):
  return (workdir / "metrics.jsonl").read_text().splitlines()


@pytest.mark.slow
def test_tiny_mnist_end_to_end_resume_and_noise(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  # The MNIST loader keeps the first 5,000 train images for validation.
  write_tiny_mnist(data, n_train=5_064, n_test=100)
  out = tmp_path / "results" / "tiny_mnist"
  workdir = out / "runs" / "gelu"
  flags = [
    "--task=tiny_mnist",
    f"--data_dir={data}",
    "--activations=gelu",
    "--seeds=2",
    "--learning_rates=3e-3,1e-3",
  ]

  # A reproduction stopped after one of tiny_mnist's two epochs...
  stdout = run_reproduce(*flags, f"--out={out}", "--epochs=1", cache=tmp_path / "cache")
  assert "[1/1] gelu: trained in" in stdout
  first_epoch = read_metrics(workdir)
  assert len(first_epoch) == 4  # 4 members x 1 evaluation

  # ... resumes from its checkpoint: the first epoch's records stay, the second is added.
  stdout = run_reproduce(*flags, f"--out={out}", cache=tmp_path / "cache")
  assert "[1/1] gelu: trained in" in stdout
  records = [json.loads(line) for line in read_metrics(workdir)]
  assert read_metrics(workdir)[:4] == first_epoch
  assert [r["epoch"] for r in records] == [1.0] * 4 + [2.0] * 4
  summary = json.loads((workdir / "summary.json").read_text())
  assert summary["epochs"] == 2
  assert [(m["learning_rate"], m["seed"]) for m in summary["members"]] == [
    (3e-3, 0),
    (3e-3, 1),
    (1e-3, 0),
    (1e-3, 1),
  ]

  # The table: the lr with the lower median best validation loss, and its test error.
  best = {
    lr: np.median(
      [m["best"]["validation_loss"] for m in summary["members"] if m["learning_rate"] == lr]
    )
    for lr in (3e-3, 1e-3)
  }
  selected = min(best, key=best.get)
  errors = [m["best"]["test_error"] for m in summary["members"] if m["learning_rate"] == selected]
  row = json.loads((out / "summary.json").read_text())["rows"][0]
  assert row["run"] == "gelu"
  assert row["selected"]["learning_rate"] == selected
  assert row["selected"]["metrics"]["best.test_error"]["median"] == pytest.approx(np.median(errors))
  assert f"| gelu | {selected:g} | 0/2 |" in (out / "table.md").read_text()
  readme = (out / "README.md").read_text()
  # The command that reproduces it, from the runs' files (the data directory is the machine's;
  # 2 seeds are tiny_mnist's default).
  assert (
    "python experiments/reproduce.py --task=tiny_mnist --activations=gelu "
    f"--learning_rates=0.003,0.001 --out={out}" in readme
  )
  assert "- Seeds: 0, 1" in readme
  assert "Learning rates: [0.003, 0.001] instead of the paper's [0.001]." in readme
  assert "Activations of the paper not run: gelu_tanh, relu, elu." in readme
  assert (out / "loss_curves.png").stat().st_size > 10_000

  # Invoked again, it trains nothing and changes no metrics; so does --render, on its own.
  before = read_metrics(workdir)
  stdout = run_reproduce(*flags, f"--out={out}", cache=tmp_path / "cache")
  assert "[1/1] gelu: finished earlier: skipped" in stdout
  assert "trained in" not in stdout
  assert read_metrics(workdir) == before
  table = (out / "table.md").read_text()
  stdout = run_reproduce("--task=tiny_mnist", f"--out={out}", "--render", cache=tmp_path / "cache")
  assert "[1/1]" not in stdout and (out / "table.md").read_text() == table
  assert read_metrics(workdir) == before

  # The noise experiment re-uses the finished no-dropout classifiers beside it.
  noise_out = tmp_path / "results" / "tiny_mnist_noise"
  stdout = run_reproduce(
    *flags, f"--out={noise_out}", "--task=tiny_mnist_noise", cache=tmp_path / "cache"
  )
  assert "[1/1] gelu: finished earlier: skipped" in stdout
  assert not (noise_out / "runs").exists()
  result = json.loads((noise_out / "noise" / "gelu.json").read_text())
  assert result["learning_rate"] == selected
  assert result["seeds"] == [0, 1]
  assert result["levels"] == pytest.approx(np.linspace(0, 3, 20))
  accuracy = np.asarray(result["accuracy"])
  # At a = 0 the evaluation is the plain test evaluation of the final checkpoint.
  final_errors = [
    m["final"]["test_error"] for m in summary["members"] if m["learning_rate"] == selected
  ]
  np.testing.assert_allclose(accuracy[:, 0], 1 - np.asarray(final_errors), atol=1e-6)
  # Pixel noise of half-width 3 swamps this data's signal (a block 0.75 brighter).
  assert np.all(accuracy[:, -1] < accuracy[:, 0])
  noise_table = (noise_out / "table.md").read_text()
  assert "| gelu | " in noise_table
  # One run: ranked first under each of the four noise metrics, with nothing to test against.
  assert noise_table.count("| 1 | gelu | ") == 4
  assert "| test accuracy a=3 | 1 | gelu | " in noise_table
  assert (noise_out / "noise_robustness.png").stat().st_size > 10_000
  # Re-rendered from noise/gelu.json and the classifier's files alone.
  run_reproduce("--task=tiny_mnist_noise", f"--out={noise_out}", "--render", cache=tmp_path / "c")
  assert (noise_out / "table.md").read_text() == noise_table


@pytest.mark.parametrize(
  ("error", "recorded"), [(KeyboardInterrupt, True), (SystemExit, True), (ValueError, False)]
)
def test_an_interrupted_grid_keeps_its_training_time(tmp_path, monkeypatch, error, recorded):
  (tmp_path / "timings.json").write_text(json.dumps({"gelu": 65.0}))

  def interrupted(*args, **kwargs):
    time.sleep(0.01)
    raise error("stop")

  monkeypatch.setattr(study.sweep, "run_grid", interrupted)
  grid = study.Grid("gelu", types.SimpleNamespace(epochs=3), tmp_path / "gelu", (1e-3,))
  with pytest.raises(error):
    study.train_grids([grid], seeds=[0], data_dir=None, out=tmp_path)
  gelu = study.read_timings(tmp_path)["gelu"]
  # Interrupted: the seconds of this invocation and its machine are added (a failure trained
  # nothing).
  assert (gelu["seconds"] > 65.0) == recorded and gelu["seconds"] >= 65.0
  assert gelu["machines"] == ([devices.describe_machine()] if recorded else [])
