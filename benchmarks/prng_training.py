"""Does the trainer's dropout hash train like threefry? The paper's dropout-0.5 grids, both ways.

The committed Fig. 2 runs with dropout 0.5 (``results/fashion_mnist/mnist/runs/<activation>_
dropout0.5``: 3 learning rates x 5 seeds x 50 epochs, dropout masks from the trainer's counter
hash) are trained again with ``--task=mnist(dropout_bits='threefry')``, the same command
otherwise, into ``benchmarks/results/prng_training/``. Every final-epoch metric of every learning
rate is then compared, hash against threefry, by the exact rank-sum test over the 5 seeds, with
Holm's correction over all the report's tests (`gelujax.study.stats`), each worded by one fixed
rule (:data:`OUTCOME_WORDS`). A sound hash gives no gap beyond the seed spread. Only the bits
differ: the initialisation, batch order and every other random draw are the same for a seed, so
the runs of one seed are paired, but the test treats them as independent samples (which is
conservative for equality).

Training resumes where it stopped (re-run the command); ``--render`` only rewrites the report.

Run: python benchmarks/prng_training.py   (about 35 minutes on 2 cores: two grids of 50 epochs)
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gelujax import host  # noqa: E402
from gelujax.study import runs, stats  # noqa: E402

RESULTS_DIR = Path(__file__).resolve().parent / "results"
HASH_RUNS = ROOT / "results" / "fashion_mnist" / "mnist" / "runs"
ACTIVATIONS = ("gelu", "relu")
METRICS = ("train_loss", "validation_loss", "validation_error", "test_loss", "test_error")
TASK = "--task=mnist(dropout_bits='threefry')"
# The one wording of each outcome of a test, by its Holm-adjusted and its unadjusted p-value.
OUTCOME_WORDS = {
  "beyond": "beyond the seed spread",
  "uncorrected": "p < 0.05 before correction only",
  "within": "within the seed spread",
}


@dataclasses.dataclass
class Test:
  """One exact rank-sum test of a metric's final values, hash seeds against threefry seeds."""

  scope: str
  metric: str
  values_a: list[float]
  values_b: list[float]
  p: float
  ties: int
  holm: float = 1.0

  @property
  def outcome(self) -> str:
    if self.holm < stats.ALPHA:
      return "beyond"
    return "uncorrected" if self.p < stats.ALPHA else "within"

  def verdict(self) -> str:
    """``"within the seed spread (p = 0.31, Holm 1, 1 tied value (mid-ranks))"``."""
    notes = [f"p = {self.p:.2g}", f"Holm {self.holm:.2g}"]
    a, b = self.values_a, self.values_b
    if max(a) < min(b) or min(a) > max(b):
      notes.append("no seed overlaps")
    if self.ties:
      notes.append(f"{self.ties} tied value{'s' if self.ties > 1 else ''} (mid-ranks)")
    return f"{OUTCOME_WORDS[self.outcome]} ({', '.join(notes)})"

  def to_json(self) -> dict:
    return {
      "scope": self.scope, "metric": self.metric, "a": "hash", "b": "threefry",
      "values_a": self.values_a, "values_b": self.values_b, "p": self.p, "holm": self.holm,
      "ties": self.ties, "outcome": self.outcome,
    }  # fmt: skip


def threefry_workdir(output_dir: Path, activation: str) -> Path:
  return output_dir / "prng_training" / f"{activation}_dropout0.5_threefry"


def train(activation: str, workdir: Path) -> None:
  """Trains (or resumes, or finds finished) the threefry grid of ``activation``."""
  hashed = json.loads((HASH_RUNS / f"{activation}_dropout0.5" / "config.json").read_text())
  command = [
    sys.executable, "experiments/train.py", TASK, "--dataset=fashion_mnist",
    f"--activation={activation}", "--dropout=0.5", f"--workdir={workdir}",
    f"--epochs={hashed['spec']['epochs']}",
  ]  # fmt: skip
  print(" ".join(command[1:]), flush=True)
  subprocess.run(command, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), check=True)
  config = json.loads((workdir / "config.json").read_text())
  theirs = {k: v for k, v in config["spec"].items() if k != "dropout_bits"}
  if theirs != hashed["spec"] or config["members"] != hashed["members"]:
    raise SystemExit(f"{workdir}: its config differs from the hash run's beyond dropout_bits.")


def is_finished(workdir: Path, activation: str) -> bool:
  """Whether ``workdir`` holds the threefry run trained for as many epochs as the hash run."""
  hashed = json.loads((HASH_RUNS / f"{activation}_dropout0.5" / "summary.json").read_text())
  summary = workdir / "summary.json"
  return summary.exists() and json.loads(summary.read_text())["epochs"] == hashed["epochs"]


def final_values(run: runs.Run, learning_rate: float, metric: str) -> list[float]:
  """Per-seed values of ``metric`` at the run's last epoch (seed order)."""
  last = max(r["epoch"] for r in run.records)
  rows = [r for r in run.records if r["epoch"] == last and r["learning_rate"] == learning_rate]
  return [r[metric] for r in sorted(rows, key=lambda r: r["seed"])]


def compare(output_dir: Path, activations: list[str]) -> dict:
  rows = []
  for activation in activations:
    hashed = runs.load_run(HASH_RUNS / f"{activation}_dropout0.5", "hash")
    threefry = runs.load_run(threefry_workdir(output_dir, activation), "threefry")
    for lr in hashed.learning_rates():
      for metric in METRICS:
        a, b = final_values(hashed, lr, metric), final_values(threefry, lr, metric)
        test = Test(
          f"{activation}, lr {lr:g}", metric, a, b, stats.rank_test(a, b), stats.tied_values(a, b)
        )
        rows.append((activation, lr, metric, test))
  tests = [test for *_, test in rows]
  for test, adjusted in zip(tests, stats.holm([t.p for t in tests]), strict=True):
    test.holm = adjusted
  return {"rows": rows, "tests": tests, "activations": activations}


def write_report(output_dir: Path, result: dict) -> None:
  tests = result["tests"]
  counts = {w: sum(t.outcome == o for t in tests) for o, w in OUTCOME_WORDS.items()}
  lines = [
    "# Dropout bits: the trainer's hash against threefry, trained",
    "",
    "Command: `python benchmarks/prng_training.py`  ",
    f"Machine (threefry runs): {host.describe_machine()}  ",
    f"Date: {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC",
    "",
    "Task `mnist` on Fashion-MNIST (Debian's `dataset-fashion-mnist`), dropout 0.5, 3 learning "
    "rates x 5 seeds x 50 epochs, the paper's Fig. 2 protocol. *hash*: the committed runs "
    "`results/fashion_mnist/mnist/runs/<activation>_dropout0.5` (the trainer's default bits; "
    "trained by the first version, on an Intel Xeon). *threefry*: the same command with "
    f"`{TASK}`, in `benchmarks/results/prng_training/` (trained here, with this version's "
    "XLA flags; the machine and flags change float32 rounding, not the distribution a seed "
    "samples from). Values are each seed's metric at epoch 50.",
    "",
    "Each row is the exact two-sided rank-sum test of the 5 seeds of each, Holm-adjusted over "
    f"all {len(tests)} tests of this report (`gelujax.study.stats`), each worded by its outcome: "
    + "; ".join(f"{w}: {n}" for w, n in counts.items())
    + ".",
    "",
  ]
  missing = [a for a in ACTIVATIONS if a not in result["activations"]]
  if missing:
    lines += [
      f"Not yet trained with threefry: {', '.join(missing)} (re-run the command to go on).",
      "",
    ]
  lines += [
    "| activation | lr | metric | hash median | threefry median | outcome |",
    "|---|---:|---|---:|---:|---|",
  ]
  for activation, lr, metric, test in result["rows"]:
    hashed = stats.Stats.of(test.values_a).median
    threefry = stats.Stats.of(test.values_b).median
    lines.append(
      f"| {activation} | {lr:g} | {metric} | {hashed:.4g} | {threefry:.4g} | {test.verdict()} |"
    )
  (output_dir / "prng_training.md").write_text("\n".join(lines) + "\n")
  (output_dir / "prng_training.json").write_text(
    json.dumps({"tests": [t.to_json() for t in tests]}, indent=2) + "\n"
  )
  print("\n".join(lines))


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--render", action="store_true", help="only rewrite the report")
  parser.add_argument("--activations", nargs="*", choices=ACTIVATIONS, default=ACTIVATIONS)
  parser.add_argument("--output-dir", type=Path, default=RESULTS_DIR)
  args = parser.parse_args()
  if not args.render:
    for activation in args.activations:
      train(activation, threefry_workdir(args.output_dir, activation))
  finished = [a for a in ACTIVATIONS if is_finished(threefry_workdir(args.output_dir, a), a)]
  if not finished:
    raise SystemExit("No finished threefry run yet: run the command without --render first.")
  write_report(args.output_dir, compare(args.output_dir, finished))


if __name__ == "__main__":
  main()
