"""The words of a result: one fixed rule per kind of statement, from the statistics alone.

Every sentence of a results README that judges a hypothesis, describes an effect or says what a
curve shows is written here from :class:`gelujax.study.analysis.Analysis`, each kind by one
rule, as a line ``- <Kind> [<where>]: ...``:

- ``Hypothesis``: a verdict (:data:`gelujax.study.verdicts.VERDICTS`), with its shift,
  interval, p and Holm p; an inconclusive one with the way it leans and the seeds a side that
  would decide it were the observed effect the true one; a pending one with the candidate lrs
  still to train and the command that trains them; and its caveats (the tested metric still
  falling at the last epoch, a run that does not learn, fewer epochs than the paper's).
- ``Candidate``: where a hypothesis is tested at several pairs of candidate lrs, each pair's
  outcome, worded as a verdict.
- ``Earlier design``: a verdict of the design before ``gelujax.paper.DESIGN_CHANGES`` (the
  selected lrs alone), kept where the change altered the design.
- ``Paired``: each judged pair of lrs compared seed by seed on the seeds both runs trained
  (signed-rank test, paired Hodges–Lehmann shift), beside the unpaired test (exploratory).
- ``Candidates``: each run's candidate lrs, with each lr's rank-sum p against the selected.
- ``Paper values``: a claim whose values, as read off the paper's figure, are ordered against
  the claim's own direction.
- ``Does not learn``, ``Still improving``, ``Final value on a spike``, ``Unstable``: what the
  curves show, by the rules of :mod:`gelujax.study.curves`.
- ``Selection``: each run's selected lr against the runner-up (exploratory).
- ``Sensitivity``: each selected-lr hypothesis on the selection seeds at each lr both runs
  trained, and whether its shift has the sign of the selected-lr result (exploratory).
- ``Out of vocabulary``, ``Lookup baseline``, ``Against the lookup``: what a task's data give
  without training (:mod:`gelujax.study.baselines`; Twitter POS): the validation and test tokens
  outside the training split's words, the per-word most-frequent-tag lookup's test error, and
  each run's median test error against it, in words fixed by
  :func:`gelujax.study.baselines.compare`.

A verdict and a pair's outcome are said in the words of :mod:`gelujax.study.wording`, a number
and a seed set as :mod:`gelujax.study.numbers` prints them, both shared with the tables; the
README's paragraph on how the verdicts are reached is
:mod:`gelujax.study.method`'s.

Exploratory lines state effects (shift, interval, uncorrected p), never significance. Typed
prose around the findings may explain and interpret them; it never states a ranking or a
significance (tests/test_results.py re-derives every line of the committed results).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from gelujax.paper import EQUIVALENT, LOWER, Hypothesis, figure
from gelujax.study import baselines as lookups
from gelujax.study import curves, numbers, stats
from gelujax.study.analysis import Analysis, Sensitivity
from gelujax.study.numbers import number
from gelujax.study.verdicts import Outcome, PairedComparison, Verdict
from gelujax.study.wording import (
  effect,
  format_shift,
  lr_pair,
  outcome_tail,
  outcome_words,
  pair_letter,
  verdict_caveat_words,
  verdict_effect,
  verdict_words,
)


def hypothesis_line(
  task: str,
  index: int,
  verdict: Verdict,
  analysis: Analysis | None = None,
  kind: str = "Hypothesis",
) -> str:
  """``- Hypothesis [Fig. 2, primary 1]: gelu_tanh below relu: ...: confirmed (gelu_tanh 0.08
  vs relu 0.11, ...; shift ..., p = ..., Holm ...).``, with the verdict's own p (an equivalence
  claim's TOST or beyond-the-margin p, not the rank-sum p of the shift), the p its table row
  shows, and its caveats. A hypothesis tested at several pairs of candidate lrs names them;
  each pair's own line is :func:`candidate_line`, and the hypothesis' line carries the caveats of
  every pair (:func:`gelujax.study.wording.verdict_caveat_words`)."""
  h = verdict.hypothesis
  head = f"- {kind} [{figure(task)}, {h.family} {index}]: {h.describe()}"
  words = verdict_words(verdict, analysis)
  if verdict.single is not None:
    return f"{head}: {words}{outcome_tail(h, verdict.single)}."
  if not verdict.outcomes:
    return f"{head}: {words}."
  lrs = [list(dict.fromkeys(o.learning_rates[i] for o in verdict.outcomes)) for i in (0, 1)]
  gelu, baseline = (", ".join("–" if lr is None else f"{lr:g}" for lr in x) for x in lrs)
  caveat = verdict_caveat_words(verdict)
  return (
    f"{head}: {words}; tested at {len(verdict.outcomes)} pairs of candidate lrs ({h.gelu} "
    f"{gelu} × {h.baseline} {baseline}), each a Candidate line"
    + (f"; {caveat}" if caveat else "")
    + "."
  )


def candidate_line(task: str, index: int, verdict: Verdict, i: int) -> str:
  """``- Candidate [Fig. 2, primary 1b: gelu_tanh lr 0.001 vs relu lr 0.001]: ...``: one pair
  of a hypothesis tested at several."""
  h, outcome = verdict.hypothesis, verdict.outcomes[i]
  head = (
    f"- Candidate [{figure(task)}, {h.family} {index}{pair_letter(i)}: "
    f"{lr_pair(h, outcome.learning_rates)}]"
  )
  return f"{head}: {outcome_words(outcome, h)}{outcome_tail(h, outcome)}."


def verdict_lines(
  task: str, family: Sequence[Verdict], analysis: Analysis | None, kind: str = "Hypothesis"
) -> list[str]:
  """A family's verdict lines, each followed by its pairs' Candidate lines where it has
  several."""
  lines = []
  for index, verdict in enumerate(family, 1):
    lines.append(hypothesis_line(task, index, verdict, analysis, kind))
    if len(verdict.outcomes) > 1:
      lines += [candidate_line(task, index, verdict, i) for i in range(len(verdict.outcomes))]
  return lines


def paired_line(task: str, label: str, h: Hypothesis, outcome: Outcome) -> str:
  """``- Paired [Fig. 2, primary 1: gelu_tanh lr 0.0001 vs relu lr 0.001]: 10 pairs (seeds
  100–109), correlation 0.71; paired shift ... [...], signed-rank p = ...; unpaired: shift ...
  [...], rank-sum p = ....``"""
  d: PairedComparison = outcome.paired
  c = outcome.comparison
  correlation = "–" if math.isnan(d.correlation) else f"{d.correlation:.2f}"
  zeros = f", {d.zeros} zero difference{'s' if d.zeros > 1 else ''} dropped" if d.zeros else ""
  shift = numbers.interval(d.shift, d.low, d.high, scale=h.scale, sign=False)
  if h.direction == EQUIVALENT:  # The verdict's p first: its equivalence test's, paired too.
    margin = f"±{number(h.margin, h.scale)}"
    paired = stats.paired_equivalence_test(d.differences, h.margin).p
    tests = (
      f"paired equivalence p = {paired:.2g} (within or beyond {margin}), signed-rank p of a "
      f"zero shift = {d.p:.2g}"
    )
    unpaired = (
      f"equivalence p = {outcome.p:.2g} (the verdict's), rank-sum p of a zero shift = {c.p:.2g}"
    )
  else:
    tests, unpaired = f"signed-rank p = {d.p:.2g}", f"rank-sum p = {c.p:.2g}"
  return (
    f"- Paired [{figure(task)}, {h.family} {label}: "
    f"{lr_pair(h, outcome.learning_rates)}]: {len(d.seeds)} pairs (seeds "
    f"{numbers.seeds(d.seeds)}{zeros}), correlation {correlation}; paired shift {shift}, "
    f"{tests}; unpaired: shift {format_shift(c, h.scale)}, {unpaired}."
  )


def paired_lines(analysis: Analysis) -> list[str]:
  lines = []
  for family in (analysis.primary, analysis.secondary):
    for index, verdict in enumerate(family, 1):
      several = len(verdict.outcomes) > 1
      for i, outcome in enumerate(verdict.outcomes):
        if outcome.paired is None or outcome.comparison is None:
          continue
        label = f"{index}{pair_letter(i) if several else ''}"
        lines.append(paired_line(analysis.task, label, verdict.hypothesis, outcome))
  return lines


def candidates_lines(analysis: Analysis) -> list[str]:
  """Each run's candidate lrs, with each other lr's rank-sum p against the selected."""
  lines = []
  for entry in analysis.candidates:
    head = f"- Candidates [{entry.run}]"
    if entry.selected is None:
      lines.append(f"{head}: none, every member diverged.")
      continue
    chosen, others = [], []
    for lr, p, candidate in entry.lrs:
      if runs_same(lr, entry.selected):
        chosen.append(f"lr {lr:g} (selected)")
      elif p is None:
        others.append(f"lr {lr:g} (every member diverged)")
      else:
        (chosen if candidate else others).append(f"lr {lr:g} (p = {p:.2g})")
    lines.append(
      f"{head}: {', '.join(chosen)}"
      + (f"; not candidates: {', '.join(others)}" if others else "")
      + "."
    )
  return lines


def runs_same(a: float, b: float) -> bool:
  return math.isclose(a, b, rel_tol=1e-9)


def contradiction_line(task: str, h: Hypothesis) -> str:
  gelu, baseline = (number(v, h.scale) for v in h.paper)
  side = "above" if h.direction == LOWER else "below"
  return (
    f"- Paper values [{figure(task)}, {h.describe()}]: the paper's text claims "
    f"{h.claim()}, but its values, {h.gelu} {gelu} vs {h.baseline} {baseline}, put {h.gelu} "
    f"{side} {h.baseline}: the values quoted contradict the claim's direction; the hypothesis "
    "tests the text's claim."
  )


def curve_line(run: str, learning_rate: float | None, kind: str, fact: Mapping[str, Any]) -> str:
  """One fact of :mod:`gelujax.study.curves` in words."""
  where = f"{run}, lr {learning_rate:g}" if learning_rate is not None else run
  if kind == "not_learning":
    return (
      f"- Does not learn [{where}]: median test error at the best epoch "
      f"{number(fact['median'], 100)}% (seeds {number(fact['low'], 100)}–"
      f"{number(fact['high'], 100)}%), above {curves.NOT_LEARNING_SHARE:.0%} of the chance "
      f"error ({number(fact['chance'], 100)}% for {fact['classes']} classes); final training loss "
      f"{number(fact['train_low'])}–{number(fact['train_high'])}."
    )
  if kind == "improving":
    return (
      f"- Still improving [{where}]: the median best epoch is {fact['median']:g} of "
      f"{fact['epoch']:g}, after {curves.IMPROVING_AFTER:.0%} of training; {fact['at_last']} of "
      f"{fact['members']} members have their best selection metric at the last evaluation: "
      "training stopped while the run still improved."
    )
  if kind == "spike":
    return (
      f"- Final value on a spike [{where}, seed {fact['seed']}]: its training loss at the last "
      f"evaluation (epoch {fact['epoch']:g}), {number(fact['value'])}, is {fact['ratio']:.3g}x "
      f"its running minimum {number(fact['running_min'])}: every final value of this member "
      "was taken on that spike."
    )
  if kind == "jump":
    return (
      f"- Unstable [{run}, lr {fact['learning_rate']:g}, seed {fact['seed']}]: training loss "
      f"{number(fact['value'])} at epoch {fact['epoch']:g}, {fact['ratio']:.3g}x its running "
      f"minimum {number(fact['running_min'])}."
    )
  raise ValueError(f"No wording rule for a curve fact of kind {kind!r}.")


def curve_lines(analysis: Analysis) -> list[str]:
  lines = [curve_line(*fact) for fact in analysis.curves if fact[2] != "jump"]
  jumps = [curve_line(*fact) for fact in analysis.curves if fact[2] == "jump"]
  if not jumps:
    jumps = [
      f"- Unstable: none; no member's training loss exceeds {curves.JUMP_RATIO:g}x its running "
      "minimum."
    ]
  return lines + jumps


def selection_lines(analysis: Analysis) -> list[str]:
  lines = []
  for s in analysis.selections:
    head = f"- Selection [{s.run}]"
    c = s.comparison
    if s.selected is None:
      lines.append(f"{head}: none, every member diverged.")
    elif c is None:
      only = "the grid's only lr" if s.lrs == 1 else "the only lr with a member not diverged"
      lines.append(f"{head}: lr {s.selected:g}, {only}.")
    else:
      lines.append(
        f"{head}: lr {s.selected:g} over lr {s.runner_up:g}, median best {s.metric} "
        f"{number(c.median_a)} vs {number(c.median_b)}; {effect(c)}."
      )
  return lines


def sensitivity_line(index: int, s: Sensitivity) -> str:
  h = s.hypothesis
  head = f"- Sensitivity [{h.family} {index}: {h.describe()}]"
  if s.reference is None:
    return f"{head}: no comparison at the selected lrs to set the fixed lrs against."
  reference, source = s.reference
  lr_gelu, lr_base = (f"{lr:g}" if lr is not None else "–" for lr in s.selected_lrs)
  parts = [
    f"at the selected lrs ({h.gelu} {lr_gelu}, {h.baseline} {lr_base}), {source}: "
    f"{verdict_effect(reference, h)}"
  ]
  for lr, c in s.at_lr.items():
    if c is None:
      parts.append(f"at lr {lr:g}: not evaluated for both runs")
      continue
    agrees = s.agrees(lr)
    word = {True: "agrees", False: "disagrees", None: "no sign to compare"}[agrees]
    parts.append(f"at lr {lr:g}, selection seeds: {verdict_effect(c, h)}: {word}")
  return f"{head}: " + "; ".join(parts) + "."


def write_findings(analysis: Analysis) -> dict[str, list[str]]:
  """The findings of a result, by section: each a list of ``- <Kind> ...`` lines."""
  task = analysis.task
  numbered = {id(v.hypothesis): i for family in (analysis.primary, analysis.secondary)
              for i, v in enumerate(family, 1)}  # fmt: skip
  earlier = [
    line
    for family in (analysis.earlier_primary, analysis.earlier_secondary)
    for line in verdict_lines(task, family, None, "Earlier design")
  ]
  sections = {
    "Verdicts": [
      line
      for family in (analysis.primary, analysis.secondary)
      for line in verdict_lines(task, family, analysis)
    ],
    "Verdicts of the earlier design (the selected lrs alone)": earlier,
    "Paired comparisons (exploratory)": paired_lines(analysis),
    "Paper values against their claim": [
      contradiction_line(task, h) for h in analysis.contradictions
    ],
    "What the curves show": curve_lines(analysis),
    "Learning-rate candidates": candidates_lines(analysis),
    "Learning-rate selection (exploratory)": selection_lines(analysis),
    "Fixed-lr sensitivity (exploratory)": [
      sensitivity_line(numbered[id(s.hypothesis)], s) for s in analysis.sensitivity
    ],
  }
  return {name: lines for name, lines in sections.items() if lines}


BASELINES_SECTION = "Baselines without training"


# The plural of each word of `gelujax.study.baselines.compare`.
_PLURAL = {lookups.BEATS: "beat", lookups.BARELY: "barely beat", lookups.NOT_BELOW: "do not beat"}


def with_baselines(sections: Mapping[str, list[str]], lines: Sequence[str]) -> dict[str, list[str]]:
  """``sections`` with the baselines' lines as a section right after the verdicts."""
  if not lines:
    return dict(sections)
  out: dict[str, list[str]] = {}
  for name, section_lines in sections.items():
    out[name] = section_lines
    if name == "Verdicts":
      out[BASELINES_SECTION] = list(lines)
  out.setdefault(BASELINES_SECTION, list(lines))
  return out


def _join(names: Sequence[str]) -> str:
  return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def _percent(count: int, total: int) -> str:
  return f"{number(count / total, 100)}%"


def unseen_words(spec: Mapping[str, Any]) -> str:
  """How the runs of ``spec`` (config.json's) read a word the training split does not hold:
  nothing to say with pretrained embeddings (the file decides); else UUUNKKK's vector, alone
  (never trained), or with the word's spelling (``spelling_mlp_twitter_pos``), trained by word
  dropout where the model replaces train words by UUUNKKK."""
  if spec["data_options"].get("embeddings"):
    return ""
  options = spec.get("model_options", {})
  words = ": the runs' vocabulary is those types, so each is read as UUUNKKK"
  if spec["model"] != "spelling_mlp_twitter_pos" and not options.get("buckets"):
    return words + ", a vector no training token reaches"
  trained = (
    "trained on the train words word dropout replaces by it"
    if options.get("word_dropout")
    else "a vector no training token reaches"
  )
  return f"{words} ({trained}) plus the word's own spelling (character n-grams, shape flags)"


def baseline_lines(
  task: str,
  found: Mapping[str, Any] | str | None,
  compared: Sequence[Mapping[str, Any]],
  *,
  spec: Mapping[str, Any],
) -> list[str]:
  """The lines of a result's baselines (:func:`gelujax.study.baselines.result_baselines`, or
  why there are none; None: its task has none) and of its runs against the lookup
  (:func:`gelujax.study.baselines.compare`). ``spec``: the runs' task, as config.json holds it,
  which says how they read an unseen word (:func:`unseen_words`)."""
  fig = figure(task)
  if found is None:
    return []
  if isinstance(found, str):
    return [f"- Lookup baseline [{fig}]: {found}."]
  lookup = found["lookup"]
  train, validation, test = lookup["train"], lookup["validation"], lookup["test"]
  oov = {k: lookup[k]["out_of_vocabulary"] for k in lookups.SPLITS}
  read_as = unseen_words(spec)
  lines = [
    f"- Out of vocabulary [{fig}]: {_percent(oov['validation']['cased'], validation['tokens'])}"
    f" of the validation tokens ({oov['validation']['cased']} of {validation['tokens']}) and "
    f"{_percent(oov['test']['cased'], test['tokens'])} of the test tokens "
    f"({oov['test']['cased']} of {test['tokens']}) are words the training split does not hold "
    f"(not among its {train['types']['cased']} word types, {train['tokens']} tokens){read_as}; "
    f"with every word lowercased, {_percent(oov['validation']['lowercased'], validation['tokens'])}"
    f" and {_percent(oov['test']['lowercased'], test['tokens'])} ("
    f"{oov['validation']['lowercased']} and {oov['test']['lowercased']}; "
    f"{train['types']['lowercased']} lowercased types)."
  ]
  errors = {k: lookup[k]["lookup_errors"] for k in lookups.SPLITS}
  groups: dict[tuple[str, str], list[str]] = {}
  for c in compared:
    key = (c["against"]["cased"]["word"], c["against"]["lowercased"]["word"])
    groups.setdefault(key, []).append(c["run"])
  summary = "; ".join(
    f"{_join(runs)} {(_PLURAL[cased] if len(runs) > 1 else cased)} the cased lookup and "
    f"{(_PLURAL[lower] if len(runs) > 1 else lower)} the lowercased one"
    for (cased, lower), runs in groups.items()
  )
  lines.append(
    f"- Lookup baseline [{fig}]: each word tagged with its most frequent tag in the training "
    f"split (ties: the tag seen first there; a word it does not hold: its most frequent tag, "
    f"{train['most_frequent_tag']}, {train['most_frequent_tag_tokens']} of {train['tokens']} "
    f"tokens), trained on nothing else, errs on {_percent(errors['test']['cased'], test['tokens'])}"
    f" of the test tokens ({errors['test']['cased']} of {test['tokens']}; validation "
    f"{_percent(errors['validation']['cased'], validation['tokens'])}) and on "
    f"{_percent(errors['test']['lowercased'], test['tokens'])} with every word lowercased "
    f"({errors['test']['lowercased']}; validation "
    f"{_percent(errors['validation']['lowercased'], validation['tokens'])}). "
    + (
      f"Against it, by the median {lookups.METRIC_WORDS}: {summary} (beats: a median below the "
      f"lookup's error by at least {lookups.BEATS_SHARE:.0%} of it, every seed below it; barely "
      "beats: a median below it otherwise)."
      if compared
      else "No run has test errors to set against it yet."
    )
  )
  for c in compared:
    parts = []
    for case, against in c["against"].items():
      n = len(c["seeds"])
      if against["below"] > 0:
        where = (
          f"{number(against['below'], 100, 3)} points below it ({against['share']:.1%} of its "
          "error)"
        )
      elif against["below"] < 0:
        where = f"{number(-against['below'], 100, 3)} points above it"
      else:
        where = "equal to it"
      parts.append(
        f"the {case} lookup's {number(against['lookup_error'], 100)}%: {where}, "
        f"{against['seeds_below']} of {n} seeds below it: {against['word']} it"
      )
    lines.append(
      f"- Against the lookup [{c['run']}, lr {c['learning_rate']:g}]: median "
      f"{lookups.METRIC_WORDS} {number(c['median'], 100)}% ({c['which']} "
      f"{numbers.seeds(c['seeds'])}); " + "; ".join(parts) + "."
    )
  return lines
