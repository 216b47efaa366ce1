"""The reproduce path of every task a machine may have no real data for, end to end on fixtures.

Twitter POS (whose real splits this project's machine has, outside the repository: a CI machine
may not), TIMIT, CIFAR-10 and CIFAR-100 are trained here with their real models, optimizers,
preprocessing and batch sizes on one batch of examples written in the real file formats, for one
epoch and one selection seed (the CIFAR networks narrowed or shortened to save minutes on a CPU:
CIFAR-10's nine convolutions at 16 and 32 channels, not 96 and 192; CIFAR-100's wide ResNet with
one block per group, not six: the same layers and code, repeated less; tests/test_export.py
lowers the full CIFAR-10 network), through the functions of ``gelujax.study`` that
``experiments/reproduce.py`` runs: selection grid -> trainer -> selected lr -> evaluation run (a
fresh seed for each member of the grid, at the selected lr; for CIFAR-10 the retrain on the whole
train file) -> verdicts, table, summary, figure.
"""

import json

import numpy as np
import pytest

from gelujax import tasks
from gelujax.paper import design
from gelujax.study import pipeline
from tests.test_data import write_cifar_batch, write_timit_split

# End to end (commands, processes, whole runs): the full suite runs it, the fast tier not.
pytestmark = pytest.mark.e2e

RNG = np.random.default_rng(5)
TAGS = "NOV^AD!,P"


def write_ark(path, tokens):
  """``tokens`` words with random tags, a blank line between tweets of 1-7 words."""
  lines, left = [], tokens
  while left:
    n = min(left, int(RNG.integers(1, 8)))
    lines += [f"w{RNG.integers(0, 12)}\t{TAGS[RNG.integers(0, len(TAGS))]}" for _ in range(n)]
    lines.append("")
    left -= n
  path.write_text("\n".join(lines), encoding="utf-8")


def write_twitter_pos(folder):
  for name, tokens in (("oct27.train", 40), ("oct27.dev", 20), ("oct27.test", 30)):
    write_ark(folder / name, tokens)
  return 30  # test examples: one window per token


def write_timit(folder):
  folder = folder / "timit"
  folder.mkdir()
  train = list(RNG.integers(1, 10, 64))  # a batch is 64 utterances
  for split, lengths in (("train", train), ("validation", [4, 6]), ("test", [6, 9, 2])):
    write_timit_split(folder / f"{split}.npz", lengths, seed=len(split))
  return 17  # test frames; padded frames must not count


def images(n):
  return RNG.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)


def write_cifar10(folder):
  folder = folder / "cifar-10-batches-py"
  folder.mkdir()
  for i in range(5):  # 105 images: 5 to validate on, then one batch of 100
    write_cifar_batch(folder / f"data_batch_{i + 1}", images(21), RNG.integers(0, 10, 21))
  write_cifar_batch(folder / "test_batch", images(10), RNG.integers(0, 10, 10))
  return 10


def write_cifar100(folder):
  folder = folder / "cifar-100-python"
  folder.mkdir()
  # 64 images, doubled by flips to one batch of 128.
  write_cifar_batch(folder / "train", images(64), RNG.integers(0, 100, 64), b"fine_labels")
  write_cifar_batch(folder / "test", images(10), RNG.integers(0, 100, 10), b"fine_labels")
  return 10


# task: (fixture writer, learning rates, data options the fixture needs, model options, the
# paper's number)
TASKS = {
  "twitter_pos": (write_twitter_pos, (1e-3, 1e-4), {}, {}, "12.57"),
  "timit": (write_timit, (1e-3, 1e-4), {}, {}, "29.3"),
  # The fixture has 105 train images, not 50,000: validate on 5 of them, not 5,000.
  "cifar10": (write_cifar10, (1e-3, 1e-4), {"validation_size": 5}, {"widths": (16, 32)}, "7.89"),
  "cifar100": (write_cifar100, (0.1,), {}, {"depth": 10}, "20.74"),
}


@pytest.mark.slow
@pytest.mark.parametrize("task", sorted(TASKS))
def test_paper_task_reproduces_end_to_end_on_fixtures(tmp_path, task):
  write, learning_rates, options, model_options, paper_number = TASKS[task]
  data_dir = tmp_path / "data"
  data_dir.mkdir()
  n_test = write(data_dir)
  spec = tasks.get(task).replace(epochs=1)
  spec = spec.replace(
    data_options={**spec.data_options, **options},
    model_options={**spec.model_options, **model_options},
  )
  out = tmp_path / "out"
  # Fresh evaluation seeds, where the task's design trains evaluation runs: as many as the
  # selection grid has members, so that an evaluation run on the same data (all but CIFAR-10's
  # retrain) loads the selection grid's compiled programs.
  evaluation_seeds = [1, 2][: len(learning_rates)] if design(task, 1).evaluation_seeds else []
  pipeline.reproduce(
    task,
    spec,
    out=out,
    root=tmp_path,
    activations=["gelu_tanh"],
    dropout_rates=[spec.dropout],
    learning_rates=learning_rates,
    seeds=[0],
    evaluation_seeds=evaluation_seeds,
    data_dir=str(data_dir),
  )
  table = (out / "table.md").read_text()
  summary = json.loads((out / "summary.json").read_text())
  (row,) = summary["rows"]
  selected = row["selected"]["learning_rate"]
  assert len(row["grid"]) == len(learning_rates)
  metrics = (out / "runs" / "gelu_tanh" / "metrics.jsonl").read_text().splitlines()
  assert len(metrics) == len(learning_rates)  # one epoch of each member
  shown = "gelu_tanh"
  if evaluation_seeds:
    # The evaluation run: the fresh seeds at the selected lr only (CIFAR-10: on all 105 images).
    shown = "gelu_tanh_eval"
    config = json.loads((out / "runs" / shown / "config.json").read_text())
    assert config["members"] == [{"seed": s, "learning_rate": selected} for s in evaluation_seeds]
    assert config["spec"]["data_options"].get("train_on_all", False) == (task == "cifar10")
    row = summary["evaluation_rows"][shown]
  line = next(line for line in table.splitlines() if line.startswith(f"| {shown} |"))
  cells = [cell.strip() for cell in line.split("|")[1:-1]]
  # run, lr, seeds, diverged, unstable, the paper's number, our median, ...
  assert cells[1] == f"{selected:g}"
  seeds = len(evaluation_seeds) or 1
  assert cells[3:6] == [f"0/{seeds}", f"0/{seeds}", paper_number]
  metric = row["selected"]["metrics"][summary["report"]["metric"]]
  assert len(metric["values"]) == seeds
  # A test error is a count of wrong test examples (TIMIT: frames) over their number.
  for value in metric["values"]:
    assert value * n_test == pytest.approx(round(value * n_test), abs=1e-4)
  error = metric["median"]
  assert error == pytest.approx(float(np.median(metric["values"])))
  assert f"{100 * error:.4g}" == cells[6]
  # The primary hypotheses wait for their baselines' runs.
  assert {v["seeds"] for v in summary["verdicts"]["primary"]} == {
    "not run: no relu run with dropout " + f"{spec.dropout:g}",
    "not run: no elu run with dropout " + f"{spec.dropout:g}",
  }
  assert (out / "loss_curves.png").read_bytes()[:4] == b"\x89PNG"
  assert "## Primary hypotheses" in (out / "README.md").read_text()
