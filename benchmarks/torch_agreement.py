"""Do gelujax's committed MNIST-classifier runs agree with an independent PyTorch training?

For each run named on the command line (a workdir of ``results/<dataset>/mnist/runs/``), this
trains the same model in PyTorch (`torch_reference`: 784 -> 8x[128, activation, dropout] -> 10,
unit-norm incoming weights, zero biases, Adam, batch 128) for the same seeds at the run's
selected learning rate, for the first ``--epochs`` of the epochs the run trained, and compares
the test error and test log loss after each of those epochs with the run's ``metrics.jsonl``.

What the two share, and what they do not: both read the data through `gelujax.data.load` (the
same 55k/5k/10k split and the same uint8 images, scaled to [0, 1]), the learning rate is the one
`gelujax.study.runs.select_learning_rate` selected, and the comparison is
`gelujax.study.stats.rank_test`.
The model, its initialisation, the optimizer, the batch order, the dropout masks and the
evaluation are PyTorch's own, with its own random numbers. So the per-seed curves differ, and
the question is whether the two implementations' distributions over seeds differ: each epoch's
report gives both medians and seed ranges and the exact rank-sum test over seeds.

Run: python benchmarks/torch_agreement.py                      (3 runs, 10 epochs, 5 seeds)
     python benchmarks/torch_agreement.py --runs=relu --epochs=2 --seeds=2 --output-dir=/tmp/x
     python benchmarks/torch_agreement.py --render   (rewrite the .md from the .json, no training)
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from gelujax import data
from gelujax import workdir as workdirs
from gelujax.host import describe_machine
from gelujax.study import runs, stats

ROOT = Path(__file__).resolve().parents[1]
RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEFAULT_RUNS_DIR = ROOT / "results" / "fashion_mnist" / "mnist" / "runs"
# ReLU under dropout 0.5 is the committed run that stands out; GELU under dropout and ReLU
# without it are the controls.
DEFAULT_RUNS = ("relu_dropout0.5", "gelu_dropout0.5", "relu")
METRICS = ("test_error", "test_loss")


def read_gelujax(workdir: Path, epochs: int, seeds: int) -> dict:
  """The run's config, its selected learning rate and per-seed test metrics for epochs 1..E."""
  config = workdirs.read_json(workdir / workdirs.CONFIG_FILE)
  if config["task"] != "mnist":
    raise ValueError(f"{workdir} is a {config['task']!r} run; this check trains mnist runs only.")
  lr = runs.select_learning_rate(runs.load_run(workdir))
  records = [
    r for r in workdirs.read_metrics(workdir)
    if r["learning_rate"] == lr and r["seed"] < seeds and r["epoch"] <= epochs
  ]  # fmt: skip
  curves = {m: np.full((epochs, seeds), np.nan) for m in METRICS}
  for r in records:
    if float(r["epoch"]).is_integer():
      for m in METRICS:
        curves[m][int(r["epoch"]) - 1, r["seed"]] = np.nan if r[m] is None else r[m]
  if any(np.isnan(c).any() for c in curves.values()):
    raise ValueError(
      f"{workdir}/metrics.jsonl lacks some of seeds 0..{seeds - 1} or epochs 1..{epochs} at lr "
      f"{lr:g}; pass fewer --seeds or --epochs."
    )
  return {"config": config, "learning_rate": lr, "curves": curves}


def train_torch(config: dict, lr: float, splits, epochs: int, seeds: int) -> dict:
  """Per-seed test metrics after each epoch of PyTorch training, and the seconds it took."""
  import torch  # Here, not at the top: --render and a bad flag need no PyTorch (seconds).
  import torch_reference

  spec = config["spec"]
  train, test = splits["train"], splits["test"]
  x_train = torch.from_numpy(train["inputs"].reshape(len(train["inputs"]), -1) / np.float32(255))
  y_train = torch.from_numpy(train["targets"].astype(np.int64))
  x_test = torch.from_numpy(test["inputs"].reshape(len(test["inputs"]), -1) / np.float32(255))
  y_test = torch.from_numpy(test["targets"].astype(np.int64))
  curves = {m: np.zeros((epochs, seeds)) for m in METRICS}
  start = time.perf_counter()
  for seed in range(seeds):
    model, optimizer = torch_reference.make_model_and_optimizer(
      x_train.shape[1], [128] * 8, 10, spec["dropout"], seed=seed, lr=lr,
      activation=config["activation"],
    )  # fmt: skip
    for epoch in range(epochs):
      torch_reference.train_epoch_tuned(model, optimizer, x_train, y_train, spec["batch_size"])
      loss, error = torch_reference.evaluate(model, x_test, y_test)
      curves["test_loss"][epoch, seed], curves["test_error"][epoch, seed] = loss, error
    print(f"  torch seed {seed}: test error {error:.4f}, test loss {loss:.4f}", flush=True)
  return {"curves": curves, "seconds": time.perf_counter() - start}


def compare(ours: np.ndarray, theirs: np.ndarray) -> list[dict]:
  """Per epoch: both medians, both seed ranges and the rank-sum p-value between them."""
  return [
    {
      "epoch": e + 1,
      "gelujax_median": float(np.median(ours[e])),
      "gelujax_range": [float(ours[e].min()), float(ours[e].max())],
      "torch_median": float(np.median(theirs[e])),
      "torch_range": [float(theirs[e].min()), float(theirs[e].max())],
      "p": stats.rank_test(ours[e], theirs[e]),
    }
    for e in range(len(ours))
  ]


def run_epochs(run: dict) -> int:
  """How many epochs the gelujax run trained (its summary.json, as committed)."""
  return workdirs.read_json(ROOT / run["workdir"] / workdirs.SUMMARY_FILE)["epochs"]


def format_report(result: dict, *, rendered: bool = False) -> str:
  """The Markdown report of a result (the .json this script writes); ``rendered``: rewritten
  from that .json by --render."""
  epochs, seeds = result["epochs"], result["seeds"]
  trained = sorted({run_epochs(run) for run in result["runs"].values()})
  note = (
    "Report rewritten from torch_agreement.json by `python benchmarks/torch_agreement.py "
    "--render` (nothing trained)."
  )
  lines = [
    "# Agreement of gelujax's MNIST-classifier runs with PyTorch",
    "",
    f"Command: `{result['command']}`  ",
    f"Machine: {result['machine']}  ",
    f"Versions: {result['versions']}  ",
    f"Date: {result['date']}",
    *(["", note] if rendered else []),
    "",
    f"What is compared: epochs 1–{epochs} of the {' or '.join(map(str, trained))} epochs that "
    f"each committed gelujax run trained (its `metrics.jsonl`), seeds 0–{seeds - 1}, at the "
    "run's selected learning rate, against the same model trained for those epochs in PyTorch "
    "(`benchmarks/torch_reference.py`). The two share the data loading (`gelujax.data.load`: "
    "the same 55k/5k/10k split and pixels scaled to [0, 1]), the learning rate (selected by "
    "`gelujax.study.runs.select_learning_rate`) and the statistics "
    "(`gelujax.study.stats.rank_test`); the "
    "model code, initial weights, optimizer, batch order, dropout masks and evaluation are "
    "PyTorch's own. Per epoch: the median over seeds and the seed range of each, and the exact "
    "two-sided rank-sum p-value between the two sets of seeds (smallest possible with "
    f"{seeds} seeds a side: {2 / math.comb(2 * seeds, seeds):.2g}). Test error in %. Nothing "
    f"after epoch {epochs} is compared.",
  ]
  tests = [row["p"] for run in result["runs"].values() for m in METRICS for row in run[m]]
  last = [
    f"{name} {m} p = {run[m][-1]['p']:.2g}" for name, run in result["runs"].items() for m in METRICS
  ]
  lines += [
    "",
    f"Summary: {sum(p < 0.05 for p in tests)} of {len(tests)} epoch-and-metric comparisons have "
    f"p < 0.05 before any correction for their number (chance alone gives about "
    f"{0.05 * len(tests):.0f}; comparisons at consecutive epochs share seeds, so they are not "
    f"independent). At epoch {epochs}: {'; '.join(last)}.",
  ]
  for name, run in result["runs"].items():
    lines += [
      "",
      f"## {name}: {run['activation']}, dropout {run['dropout']:g}, lr {run['learning_rate']:g}",
      "",
      f"gelujax workdir: `{run['workdir']}` ({run_epochs(run)} epochs trained, the first "
      f"{epochs} compared); PyTorch trained in {run['torch_seconds']:.0f} s.",
      "",
      "| epoch | metric | gelujax median (range) | PyTorch median (range) | p |",
      "|---:|---|---|---|---:|",
    ]
    for metric in METRICS:
      scale = 100 if metric == "test_error" else 1
      for row in run[metric]:
        lo, hi = (scale * v for v in row["gelujax_range"])
        tlo, thi = (scale * v for v in row["torch_range"])
        lines.append(
          f"| {row['epoch']} | {metric} | {scale * row['gelujax_median']:.4g} "
          f"({lo:.4g}–{hi:.4g}) | {scale * row['torch_median']:.4g} ({tlo:.4g}–{thi:.4g}) | "
          f"{row['p']:.2g} |"
        )
  return "\n".join(lines) + "\n"


def write_report(result: dict, out: Path) -> None:
  out.mkdir(parents=True, exist_ok=True)
  (out / "torch_agreement.json").write_text(json.dumps(result, indent=1) + "\n")
  (out / "torch_agreement.md").write_text(format_report(result))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--runs", default=",".join(DEFAULT_RUNS), help="run names, comma separated")
  parser.add_argument("--runs_dir", type=Path, default=DEFAULT_RUNS_DIR)
  parser.add_argument("--epochs", type=int, default=10)
  parser.add_argument("--seeds", type=int, default=5)
  parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
  parser.add_argument(
    "--render", action="store_true", help="rewrite the .md from the .json in --output-dir only"
  )
  args = parser.parse_args()
  if args.render:
    result = workdirs.read_json(args.output_dir / "torch_agreement.json")
    (args.output_dir / "torch_agreement.md").write_text(format_report(result, rendered=True))
    return
  if args.epochs < 1 or args.seeds < 1:
    parser.error(f"--epochs {args.epochs} and --seeds {args.seeds} must both be at least 1.")
  names = [n for n in args.runs.split(",") if n]
  gelujax_runs = {}
  for name in names:
    workdir = args.runs_dir / name
    if not (workdir / "config.json").exists():
      parser.error(f"--runs names {name!r}, but {workdir} holds no run (no config.json).")
    gelujax_runs[name] = read_gelujax(workdir, args.epochs, args.seeds)
  import torch

  torch.set_num_threads(1)  # The agreement, not the speed, is measured; leaves a core free.
  datasets = {r["config"]["dataset"] for r in gelujax_runs.values()}
  splits = {d: data.load(d) for d in datasets}
  result = {
    "command": "python benchmarks/torch_agreement.py" + "".join(f" {a}" for a in sys.argv[1:]),
    "machine": describe_machine(),
    "versions": f"python {sys.version.split()[0]}, torch {torch.__version__}",
    "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    "epochs": args.epochs,
    "seeds": args.seeds,
    "runs": {},
  }
  for name, ours in gelujax_runs.items():
    config, lr = ours["config"], ours["learning_rate"]
    print(f"{name}: PyTorch, {args.seeds} seeds x {args.epochs} epochs at lr {lr:g} ...")
    theirs = train_torch(config, lr, splits[config["dataset"]], args.epochs, args.seeds)
    run = {
      "workdir": os.path.relpath(args.runs_dir / name, ROOT),
      "activation": config["activation"],
      "dropout": config["spec"]["dropout"],
      "learning_rate": lr,
      "torch_seconds": theirs["seconds"],
    }
    for metric in METRICS:
      run[metric] = compare(ours["curves"][metric], theirs["curves"][metric])
    last = {m: run[m][-1] for m in METRICS}
    print(
      f"{name} at epoch {args.epochs}: test error gelujax "
      f"{last['test_error']['gelujax_median']:.4f} vs PyTorch "
      f"{last['test_error']['torch_median']:.4f} (p = {last['test_error']['p']:.2g})",
      flush=True,
    )
    result["runs"][name] = run
  write_report(result, args.output_dir)


if __name__ == "__main__":
  main()
