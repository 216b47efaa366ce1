"""Writes trainer workdirs in the file formats documented in docs/workdir.md, from chosen curves."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gelujax import tasks
from gelujax import workdir as workdirs


def member(
  seed: int, learning_rate: float, *, diverged_epoch: int | None = None, **curves: Sequence[float]
) -> dict[str, Any]:
  """One member: per-epoch values of each metric (epoch 1, 2, ...), diverging at an epoch."""
  return {"seed": seed, "learning_rate": learning_rate, "diverged_epoch": diverged_epoch, **curves}


def write_workdir(
  workdir: Path,
  members: Sequence[dict[str, Any]],
  *,
  activation: str = "gelu",
  dropout: float = 0.0,
  task: str = "mnist",
  dataset: str = "fashion_mnist",
  select_metric: str = "validation_loss",
  finished: bool = True,
) -> Path:
  """Writes config.json, metrics.jsonl and (when finished) summary.json for ``members``.

  A diverged member's records from its divergence epoch on are null with ``diverged: true``, and
  its best is taken over the epochs before, as the trainer does.
  """
  workdir.mkdir(parents=True, exist_ok=True)
  epochs = max(len(v) for m in members for k, v in m.items() if k.endswith(("_loss", "_error")))
  # The task's full spec, as the trainer writes it, with this run's fields.
  spec = {
    **workdirs.jsonable(dataclasses.asdict(tasks.get(task))),
    "dataset": dataset,
    "activation": activation,
    "dropout": dropout,
    "epochs": epochs,
    "select_metric": select_metric,
  }
  config = {
    "task": task,
    "dataset": dataset,
    "activation": activation,
    "spec": spec,
    "members": [{"seed": m["seed"], "learning_rate": m["learning_rate"]} for m in members],
  }
  (workdir / "config.json").write_text(json.dumps(config))
  lines, summary_members = [], []
  for index, m in enumerate(members):
    keys = [k for k in m if k.endswith(("_loss", "_error"))]
    rows = []
    for epoch in range(1, epochs + 1):
      diverged = m["diverged_epoch"] is not None and epoch >= m["diverged_epoch"]
      values = {k: None if diverged else m[k][epoch - 1] for k in keys}
      row = {
        "member": index,
        "seed": m["seed"],
        "learning_rate": m["learning_rate"],
        "epoch": float(epoch),
        "step": epoch * 10,
        "diverged": diverged,
        **values,
      }
      rows.append(row)
      lines.append(json.dumps(row))
    # Without a validation split the trainer selects on the matching test metric.
    metric = select_metric if select_metric in keys else select_metric.replace("validation", "test")
    finite = [r for r in rows if not r["diverged"]]
    best = min(finite, key=lambda r: r[metric]) if finite else None
    summary_members.append(
      {
        "seed": m["seed"],
        "learning_rate": m["learning_rate"],
        "diverged": m["diverged_epoch"] is not None,
        "diverged_epoch": m["diverged_epoch"],
        "best_epoch": best["epoch"] if best else None,
        "best": {k: best[k] for k in keys} if best else {},
        "final": {k: rows[-1][k] for k in keys},
      }
    )
  (workdir / "metrics.jsonl").write_text("\n".join(lines) + "\n")
  if finished:
    summary = {
      "task": task,
      "dataset": dataset,
      "activation": activation,
      "epochs": epochs,
      "members": summary_members,
    }
    (workdir / "summary.json").write_text(json.dumps(summary, allow_nan=False))
  return workdir


def constant(value: float, epochs: int = 3) -> list[float]:
  """A flat curve."""
  return [value] * epochs
