"""The committed results' verdicts and findings, re-derived from their runs' files by a second
code path.

Every hypothesis row and every finding line of each ``results/<dataset>/<task>/README.md``, and
the numbers of its tables and summary.json, are checked against what this file computes from
the runs' ``metrics.jsonl`` and ``config.json`` (and, for the noise experiment, ``noise/*.json``)
with NumPy and SciPy alone: each member's final and best-epoch values, the learning-rate
selection, the evaluation runs at the selected lr, exact rank-sum p-values (SciPy's exact
Mann-Whitney test; with ties, SciPy's permutation distribution of the mid-rank sum), the
Hodges-Lehmann shift and its exact interval (the Mann-Whitney null distribution from SciPy's
exact test), TOST, Holm's correction within each family, the verdicts, the seeds for 80% power,
and the rules of what the curves show. The hypotheses are restated here from PAPER.md, not
imported. A result whose evaluation runs are absent or unfinished must say *pending*; the checks
hold either way. The README must state exactly the lines expected here, in order.
"""

from __future__ import annotations

import collections
import functools
import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from gelujax.study import readme
from tests.fake_workdirs import constant, member, write_workdir

ROOT = Path(__file__).resolve().parents[1]
# A study result is a folder with its summary.json (as the overview lists them); others, such as
# results/twitter_pos/trial/, are the inputs of a choice, not results.
RESULTS = sorted(p.parent for p in (ROOT / "results").glob("*/*/summary.json"))
ALPHA, POWER = 0.05, 0.8
FIGURES = {"mnist": "Fig. 2", "mnist_noise": "Fig. 3", "mnist_ae": "Fig. 4", "twitter_pos": "§3.3"}
ORDER = ("gelu", "gelu_tanh", "relu", "elu", "silu")
CLASSES = {"mnist": 10, "fashion_mnist": 10, "twitter_pos": 25}


# ------------------------------------------------------------- the hypotheses, from PAPER.md

H = collections.namedtuple(
  "H", "family metric label baseline direction dropout lr a margin paper scale"
)


def pairs(family, metric, label, conditions, scale=1.0, paper=None):
  out = []
  for dropout, lr in conditions:
    values = (paper or {}).get(dropout if lr is None else lr, {})
    for baseline in ("relu", "elu"):
      out.append(
        H(family, metric, label, baseline, "lower", dropout, lr, None, None,
          (values.get("gelu_tanh"), values.get(baseline)), scale)
      )  # fmt: skip
  return out


HYPOTHESES = {
  "mnist": pairs(
    "primary", "final.train_loss", "final train log loss (nats)", [(0.0, None), (0.5, None)],
    paper={0.0: {"gelu_tanh": 0.008, "relu": 0.007, "elu": 0.013},
           0.5: {"gelu_tanh": 0.044, "relu": 0.35, "elu": 0.105}},
  ) + pairs(
    "secondary", "best.test_error", "test error (%) at the best-validation epoch",
    [(0.0, None), (0.5, None)], scale=100.0,
  ),
  "mnist_noise": [
    H("primary", f"accuracy@{a}", "test accuracy under noise", b, d, 0.0, None, a, m,
      ({1: 0.67, 3: 0.24}[a], None), 1.0)
    for b, d, m in (("elu", "higher", None), ("relu", "equivalent", 0.02)) for a in (1, 3)
  ],
  "mnist_ae": pairs(
    "primary", "final.test_loss", "final test MSE", [(None, 1e-3), (None, 1e-4)],
    paper={1e-3: {"gelu_tanh": 0.0044, "relu": 0.0097, "elu": 0.006}},
  ),
  "twitter_pos": pairs(
    "primary", "best.test_error", "test error (%) at the best-validation epoch", [(None, None)],
    scale=100.0, paper={None: {"gelu_tanh": 0.1257, "relu": 0.1267, "elu": 0.1291}},
  ) + pairs(
    "secondary", "final.test_error", "test error (%) after the last epoch", [(None, None)],
    scale=100.0,
  ),
}  # fmt: skip
# Tasks whose lr is not selected: each lr is tested on all seeds (the grid's and the extra ones).
NO_SELECTION = ("mnist_ae",)


def claim(h):
  if h.direction == "equivalent":
    return f"{h.baseline} within ±{h.margin:g} of gelu_tanh"
  return f"gelu_tanh {'below' if h.direction == 'lower' else 'above'} {h.baseline}"


def describe(h):
  parts = [f"dropout {h.dropout:g}"] if h.dropout is not None else []
  parts += [f"lr {h.lr:g}"] if h.lr is not None else []
  parts += [f"a = {h.a}"] if h.a is not None else []
  return f"{claim(h)}: {h.label}" + (f", {', '.join(parts)}" if parts else "")


# -------------------------------------------------------------------- numbers and statistics


def fmt(value, scale=1.0, digits=4):
  if value is None or (isinstance(value, float) and math.isnan(value)):
    return "–"
  if math.isinf(value):
    return "inf" if value > 0 else "-inf"
  return f"{value * scale:.{digits}g}"


def rank_p(a, b, alternative="two-sided"):
  """SciPy's exact Mann-Whitney p-value; with ties, the exact permutation distribution of the
  mid-rank sum (two-sided: at least as far from its mean), enumerated split by split."""
  return _rank_p(tuple(map(float, a)), tuple(map(float, b)), alternative)


@functools.cache  # The README's tables and its prose test the same samples again.
def _rank_p(a, b, alternative):
  a, b = np.asarray(a, float), np.asarray(b, float)
  if len(np.unique(np.concatenate([a, b]))) == len(a) + len(b):
    return float(scipy.stats.mannwhitneyu(a, b, alternative=alternative, method="exact").pvalue)
  # Every way of drawing len(a) of the pooled values (C(20, 10) = 184,756 for 10 seeds a side),
  # each split's rank sum from SciPy's mid-ranks, as scipy.stats.permutation_test enumerates
  # them (it does so in Python, one split at a time: minutes for the committed results).
  ranks = scipy.stats.rankdata(np.concatenate([a, b]))
  splits = np.fromiter(
    itertools.chain.from_iterable(itertools.combinations(range(len(ranks)), len(a))),
    dtype=np.int32,
  ).reshape(-1, len(a))
  totals, observed = ranks[splits].sum(axis=1), ranks[: len(a)].sum()
  if alternative == "two-sided":
    centre = len(a) * (len(ranks) + 1) / 2
    extreme = np.abs(totals - centre) >= abs(observed - centre) - 1e-9
  elif alternative == "greater":
    extreme = totals >= observed - 1e-9
  else:
    extreme = totals <= observed + 1e-9
  return float(extreme.mean())


@functools.cache
def u_cdf(m, n, k):
  """P(U <= k) for m and n values without ties: SciPy's exact one-sided p-value of samples
  built to have exactly U = k pairs of the first above the second."""
  if k < 0:
    return 0.0
  y = np.arange(n, dtype=float)
  counts, left = [], k
  for _ in range(m):  # Each value of x lies above min(left, n) of y's.
    counts.append(min(left, n))
    left -= counts[-1]
  x = np.array(counts, float) - 0.5
  return float(scipy.stats.mannwhitneyu(x, y, alternative="less", method="exact").pvalue)


def hl(a, b):
  """The Hodges-Lehmann shift and its exact 95% interval: (shift, low, high, level)."""
  m, n = len(a), len(b)
  diffs = np.sort((np.asarray(a, float)[:, None] - np.asarray(b, float)[None, :]).ravel())
  k = 0
  while u_cdf(m, n, k) <= 0.025:
    k += 1
  if k == 0:
    return float(np.median(diffs)), -math.inf, math.inf, 1.0
  return (
    float(np.median(diffs)),
    float(diffs[k - 1]),
    float(diffs[m * n - k]),
    1 - 2 * u_cdf(m, n, k - 1),
  )


def effect(a, b, scale=1.0, p=None):
  """The shift, its interval and ``p`` (a verdict's), else the rank-sum p."""
  shift, low, high, _ = hl(a, b)
  interval = f"[{fmt(low, scale, 3)}, {fmt(high, scale, 3)}]"
  p = rank_p(a, b) if p is None else p
  return f"shift {fmt(shift, scale, 3)} {interval}, p = {p:.2g}"


def holm(p):
  order = sorted(range(len(p)), key=lambda i: p[i])
  adjusted, running = [0.0] * len(p), 0.0
  for k, i in enumerate(order):
    running = max(running, min(1.0, (len(p) - k) * p[i]))
    adjusted[i] = running
  return adjusted


def seeds_for_power(a, b, level, margin=None):
  """The normal approximation the README states: shift = HL, se with n a side
  s * sqrt(pi/3 * 2/n), s the pooled sd; at least the seeds whose smallest p reaches the level."""
  a, b = np.asarray(a, float), np.asarray(b, float)
  shift = hl(a, b)[0]
  s = math.sqrt(
    (np.var(a, ddof=1) * (len(a) - 1) + np.var(b, ddof=1) * (len(b) - 1)) / (len(a) + len(b) - 2)
  )
  se1 = s * math.sqrt(math.pi / 3)
  norm = scipy.stats.norm
  beyond = margin is not None and abs(shift) > margin
  floor = next(
    n for n in range(1, 1001) if 2 / math.comb(2 * n, n) < (level / 2 if beyond else level)
  )
  if margin is None or beyond:
    eff = abs(shift) - (margin or 0.0)
    if eff == 0:
      return None
    z = norm.ppf(1 - level / 2) if margin is None else norm.ppf(1 - level / 4)
    needed = math.ceil(2 * (se1 * (z + norm.ppf(POWER)) / eff) ** 2)
  else:
    if abs(shift) == margin:
      return None
    z = norm.ppf(1 - level / 2)
    needed = None
    for n in range(2, 1001):
      se = se1 * math.sqrt(2 / n)
      power = (
        1.0
        if se == 0
        else 1 - norm.cdf(z - (margin - shift) / se) - norm.cdf(z - (margin + shift) / se)
      )
      if power >= POWER:
        needed = n
        break
    if needed is None:
      return None
  needed = max(needed, floor)
  return needed if needed <= 1000 else None


def describe_seeds(seeds):
  parts = []
  for s in sorted(set(seeds)):
    if parts and s == parts[-1][-1] + 1:
      parts[-1].append(s)
    else:
      parts.append([s])
  return ", ".join(f"{p[0]}–{p[-1]}" if len(p) > 2 else ", ".join(map(str, p)) for p in parts)


# ------------------------------------------------------------------ the runs, read directly


class Run:
  """A run's members from its metrics.jsonl: per (lr, seed), its records in epoch order."""

  def __init__(self, workdir: Path):
    self.workdir, self.name = workdir, workdir.name
    self.config = json.loads((workdir / "config.json").read_text())
    self.activation = self.config["activation"]
    self.dropout = float(self.config["spec"]["dropout"])
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    self.members = collections.defaultdict(list)
    for r in records:
      self.members[(r["learning_rate"], r["seed"])].append(r)
    for rs in self.members.values():
      rs.sort(key=lambda r: r["epoch"])
    self.lrs = list(dict.fromkeys(lr for lr, _ in self.members))
    self.select = self.config["spec"].get("select_metric", "validation_loss")
    if not any(self.select in r for r in records):
      self.select = self.select.replace("validation", "test")
    self.last = max(r["epoch"] for r in records)

  def diverged(self, lr, seed):
    return any(r["diverged"] for r in self.members[(lr, seed)])

  def seeds(self, lr=None):
    return sorted({s for found, s in self.members if lr is None or found == lr})

  def kept(self, lr):
    return [s for s in self.seeds(lr) if not self.diverged(lr, s)]

  def best(self, lr, seed):
    """The record of the member's lowest selection metric (the earliest of equals)."""
    records = [r for r in self.members[(lr, seed)] if r.get(self.select) is not None]
    return min(records, key=lambda r: r[self.select]) if records else None

  def value(self, lr, seed, key):
    where, metric = key.split(".")
    record = self.best(lr, seed) if where == "best" else self.members[(lr, seed)][-1]
    return None if record is None else record.get(metric)

  def values(self, lr, key):
    out = []
    for seed in self.kept(lr):
      v = self.value(lr, seed, key)
      if v is not None and math.isfinite(v):
        out.append(float(v))
    return out

  def selection_values(self, lr):
    return [
      math.inf if self.diverged(lr, s) else self.best(lr, s)[self.select] for s in self.seeds(lr)
    ]

  def ranked_lrs(self):
    kept = [lr for lr in self.lrs if self.kept(lr)]
    return sorted(kept, key=lambda lr: float(np.median(self.selection_values(lr))))

  def selected(self):
    return self.ranked_lrs()[0] if self.ranked_lrs() else None


def finished(workdir):
  return (workdir / "summary.json").exists()


# ------------------------------------------------------------------ the expected README


class Expected:
  """Everything one result's README should state, computed from its files."""

  def __init__(self, folder: Path):
    self.folder = folder
    self.summary = json.loads((folder / "summary.json").read_text())
    self.task = self.summary["task"]
    self.noise = self.task.endswith("_noise")
    self.base = self.task.removesuffix("_noise")
    self.figure = FIGURES[self.task]
    self.select = self.base not in NO_SELECTION
    if self.noise:
      self.kept = {
        p.stem: json.loads(p.read_text()) for p in sorted((folder / "noise").glob("*.json"))
      }
      workdirs = {}
      for result in self.kept.values():
        workdir = ROOT / result["workdir"]
        workdir = workdir.parent / workdir.name.removesuffix("_eval")
        workdirs[workdir.name] = workdir
      runs = [Run(w) for w in workdirs.values()]
    else:
      runs = [Run(p) for p in sorted((folder / "runs").glob("*/")) if not p.name.endswith("_eval")]
    self.runs = sorted(runs, key=lambda r: (r.dropout, ORDER.index(r.activation)))
    self.evaluation = {}
    for run in self.runs:
      workdir = run.workdir.parent / f"{run.name}_eval"
      if finished(workdir):
        self.evaluation[run.name] = Run(workdir)
    self.has_evaluation = bool(self.evaluation) or self.base in HYPOTHESES

  def find(self, activation, dropout):
    return next(
      (
        r
        for r in self.runs
        if r.activation == activation and (dropout is None or r.dropout == dropout)
      ),
      None,
    )

  def noise_values(self, run, lr, key):
    result = self.kept.get(f"{run.name}_lr{lr:g}")
    if result is None:
      return None
    measure, a = key.split("@")
    return [float(np.interp(float(a), result["levels"], s)) for s in result[measure]]

  def eval_values(self, run, key, lr=None):
    """The evaluation run's values (at its one lr, or at ``lr``), or the pending reason."""
    evaluation = self.evaluation.get(run.name)
    if evaluation is None:
      return "pending: evaluation seeds not trained"
    expected = [run.selected()] if self.select else run.lrs
    assert evaluation.lrs == expected, (evaluation.name, evaluation.lrs, expected)
    if self.select:
      assert not set(evaluation.seeds()) & set(run.seeds()), evaluation.name
    lr = evaluation.lrs[0] if lr is None else lr
    if self.noise:
      values = self.noise_values(evaluation, lr, key)
      return (
        "pending: noise evaluation of the evaluation seeds not run" if values is None else values
      )
    return evaluation.values(lr, key)

  def evidence(self, h):
    dropout = h.dropout if h.dropout is not None else (self.runs[0].dropout)
    found = [self.find(a, dropout) for a in ("gelu_tanh", h.baseline)]
    missing = [a for a, r in zip(("gelu_tanh", h.baseline), found, strict=True) if r is None]
    if missing:
      return f"not run: no {' or '.join(missing)} run with dropout {dropout:g}"
    sides, seeds = [], ""
    for run in found:
      if self.select:
        values = self.eval_values(run, h.metric)
        if isinstance(values, str):
          return values
        seeds = (
          f"evaluation seeds {describe_seeds(self.evaluation[run.name].seeds())} at the selected lr"
        )
      else:
        extra = self.eval_values(run, h.metric, h.lr)
        if isinstance(extra, str):
          return extra
        values = run.values(h.lr, h.metric) + extra
        seeds = f"seeds {describe_seeds(run.seeds() + self.evaluation[run.name].seeds())}"
      if not values:
        return f"no values: every member of {run.name} diverged"
      sides.append(values)
    return sides[0], sides[1], seeds

  def verdicts(self, family):
    """Per hypothesis of ``family``: (h, evidence, p, holm, verdict words)."""
    hs = [h for h in HYPOTHESES.get(self.task, []) if h.family == family]
    found = [self.evidence(h) for h in hs]
    ps = []
    for h, e in zip(hs, found, strict=True):
      if isinstance(e, str):
        ps.append(1.0)
      elif h.direction == "equivalent":
        a, b = np.asarray(e[0]), np.asarray(e[1])
        tost = max(rank_p(a + h.margin, b, "greater"), rank_p(a - h.margin, b, "less"))
        beyond = min(
          1.0, 2 * min(rank_p(a - h.margin, b, "greater"), rank_p(a + h.margin, b, "less"))
        )
        ps.append((min(1.0, 2 * min(tost, beyond)), tost <= beyond))
      else:
        ps.append(rank_p(*e[:2]))
    plain = [p[0] if isinstance(p, tuple) else p for p in ps]
    adjusted = holm(plain)
    out = []
    for h, e, p, adj in zip(hs, found, ps, adjusted, strict=True):
      if isinstance(e, str):
        out.append((h, e, 1.0, adj, e))
        continue
      p_value = p[0] if isinstance(p, tuple) else p
      if adj < ALPHA and isinstance(p, tuple):
        words = "equivalent" if p[1] else "refuted"
      elif adj < ALPHA:
        pooled = scipy.stats.rankdata(np.concatenate([e[0], e[1]]))
        below = pooled[: len(e[0])].sum() < len(e[0]) * (len(pooled) + 1) / 2
        words = "confirmed" if below == (h.direction == "lower") else "refuted"
      else:
        n = seeds_for_power(e[0], e[1], ALPHA / len(hs), h.margin)
        shift = hl(*e[:2])[0]
        if n is not None:
          words = f"inconclusive: {n} seeds a side for 80% power at the observed effect"
        elif len(e[0]) + len(e[1]) < 3:
          words = "inconclusive: too few seeds to estimate the seeds a side 80% power would need"
        elif abs(shift) == (h.margin or 0.0):
          where = "at the margin" if h.margin else "of 0"
          words = f"inconclusive: no number of seeds decides the observed shift {where}"
        else:
          words = "inconclusive: more than 1000 seeds a side for 80% power at the observed effect"
      out.append((h, e, p_value, adj, words))
    return out

  # --- the README's parts

  def table_rows(self, family):
    rows = []
    for i, (h, e, p, adj, words) in enumerate(self.verdicts(family), 1):
      paper = (
        "–" if all(v is None for v in h.paper) else " vs ".join(fmt(v, h.scale) for v in h.paper)
      )
      if isinstance(e, str):
        rows.append(f"| {i} | {describe(h)} | {paper} | – | – | – | – | {words} |")
        continue
      a, b, seeds = e
      shift, low, high, _ = hl(a, b)
      rows.append(
        f"| {i} | {describe(h)} | {paper} | {fmt(np.median(a), h.scale)} vs "
        f"{fmt(np.median(b), h.scale)} ({seeds}; {len(a)} vs {len(b)}) | "
        f"{fmt(shift, h.scale, 3)} [{fmt(low, h.scale, 3)}, {fmt(high, h.scale, 3)}] | "
        f"{p:.2g} | {adj:.2g} | {words} |"
      )
    return rows

  def verdict_lines(self):
    lines = []
    for family in ("primary", "secondary"):
      for i, (h, e, p, adj, words) in enumerate(self.verdicts(family), 1):
        head = f"- Hypothesis [{self.figure}, {family} {i}]: {describe(h)}"
        if isinstance(e, str):
          lines.append(f"{head}: {words}.")
        else:
          a, b, seeds = e
          lines.append(
            f"{head}: {words} (gelu_tanh {fmt(np.median(a), h.scale)} vs {h.baseline} "
            f"{fmt(np.median(b), h.scale)}, {seeds}; {effect(a, b, h.scale, p)}, "
            f"Holm {adj:.2g})."
          )
    return lines

  def contradiction_lines(self):
    lines = []
    for h in HYPOTHESES.get(self.task, []):
      g, b = h.paper
      if g is None or b is None or h.direction == "equivalent":
        continue
      if (g > b) if h.direction == "lower" else (g < b):
        side = "above" if h.direction == "lower" else "below"
        lines.append(
          f"- Paper values [{self.figure}, {describe(h)}]: the paper's text claims {claim(h)}, but "
          f"its values, gelu_tanh {fmt(g, h.scale)} vs {h.baseline} {fmt(b, h.scale)}, put "
          f"gelu_tanh {side} {h.baseline}: the values quoted contradict the claim's direction; "
          "the hypothesis tests the text's claim."
        )
    return lines

  def curve_lines(self):
    lines, jumps = [], []
    shown = [(run, [run.selected()] if self.select else run.lrs) for run in self.runs]
    shown += [
      (self.evaluation[r.name], self.evaluation[r.name].lrs)
      for r in self.runs
      if r.name in self.evaluation
    ]
    for run, lrs in shown:
      for lr in lrs:
        if lr is None:
          continue
        seeds = run.kept(lr)
        errors = [run.value(lr, s, "best.test_error") for s in seeds]
        errors = [e for e in errors if e is not None]
        classes = CLASSES.get(run.config["dataset"])
        if classes and errors and np.median(errors) > 0.5 * (1 - 1 / classes):
          train = [run.members[(lr, s)][-1]["train_loss"] for s in seeds]
          lines.append(
            f"- Does not learn [{run.name}, lr {lr:g}]: median test error at the best epoch "
            f"{fmt(np.median(errors), 100)}% (seeds {fmt(min(errors), 100)}–"
            f"{fmt(max(errors), 100)}%), "
            f"above 50% of the chance error ({fmt(1 - 1 / classes, 100)}% for {classes} classes); "
            f"final training loss {fmt(min(train))}–{fmt(max(train))}."
          )
        best = [run.best(lr, s)["epoch"] for s in seeds]
        if best and np.median(best) > 0.8 * run.last:
          lines.append(
            f"- Still improving [{run.name}, lr {lr:g}]: the median best epoch is "
            f"{np.median(best):g} of {run.last:g}, after 80% of training; "
            f"{sum(b == run.last for b in best)} of {len(best)} members have their best selection "
            "metric at the last evaluation: training stopped while the run still improved."
          )
        for s in seeds:
          losses = [
            r["train_loss"] for r in run.members[(lr, s)] if r.get("train_loss") is not None
          ]
          if len(losses) > 1 and losses[-1] > 2 * min(losses[:-1]):
            lines.append(
              f"- Final value on a spike [{run.name}, lr {lr:g}, seed {s}]: its training loss at "
              f"the last evaluation (epoch {run.last:g}), {fmt(losses[-1])}, is "
              f"{losses[-1] / min(losses[:-1]):.3g}x its running minimum {fmt(min(losses[:-1]))}: "
              "every final value of this member was taken on that spike."
            )
    for run, _ in shown:
      for (lr, seed), records in run.members.items():
        lowest, inside, found = math.inf, False, []
        for r in records:
          loss = r.get("train_loss")
          if loss is None:
            continue
          if loss > 2 * lowest:
            jump = (r["epoch"], loss, lowest)
            if not inside:
              found.append(jump)
            elif loss / lowest > found[-1][1] / found[-1][2]:
              found[-1] = jump
            inside = True
          else:
            inside = False
          lowest = min(lowest, loss)
        jumps += [
          f"- Unstable [{run.name}, lr {lr:g}, seed {seed}]: training loss {fmt(v)} at epoch "
          f"{e:g}, {v / m:.3g}x its running minimum {fmt(m)}."
          for e, v, m in found
        ]
    if not jumps:
      jumps = ["- Unstable: none; no member's training loss exceeds 2x its running minimum."]
    return lines + jumps

  def selection_lines(self):
    if not self.select:
      return []
    lines = []
    for run in self.runs:
      ranked = run.ranked_lrs()
      if not ranked:
        lines.append(f"- Selection [{run.name}]: none, every member diverged.")
      elif len(ranked) == 1:
        only = (
          "the grid's only lr" if len(run.lrs) == 1 else "the only lr with a member not diverged"
        )
        lines.append(f"- Selection [{run.name}]: lr {ranked[0]:g}, {only}.")
      else:
        a, b = run.selection_values(ranked[0]), run.selection_values(ranked[1])
        lines.append(
          f"- Selection [{run.name}]: lr {ranked[0]:g} over lr {ranked[1]:g}, median best "
          f"{run.select} {fmt(np.median(a))} vs {fmt(np.median(b))}; {effect(a, b)}."
        )
    return lines

  def selection_values_at(self, run, lr, key):
    if lr is None:
      lr = run.selected()
    if self.noise:
      return self.noise_values(run, lr, key)
    return run.values(lr, key) if lr in run.lrs else None

  def sensitivity_lines(self):
    if not self.select:
      return []
    lines = []
    lrs_noise = list(dict.fromkeys(r.selected() for r in self.runs if r.selected() is not None))
    for family in ("primary", "secondary"):
      for i, (h, e, *_) in enumerate(self.verdicts(family), 1):
        dropout = h.dropout if h.dropout is not None else self.runs[0].dropout
        g, b = self.find("gelu_tanh", dropout), self.find(h.baseline, dropout)
        if g is None or b is None:
          continue
        head = f"- Sensitivity [{family} {i}: {describe(h)}]"
        ref = None
        if not isinstance(e, str):
          ref = (e[0], e[1], "evaluation seeds")
        else:
          va, vb = (
            self.selection_values_at(g, None, h.metric),
            self.selection_values_at(b, None, h.metric),
          )
          if va and vb:
            ref = (va, vb, "selection seeds")
        if ref is None:
          lines.append(f"{head}: no comparison at the selected lrs to set the fixed lrs against.")
          continue
        parts = [
          f"at the selected lrs (gelu_tanh {g.selected():g}, {h.baseline} {b.selected():g}), "
          f"{ref[2]}: {effect(ref[0], ref[1], h.scale)}"
        ]
        ref_sign = np.sign(hl(ref[0], ref[1])[0])
        lrs = lrs_noise if self.noise else [lr for lr in g.lrs if lr in b.lrs]
        for lr in lrs:
          va, vb = (
            self.selection_values_at(g, lr, h.metric),
            self.selection_values_at(b, lr, h.metric),
          )
          if not va or not vb:
            parts.append(f"at lr {lr:g}: not evaluated for both runs")
            continue
          here = np.sign(hl(va, vb)[0])
          word = (
            "no sign to compare"
            if not here or not ref_sign
            else ("agrees" if here == ref_sign else "disagrees")
          )
          parts.append(f"at lr {lr:g}, selection seeds: {effect(va, vb, h.scale)}: {word}")
        lines.append(f"{head}: " + "; ".join(parts) + ".")
    return lines

  def sections(self):
    sections = {
      "Verdicts": self.verdict_lines(),
      "Paper values against their claim": self.contradiction_lines(),
      "What the curves show": self.curve_lines(),
      "Learning-rate selection (exploratory)": self.selection_lines(),
      "Fixed-lr sensitivity (exploratory)": self.sensitivity_lines(),
    }
    return {name: lines for name, lines in sections.items() if lines}


def readme_sections(text):
  """The README's findings: section title -> its lines."""
  findings = text.split("\n## Findings\n", 1)[1].split("\n## Tables\n", 1)[0]
  sections = {}
  for part in findings.split("\n### ")[1:]:
    title, *lines = part.splitlines()
    sections[title] = [line for line in lines if line.startswith("- ")]
  return sections


def table_rows(text, heading):
  """The rows of the Markdown table under ``heading`` (a line of the text)."""
  lines = text.split(f"\n{heading}\n", 1)[1].splitlines()
  start = next(i for i, line in enumerate(lines) if line.startswith("| "))
  rows = []
  for line in lines[start + 2 :]:
    if not line.startswith("| "):
      break
    rows.append(line)
  return rows


def check_result(folder):
  expected = Expected(folder)
  text = (folder / "README.md").read_text()
  assert table_rows(text, "## Primary hypotheses") == expected.table_rows(
    "primary"
  ) or not expected.table_rows("primary")
  if expected.table_rows("secondary"):
    assert table_rows(text, "## Secondary hypotheses") == expected.table_rows("secondary")
  assert readme_sections(text) == expected.sections()
  check_tables(expected)


def stats(values):
  x = np.asarray(values, float)
  return {
    "median": float(np.median(x)), "mean": float(np.mean(x)),
    "std": float(np.std(x, ddof=1)) if len(x) > 1 else math.nan, "n": len(x), "values": list(x),
  }  # fmt: skip


def check_tables(expected):
  """summary.json's per-run statistics, and table.md's rows of the runs at their lr (noise:
  the medians of each kept evaluation's seeds at a = 0, 1, 3)."""
  if expected.noise:
    table = (expected.folder / "table.md").read_text()
    for run in expected.runs:
      evaluation = expected.evaluation.get(run.name)
      name, lr = (evaluation.name, evaluation.lrs[0]) if evaluation else (run.name, run.selected())
      result = expected.kept.get(f"{name}_lr{lr:g}")
      if evaluation and result is None:  # Not evaluated yet: the selection grid is shown.
        name, lr = run.name, run.selected()
        result = expected.kept.get(f"{name}_lr{lr:g}")
      if result is None:
        continue
      cells = [
        fmt(np.median([np.interp(a, result["levels"], s) for s in result[key]]), digits=3)
        for key in ("accuracy", "loss")
        for a in (0.0, 1.0, 3.0)
      ]
      line = next(line for line in table.splitlines() if line.startswith(f"| {name} | {lr:g} |"))
      found = [c.strip().split(" ")[0] for c in line.split("|")[5:-1]]
      assert found == cells, (line, cells)
    return
  summary = expected.summary
  rows = {row["run"]: row for row in summary["rows"]}
  rows |= summary.get("evaluation_rows", {})
  runs = [*expected.runs, *expected.evaluation.values()]
  assert sorted(rows) == sorted(r.name for r in runs)
  table = (expected.folder / "table.md").read_text()
  report = summary["report"]
  for run in runs:
    row = rows[run.name]
    for g in row["grid"]:
      lr = g["learning_rate"]
      assert g["seeds"] == run.seeds(lr)
      assert g["diverged"] == len(run.seeds(lr)) - len(run.kept(lr))
      for key, found in g["metrics"].items():
        want = stats(run.values(lr, key))
        for field in ("median", "mean", "std"):
          if math.isnan(want[field]):
            assert found[field] is None or math.isnan(found[field])
          else:
            assert found[field] == pytest.approx(want[field], rel=1e-12), (run.name, lr, key, field)
        assert found["values"] == pytest.approx(want["values"], rel=1e-12)
    # table.md: the median and mean ± std of the reported metric at the lr the table shows.
    lr = report["learning_rate"] or (
      run.selected() if not run.name.endswith("_eval") else run.lrs[0]
    )
    want = stats(run.values(lr, report["metric"]))
    scale = report["scale"]
    spread = f"{fmt(want['mean'], scale)} ± {fmt(want['std'], scale, 2)}"
    cells = f"| {fmt(want['median'], scale)} | {spread} |"
    line = next(line for line in table.splitlines() if line.startswith(f"| {run.name} | {lr:g} | "))
    assert cells in line, (line, cells)


@pytest.mark.parametrize("folder", RESULTS, ids=[f"{p.parent.name}/{p.name}" for p in RESULTS])
def test_every_verdict_and_finding_is_rederived_from_the_runs_files(folder):
  check_result(folder)


# A verdict line's parenthesis, and a table row's "ours" cell.
VERDICT_TAIL = re.compile(
  r" \((?P<gelu>\S+) (?P<median_a>\S+) vs (?P<baseline>\S+) (?P<median_b>\S+), (?P<seeds>.+); "
  r"shift (?P<shift>\S+ \[\S+, \S+\]), p = (?P<p>\S+), Holm (?P<holm>\S+)\)\."
)
OURS_CELL = re.compile(r"(?P<median_a>\S+) vs (?P<median_b>\S+) \((?P<seeds>.+); \d+ vs \d+\)")


def check_verdict_lines_against_table(text, lines, figure):
  """Each ``- Hypothesis`` line of ``lines`` states its table row's claim, verdict, medians,
  seeds, shift and interval, p and Holm p (the rows of ``text``'s hypothesis tables)."""
  for family in ("primary", "secondary"):
    heading = f"## {family.capitalize()} hypotheses"
    rows = table_rows(text, heading) if f"\n{heading}\n" in text else []
    found = [line for line in lines if line.startswith(f"- Hypothesis [{figure}, {family} ")]
    assert len(found) == len(rows), (family, found, rows)
    for row, line in zip(rows, found, strict=True):
      i, claim, _, ours, shift, p, holm, verdict = row[2:-2].split(" | ")
      head = f"- Hypothesis [{figure}, {family} {i}]: {claim}: {verdict}"
      assert line.startswith(head), (line, row)
      tail = line[len(head) :]
      if ours == "–":
        assert (tail, shift, p, holm) == (".", "–", "–", "–"), (line, row)
        continue
      said, cell = VERDICT_TAIL.fullmatch(tail), OURS_CELL.fullmatch(ours)
      assert said and cell, (line, row)
      assert said["gelu"] in claim and said["baseline"] in claim, (line, row)
      keys = ("median_a", "median_b", "seeds")
      assert [said[k] for k in keys] == [cell[k] for k in keys], (line, row)
      assert (said["shift"], said["p"], said["holm"]) == (shift, p, holm), (line, row)


@pytest.mark.parametrize("folder", RESULTS, ids=[f"{p.parent.name}/{p.name}" for p in RESULTS])
def test_each_verdict_line_states_its_table_rows_numbers(folder):
  """The README's verdict lines and the results overview's lines of this result give the
  numbers of its hypothesis tables: an equivalence claim's p is the TOST-or-beyond p, not the
  rank-sum p of its shift."""
  text = (folder / "README.md").read_text()
  figure = FIGURES[json.loads((folder / "summary.json").read_text())["task"]]
  check_verdict_lines_against_table(text, readme_sections(text)["Verdicts"], figure)
  overview = overview_blocks((ROOT / "README.md").read_text())[str(folder.relative_to(ROOT))]
  check_verdict_lines_against_table(text, [line.strip() for line in overview], figure)


def grid_marks(text, heading):
  """(run, lr) of the rows of the grid table under ``heading`` that mark their lr selected."""
  if f"\n{heading}\n" not in text:
    return None
  marked = set()
  for row in table_rows(text, heading):
    run, lr = row[2:-2].split(" | ")[:2]
    if lr.endswith(" (selected)"):
      marked.add((run, lr.removesuffix(" (selected)")))
  return marked


@pytest.mark.parametrize("folder", RESULTS, ids=[f"{p.parent.name}/{p.name}" for p in RESULTS])
def test_the_grid_table_marks_an_lr_selected_only_where_the_design_selects_it(folder):
  """Every lr of the selection grids: each run's selected lr marked where the design selects
  one (the lowest median best selection metric), no lr where it selects none (Fig. 4 tests each
  lr), whatever lr the table above shows."""
  expected = Expected(folder)
  if expected.noise:
    return
  want = set()
  if expected.select:
    want = {(run.name, f"{run.selected():g}") for run in expected.runs if run.selected()}
  readme_marks = grid_marks(
    (folder / "README.md").read_text(), "### Every learning rate of the selection grids"
  )
  table_marks = grid_marks(
    (folder / "table.md").read_text(), "## Every learning rate of the selection grids"
  )
  assert readme_marks == table_marks == want


def test_the_checks_hold_for_a_result_with_its_evaluation_seeds(tmp_path):
  """Synthetic Fig. 2 runs: 5 selection seeds, 10 evaluation seeds where the claims are
  decided (gelu_tanh well below relu, beside elu), one jump, one run that does not learn."""
  rng = np.random.default_rng(0)
  out = tmp_path / "results" / "fashion_mnist" / "mnist"
  centres = {"gelu_tanh": 0.05, "relu": 0.10, "elu": 0.0502}
  for activation, centre in centres.items():
    for dropout in (0.0, 0.5):
      name = activation if dropout == 0 else f"{activation}_dropout0.5"
      selection = []
      for i, lr in enumerate((1e-3, 1e-4)):
        for seed in range(5):
          train = [0.5, 0.3, centre * (1 + i) + rng.normal(0, 0.002)]
          if (name, lr, seed) == ("elu", 1e-3, 3):
            train = [0.5, 0.1, 0.35]  # A jump, at the last epoch: 3.5x the running minimum.
          error = 0.6 if name == "relu_dropout0.5" else 0.12
          selection.append(
            member(seed, lr, train_loss=train,
                   validation_loss=[0.5, 0.3 + 0.1 * i + rng.normal(0, 0.001), 0.4],
                   validation_error=constant(0.1), test_loss=constant(0.4),
                   test_error=[0.7, error + rng.normal(0, 0.001), error + 0.01])
          )  # fmt: skip
      write_workdir(out / "runs" / name, selection, activation=activation, dropout=dropout)
      if name != "elu_dropout0.5":  # Its evaluation seeds are not trained: pending.
        evaluation = [
          member(seed, 1e-3, train_loss=[0.5, 0.3, centre + rng.normal(0, 0.002)],
                 validation_loss=[0.5, 0.3, 0.4], validation_error=constant(0.1),
                 test_loss=constant(0.4), test_error=[0.7, 0.12 + rng.normal(0, 0.002), 0.13])
          for seed in range(100, 110)
        ]  # fmt: skip
        write_workdir(
          out / "runs" / f"{name}_eval", evaluation, activation=activation, dropout=dropout
        )
  from gelujax import study

  study.render("mnist", out=out, root=tmp_path)
  text = (out / "README.md").read_text()
  verdicts = [row.split(" | ")[-1] for row in table_rows(text, "## Primary hypotheses")]
  assert verdicts[0] == "confirmed |" and verdicts[3] == "pending: evaluation seeds not trained |"
  assert (
    "- Unstable [elu, lr 0.001, seed 3]" in text and "- Does not learn [relu_dropout0.5" in text
  )
  check_result(out)


def overview_blocks(text):
  """The README's results overview: result folder -> its indented lines."""
  section = text.split(readme.OVERVIEW_BEGIN, 1)[1].split(readme.OVERVIEW_END, 1)[0]
  blocks = {}
  for line in section.strip("\n").splitlines():
    if line.startswith("- [`"):
      current = line.split("`")[1].rstrip("/")
      blocks[current] = []
    else:
      blocks[current].append(line)
  return blocks


def test_the_readme_results_overview_leads_with_each_results_verdicts():
  text = (ROOT / "README.md").read_text()
  assert readme.results_overview(ROOT) in text, (
    "README.md's results overview differs from the committed results: run "
    "`python experiments/reproduce.py --task=<task> --dataset=<dataset> --render` on any result"
  )
  blocks = overview_blocks(text)
  assert sorted(blocks) == sorted(str(f.relative_to(ROOT)) for f in RESULTS)
  for where, lines in blocks.items():
    expected = Expected(ROOT / where)
    keep = ("- Does not learn [", "- Final value on a spike [")
    curves = [line for line in expected.curve_lines() if line.startswith(keep)]
    wanted = expected.verdict_lines() + expected.contradiction_lines() + curves
    assert lines == [f"  {line}" for line in wanted], where


def test_the_readme_results_prose_states_no_ranking_or_significance():
  text = (ROOT / "README.md").read_text()
  section = text.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
  prose = section.replace(readme.results_overview(ROOT), "").lower()
  phrases = ("beyond the", "within the seed", "significan", "outperform", "lowest", "highest")
  phrases += ("ranks first", "better than", "worse than", "p = ", "p < ")
  # The verdicts' names may be listed, never given to a claim by hand.
  for verdict in ("confirmed", "refuted", "equivalent", "inconclusive"):
    assert not re.search(rf"(is|are|was|were|stays?) {verdict}", prose), verdict
  for phrase in phrases:
    assert phrase not in prose, phrase
