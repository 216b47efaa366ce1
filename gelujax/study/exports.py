"""What a paper result writes for use outside its README: ``values.csv``, every per-seed value
its statistics are computed on, and ``verdicts.tex``, its verdict table for a paper.

``values.csv`` has a row per run folder, member (learning rate and seed) and metric: the
best-epoch and final metrics of each member, as the study reads them (`gelujax.study.runs`:
derived from the run's records, as its ``summary.json`` holds them), unscaled (an error is a
fraction, not a percentage); for a noise result, each classifier's accuracy and log loss at the
noise levels the result compares. Its columns (:data:`VALUE_COLUMNS`): ``run``, the run's folder
relative to the result's (``runs/gelu_eval``); ``seeds``, ``selection`` (a selection grid) or
``evaluation`` (an evaluation run); ``activation``, ``dropout``, ``learning_rate``, ``seed``;
``metric`` (``best.test_error``, ``final.train_loss``, ``accuracy@1``); ``value``; ``diverged``
(``true`` or ``false``). A diverged member's values are empty, marked in ``diverged``,
as every statistic of the result leaves it out; a value that is not finite is empty too. Only
runs the result reads are there: an evaluation run it cannot use yet (trained at another lr,
say) is not.

``verdicts.tex`` is a booktabs ``tabular`` of the README's hypotheses tables, made from the same
verdicts (never from the Markdown): each hypothesis, the paper's numbers, the lrs tested, our
medians, the Hodges–Lehmann shift with its exact interval, the Holm p and the verdict, marked
``*`` where the README states caveats with it; or, for a result without a verdict (an activation
of one's own run beside references, say), its exploratory comparisons. Every cell is escaped
for LaTeX by :func:`latex`.
"""

from __future__ import annotations

import csv
import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gelujax.study import numbers, runs, wording
from gelujax.study.analysis import Analysis
from gelujax.study.numbers import number
from gelujax.study.runs import Run
from gelujax.study.verdicts import PENDING, Outcome, Verdict

VALUES_FILE = "values.csv"
VERDICTS_FILE = "verdicts.tex"
VALUE_COLUMNS = (
  "run",
  "seeds",
  "activation",
  "dropout",
  "learning_rate",
  "seed",
  "metric",
  "value",
  "diverged",
)
SELECTION, EVALUATION = "selection", "evaluation"  # The `seeds` column: which seeds a run has.


# ------------------------------------------------------------------------------ values.csv


def _cell(value: float | None) -> str:
  """A value as the CSV holds it: Python's shortest round-tripping repr; empty where there is
  none or it is not finite."""
  return "" if value is None or not math.isfinite(value) else repr(float(value))


def _folder(path: Path, out: Path) -> str:
  """A run's folder relative to the result's: ``runs/gelu_eval``, ``../mnist/runs/gelu``."""
  return Path(os.path.relpath(path, out)).as_posix()


def member_keys(run: Run) -> list[str]:
  """Every best-epoch and final metric of the run's members: ``best.test_error``, ...,
  ``final.train_loss``, sorted."""
  return sorted(
    {
      f"{where}.{key}"
      for m in run.members
      for where in ("best", "final")
      for key in m.get(where) or {}
    }
  )


def run_values(run: Run, seeds: str, out: Path) -> list[dict[str, str]]:
  """The CSV rows of a run: each member (in the run's order) and each of :func:`member_keys`,
  the value as :func:`gelujax.study.runs.member_value` reads it; empty for a diverged member.
  ``seeds``: :data:`SELECTION` or :data:`EVALUATION`."""
  keys = member_keys(run)
  return [
    _row(run, seeds, out, m, key, None if m["diverged"] else runs.member_value(m, key))
    for m in run.members
    for key in keys
  ]


def noise_values(
  run: Run,
  seeds: str,
  out: Path,
  learning_rate: float,
  values: Mapping[str, Mapping[int, float]],
) -> list[dict[str, str]]:
  """The CSV rows of a noise evaluation of ``run``'s members at ``learning_rate``: ``values``
  (metric, ``"accuracy@1"``, -> seed -> value: `gelujax.study.noise_task.noise_values`) per
  member of that lr; a diverged member, which is not evaluated, empty."""
  return [
    _row(run, seeds, out, m, key, None if m["diverged"] else values[key].get(m["seed"]))
    for m in runs.lr_members(run, learning_rate)
    for key in values
  ]


def _row(
  run: Run, seeds: str, out: Path, member: Mapping[str, Any], key: str, value: float | None
) -> dict[str, str]:
  return {
    "run": _folder(run.workdir, out),
    "seeds": seeds,
    "activation": run.activation,
    "dropout": repr(run.dropout),
    "learning_rate": repr(float(member["learning_rate"])),
    "seed": str(member["seed"]),
    "metric": key,
    "value": _cell(value),
    "diverged": "true" if member["diverged"] else "false",
  }


def write_values(out: Path, rows: Sequence[Mapping[str, str]]) -> Path:
  """``out/values.csv``: a header row, then ``rows`` (:data:`VALUE_COLUMNS`), by the csv
  module, lines ended by ``\\n``."""
  path = out / VALUES_FILE
  with open(path, "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=VALUE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
  return path


# ---------------------------------------------------------------------------- verdicts.tex

# Characters LaTeX reads as commands, and the non-ASCII ones the tables print, as LaTeX writes
# them in text mode (math symbols by \ensuremath, so that two side by side never make "$$").
LATEX = {
  "\\": r"\textbackslash{}",
  "&": r"\&",
  "%": r"\%",
  "$": r"\$",
  "#": r"\#",
  "_": r"\_",
  "{": r"\{",
  "}": r"\}",
  "~": r"\textasciitilde{}",
  "^": r"\textasciicircum{}",
  "<": r"\textless{}",
  ">": r"\textgreater{}",
  "±": r"\ensuremath{\pm}",
  "−": r"\ensuremath{-}",  # U+2212, the minus sign
  "–": "--",  # U+2013, the en dash: ranges (0–4) and no number (numbers.DASH)
  "\u2014": "---",  # the em dash
  "×": r"\ensuremath{\times}",
  "≤": r"\ensuremath{\leq}",
  "≥": r"\ensuremath{\geq}",
  "∞": r"\ensuremath{\infty}",
}
# An ASCII hyphen that is a number's sign (``-0.01``, ``[-0.03``, ``-inf``), not an exponent's
# (``1e-05``) nor a word's: set as a minus sign; an infinity (``inf``, as `gelujax.study.numbers`
# prints one) as the symbol.
_SIGN = re.compile(r"(?<![\w.])-(?=\d|inf\b)")
_INFINITY = re.compile(r"\binf\b")


def latex(text: str) -> str:
  r"""``text`` as a LaTeX text-mode cell: every character of :data:`LATEX` replaced, a
  number's sign set as a minus (``-0.01`` -> ``\ensuremath{-}0.01``), ``inf`` as the symbol."""
  text = _INFINITY.sub("∞", _SIGN.sub("−", text))
  return "".join(LATEX.get(c, c) for c in text)


def tabular(
  columns: str,
  head: Sequence[str],
  groups: Sequence[tuple[str | None, Sequence[Sequence[str]]]],
  *,
  comment: Sequence[str] = (),
  note: str = "",
) -> str:
  """A booktabs tabular: ``head``, then each group's rows under its title (a row of its own,
  where the title is not None), groups apart by a ``\\midrule``; ``note`` below the table;
  ``comment`` as ``%`` lines above it. Every cell, title and note is escaped by
  :func:`latex`."""
  width = len(head)

  def row(cells: Sequence[str]) -> str:
    if len(cells) != width:
      raise ValueError(f"a row of {len(cells)} cells in a table of {width} columns: {cells}")
    return " & ".join(latex(c) for c in cells) + r" \\"

  def spanning(cell: str) -> str:
    return rf"\multicolumn{{{width}}}{{l}}{{{cell}}} \\"

  lines = [f"% {line}" for line in comment]
  lines += [rf"\begin{{tabular}}{{{columns}}}", r"\toprule", row(head)]
  for title, rows in groups:
    lines.append(r"\midrule")
    if title is not None:
      lines.append(spanning(rf"\emph{{{latex(title)}}}"))
    lines += [row(cells) for cells in rows]
  lines.append(r"\bottomrule")
  if note:
    lines.append(spanning(rf"\footnotesize {latex(note)}"))
  lines.append(r"\end{tabular}")
  return "\n".join(lines) + "\n"


VERDICT_HEAD = (
  "#",
  "hypothesis",
  "paper",
  "lrs: GELU vs baseline",
  "seeds",
  "ours: median GELU vs baseline",
  "HL shift [exact CI]",
  "Holm p",
  "verdict",
)
VERDICT_COLUMNS = r"@{}lp{4.2cm}llllllp{2.4cm}@{}"
CAVEATS_MARK = "*"
VERDICT_NOTE = f"{CAVEATS_MARK} with caveats, stated in the result's README.md"


def _verdict_word(words: str, caveats: str) -> str:
  return words + (CAVEATS_MARK if caveats else "")


def _pair_cells(h: Any, o: Outcome) -> list[str]:
  """The lrs, seeds, medians, shift and Holm p of one pair of lrs ('–' where pending)."""
  lrs = " vs ".join(numbers.DASH if lr is None else numbers.lr(lr) for lr in o.learning_rates)
  c = o.comparison
  if c is None:
    return [lrs, *[numbers.DASH] * 4]
  return [
    lrs,
    f"{len(c.a)} vs {len(c.b)}",
    f"{number(c.median_a, h.scale)} vs {number(c.median_b, h.scale)}",
    wording.format_shift(c, h.scale),
    f"{o.holm:.2g}",
  ]


def verdict_rows(family: Sequence[Verdict]) -> list[list[str]]:
  """A family's rows, as the README's hypotheses table numbers them (`gelujax.study.tables.
  format_hypotheses`): a hypothesis tested at one pair of lrs on one row; at several, its
  verdict's row, then one per pair (``1a``, ``1b``, ...). The verdict in one word
  (:data:`gelujax.study.verdicts.VERDICTS`, or ``not run``), marked where it has caveats."""
  rows = []
  for i, v in enumerate(family, 1):
    h = v.hypothesis
    paper = " vs ".join(number(x, h.scale) for x in h.paper)
    if all(x is None for x in h.paper):
      paper = numbers.DASH
    if v.single is not None:
      o = v.single
      word = _verdict_word(o.verdict, wording.caveat_words(o, h))
      rows.append([str(i), h.describe(), paper, *_pair_cells(h, o), word])
      continue
    word = v.verdict
    if not v.outcomes and v.reason:  # "not run: no gelu_tanh or relu run with dropout 0.5"
      word = v.reason.split(":", 1)[0] if v.reason.startswith("not run") else PENDING
    pairs = f"{len(v.outcomes)} pairs" if v.outcomes else numbers.DASH
    rows.append(
      [str(i), h.describe(), paper, pairs, *[numbers.DASH] * 4,
       _verdict_word(word, wording.verdict_caveat_words(v))]
    )  # fmt: skip
    for k, o in enumerate(v.outcomes):
      word = _verdict_word(o.verdict, wording.caveat_words(o, h))
      rows.append([f"{i}{wording.pair_letter(k)}", "", "", *_pair_cells(h, o), word])
  return rows


EXPLORATORY_HEAD = (
  "where",
  "metric",
  "run",
  "against",
  "seeds",
  "run median",
  "against median",
  "HL shift [exact CI]",
  "p (uncorrected)",
  "pairs",
  "paired shift [exact CI]",
  "signed-rank p",
)
EXPLORATORY_COLUMNS = r"@{}llllllllllll@{}"
EXPLORATORY_NOTE = "Exploratory: no correction, no verdict."


def exploratory_rows(analysis: Analysis) -> list[list[str]]:
  """The rows of the README's exploratory comparisons (`gelujax.study.tables.
  format_exploratory`), cell for cell."""
  rows = []
  for e in analysis.exploratory:
    c, d, scale = e.comparison, e.paired, e.metric.scale
    paired = (
      ["0", numbers.DASH, numbers.DASH]
      if d is None
      else [str(len(d.seeds)), wording.format_shift(d, scale), f"{d.p:.2g}"]
    )
    rows.append(
      [e.scope, e.metric.label, e.run, e.baseline, e.seeds, number(c.median_a, scale),
       number(c.median_b, scale), wording.format_shift(c, scale), f"{c.p:.2g}", *paired]
    )  # fmt: skip
  return rows


def has_verdicts(analysis: Analysis) -> bool:
  """Whether some hypothesis of the result has runs to be judged on (a verdict, or a pair of
  lrs pending its seeds); not where every hypothesis lacks a run, or the task has none."""
  return any(v.outcomes for v in (*analysis.primary, *analysis.secondary))


def verdicts_table(analysis: Analysis, title: str) -> str:
  """``verdicts.tex``'s text: the verdict table (:func:`verdict_rows`, primary then secondary
  hypotheses), or, where the result has no verdicts (:func:`has_verdicts`), its exploratory
  comparisons (:func:`exploratory_rows`)."""
  comment = [
    f"{title}.",
    "Written by gelujax.study.exports from the statistics README.md is written from; every",
    "render rewrites it. Needs \\usepackage{booktabs}.",
  ]
  if has_verdicts(analysis):
    groups = [
      (f"{name.capitalize()} hypotheses", verdict_rows(family))
      for name, family in (("primary", analysis.primary), ("secondary", analysis.secondary))
      if family
    ]
    comment.append("The hypotheses tables of README.md; the verdicts' words and caveats are there.")
    return tabular(VERDICT_COLUMNS, VERDICT_HEAD, groups, comment=comment, note=VERDICT_NOTE)
  comment.append("No hypothesis of this result has runs to judge: its exploratory comparisons.")
  rows = exploratory_rows(analysis)
  if not rows:
    rows = [["none", *[numbers.DASH] * (len(EXPLORATORY_HEAD) - 1)]]
  return tabular(
    EXPLORATORY_COLUMNS, EXPLORATORY_HEAD, [(None, rows)], comment=comment, note=EXPLORATORY_NOTE
  )


def verdicts_line(analysis: Analysis) -> str:
  """The README's line on verdicts.tex: which table it holds."""
  if has_verdicts(analysis):
    return (
      f"{VERDICTS_FILE}: the hypotheses tables above as a LaTeX tabular (booktabs), each verdict "
      f"in one word, `{CAVEATS_MARK}` where it carries caveats"
    )
  return (
    f"{VERDICTS_FILE}: the exploratory comparisons above as a LaTeX tabular (booktabs), no "
    "hypothesis of this result having runs to judge"
  )


def write_verdicts(out: Path, analysis: Analysis, title: str) -> Path:
  """``out/verdicts.tex`` (:func:`verdicts_table`)."""
  path = out / VERDICTS_FILE
  path.write_text(verdicts_table(analysis, title))
  return path
