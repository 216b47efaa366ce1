"""What a study's result writes beside its README: ``summary.json``, ``table.md`` and the loss
curves' figure."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gelujax.paper import BASELINES, Report
from gelujax.study import analysis, curves, overview, tables, wording
from gelujax.study.analysis import Analysis
from gelujax.study.runs import EVAL_SUFFIX, LrRow, Run, RunRow
from gelujax.study.stages import Evaluations
from gelujax.workdir import write_json


def loss_curves(
  selection: Sequence[Run],
  rows: Sequence[RunRow],
  evaluated: dict[str, Evaluations],
  evaluation_rows: dict[str, RunRow],
) -> list[tuple[Run, LrRow | None, str]]:
  """Each run's curves as Fig. 2 draws them: its evaluation run at the selected lr where it is
  trained, else its selection grid at the selected lr."""
  shown = []
  for run, row in zip(selection, rows, strict=True):
    found = next((r for _, r in evaluated[row.run]), None)
    if isinstance(found, Run):
      shown.append((found, evaluation_rows[found.name].grid[0], "evaluation seeds"))
    else:
      shown.append((run, row.selected, "selection seeds"))
  return shown


def default_report(rows: Sequence[RunRow]) -> Report:
  """For a task without paper numbers: test error where the task classifies, else test loss."""
  keys = {k for row in rows for g in row.grid for k in g.metrics}
  if "best.test_error" in keys:
    return Report("best.test_error", "test error (%)", 100.0)
  return Report("best.test_loss", "test loss")


def write_summary(
  out: Path,
  task: str,
  settings: dict[str, Any],
  result: Analysis,
  sections: dict[str, list[str]],
  **extra: Any,
) -> None:
  """summary.json: the settings, every verdict, the exploratory statistics and the findings."""
  extra = {k: _json_value(v) for k, v in extra.items()}
  if "evaluated" in extra:
    extra["evaluated"] = {
      name: {
        (grid.name if grid else ""): found if isinstance(found, str) else found.name
        for grid, found in evaluations
      }
      for name, evaluations in extra["evaluated"].items()
    }
  write_json(
    out / "summary.json",
    {
      "task": task,
      "settings": settings,
      **extra,
      "verdicts": {
        "primary": [v.to_json() for v in result.primary],
        "secondary": [v.to_json() for v in result.secondary],
      },
      "earlier_design_verdicts": {
        "primary": [v.to_json() for v in result.earlier_primary],
        "secondary": [v.to_json() for v in result.earlier_secondary],
      },
      "candidates": [c.to_json() for c in result.candidates],
      "untrained": {
        h.describe(): [{"run": r, "learning_rate": lr, "workdir": w} for r, lr, w in missing]
        for h, missing in result.untrained.items()
      },
      "sensitivity": [
        {
          "claim": s.hypothesis.describe(),
          "family": s.hypothesis.family,
          "selected_lrs": list(s.selected_lrs),
          "reference": s.reference and {"seeds": s.reference[1], **s.reference[0].to_json()},
          "at_lr": [
            {"learning_rate": lr, "comparison": c and c.to_json(), "agrees": s.agrees(lr)}
            for lr, c in s.at_lr.items()
          ],
        }
        for s in result.sensitivity
      ],
      "selections": [s.to_json() for s in result.selections],
      "exploratory": [e.to_json() for e in result.exploratory],
      "findings": sections,
      # The rows of results/README.md (gelujax.study.overview).
      "headline": overview.hypothesis_rows(task, result),
    },
  )


def _json_value(value: Any) -> Any:
  """A value of summary.json: rows as `RunRow.to_json` writes them, other dataclasses as dicts,
  inside lists and dicts too."""
  if isinstance(value, RunRow):
    return value.to_json()
  if dataclasses.is_dataclass(value):
    return dataclasses.asdict(value)
  if isinstance(value, list):
    return [_json_value(v) for v in value]
  if isinstance(value, dict):
    return {k: _json_value(v) for k, v in value.items()}
  return value


def write_table(
  task: str,
  rows: Sequence[RunRow],
  evaluation_rows: Sequence[RunRow],
  report: Report,
  result: Analysis,
  metrics: Sequence[analysis.Metric],
  out: Path,
  own: Sequence[str] = (),
) -> str:
  """table.md: the evaluation runs and the selection grids beside the paper's numbers, the
  exploratory comparisons and instabilities, then every lr of the selection grids; ``own``
  as :func:`exploratory_tables` takes it."""
  extra = [(m.key, m.label, m.scale) for m in metrics[1:]]
  select = rows[0].select_metric
  # The grid of every lr marks each run's selected lr, not the lr the tables above show.
  grid_rows = rows
  where = f"the lr selected on {select}"
  if report.learning_rate is not None:
    # The paper reports these numbers per lr: show its lr, not a selected one.
    where = f"lr {report.learning_rate:g} (the paper's)"
    rows, evaluation_rows = (
      [row.with_selected(report.learning_rate) for row in group]
      for group in (rows, evaluation_rows)
    )
  text = [f"# {task}: {report.label}, median over seeds at {where}\n"]
  if report.paper:
    text.append(
      f"Paper: {report.source}. The paper's GELU is `gelu_tanh`; it reports no numbers for the "
      "other activations.\n"
    )
  paper = {**report.paper, **{k + EVAL_SUFFIX: v for k, v in report.paper.items()}}
  table_options = {"metric": report.metric, "label": report.label, "scale": report.scale,
                   "paper": paper, "extra": extra}  # fmt: skip
  text.append("## Evaluation runs\n")
  if evaluation_rows:
    text.append(tables.format_table(evaluation_rows, **table_options))
  else:
    text.append("None trained yet.\n")
  selection_cells = {
    s.run: f"{s.selected:g} over {s.runner_up:g}: {wording.effect(s.comparison)}"
    for s in result.selections
    if s.comparison is not None
  }
  text += [
    "## Selection grids\n",
    tables.format_table(rows, **table_options, selection=selection_cells or None),
    "Diverged members are left out of every statistic and counted in `diverged`; an lr whose "
    "members all diverged is never selected. std is the sample standard deviation over seeds. "
    "`lr selection`: the selected lr against the runner-up (the lr of the next lowest median), "
    "on each member's best selection metric: the Hodges–Lehmann shift with its exact interval "
    "and the uncorrected p. `unstable`: members of the lr shown whose training loss exceeds "
    f"{curves.JUMP_RATIO:g}x its running minimum.\n",
  ]
  text += exploratory_tables(result, own)
  text.append("## Every learning rate of the selection grids\n")
  text.append(
    tables.format_grid(
      grid_rows,
      metric=report.metric,
      label=report.label,
      scale=report.scale,
      mark_selected=result.design.select_lr,
    )
  )
  table = "\n".join(text)
  (out / "table.md").write_text(table)
  return table


# How a user makes a comparison of their own activation confirmatory (the exploratory tables'
# last sentence, where the runs hold one).
CONFIRMATORY = (
  "To make a comparison of your own activation confirmatory, pre-register it: a study literal "
  "with your activation among its arms, in a module of your own (`my_studies.py`: `MINE = "
  "dataclasses.replace(gelujax.study.forms.DESIGN, ...)`), run by `gelujax reproduce "
  "--task=my_studies:MINE` (docs/reproducing.md, Adding a study)."
)


def exploratory_tables(result: Analysis, own: Sequence[str] = ()) -> list[str]:
  """The exploratory comparisons' section of table.md; ``own``, the user's own activations
  among the runs (`gelujax.study.stages.activation_sources`): then it says how to make a
  comparison of theirs confirmatory."""
  text = []
  if result.exploratory:
    text += [
      "## Exploratory comparisons\n",
      f"Every activation that is not a baseline ({', '.join(BASELINES)}) against each baseline, "
      f"and against each reference ({', '.join(result.references)}) trained beside it: the "
      "Hodges–Lehmann shift of the run from the baseline with its exact interval and the "
      "uncorrected two-sided rank-sum p; then, on the seeds both runs trained (a seed is one "
      "initial draw, batch order and dropout stream whatever the activation), the paired shift "
      "(the median of the differences' Walsh averages) with its exact interval and the "
      "signed-rank p. Exploratory: no correction, no verdict."
      + (f" {CONFIRMATORY}" if own else "")
      + "\n",
      tables.format_exploratory(result.exploratory),
    ]
  if any(kind == "jump" for _, _, kind, _ in result.curves):
    text += [
      "## Unstable members\n",
      f"Members whose training loss exceeds {curves.JUMP_RATIO:g}x its running minimum, at the "
      "peak of each jump.\n",
      tables.format_jumps(result),
    ]
  return text


# ---------------------------------------------------------------------------- the noise task
