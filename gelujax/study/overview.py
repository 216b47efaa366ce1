"""Every verdict on one page: ``results/README.md``, and the top-level README's short summary.

Each result writes its *headline rows* into its ``summary.json`` (``"headline"``) from the
statistics it was rendered from: one row per pre-registered hypothesis of the paper's claims
(:func:`hypothesis_rows`), one per pre-registered family of a gelujax study
(:func:`gelujax.study.forms_report.headline_rows`), each with the claim, the paper's numbers,
ours (medians, shift [interval]), the verdict and its caveats in the words of the result's own
README. :func:`results_readme` sets every committed result's rows in one table, with links;
:func:`summary_lines` counts them in a few lines for the top-level README. Nothing here is typed
by hand: every verdict, count and caveat is copied from the rows or counted from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gelujax import workdir as workdirs
from gelujax.paper import NOISE_SUFFIX, PAPER_TASKS, figure
from gelujax.study import grids, wording
from gelujax.study.analysis import Analysis
from gelujax.study.verdicts import PENDING, VERDICTS, Verdict

RESULTS_README = "README.md"  # under results/
HYPOTHESIS, FAMILY = "hypothesis", "family"


def _ours(v: Verdict) -> str:
  """Our medians and the Hodges–Lehmann shift [exact interval], per pair of lrs tested."""
  h = v.hypothesis
  parts = []
  for o in v.outcomes:
    c = o.comparison
    lrs = f"{wording.lr_pair(h, o.learning_rates)}: " if len(v.outcomes) > 1 else ""
    if c is None:
      parts.append(f"{lrs}{PENDING}")
      continue
    parts.append(
      f"{lrs}{h.gelu} {wording.number(c.median_a, h.scale)} vs {h.baseline} "
      f"{wording.number(c.median_b, h.scale)}; shift {wording.format_shift(c, h.scale)}"
    )
  return "<br>".join(parts) or "–"


def hypothesis_rows(task: str, analysis: Analysis) -> list[dict[str, Any]]:
  """A result's headline rows: one per hypothesis of each family, in the words of its README's
  hypothesis tables (the verdict and every caveat it carries), with the earlier design's
  verdict where the design change altered it."""
  earlier = {id(e.hypothesis): e for e in (*analysis.earlier_primary, *analysis.earlier_secondary)}
  rows = []
  for family in (analysis.primary, analysis.secondary):
    for i, v in enumerate(family, 1):
      h = v.hypothesis
      paper = " vs ".join(
        f"{name} {wording.format_number(x, h.scale)}"
        for name, x in zip((h.gelu, h.baseline), h.paper, strict=True)
        if x is not None
      )
      verdict = wording.verdict_words(v, analysis)
      before = earlier.get(id(h))
      if before is not None and before.verdict != v.verdict:
        verdict += f" (earlier design, the selected lrs alone: {before.verdict})"
      rows.append(
        {
          "kind": HYPOTHESIS,
          "where": f"{figure(task)}, {h.family} {i}",
          "claim": h.describe(),
          "paper": paper,
          "ours": _ours(v),
          "verdict": verdict,
          "word": v.verdict,
          "caveats": wording.verdict_caveat_words(v).removeprefix("caveats: "),
        }
      )
  return rows


def _summaries(root: Path) -> list[tuple[Path, dict[str, Any]]]:
  """Every committed result's summary.json: the paper's, in its order, then gelujax's own
  studies."""
  order = {task: i for i, task in enumerate(PAPER_TASKS)}
  return sorted(
    ((path, workdirs.read_json(path)) for path in (root / "results").glob("*/*/summary.json")),
    key=lambda found: (
      "study" in found[1],
      order.get(found[1].get("task", "").removesuffix(NOISE_SUFFIX), len(order)),
      found[0].parent.parent.name,
      found[0].parent.name,
    ),
  )


def _labels(summaries: list[tuple[Path, dict[str, Any]]]) -> dict[Path, str]:
  """Each result's name in a row's label: ``""`` where it is the only result of its figure, its
  folder where several share one (two Twitter POS results)."""
  figures: dict[str, list[Path]] = {}
  for path, summary in summaries:
    if "study" not in summary:
      figures.setdefault(figure(summary["task"]), []).append(path)
  return {path: path.parent.name for paths in figures.values() if len(paths) > 1 for path in paths}


def _label(path: Path, names: dict[Path, str], row: dict[str, Any]) -> str:
  """``"Fig. 2 primary 3"``; with the result's folder where several results share its figure
  (``"§3.3 (twitter_pos_spelling) primary 2"``)."""
  result, rest = row["where"].split(", ", 1)
  return f"{result} ({names[path]}) {rest}" if path in names else f"{result} {rest}"


def ran_words(summary: dict[str, Any]) -> str:
  """What a result ran, in one line: a study's title; a paper result's settings."""
  if "study" in summary:
    return summary["title"]
  from gelujax import tasks  # Here: the settings' words need the task's paper defaults.
  from gelujax.study import readme

  settings = summary["settings"]
  return readme.describe_result(settings, tasks.get(settings["task"].removesuffix(NOISE_SUFFIX)))


def _cell(text: str) -> str:
  return text.replace("|", "\\|") or "–"


def results_readme(root: Path) -> str:
  """``results/README.md``: every committed result's headline rows in one table."""
  lines = [
    "# Results: every verdict on one page",
    "",
    "One row per pre-registered hypothesis of the paper's claims and per pre-registered family "
    "of gelujax's own studies, from each result's `summary.json` (`gelujax.study.overview`; "
    "rewritten whenever a result under `results/` is written). The claim, the paper's numbers, "
    "ours (median GELU vs baseline and the Hodges–Lehmann shift [exact interval], per pair of "
    "lrs tested), the verdict and every caveat it carries, in the words of the result's README, "
    "which the link opens: its tables give the p-values, Holm's correction and the seeds.",
    "",
    "| result | claim | paper | ours | verdict | caveats |",
    "|---|---|---|---|---|---|",
  ]
  ran = []
  summaries = _summaries(root)
  names = _labels(summaries)
  for path, summary in summaries:
    where = grids.repo_relative(path.parent, root)
    link = path.parent.relative_to(root / "results").as_posix() + "/README.md"
    rows = summary.get("headline")
    if rows is None:  # Written before headline rows were generated.
      lines.append(f"| [{where}]({link}) | re-render it | – | – | – | – |")
      continue
    for row in rows:
      label = _label(path, names, row) if row["kind"] == HYPOTHESIS else row["where"]
      lines.append(
        f"| [{label}]({link}) | {_cell(row['claim'])} | {_cell(row['paper'])} | "
        f"{_cell(row['ours'])} | {_cell(row['verdict'])} | {_cell(row['caveats'])} |"
      )
    ran.append(f"- [`{where}/`]({link}): {ran_words(summary)}.")
  lines += ["", "## What each result ran", "", *ran, ""]
  return "\n".join(lines)


def _grouped(found: list[tuple[str, str, str, bool]]) -> str:
  """``"Fig. 2 primary 3*, secondary 3*; Fig. 4 primary 1*, 2*"``: hypotheses (result,
  family, number, with caveats) by result, then family."""
  results: dict[str, dict[str, list[str]]] = {}
  for result, family, number, caveats in found:
    results.setdefault(result, {}).setdefault(family, []).append(number + "*" * caveats)
  return "; ".join(
    f"{result} " + ", ".join(f"{family} {', '.join(numbers)}" for family, numbers in by.items())
    for result, by in results.items()
  )


def summary_lines(root: Path) -> list[str]:
  """The top-level README's summary: per verdict, how many of the paper's hypotheses got it and
  which (``*``: with caveats), then each study's own line."""
  hypotheses, studies = [], []
  summaries = _summaries(root)
  names = _labels(summaries)
  for path, summary in summaries:
    for row in summary.get("headline") or []:
      if row["kind"] == HYPOTHESIS:
        result, rest = row["where"].split(", ", 1)
        family, number = rest.rsplit(" ", 1)
        if path in names:
          result += f" ({names[path]})"
        hypotheses.append((result, family, number, row))
    if summary.get("headline_summary"):
      studies.append(summary["headline_summary"])
  lines = []
  for verdict in VERDICTS:
    found = [
      (r, f, n, bool(row["caveats"])) for r, f, n, row in hypotheses if row["word"] == verdict
    ]
    if found:
      lines.append(
        f"{verdict.capitalize()}: {len(found)} of the paper's {len(hypotheses)} pre-registered "
        f"hypotheses, {_grouped(found)}."
      )
  return lines + studies
