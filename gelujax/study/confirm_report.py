"""The README, table and summary of a confirmation study (:mod:`gelujax.study.confirm`), written
from the runs' files and the earlier result's alone: every word that states a verdict, a
direction or a count is derived here, none typed by hand. The earlier design's verdict is quoted
from the earlier result's ``summary.json`` and kept, named as that design's."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax import workdir as workdirs
from gelujax.paper import LOWER, figure
from gelujax.study import (
  best,
  confirm,
  corrections,
  numbers,
  overview,
  power,
  readme,
  registry,
  report,
  runs,
  stats,
)
from gelujax.study.confirm import TIE_RULES, Confirmation, Outcome
from gelujax.study.verdicts import INCONCLUSIVE, PENDING


def points(count: float, design: Confirmation) -> float:
  """A shift in examples as percentage points of the split."""
  return 100.0 * count / design.examples


def shift_words(
  design: Confirmation, shift: float, low: float, high: float, digits: int = 3
) -> str:
  """``"+33.5 tokens [+1.5, +65] (+0.468 points [+0.021, +0.909])"``: the counts to ``digits``
  significant digits, the points to 3."""
  counts = numbers.interval(shift, low, high, digits=digits, unit=design.unit)
  shown = numbers.interval(*(points(v, design) for v in (shift, low, high)), unit="points")
  return f"{counts} ({shown})"


def lean_words(h: Any, shift: float) -> str:
  """Which way an inconclusive shift leans: toward the claim or against it."""
  if not shift or not math.isfinite(shift):
    return "no lean"
  toward = (shift < 0) == (h.direction == LOWER)
  return f"leaning {'toward' if toward else 'against'} the claim"


def verdict_words(o: Outcome, command: str = "") -> str:
  """The verdict as a cell and a finding say it."""
  if o.verdict == PENDING:
    words = f"pending: {', '.join(o.missing)} not trained"
    return words + (f" (`{command}` trains them)" if command else "")
  if o.verdict != INCONCLUSIVE or o.paired is None:
    return o.verdict
  lean = lean_words(o.hypothesis, o.paired.shift)
  if o.pairs_needed:
    need = f"{o.pairs_needed} pairs for 80% power if the observed shift were the true one"
  elif len(o.paired.seeds) < 3 or not o.paired.shift:
    need = "no number of pairs decides a shift of 0"
  else:
    need = f"more than {stats.MAX_SEEDS} pairs would decide it"
  return f"inconclusive, {lean}: {need}"


def paper_words(o: Outcome) -> str:
  h = o.hypothesis
  named = zip((h.gelu, h.baseline), h.paper, strict=True)
  return " vs ".join(f"{name} {x * h.scale:.4g}" for name, x in named if x is not None)


def where(design: Confirmation, o: Outcome) -> str:
  return f"{design.name}, {o.hypothesis.family} {o.number}"


def verdict_table(design: Confirmation, outcomes: Sequence[Outcome], command: str) -> list[str]:
  """The family's verdicts: a row per hypothesis."""
  lines = [
    f"| # | claim | paper | ours: median {outcomes[0].hypothesis.gelu if outcomes else 'GELU'} "
    f"vs baseline (%, seeds {numbers.seeds(design.seeds)}) | paired shift in {design.unit} "
    "[exact CI] (points) | n | signed-rank p | Holm p | verdict |",
    "|---|---|---|---|---|---|---|---|---|",
  ]
  for o in outcomes:
    cells = report.paired_cells(
      o,
      lambda m: numbers.percent(m, design.examples),
      lambda c: shift_words(design, c.shift, c.low, c.high),
    )
    lines.append(
      f"| {o.number} | {o.hypothesis.describe()} | {paper_words(o)} | "
      + " | ".join(cells)
      + f" | {verdict_words(o, command)} |"
    )
  return lines


def hypothesis_line(design: Confirmation, o: Outcome, command: str) -> str:
  """A verdict as a finding."""
  head = f"Hypothesis [{where(design, o)}]: {o.hypothesis.describe()}: {verdict_words(o, command)}"
  if o.paired is None:
    return head + "."
  c, h = o.paired, o.hypothesis
  zeros = ""
  if c.zeros:
    zeros = f", {c.zeros} zero difference{'s' * (c.zeros > 1)} dropped from the test"
  return (
    f"{head} ({h.gelu} {numbers.percent(o.medians[0], design.examples)} vs {h.baseline} "
    f"{numbers.percent(o.medians[1], design.examples)}, median over {len(c.seeds)} paired seeds "
    f"{numbers.seeds(c.seeds)}{zeros}; paired shift {shift_words(design, c.shift, c.low, c.high)}, "
    f"signed-rank p = {o.p:.2g}, Holm {o.holm:.2g})."
  )


def rule_verdicts(rows: Sequence[Mapping[str, Any]], family: str) -> str:
  """``"primary 1 inconclusive (Holm 0.27), primary 2 refuted (Holm 0.049)"``."""
  return ", ".join(f"{family} {r['number']} {r['verdict']} (Holm {r['holm']:.2g})" for r in rows)


def tie_lines(
  design: Confirmation,
  ties: Mapping[str, Sequence[Mapping[str, Any]]],
  members: Mapping[str, int],
  sensitivity: Mapping[str, Sequence[Mapping[str, Any]]],
  *,
  test: str,
  taken: str = "the design takes",
) -> list[str]:
  """The members whose best validation error ties, and the family's verdicts under each tie rule
  (exploratory beside the design's)."""
  total = sum(members.values())
  tied = sum(len(t) for t in ties.values())
  detail = "; ".join(
    f"{arm}: seed{'s' * (len(t) > 1)} "
    + ", ".join(
      f"{m['seed']} (epochs {', '.join(f'{e:g}' for e in m['epochs'])}: "
      f"{', '.join(numbers.percent(c, design.examples) + '%' for c in m['counts'])})"
      for m in t
    )
    for arm, t in ties.items()
    if t
  )
  lines = [
    f"{tied} of the {total} members "
    + ("reaches its" if tied == 1 else "reach their")
    + " lowest validation error at several epochs"
    + (f" ({detail}); {taken} the earliest" if tied else "")
    + "."
  ]
  mine = [r["verdict"] for r in sensitivity[confirm.EARLIEST]]
  others = []
  for rule, rows in sensitivity.items():
    if rule == confirm.EARLIEST:
      continue
    same = [r["verdict"] for r in rows] == mine
    others.append(
      f"with {TIE_RULES[rule]}: {rule_verdicts(rows, design.family)}"
      + (" (the same verdicts)" if same else " (not the same verdicts)")
    )
  lines.append(
    f"Exploratory, the same {test} under the other tie rules: " + "; ".join(others) + "."
  )
  return lines


def earlier_lines(
  design: Confirmation, earlier: Mapping[str, Any] | None, out: Path, root: Path
) -> list[str]:
  """The earlier design's verdicts, quoted from its summary.json, and what its own runs say of
  its tie rule; linked where its README lies under ``root`` (relative to ``out``)."""
  if earlier is None:
    return [
      f"The earlier result (`{design.earlier}`) was not found beside this one or in the "
      "checkout this code lies in, and no earlier rendering of this result kept it: its "
      "verdicts are in its own README."
    ]
  name = f"`{earlier['folder']}`"
  target = root / earlier["folder"] / "README.md"
  if target.exists():
    name = f"[{name}]({Path(os.path.relpath(target, out)).as_posix()})"
  lines = [
    f"The earlier result, {name}, "
    "tested the same family under the earlier design: each run's lr selected from "
    f"{numbers.lrs(earlier.get('learning_rates', []))} on selection seeds "
    f"{numbers.seeds(earlier.get('selection_seeds', []))}, then "
    f"{len(earlier.get('evaluation_seeds', []))} evaluation seeds "
    f"({numbers.seeds(earlier.get('evaluation_seeds', []))}) a side at that lr, compared unpaired "
    "by the exact two-sided rank-sum test, Holm over the family. Its verdicts stand as that "
    "design's; quoted from its `summary.json`:",
    "",
    "| # | claim | verdict (earlier design) | median GELU vs baseline (%) | shift [exact CI] "
    "(points) | rank-sum p | Holm p | paired, exploratory: shift [CI], signed-rank p |",
    "|---|---|---|---|---|---|---|---|",
  ]
  for v in earlier["verdicts"]:
    paired = "–"
    if v.get("paired_shift") is not None:
      paired = (
        numbers.interval(*(100 * v[f"paired_{k}"] for k in ("shift", "low", "high")))
        + f", p = {v['paired_p']:.2g}"
      )
    shift = "–"
    if v.get("shift") is not None:
      shift = numbers.interval(v["shift"], v["low"], v["high"], scale=100)
    medians = "–"
    if v.get("median_a") is not None:
      medians = f"{100 * v['median_a']:.4g} vs {100 * v['median_b']:.4g}"
    lines.append(
      f"| {v['number']} | {v['claim']} | **{v['verdict']}** | {medians} | {shift} | "
      f"{v['p']:.2g} | {v['holm']:.2g} | {paired} |"
    )
  lines += ["", "Its findings' lines for this family, verbatim:", ""]
  lines += [f"> {line}" for line in earlier["lines"]]
  lines += [
    "",
    "What its evaluation runs' files say of its tie rule (derived here from their "
    "`metrics.jsonl`):",
    "",
  ]
  lines += [
    f"- {line}"
    for line in tie_lines(
      design, earlier["ties"], earlier["members"], earlier["tie_rules"],
      test="unpaired rank-sum test (the earlier design's)", taken="the earlier design took",
    )
  ]  # fmt: skip
  at_last = ", ".join(
    f"{arm} {n} of {earlier['members'][arm]}" for arm, n in earlier["at_last_epoch"].items()
  )
  lines.append(f"- Members whose best epoch is the last ({design.epochs}): {at_last}.")
  return lines


def power_lines(design: Confirmation, earlier: Mapping[str, Any] | None) -> list[str]:
  """The power statement, from the earlier runs' paired spread (:func:`confirm.pilot`)."""
  if earlier is None:
    return ["- Power: the earlier result's runs were not found, so its pilot is not restated."]
  p = earlier["pilot"]
  n, level = p["pairs"], p["level"]
  parts = []
  for h, v in zip(design.hypotheses(), p["hypotheses"], strict=True):
    parts.append(
      f"primary {v['number']} ({h.gelu} − {h.baseline}): the earlier {len(v['seeds'])} pairs' "
      f"differences have SD {v['sd']:.1f} {design.unit} ({points(v['sd'], design):.2f} points; "
      f"{v['sd_bound']:.1f} at its one-sided {100 * power.PILOT_BOUND:g}% upper bound) "
      f"and a paired shift of {numbers.signed(v['shift'])} {design.unit} "
      f"({numbers.signed(points(v['shift'], design))} points); {n} pairs detect a shift of "
      f"{v['detectable']:.1f} {design.unit} ({points(v['detectable'], design):.2f} points; "
      f"{v['detectable_bound']:.1f}, {points(v['detectable_bound'], design):.2f} points, with the "
      f"SD at its bound), and deciding the earlier shift would take "
      f"{numbers.count(v['pairs'])} pairs ({numbers.count(v['pairs_bound'])} with the SD at its "
      "bound)"
    )
  gaps = []
  for h, v in zip(design.hypotheses(), p["hypotheses"], strict=True):
    if None in h.paper:
      continue
    gap = (h.paper[0] - h.paper[1]) * design.examples
    if abs(gap) < v["detectable"]:
      detect = f"below what {n} pairs detect even with the SD as observed"
    elif abs(gap) >= v["detectable_bound"]:
      detect = f"at least what {n} pairs detect even with the SD at its bound"
    else:
      detect = (
        f"at least what {n} pairs detect with the SD as observed, below it with the SD at its bound"
      )
    gaps.append(
      f"{h.gelu} − {h.baseline} {numbers.signed(points(gap, design))} points "
      f"({numbers.signed(gap)} {design.unit}), {detect}"
    )
  return [
    f"- Power (`gelujax.study.confirm.pilot`, from the earlier result's evaluation runs, in "
    f"whole {design.unit}): with 80% power by the two-sided signed-rank test at {level:.3g}, the "
    f"family's strictest Holm level; {'; '.join(parts)}. The pilot asks for {p['seeds']} pairs "
    f"for {design.family} {design.retested} (its answer at the SD bound rounded up to tens). "
    f"The paper's own gaps: {'; '.join(gaps)}."
  ]


def design_lines(design: Confirmation, earlier: Mapping[str, Any] | None) -> list[str]:
  """The design, as :data:`gelujax.study.confirm.TWITTER` fixes it."""
  spec = design.spec()
  fields = ", ".join(f"{k}={v!r}" for k, v in design.spec_fields.items())
  family = design.hypotheses()
  lines = [
    f"Fixed in {registry.fixed_in(design)} before any of its runs was trained:",
    "",
    f"- Task: `{design.task}` with the earlier result's substitute and options ({fields}), "
    f"dropout {spec.dropout:g}, batch size {spec.batch_size}, {spec.optimizer}, {design.epochs} "
    f"epochs, one evaluation of the validation and test splits per epoch: {design.epochs_reason}.",
    f"- Learning rate {design.learning_rate:g} for every arm, nothing selected: "
    f"{design.lr_reason}.",
    f"- Arms: {', '.join(design.arms)}, each one run of {len(design.seeds)} members "
    "(`runs/<arm>/`), with the same seeds: one seed gives one initial draw, one batch order and "
    "one dropout stream whatever the activation, so each comparison is paired by seed.",
    f"- Seeds: {design.seeds_reason}.",
    f"- Hypotheses: the paper task's {design.family} family as `gelujax.paper.PAPER` fixes it "
    f"({len(family)}: "
    + "; ".join(f"{i}. {h.describe()}" for i, h in enumerate(family, 1))
    + f"), re-tested whole so that Holm's correction runs over the family the earlier verdict "
    f"was corrected in; the study is for primary {design.retested}.",
    f"- Compared: each member's test error at its best-validation epoch, as a count of the "
    f"{design.examples} test {design.unit} (the error times {design.examples}, which must be "
    "within 1e-6 of an integer), so that networks that err on equally many tokens tie exactly.",
    f"- The best epoch: {design.tie_rule}. The other rules (the latest tied epoch; the lowest "
    "validation loss) are shown beside it, exploratory.",
    f"- Test: the exact two-sided Wilcoxon signed-rank test of the paired differences (GELU "
    "minus the baseline, seed by seed; zeros dropped, mid-ranks for tied |d|; a seed whose "
    f"member diverged in either arm drops its pair); Holm's correction over the family of "
    f"{len(family)}, at level {design.alpha:g}. Verdicts at a Holm p below {design.alpha:g}: "
    "*confirmed* (the statistic on the claim's side of 0), *refuted* (on the other side); "
    "otherwise *inconclusive*, with its lean and the pairs that would decide the observed "
    "shift with 80% power at the family's strictest level.",
    f"- Effect size: the paired Hodges–Lehmann shift (the median of the differences' Walsh "
    f"averages) in {design.unit} and points, with its exact distribution-free interval (at "
    f"least {100 * stats.CONFIDENCE:g}%), and each arm's median.",
  ]
  lines += power_lines(design, earlier)
  if earlier is not None:
    e = earlier["estimate"]
    lines.append(
      f"- Time (`gelujax.study.confirm.estimate`): the earlier evaluation runs "
      f"({', '.join(e['runs'])}) took {e['seconds']:.0f} s for {e['members']} members, "
      f"{e['per_member']:.1f} s a member of {design.epochs} epochs, so {e['total_members']} "
      "members take about "
      f"{e['minutes']:.0f} minutes on {'; '.join(e['machines']) or 'an unknown machine'}."
    )
  return lines


def seed_table(design: Confirmation, finished: Mapping[str, runs.Run]) -> list[str]:
  """Every seed's count of test errors per arm (the values the tests compare)."""
  columns = {
    f"{a} ({design.unit} wrong)": confirm.arm_values(finished[a], design)
    for a in design.arms
    if a in finished
  }
  return report.seed_table(design.seeds, columns)


def arm_lines(design: Confirmation, finished: Mapping[str, runs.Run]) -> list[str]:
  lines = [
    "| arm | members | diverged | median test error (%) | min–max (%) | best epoch at the last |",
    "|---|---|---|---|---|---|",
  ]
  for arm in design.arms:
    if arm not in finished:
      lines.append(f"| {arm} | pending | – | – | – | – |")
      continue
    values = list(confirm.arm_values(finished[arm], design).values())
    x = np.asarray([v for v in values if math.isfinite(v)])
    cells = ["–", "–"]
    if len(x):
      cells = [
        numbers.percent(float(np.median(x)), design.examples),
        "–".join(numbers.percent(v, design.examples) for v in (x.min(), x.max())),
      ]
    lines.append(
      f"| {arm} | {len(values)} | {len(values) - len(x)} | {cells[0]} | {cells[1]} | "
      f"{len(best.at_last_epoch(finished[arm], design.learning_rate))} |"
    )
  return lines


def comparison_words(design: Confirmation, outcomes: Sequence[Outcome], earlier) -> list[str]:
  """The new verdict of each hypothesis beside the earlier design's."""
  if earlier is None:
    return []
  before = {v["number"]: v for v in earlier["verdicts"]}
  lines = []
  for o in outcomes:
    if o.verdict == PENDING or o.number not in before:
      continue
    b = before[o.number]
    agree = "the same verdict" if b["verdict"] == o.verdict else "a different verdict"
    lines.append(
      f"Against the earlier design [{design.family} {o.number}]: {b['verdict']} there "
      f"(Holm {b['holm']:.2g}, {b['seeds']}, unpaired), {o.verdict} here (Holm {o.holm:.2g}, "
      f"{len(o.paired.seeds) if o.paired else 0} paired seeds): {agree}."
    )
  return lines


def findings(
  design: Confirmation,
  outcomes: Sequence[Outcome],
  finished: Mapping[str, runs.Run],
  earlier: Mapping[str, Any] | None,
  command: str,
) -> list[str]:
  """The result in sentences, every count and verdict derived from the outcomes and the runs."""
  lines = [hypothesis_line(design, o, command) for o in outcomes]
  missing = [a for a in design.arms if a not in finished]
  if missing:
    return lines
  lines += comparison_words(design, outcomes, earlier)
  ties = {arm: confirm.tied_members(run, design) for arm, run in finished.items()}
  members = {arm: len(runs.lr_members(run, design.learning_rate)) for arm, run in finished.items()}
  sensitivity = confirm.tie_sensitivity(design, finished)
  lines += tie_lines(design, ties, members, sensitivity, test="paired signed-rank test")
  at_last = ", ".join(
    f"{arm} {len(best.at_last_epoch(run, design.learning_rate))} of {members[arm]}"
    for arm, run in finished.items()
  )
  lines.append(
    f"Members whose best epoch is the last ({design.epochs}): {at_last}: the design takes the "
    "best-validation epoch, so a run still improving at the end is compared where it stopped."
  )
  return lines


def load_earlier(design: Confirmation, out: Path, root: Path) -> dict[str, Any] | None:
  """The earlier record (:func:`confirm.earlier_record`): from the earlier result where it is
  found, else as a previous rendering of this result kept it in its summary.json."""
  folder = confirm.find_earlier(design, root)
  if folder is not None:
    return confirm.earlier_record(design, folder)
  path = out / workdirs.SUMMARY_FILE
  return workdirs.read_json(path).get("earlier") if path.exists() else None


def tie_caveats(
  design: Confirmation, o: Outcome, sensitivity: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[str]:
  """Where another tie rule (exploratory, :func:`gelujax.study.confirm.tie_sensitivity`) gives
  hypothesis ``o`` another verdict: ``"under the latest of the tied epochs (exploratory) it is
  inconclusive (Holm 0.058), not refuted (Holm 0.04)"``."""
  found = []
  for rule, rows in sensitivity.items():
    if rule == confirm.EARLIEST:
      continue
    other = next((r for r in rows if r["number"] == o.number), None)
    if other is not None and other["verdict"] != o.verdict:
      found.append(
        f"under {TIE_RULES[rule]} (exploratory) it is {other['verdict']} "
        f"(Holm {other['holm']:.2g}), not {o.verdict} (Holm {o.holm:.2g})"
      )
  return found


def headline_rows(
  design: Confirmation,
  outcomes: Sequence[Outcome],
  earlier: Mapping[str, Any] | None,
  sensitivity: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
) -> list[dict[str, Any]]:
  """The study's rows of ``results/README.md``: one per hypothesis tested (none while pending),
  among its caveats the earlier design's verdict and another verdict under another tie rule
  (``sensitivity``: :func:`gelujax.study.confirm.tie_sensitivity`)."""
  before = {v["number"]: v for v in (earlier or {}).get("verdicts", [])}
  rows = []
  for o in outcomes:
    if o.paired is None:
      continue
    c, h = o.paired, o.hypothesis
    caveats = []
    if o.number in before:
      b = before[o.number]
      caveats.append(
        f"the earlier design ({design.earlier.rsplit('/', 1)[-1]}: {b['seeds']}, unpaired): "
        f"{b['verdict']}, Holm {b['holm']:.2g}"
      )
    caveats += tie_caveats(design, o, sensitivity or {})
    caveat = "; ".join(caveats)
    rows.append(
      {
        "kind": overview.FAMILY,
        "where": where(design, o),
        "claim": f"{h.describe()}, paired, {len(design.seeds)} fresh seeds, lr "
        f"{design.learning_rate:g}",
        "paper": paper_words(o) or "–",
        "ours": f"{h.gelu} {numbers.percent(o.medians[0], design.examples)} vs {h.baseline} "
        f"{numbers.percent(o.medians[1], design.examples)}; paired shift "
        f"{shift_words(design, c.shift, c.low, c.high)}",
        "verdict": verdict_words(o),
        "caveats": caveat,
      }
    )
  return rows


def title(design: Confirmation) -> str:
  family = design.hypotheses()
  arms = " and ".join(design.arms[1:])
  return (
    f"{figure(design.task)} re-tested: {design.arms[0]} against {arms} on {design.dataset} "
    f"({design.spec_fields.get('model', design.task)}), {len(design.seeds)} fresh paired seeds "
    f"at lr {design.learning_rate:g}, {design.epochs} epochs ({design.family} family of "
    f"{len(family)}, for {design.family} {design.retested})"
  )


def headline_summary(design: Confirmation, outcomes: Sequence[Outcome], earlier) -> str:
  before = {v["number"]: v["verdict"] for v in (earlier or {}).get("verdicts", [])}
  parts = [
    f"{design.family} {o.number} {o.verdict}"
    + (f" (the earlier design's: {before[o.number]})" if o.number in before else "")
    for o in outcomes
  ]
  whose = "gelujax's" if registry.users(design) is None else "your own"
  return (
    f"{whose} re-test of {figure(design.task)}'s {design.family} family on "
    f"{len(design.seeds)} fresh paired seeds (`{design.name}`): {', '.join(parts)}."
  )


def write_result(design: Confirmation, *, out: Path, root: Path, project: bool = True) -> Path:
  """Writes ``out``'s README.md, table.md and summary.json; returns ``out``; and the project's
  overview where ``out`` is under its results/."""
  finished = confirm.finished_runs(design, out)
  outcomes = confirm.analyse(design, finished)
  earlier = load_earlier(design, out, root)
  command = f"{readme.command_name(project)} --task={design.name}"
  missing = [a for a in design.arms if a not in finished]
  found = findings(design, outcomes, finished, earlier, command)
  corrected = corrections.lines(design.name, design.date)
  h = design.hypotheses()[design.retested - 1]
  body = [
    *report.section("Verdicts", verdict_table(design, outcomes, command)),
    *report.section("Findings", [f"- {line}" for line in found]),
    *report.section("The earlier design's verdict", earlier_lines(design, earlier, out, root)),
    *report.section("Corrections", corrected),
    *report.section("Design", design_lines(design, earlier)),
    *report.section("Each arm", arm_lines(design, finished)),
  ]
  return report.publish(
    design.name,
    out=out,
    root=root,
    project=project,
    title=title(design),
    intro=f"{figure(design.task)} of the GELU paper: “{_claim(design)}”. The earlier result of "
    f"this project found its {design.family} hypothesis {design.retested} ({h.describe()}) as "
    "the section below quotes it; this study re-tests the family on fresh seeds, paired, with "
    "the tie rule and the comparison in whole tokens fixed before its runs.",
    body=body,
    footer="Every seed's count: `table.md`.",
    table=[
      "# Each arm",
      "",
      *arm_lines(design, finished),
      "",
      "# Every seed",
      "",
      *seed_table(design, finished),
    ],
    summary={
      "missing": missing,
      "headline": headline_rows(
        design,
        outcomes,
        earlier,
        None if missing else confirm.tie_sensitivity(design, finished),
      ),
      "headline_summary": (
        f"{title(design)}: pending ({', '.join(missing)} not trained)"
        if missing
        else headline_summary(design, outcomes, earlier)
      ),
      "outcomes": [o.to_json() for o in outcomes],
      "earlier": earlier,
    },
  )


def _claim(design: Confirmation) -> str:
  from gelujax.paper import PAPER

  return PAPER[design.task].claim


reproduce = report.reproducer(confirm.make_grids, write_result, confirm.TASK)
"""Trains the design's runs and writes the result (`gelujax.study.report.reproducer`)."""
