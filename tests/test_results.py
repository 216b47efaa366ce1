"""The committed results' findings, re-derived from their runs' files by a second code path.

Every finding line of each ``results/<dataset>/<task>/README.md`` is parsed and checked against
statistics computed here from the runs' ``metrics.jsonl`` (and, for the noise experiment,
``noise/*.json``) with NumPy and SciPy alone: each member's final and best-epoch values, the
learning-rate selection, exact rank-sum p-values (SciPy's permutation distribution of the
rank sum, mid-ranks for ties), Holm's correction over every test the README states, the
outcome's wording, training-loss jumps. The README must state exactly the findings expected
here (no ranking, selection, comparison, claim or jump missing or added), and the top-level
README's results overview must be the one generated from the committed summaries.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.stats

from gelujax import study
from tests.fake_workdirs import constant, member, write_workdir

ROOT = Path(__file__).resolve().parents[1]
RESULTS = sorted(p.parent for p in (ROOT / "results").glob("*/*/README.md"))
WORDS = {
  "beyond": "beyond the seed spread",
  "uncorrected": "p < 0.05 before correction only",
  "within": "within the seed spread",
}
# Metric headings of the tables -> (source key, scale, lower is better).
METRICS = {
  "final train log loss (nats)": ("final.train_loss", 1.0, True),
  "test error (%) at best-validation_loss epoch": ("best.test_error", 100.0, True),
  "test loss at best-validation_loss epoch": ("best.test_loss", 1.0, True),
  "final test MSE": ("final.test_loss", 1.0, True),
  "test loss at best-test_loss epoch": ("best.test_loss", 1.0, True),
  "test accuracy a=1": ("accuracy@1", 1.0, False),
  "test accuracy a=3": ("accuracy@3", 1.0, False),
  "test log loss a=1": ("loss@1", 1.0, True),
  "test log loss a=3": ("loss@3", 1.0, True),
}
# The orders the paper states (PAPER.md), per task: (metric key, GELU, baseline, at every lr).
CLAIMS = {
  "mnist": [("final.train_loss", "gelu_tanh", b, False) for b in ("relu", "elu")],
  "mnist_ae": [("final.test_loss", "gelu_tanh", b, True) for b in ("relu", "elu")],
  "mnist_noise": [(f"accuracy@{a}", "gelu_tanh", "elu", False) for a in (1, 3)],
}


# ------------------------------------------------------------------ the runs, read directly


class Run:
  """A run's members from its metrics.jsonl: per (lr, seed), its records in epoch order."""

  def __init__(self, workdir: Path):
    self.name = workdir.name
    config = json.loads((workdir / "config.json").read_text())
    self.activation = config["activation"]
    self.dropout = float(config["spec"]["dropout"])
    records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
    self.members = collections.defaultdict(list)
    for r in records:
      self.members[(r["learning_rate"], r["seed"])].append(r)
    for rs in self.members.values():
      rs.sort(key=lambda r: r["epoch"])
    self.lrs = list(dict.fromkeys(lr for lr, _ in self.members))
    has_validation = any("validation_loss" in r for r in records)
    self.select = "validation_loss" if has_validation else "test_loss"

  def diverged(self, lr, seed):
    return any(r["diverged"] for r in self.members[(lr, seed)])

  def seeds(self, lr):
    return sorted(seed for member_lr, seed in self.members if member_lr == lr)

  def best(self, lr, seed):
    """The record of the member's lowest selection metric (the earliest of equals)."""
    records = [r for r in self.members[(lr, seed)] if r.get(self.select) is not None]
    return min(records, key=lambda r: r[self.select]) if records else None

  def value(self, lr, seed, key):
    where, metric = key.split(".")
    record = self.best(lr, seed) if where == "best" else self.members[(lr, seed)][-1]
    return None if record is None else record.get(metric)

  def values(self, lr, key):
    """Per seed, the non-diverged members' finite values."""
    out = []
    for seed in self.seeds(lr):
      v = None if self.diverged(lr, seed) else self.value(lr, seed, key)
      if v is not None and math.isfinite(v):
        out.append(float(v))
    return out

  def selection_values(self, lr):
    return [
      math.inf if self.diverged(lr, s) else self.best(lr, s)[self.select] for s in self.seeds(lr)
    ]

  def ranked_lrs(self):
    """The lrs with a member that did not diverge, by median selection value (stable)."""
    kept = [lr for lr in self.lrs if not all(self.diverged(lr, s) for s in self.seeds(lr))]
    return sorted(kept, key=lambda lr: float(np.median(self.selection_values(lr))))

  def jumps(self, ratio=2.0):
    """(lr, seed, epoch, loss, running minimum) at the peak of each excursion above
    ``ratio`` x the running minimum of the training loss."""
    found = []
    for (lr, seed), records in self.members.items():
      lowest, inside = math.inf, False
      for r in records:
        loss = r.get("train_loss")
        if loss is None:
          continue
        if loss > ratio * lowest:
          jump = (lr, seed, r["epoch"], loss, lowest)
          if not inside:
            found.append(jump)
          elif loss / lowest > found[-1][3] / found[-1][4]:
            found[-1] = jump
          inside = True
        else:
          inside = False
        lowest = min(lowest, loss)
    return found


def rank_sum_p(a, b):
  """Exact two-sided rank-sum p-value: the share of splits of the pooled values whose rank sum
  is at least as far from its mean as the observed one (SciPy's exact Mann-Whitney test without
  ties; with ties, SciPy's permutation distribution of the mid-rank sum)."""
  a, b = np.asarray(a, float), np.asarray(b, float)
  if len(np.unique(np.concatenate([a, b]))) == len(a) + len(b):
    return float(scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method="exact").pvalue)

  def distance(x, y, axis=-1):
    pooled = np.concatenate([x, y], axis=axis)
    ranks = scipy.stats.rankdata(pooled, axis=axis)
    n = x.shape[axis]
    return np.abs(ranks[..., :n].sum(axis=-1) - n * (pooled.shape[axis] + 1) / 2)

  result = scipy.stats.permutation_test(
    (a, b),
    distance,
    permutation_type="independent",
    n_resamples=np.inf,
    alternative="greater",
    vectorized=True,
  )
  return float(result.pvalue)


def holm(p):
  """Holm's step-down adjustment, written out: the k-th smallest p times (m - k + 1), never
  below an earlier adjusted value, at most 1."""
  order = sorted(range(len(p)), key=lambda i: p[i])
  adjusted, running = [0.0] * len(p), 0.0
  for k, i in enumerate(order):
    running = max(running, min(1.0, (len(p) - k) * p[i]))
    adjusted[i] = running
  return adjusted


# ------------------------------------------------------------------ the findings, parsed

TEST = re.compile(
  r"(?P<words>beyond the seed spread|p < 0\.05 before correction only|within the seed spread) "
  r"\(p = (?P<p>[^,]+), Holm (?P<holm>[^,)]+)(?P<notes>(, [^,()]+( \(mid-ranks\))?)*)\)"
)


def fmt(value, scale=1.0):
  return f"{value * scale:.4g}"


class Checker:
  """Re-derives one result's findings; ``tests`` collects every stated test for Holm."""

  def __init__(self, folder: Path):
    self.folder = folder
    self.summary = json.loads((folder / "summary.json").read_text())
    self.task = self.summary["task"]
    self.noise = self.task.endswith("_noise")
    if self.noise:
      self.results = {
        p.stem: json.loads(p.read_text()) for p in sorted((folder / "noise").glob("*.json"))
      }
      self.runs = {name: Run(ROOT / r["workdir"]) for name, r in self.results.items()}
    else:
      self.runs = {
        p.name: Run(p)
        for p in sorted((folder / "runs").glob("*/"))
        if not p.name.endswith("_train_on_all")
      }
    self.tests = {}  # (scope, metric, frozenset(runs)) -> (p, stated p, stated holm, words, notes)
    self.seen = collections.Counter()

  # --- values

  def group(self, dropout):
    return {n: r for n, r in self.runs.items() if dropout is None or r.dropout == dropout}

  def selected_lr(self, run):
    return run.ranked_lrs()[0]

  def values(self, name, key, lr):
    run = self.runs[name]
    if self.noise:
      measure, a = key.split("@")
      result = self.results[name]
      return [float(np.interp(float(a), result["levels"], s)) for s in result[measure]]
    return run.values(self.selected_lr(run) if lr == "selected" else lr, key)

  def scope(self, text):
    """'dropout 0.5, lr 0.001 (the paper's)' -> (0.5, 0.001); 'selected lr' -> (None, ...)."""
    dropout = None
    if text.startswith("dropout "):
      rate, text = text[len("dropout ") :].split(", ", 1)
      dropout = float(rate)
    lr = "selected" if text == "selected lr" else float(text.split()[1])
    return dropout, lr

  # --- tests

  def check_test(self, scope, metric, a, va, b, vb, text):
    """A stated test: its outcome words, p, notes; recorded for the family's Holm check."""
    match = TEST.fullmatch(text)
    assert match, f"{self.folder}: not a test's wording: {text!r}"
    p = rank_sum_p(va, vb)
    assert match["p"] == f"{p:.2g}", (self.folder, scope, metric, a, b, p, text)
    notes = [n for n in match["notes"].split(", ") if n]
    apart = max(va) < min(vb) or min(va) > max(vb)
    assert ("no seed overlaps" in notes) == apart, text
    _, counts = np.unique(np.concatenate([va, vb]), return_counts=True)
    ties = int((counts > 1).sum())
    expected_ties = [f"{ties} tied value{'s' if ties > 1 else ''} (mid-ranks)"] if ties else []
    assert [n for n in notes if n != "no seed overlaps"] == expected_ties, text
    key = (scope, metric, frozenset((a, b)))
    self.tests.setdefault(key, (p, match["p"], match["holm"], match["words"]))
    assert self.tests[key][2:] == (match["holm"], match["words"]), text

  def check_family(self, stated_total, beyond, uncorrected, seeds):
    keys = list(self.tests)
    assert stated_total == len(keys), (self.folder, stated_total, len(keys))
    adjusted = holm([self.tests[k][0] for k in keys])
    outcomes = collections.Counter()
    for key, h in zip(keys, adjusted, strict=True):
      p, _, stated_holm, words = self.tests[key]
      assert stated_holm == f"{h:.2g}", (key, h, stated_holm)
      outcome = "beyond" if h < 0.05 else "uncorrected" if p < 0.05 else "within"
      assert words == WORDS[outcome], (key, p, h, words)
      outcomes[outcome] += 1
    assert (outcomes["beyond"], outcomes["uncorrected"]) == (beyond, uncorrected)
    assert seeds == max(len(r.seeds(r.lrs[0])) for r in self.runs.values())

  # --- the kinds of finding

  def ranking(self, line):
    m = re.fullmatch(
      r"- Ranking \[(.+?)\], (.+?)(, best first)?: (.+?)(\. Neighbours: (.+))?\.", line
    )
    assert m, line
    scope_text, metric, _, order_text, _, neighbours = m.groups()
    key, scale, lower = METRICS[metric]
    dropout, lr = self.scope(scope_text)
    order_text = order_text.removesuffix(", the only run")
    order = [item.rsplit(" ", 1) for item in order_text.split(", ")]
    expected = {n: self.values(n, key, lr) for n in self.group(dropout)}
    expected = {n: v for n, v in expected.items() if v}
    assert sorted(n for n, _ in order) == sorted(expected), line
    medians = [float(np.median(expected[n])) for n, _ in order]
    assert [fmt(v, scale) for v in medians] == [v for _, v in order], line
    sign = 1 if lower else -1
    assert all(sign * x <= sign * y for x, y in itertools.pairwise(medians)), line
    tests = (neighbours or "").split("; ") if neighbours else []
    assert len(tests) == len(order) - 1, line
    for (a, _), (b, _), text in zip(order[:-1], order[1:], tests, strict=True):
      prefix = f"{a} vs {b} "
      assert text.startswith(prefix), line
      self.check_test(scope_text, metric, a, expected[a], b, expected[b], text[len(prefix) :])
    self.seen["ranking", dropout, lr, metric] += 1

  def selection(self, line):
    if line.startswith("- Selections: "):
      return  # Counted against the selection lines in check_selection_count.
    m = re.fullmatch(
      r"- Selection \[(.+?)\]: lr (\S+) over lr (\S+), median best (\S+) (\S+) vs (\S+): (.+)\.",
      line,
    )
    assert m, line
    name, lr, runner, metric, m1, m2, text = m.groups()
    run = self.runs[name]
    ranked = run.ranked_lrs()
    assert (f"{ranked[0]:g}", f"{ranked[1]:g}", metric) == (lr, runner, run.select), line
    va, vb = run.selection_values(ranked[0]), run.selection_values(ranked[1])
    assert (fmt(np.median(va)), fmt(np.median(vb))) == (m1, m2), line
    scope = f"{name} lr selection"
    self.check_test(scope, f"best {metric}", f"lr {lr}", va, f"lr {runner}", vb, text)
    self.seen["selection", name] += 1
    self.seen["selection outcome", WORDS_TO_OUTCOME[TEST.fullmatch(text)["words"]], name] += 1

  def gelu(self, line):
    m = re.fullmatch(
      r"- GELU vs baseline \[(.+?)\], (.+?): (\S+) (\S+) vs (\S+) (\S+), "
      r"(lower|higher|equal): (.+)\.",
      line,
    )
    assert m, line
    scope_text, metric, a, ma, b, mb, relation, text = m.groups()
    key, scale, _ = METRICS[metric]
    dropout, lr = self.scope(scope_text)
    va, vb = self.values(a, key, lr), self.values(b, key, lr)
    assert (fmt(np.median(va), scale), fmt(np.median(vb), scale)) == (ma, mb), line
    x, y = np.median(va), np.median(vb)
    assert relation == ("equal" if x == y else "lower" if x < y else "higher"), line
    activations = (self.runs[a].activation, self.runs[b].activation)
    assert activations[0] in ("gelu_tanh", "gelu") and activations[1] in ("relu", "elu"), line
    self.check_test(scope_text, metric, a, va, b, vb, text)
    self.seen["gelu", dropout, lr, metric, activations] += 1

  def paper(self, line):
    m = re.fullmatch(
      r"- Paper \[(.+?)\], (.+?): (Fig\. \d|§[\d.]+) has (\S+) (below|above) (\S+)"
      r"( \(its values: \S+ vs \S+\))?; here \S+ (\S+) vs \S+ (\S+): (.+?), "
      r"((?:beyond|p <|within).+)\.",
      line,
    )
    assert m, line
    scope_text, metric, _, better, direction, worse, _, mb, mw, status, text = m.groups()
    key, scale, lower = METRICS[metric]
    dropout, lr = self.scope(scope_text)
    assert direction == ("below" if lower else "above"), line
    vb, vw = self.values(better, key, lr), self.values(worse, key, lr)
    assert (fmt(np.median(vb), scale), fmt(np.median(vw), scale)) == (mb, mw), line
    self.check_test(scope_text, metric, better, vb, worse, vw, text)
    beyond = TEST.fullmatch(text)["words"] == WORDS["beyond"]
    x, y = np.median(vb), np.median(vw)
    if x == y:
      expected = "not reproduced, equal medians"
    elif (x < y) == lower:
      expected = "reproduced" if beyond else "not reproduced, same order"
    else:
      expected = "contradicted, opposite order" if beyond else "not reproduced, opposite order"
    assert status == expected, line
    claim = (key, self.runs[better].activation, self.runs[worse].activation)
    self.seen["paper", dropout, lr, *claim] += 1

  def unstable(self, line):
    if line.startswith("- Unstable: none"):
      self.seen["no jumps"] += 1
      return
    m = re.fullmatch(r"- Unstable \[(\S+), lr (\S+), seed (\d+)\]: training loss (.+)\.", line)
    assert m, line
    name, lr, seed, jumps = m.groups()
    for jump in jumps.split("; "):
      j = re.fullmatch(r"(\S+) at epoch (\S+), (\S+)x its running minimum (\S+)", jump)
      assert j, line
      self.seen["jump", name, lr, int(seed), j[2]] += 1
      self.stated_jumps[(name, lr, int(seed), j[2])] = j.groups()

  def models(self, line):
    m = re.fullmatch(
      r"- Models \[(\S+), lr (\S+)\]: evaluated after epoch (\d+); lowest validation loss at "
      r"epoch (\S+) \(median over seeds\); at epoch \d+ the validation loss is (\S+)x that "
      r"minimum \(median over seeds\)\.",
      line,
    )
    assert m, line
    name, lr, epochs, best_epoch, ratio = m.groups()
    run = self.runs[name]
    selected = self.selected_lr(run)
    assert f"{selected:g}" == lr
    seeds = run.seeds(selected)
    assert int(epochs) == run.members[(selected, seeds[0])][-1]["epoch"]
    assert f"{np.median([run.best(selected, s)['epoch'] for s in seeds]):g}" == best_epoch
    ratios = [
      run.members[(selected, s)][-1]["validation_loss"] / run.best(selected, s)["validation_loss"]
      for s in seeds
    ]
    assert f"{np.median(ratios):.3g}" == ratio
    self.seen["models", name] += 1


WORDS_TO_OUTCOME = {words: outcome for outcome, words in WORDS.items()}


def findings_of(readme: str) -> list[str]:
  """The finding lines of a README: every list item of its Findings section."""
  section = readme.split("\n## Findings\n", 1)[1].split("\n## Tables\n", 1)[0]
  return [line for line in section.splitlines() if line.startswith("- ")]


@pytest.mark.parametrize("folder", RESULTS, ids=[f"{p.parent.name}/{p.name}" for p in RESULTS])
def test_every_finding_is_rederived_from_the_runs_files(folder):
  check_result(folder)


def test_a_ten_seed_result_with_gaps_beyond_the_seed_spread_is_rederived(tmp_path):
  """Synthetic runs of 10 seeds, where Holm's correction can pass: the same checks hold."""
  rng = np.random.default_rng(0)
  out = tmp_path / "results" / "fashion_mnist" / "mnist"
  # Final train loss: gelu_tanh well below relu, elu beside relu; lr 1e-3 selected everywhere.
  centres = {"gelu_tanh": 0.05, "relu": 0.10, "elu": 0.101}
  for activation, centre in centres.items():
    members = []
    for i, lr in enumerate((1e-3, 1e-4)):
      for seed in range(10):
        final = centre * (1 + i) + rng.normal(0, 0.002)
        train = [0.5, 0.3, final]
        if (activation, lr, seed) == ("elu", 1e-3, 3):
          train = [0.5, 0.1, 0.35]  # A jump: 3.5x the running minimum 0.1.
        members.append(
          member(
            seed,
            lr,
            train_loss=train,
            validation_loss=[0.5, 0.3 + 0.1 * i + rng.normal(0, 0.001), 0.4],
            validation_error=constant(0.1),
            test_loss=[0.5, 0.35 + rng.normal(0, 0.01), 0.45],
            test_error=[0.2, 0.12 + rng.normal(0, 0.001), 0.13],
          )
        )
    write_workdir(out / "runs" / activation, members, activation=activation)
  study.reproduce("mnist", root=tmp_path, dataset="fashion_mnist", render=True)
  lines = findings_of((out / "README.md").read_text())
  assert any(
    line.startswith("- Paper [selected lr]") and ": reproduced, beyond" in line for line in lines
  )
  assert any(line.startswith("- Unstable [elu, lr 0.001, seed 3]") for line in lines)
  check_result(out)


def check_result(folder):
  checker = Checker(folder)
  checker.stated_jumps = {}
  lines = findings_of((folder / "README.md").read_text())
  tests_line = None
  kinds = {
    "- Ranking [": checker.ranking,
    "- Selection": checker.selection,
    "- GELU vs baseline [": checker.gelu,
    "- Paper [": checker.paper,
    "- Unstable": checker.unstable,
    "- Models [": checker.models,
  }
  for line in lines:
    if line.startswith("- Tests: "):
      tests_line = line
      continue
    kind = next((k for k in kinds if line.startswith(k)), None)
    assert kind, f"{folder}: a finding no rule writes: {line!r}"
    kinds[kind](line)

  # The family: every stated test, Holm-adjusted together.
  m = re.fullmatch(
    r"- Tests: (\d+) of the (\d+) rank-sum tests of this README are beyond the seed spread "
    r"after Holm's correction; (\d+) more have p < 0\.05 before correction only\. With (\d+) "
    r"seeds a side the smallest possible p is (\S+?)(, and .*)?\.",
    tests_line or "",
  )
  assert m, tests_line
  beyond, total, uncorrected, seeds, smallest, cannot = m.groups()
  checker.check_family(int(total), int(beyond), int(uncorrected), int(seeds))
  n = int(seeds)
  assert smallest == f"{2 / math.comb(2 * n, n):.2g}"
  assert (cannot is not None) == (int(total) * 2 / math.comb(2 * n, n) >= 0.05)

  # Completeness: what is expected of this result, and nothing else.
  seen, runs = checker.seen, checker.runs
  base = checker.task.removesuffix("_noise")
  dropouts = sorted({r.dropout for r in runs.values()})
  for name, run in runs.items():
    if len(run.ranked_lrs()) > 1:
      assert seen["selection", name] == 1, name
  stated = sum(v for k, v in seen.items() if k[0] == "selection outcome")
  assert stated == sum(v for k, v in seen.items() if k[0] == "selection")
  count_line = next(line for line in lines if line.startswith("- Selections: "))
  counts = collections.Counter(k[1] for k, v in seen.items() if k[0] == "selection outcome")
  within = [k[2] for k in seen if k[0] == "selection outcome" and k[1] == "within"]
  assert count_line == (
    f"- Selections: of {stated} runs' lr selections against the runner-up, {counts['beyond']} "
    f"beyond the seed spread, {counts['uncorrected']} with p < 0.05 before correction only and "
    f"{counts['within']} within the seed spread" + (f" ({', '.join(within)})." if within else ".")
  )
  paper_lr = 1e-3 if base == "mnist_ae" else "selected"
  metrics = {m for k in seen if k[0] == "ranking" for m in [k[3]]}
  for dropout in dropouts if len(dropouts) > 1 else [None]:
    group = checker.group(dropout)
    activations = {r.activation: name for name, r in group.items()}
    for metric in metrics:
      assert seen["ranking", dropout, paper_lr, metric] == 1, (dropout, metric)
      for gelu in ("gelu_tanh", "gelu"):
        for baseline in ("relu", "elu"):
          if gelu in activations and baseline in activations:
            assert seen["gelu", dropout, paper_lr, metric, (gelu, baseline)] == 1
    for key, better, worse, every_lr in CLAIMS.get(checker.task, []):
      lrs = runs[activations[better]].lrs if every_lr else [paper_lr]
      for lr in lrs:
        assert seen["paper", dropout, lr, key, better, worse] == 1, (dropout, lr, key, worse)
    if not checker.noise:
      # At each shared lr, the main metric, unless it repeats the ranking at the reported lr.
      main = next(k for k, v in METRICS.items() if v[0] == checker.summary["report"]["metric"])
      for lr in runs[next(iter(group))].lrs:
        if lr == paper_lr:
          continue  # The paper's lr: its ranking is the one above.
        same = all(
          checker.values(n, METRICS[main][0], lr) == checker.values(n, METRICS[main][0], paper_lr)
          for n in group
        )
        assert seen["ranking", dropout, lr, main] == (0 if same else 1), (dropout, lr)
  jumps = {
    (name, f"{lr:g}", seed, f"{epoch:g}"): (loss, lowest)
    for name, run in runs.items()
    for lr, seed, epoch, loss, lowest in run.jumps()
  }
  assert set(checker.stated_jumps) == set(jumps)
  for key, (loss, lowest) in jumps.items():
    assert checker.stated_jumps[key][0] == fmt(loss) and checker.stated_jumps[key][3] == fmt(lowest)
    assert checker.stated_jumps[key][2] == f"{loss / lowest:.3g}"
  assert seen["no jumps"] == (0 if jumps else 1)
  if checker.noise:
    assert all(seen["models", name] == 1 for name in runs)


def test_the_readme_results_overview_is_the_generated_one():
  readme = (ROOT / "README.md").read_text()
  generated = study.results_overview(ROOT)
  assert generated in readme, (
    "README.md's results overview differs from the committed results: run "
    "`python experiments/reproduce.py --task=<task> --dataset=<dataset> --render` on any result"
  )
  # Each finding it repeats is one of its result's README, which the test above re-derives.
  for block in generated.split("\n- [")[1:]:
    folder = ROOT / block.split("`")[1]
    lines = findings_of((folder / "README.md").read_text())
    for line in block.splitlines()[1:]:
      if line.startswith("  - "):
        assert line[2:] in lines, line


def test_the_readme_results_prose_states_no_ranking_or_significance():
  readme = (ROOT / "README.md").read_text()
  section = readme.split("\n## Results\n", 1)[1].split("\n## ", 1)[0]
  generated = study.results_overview(ROOT)
  prose = section.replace(generated, "").lower()
  phrases = ("beyond the", "within the seed", "significan", "outperform", "lowest", "highest")
  phrases += ("ranks first", "better than", "worse than", "p = ", "p < ")
  for phrase in phrases:
    assert phrase not in prose, phrase
