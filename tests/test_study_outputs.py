"""What a paper result writes beside its README for use elsewhere (gelujax.study.exports), and the
README's line on what fills its folder: values.csv against the fixture's records read here,
verdicts.tex parsed back against statistics computed here, its escaping against hand-written
strings, and a result re-rendered byte for byte without its runs' checkpoints and TensorBoard
files, rendering having opened no file of a run but its records."""

import csv
import hashlib
import itertools
import json
import math
import re
import shutil
import sys

import numpy as np
import pytest
import scipy.stats

from gelujax.study import exports, numbers, pipeline
from tests.fake_workdirs import member, write_workdir
from tests.test_study_pipeline import EVAL, SEEDS, write_evaluation, write_selection

RECORDS = ("config.json", "metrics.jsonl", "summary.json")


@pytest.fixture
def mnist(tmp_path):
  """Fig. 2 without dropout: gelu_tanh and relu with evaluation runs, elu with one trained at an
  lr its grid did not select (which the result cannot use), silu with a member that diverges."""
  out = tmp_path / "results" / "fashion_mnist" / "mnist"
  write_selection(out, "gelu_tanh", "gelu_tanh", [[0.01, 0.02, 0.03, 0.04, 0.05], [1] * 5])
  write_selection(out, "relu", "relu", [[0.04, 0.05, 0.06, 0.07, 0.08], [1] * 5])
  write_selection(out, "elu", "elu", [[0.02, 0.03, 0.04, 0.05, 0.06], [1] * 5])
  write_evaluation(out, "gelu_tanh", "gelu_tanh", [0.010, 0.011, 0.012, 0.013, 0.014])
  write_evaluation(out, "relu", "relu", [0.020, 0.021, 0.022, 0.023, 0.024])
  write_evaluation(out, "elu", "elu", [0.02] * 5, lr=1e-4)  # elu selected 1e-3: not used
  silu = [
    member(seed, lr, diverged_epoch=2 if (seed, lr) == (3, 1e-4) else None,
           train_loss=[1.0, 0.5, 0.03 + 0.01 * seed], validation_loss=[0.4, 0.2 + i, 0.3 + i],
           validation_error=[0.06, 0.05, 0.05], test_loss=[0.3, 0.25, 0.26],
           test_error=[0.5, 0.1 + 0.01 * seed, 0.12])
    for i, lr in enumerate((1e-3, 1e-4))
    for seed in SEEDS
  ]  # fmt: skip
  write_workdir(out / "runs" / "silu", silu, activation="silu")
  return tmp_path, out


def read_csv(path):
  with open(path, newline="") as f:
    return list(csv.reader(f))


def expected_values(out, folder, seeds):
  """The rows values.csv should hold for one run folder, read here from its config.json and
  metrics.jsonl: each member's records in epoch order; its best epoch the earliest of lowest
  validation loss (the runs' select_metric) before any diverged record, its final values the
  last record's; a diverged member's values empty."""
  workdir = out / folder
  config = json.loads((workdir / "config.json").read_text())
  records = [json.loads(line) for line in (workdir / "metrics.jsonl").read_text().splitlines()]
  select = config["spec"]["select_metric"]
  rows = []
  for index, m in enumerate(config["members"]):
    own = sorted((r for r in records if r["member"] == index), key=lambda r: r["epoch"])
    keys = sorted(k for k in own[0] if k.endswith(("_loss", "_error")))
    diverged = any(r["diverged"] for r in own)
    best = min((r for r in own if not r["diverged"]), key=lambda r: (r[select], r["epoch"]))
    for where, record in (("best", best), ("final", own[-1])):
      for key in keys:
        value = "" if diverged else record[key]
        rows.append(
          (folder, seeds, config["activation"], float(config["spec"]["dropout"]),
           float(m["learning_rate"]), m["seed"], f"{where}.{key}", value, diverged)
        )  # fmt: skip
  return rows


def parsed_values(rows):
  return [
    (run, seeds, activation, float(dropout), float(lr), int(seed), metric,
     float(value) if value else "", {"true": True, "false": False}[diverged])
    for run, seeds, activation, dropout, lr, seed, metric, value, diverged in rows
  ]  # fmt: skip


def test_values_csv_holds_every_value_the_result_reads(mnist):
  root, out = mnist
  pipeline.render("mnist", out=out, root=root)
  header, *rows = read_csv(out / "values.csv")
  assert header == [
    "run", "seeds", "activation", "dropout", "learning_rate", "seed", "metric", "value",
    "diverged",
  ]  # fmt: skip
  assert (out / "values.csv").read_bytes().count(b"\r") == 0
  # Every selection grid, and each evaluation run the result uses, in the result's order (each
  # grid then its evaluation run); elu_eval (at an lr elu did not select) is not used.
  expected = []
  for name in ("gelu_tanh", "relu", "elu", "silu"):
    expected += expected_values(out, f"runs/{name}", "selection")
    if name in ("gelu_tanh", "relu"):
      expected += expected_values(out, f"runs/{name}_eval", "evaluation")
  assert parsed_values(rows) == expected
  assert not any(row[0] == "runs/elu_eval" for row in rows)
  # 4 grids x 10 members + 2 evaluation runs x 5, each member 5 metrics x (best, final).
  assert len(rows) == (4 * 10 + 2 * 5) * 10
  # silu's seed 3 at lr 1e-4 diverged: every value empty, marked; the others' are there.
  diverged = [row for row in rows if row[-1] == "true"]
  assert {(r[0], r[4], r[5]) for r in diverged} == {("runs/silu", "0.0001", "3")}
  assert len(diverged) == 10 and all(r[7] == "" for r in diverged)
  # A value round-trips exactly: gelu_tanh_eval seed 102's final train loss is 0.012.
  (final,) = [
    r
    for r in rows
    if r[0] == "runs/gelu_tanh_eval" and r[5] == "102" and r[6] == "final.train_loss"
  ]
  assert final[7] == "0.012"
  # The per-seed values the first verdict was computed on are the CSV's.
  summary = json.loads((out / "summary.json").read_text())
  tested = [
    float(r[7]) for r in rows if r[0] == "runs/gelu_tanh_eval" and r[6] == "final.train_loss"
  ]
  assert summary["verdicts"]["primary"][0]["comparison"]["a"] == tested


def test_values_csv_of_a_noise_result_holds_the_compared_noise_levels(mnist):
  root, classifiers = mnist
  out = classifiers.parent / "mnist_noise"
  levels = np.linspace(0, 3, 20).tolist()
  kept = {}
  for workdir, seeds, base in (
    ("gelu_tanh", SEEDS, 0.50), ("relu", SEEDS, 0.45), ("gelu_tanh_eval", EVAL, 0.50),
  ):  # fmt: skip
    result = {
      "learning_rate": 1e-3, "members": len(seeds), "diverged": 0, "levels": levels,
      "seeds": seeds, "accuracy": [[base + 0.001 * i - 0.1 * a for a in levels]
                                   for i in range(len(seeds))],
      "loss": [[1.0 + a + 0.01 * i for a in levels] for i in range(len(seeds))],
      "workdir": str((classifiers / "runs" / workdir).relative_to(root)),
    }  # fmt: skip
    path = out / "noise" / f"{workdir}_lr0.001.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result))
    kept[workdir] = result
  pipeline.render("mnist_noise", out=out, root=root)
  _, *rows = read_csv(out / "values.csv")
  expected = []
  for workdir, seeds in (("gelu_tanh", "selection"), ("gelu_tanh_eval", "evaluation"),
                         ("relu", "selection")):  # fmt: skip
    result = kept[workdir]
    for i, seed in enumerate(result["seeds"]):
      for key in ("accuracy", "loss"):
        for a in (1.0, 3.0):
          value = float(np.interp(a, levels, result[key][i]))
          expected.append((f"../mnist/runs/{workdir}", seeds, workdir.split("_eval")[0], 0.0,
                           1e-3, seed, f"{key}@{a:g}", value, False))  # fmt: skip
  assert sorted(parsed_values(rows), key=repr) == sorted(expected, key=repr)


# ------------------------------------------------------------------------------ verdicts.tex

# LaTeX back to the tables' text, written here from what the escaping must produce.
UNESCAPE = (
  (r"\ensuremath{-}", "-"),
  (r"\ensuremath{\pm}", "±"),
  (r"\ensuremath{\infty}", "inf"),
  (r"\_", "_"),
  (r"\%", "%"),
  (r"\&", "&"),
  (r"\#", "#"),
  ("--", "–"),
)


def tex_rows(text):
  """The body rows of a booktabs tabular: cells, unescaped; group titles as ``("title",)``."""
  lines = text.splitlines()
  assert lines[lines.index(r"\toprule") + 2] == r"\midrule"
  assert lines.count(r"\bottomrule") == 1 and lines[-1] == r"\end{tabular}"
  assert any(line.startswith(r"\begin{tabular}{") for line in lines)
  body = lines[lines.index(r"\toprule") + 2 : lines.index(r"\bottomrule")]
  rows = []
  for line in body:
    if line == r"\midrule":
      continue
    assert line.endswith(r" \\")
    line = line.removesuffix(r" \\")
    title = re.fullmatch(r"\\multicolumn\{\d+\}\{l\}\{\\emph\{(.*)\}\}", line)
    if title:
      rows.append((title[1],))
      continue
    cells = line.split(" & ")
    for escaped, text in UNESCAPE:
      cells = [c.replace(escaped, text) for c in cells]
    rows.append(cells)
  return rows


def hodges_lehmann(a, b):
  """The shift, and its exact interval at 95%, from the null distribution of U counted over
  every split of the pooled ranks."""
  m, n = len(a), len(b)
  diffs = np.sort(np.subtract.outer(a, b).ravel())
  counts = collections_counter(m, n)
  total = math.comb(m + n, m)
  k = max(k for k in range(m * n + 1) if sum(counts.get(u, 0) for u in range(k)) / total <= 0.025)
  return float(np.median(diffs)), float(diffs[k - 1]), float(diffs[m * n - k])


def collections_counter(m, n):
  counts = {}
  for chosen in itertools.combinations(range(1, m + n + 1), m):
    u = sum(chosen) - m * (m + 1) // 2
    counts[u] = counts.get(u, 0) + 1
  return counts


def holm(ps):
  order = sorted(range(len(ps)), key=lambda i: ps[i])
  adjusted, running = [0.0] * len(ps), 0.0
  for rank, i in enumerate(order):
    running = max(running, min(1.0, (len(ps) - rank) * ps[i]))
    adjusted[i] = running
  return adjusted


def test_verdicts_tex_is_the_readmes_verdict_table(mnist):
  root, out = mnist
  pipeline.render("mnist", out=out, root=root)
  text = (out / "verdicts.tex").read_text()
  rows = tex_rows(text)
  assert rows[0] == ("Primary hypotheses",)
  head = text.splitlines()[text.splitlines().index(r"\toprule") + 1]
  assert head == (
    r"\# & hypothesis & paper & lrs: GELU vs baseline & seeds & ours: median GELU vs baseline & "
    r"HL shift [exact CI] & Holm p & verdict \\"
  )

  def final_train_loss(folder):
    return [
      json.loads(line)["train_loss"]
      for line in (out / "runs" / folder / "metrics.jsonl").read_text().splitlines()
      if json.loads(line)["epoch"] == 3
    ]

  def best_test_error(folder):
    found = {}
    for line in (out / "runs" / folder / "metrics.jsonl").read_text().splitlines():
      r = json.loads(line)
      key = (r["validation_loss"], r["epoch"])
      if r["member"] not in found or key < found[r["member"]][0]:
        found[r["member"]] = (key, r["test_error"])
    return [value for _, value in found.values()]

  def row(number, claim, paper, a, b, p_holm, scale, words):
    shift, low, high = hodges_lehmann(np.array(a) * scale, np.array(b) * scale)
    return [
      number, claim, paper, "0.001 vs 0.001", f"{len(a)} vs {len(b)}",
      f"{np.median(a) * scale:.4g} vs {np.median(b) * scale:.4g}",
      f"{shift:.3g} [{low:.3g}, {high:.3g}]", f"{p_holm:.2g}", words,
    ]  # fmt: skip

  # Primary 1 on the evaluation seeds: apart (p = 2 / C(10, 5)); Holm over the family's 4
  # hypotheses, the others without values (p = 1). Its caveats: the train loss still falls,
  # 3 epochs of the paper's 50.
  a, b = final_train_loss("gelu_tanh_eval"), final_train_loss("relu_eval")
  p = scipy.stats.mannwhitneyu(a, b, method="exact").pvalue
  claim = "gelu_tanh below relu: final train log loss (nats), dropout 0"
  assert rows[1] == row("1", claim, "0.008 vs 0.007", a, b, holm([p, 1, 1, 1])[0], 1, "confirmed*")
  # elu's evaluation run is at another lr: pending; the dropout 0.5 runs were never trained.
  assert rows[2][:3] == ["2", "gelu_tanh below elu: final train log loss (nats), dropout 0",
                         "0.008 vs 0.013"]  # fmt: skip
  assert rows[2][3:] == ["0.001 vs 0.001", "–", "–", "–", "–", "pending"]
  assert [r[0] for r in rows[3:5]] == ["3", "4"]
  assert [r[-1] for r in rows[3:5]] == ["not run", "not run"]
  # Secondary 1: test error (%) at the best-validation epoch, the same on both runs: p = 1.
  assert rows[5] == ("Secondary hypotheses",)
  a, b = best_test_error("gelu_tanh_eval"), best_test_error("relu_eval")
  p = scipy.stats.mannwhitneyu(a, b, method="exact").pvalue
  claim = "gelu_tanh below relu: test error (%) at the best-validation epoch, dropout 0"
  assert rows[6] == row("1", claim, "–", a, b, holm([p, 1, 1, 1])[0], 100, "inconclusive*")
  assert len(rows) == 10
  # The same verdicts as the README's tables state.
  summary = json.loads((out / "summary.json").read_text())
  words = [v["verdict"] for v in summary["verdicts"]["primary"] + summary["verdicts"]["secondary"]]
  assert words[:2] == ["confirmed", "pending"] and words[4] == "inconclusive"
  assert text.splitlines()[-2] == (
    r"\multicolumn{9}{l}{\footnotesize * with caveats, stated in the result's README.md} \\"
  )


def write_users_result(root, epochs=1):
  """A user's result: tiny_mnist with gelu and their own activation, one epoch, 3 seeds."""
  out = root / "results" / "mnist" / "tiny_mnist"
  for activation, folder, error in (
    ("gelu", "gelu", 0.10), ("my_pkg.acts:squareplus", "my_pkg.acts_squareplus", 0.12)
  ):  # fmt: skip
    members = [
      member(seed, 1e-3, train_loss=[0.5 + 0.01 * seed] * epochs,
             validation_loss=[0.4 + 0.01 * seed] * epochs, validation_error=[0.1] * epochs,
             test_loss=[0.45] * epochs, test_error=[error + 0.002 * seed] * epochs)
      for seed in range(3)
    ]  # fmt: skip
    write_workdir(out / "runs" / folder, members, activation=activation, task="tiny_mnist",
                  dataset="mnist")  # fmt: skip
  # The user's function's source, as the trainer records it in its run's config.json.
  file = root / "mine" / "my_pkg" / "acts.py"
  file.parent.mkdir(parents=True)
  file.write_text("def squareplus(x):\n  return (x + (x * x + 4.0) ** 0.5) / 2.0\n")
  config_path = out / "runs" / "my_pkg.acts_squareplus" / "config.json"
  config = json.loads(config_path.read_text())
  config["activation_source"] = {
    "module": "my_pkg.acts", "function": "squareplus", "file": str(file),
    "sha256": hashlib.sha256(file.read_bytes()).hexdigest(), "imports": {},
  }  # fmt: skip
  config_path.write_text(json.dumps(config))
  return out


def test_a_result_without_verdicts_tabulates_its_exploratory_comparisons(tmp_path):
  out = write_users_result(tmp_path)
  pipeline.render("tiny_mnist", out=out, root=tmp_path, project=False)
  text = (out / "verdicts.tex").read_text()
  rows = tex_rows(text)
  # squareplus against gelu (a reference trained beside it) on the selection seeds: test error
  # 12, 12.2, 12.4 % against 10, 10.2, 10.4 %; 3 seeds a side give no bounded interval; seed
  # by seed each difference is 2 points.
  squareplus, gelu = [12.0, 12.2, 12.4], [10.0, 10.2, 10.4]
  p = scipy.stats.mannwhitneyu(squareplus, gelu, method="exact").pvalue
  paired = scipy.stats.wilcoxon(np.subtract(squareplus, gelu), method="exact").pvalue
  assert rows[0] == [
    "selected lr", "test error (%)", "my_pkg.acts_squareplus", "gelu", "selection seeds",
    f"{np.median(squareplus):.4g}", f"{np.median(gelu):.4g}", "2 [-inf, inf]", f"{p:.2g}", "3",
    "2 [-inf, inf]", f"{paired:.2g}",
  ]  # fmt: skip
  # Escaped by hand: the run's underscore, the percent sign, the infinite interval.
  line = text.splitlines()[text.splitlines().index(r"\midrule") + 1]
  assert line.startswith(
    r"selected lr & test error (\%) & my\_pkg.acts\_squareplus & gelu & selection seeds & "
    r"12.2 & 10.2 & 2 [\ensuremath{-}\ensuremath{\infty}, \ensuremath{\infty}] & "
  )
  readme = (out / "README.md").read_text()
  assert "- verdicts.tex: the exploratory comparisons above as a LaTeX tabular" in readme
  # The exploratory comparisons of the user's own activation say how to make one confirmatory.
  (note,) = [line for line in readme.splitlines() if "no correction, no verdict" in line]
  assert note.endswith(
    "Exploratory: no correction, no verdict. To make a comparison of your own activation "
    "confirmatory, pre-register it: a study literal with your activation among its arms, in a "
    "module of your own (`my_studies.py`: `MINE = dataclasses.replace(gelujax.study.forms."
    "DESIGN, ...)`), run by `gelujax reproduce --task=my_studies:MINE` (docs/reproducing.md, "
    "Adding a study)."
  )


def test_latex_escapes_every_special_character():
  assert exports.latex("gelu_tanh 5% & #1") == r"gelu\_tanh 5\% \& \#1"
  assert exports.latex("within ±0.02") == r"within \ensuremath{\pm}0.02"
  assert exports.latex("Unif[−a, a]") == r"Unif[\ensuremath{-}a, a]"
  assert exports.latex("seeds 100–104, –") == "seeds 100--104, --"
  assert exports.latex("-0.0256 [-0.0285, -inf]") == (
    r"\ensuremath{-}0.0256 [\ensuremath{-}0.0285, \ensuremath{-}\ensuremath{\infty}]"
  )
  # An exponent's hyphen and a word's stay hyphens.
  assert exports.latex("1e-05 best-validation x-1") == "1e-05 best-validation x-1"
  assert exports.latex(r"$x^2_{i} ~ a\b <c>") == (
    r"\$x\textasciicircum{}2\_\{i\} \textasciitilde{} a\textbackslash{}b \textless{}c\textgreater{}"
  )
  # A table's cells are escaped; a row of the wrong width is refused.
  table = exports.tabular("ll", ["a_b", "c"], [("G_1", [["x%", "y"]])], note="n&m")
  assert table.splitlines() == [
    r"\begin{tabular}{ll}", r"\toprule", r"a\_b & c \\", r"\midrule",
    r"\multicolumn{2}{l}{\emph{G\_1}} \\", r"x\% & y \\", r"\bottomrule",
    r"\multicolumn{2}{l}{\footnotesize n\&m} \\", r"\end{tabular}",
  ]  # fmt: skip
  with pytest.raises(ValueError, match="a row of 1 cells in a table of 2 columns"):
    exports.tabular("ll", ["a", "b"], [(None, [["x"]])])


# --------------------------------------------------------------------------- the disk line


def disk_line(out):
  (line,) = [
    line for line in (out / "README.md").read_text().splitlines() if line.startswith("- Disk")
  ]
  return line


def human(count):
  """Decimal units to 3 significant digits, written here (no count near a unit's edge)."""
  for unit, size in (("MB", 10**6), ("kB", 10**3)):
    if count >= size:
      return f"{float(f'{count / size:.3g}'):g} {unit}"
  return f"{count} B"


def test_the_readme_says_what_fills_the_folder_and_the_checkpoints_can_go(mnist):
  """The runs' checkpoints and TensorBoard files are counted, and deleting them changes
  nothing rendered but that count: rendering opens no file of a run but its records."""
  root, out = mnist
  checkpoint = out / "runs" / "gelu_tanh" / "checkpoints" / "3" / "default" / "array"
  checkpoint.parent.mkdir(parents=True)
  checkpoint.write_bytes(b"\0" * 2_500_000)
  events = out / "runs" / "relu_eval" / "tensorboard" / "0" / "events.out.tfevents"
  events.parent.mkdir(parents=True)
  events.write_bytes(b"\1" * 1234)
  opened = []
  recording = [True]

  def hook(event, args):
    if recording[0] and event == "open" and isinstance(args[0], str):
      opened.append(args[0])

  sys.addaudithook(hook)  # For the process's life: `recording` turns it off below.
  try:
    pipeline.render("mnist", out=out, root=root)
  finally:
    recording[0] = False
  in_runs = {p for p in opened if p.startswith(str(out / "runs"))}
  assert in_runs and {p.rsplit("/", 1)[1] for p in in_runs} <= set(RECORDS), sorted(in_runs)
  records = sum((run / name).stat().st_size for run in (out / "runs").iterdir() for name in RECORDS)
  figure = (out / "loss_curves.png").stat().st_size
  others = ["summary.json", "table.md", "values.csv", "verdicts.tex"]
  rest = sum((out / name).stat().st_size for name in others)
  total = 2_500_000 + 1234 + records + figure + rest
  line = disk_line(out)
  assert line == (
    f"- Disk, when this README was written: {human(total)} in this folder besides the README: in "
    f"runs/, checkpoints/ 2.5 MB, tensorboard/ 1.23 kB, records (config.json, metrics.jsonl, "
    f"summary.json) {human(records)}; figures (loss_curves.png) {human(figure)}; other files "
    f"({', '.join(others)}) {human(rest)}. The runs' checkpoints/ and tensorboard/ can be deleted "
    "without changing this result: rendering it reads of each run only its config.json, "
    "metrics.jsonl and summary.json, besides this folder's own files; a run's checkpoints serve "
    "only to train it on to more epochs, or to evaluate its networks under noise (a "
    "`<task>_noise` result)."
  )
  before = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
  shutil.rmtree(checkpoint.parents[2])
  shutil.rmtree(events.parents[1])
  pipeline.render("mnist", out=out, root=root)
  after = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
  gone = {p for p in before if "checkpoints" in p.parts or "tensorboard" in p.parts}
  assert set(before) - set(after) == gone and set(after) <= set(before)
  readme = out / "README.md"
  assert {p for p in after if after[p] != before[p]} <= {readme}
  changed = [
    (old, new)
    for old, new in zip(before[readme].decode().splitlines(), after[readme].decode().splitlines(),
                        strict=True)
    if old != new
  ]  # fmt: skip
  # The size line; and the time it was written, to the minute, where a minute turned between.
  assert changed[-1] == (line, disk_line(out)) and len(changed) <= 2
  assert all(old.startswith("- Written ") for old, _ in changed[:-1])
  assert "checkpoints/ none, tensorboard/ none" in disk_line(out)
  assert human(total - 2_500_000 - 1234) in disk_line(out)


def test_sizes_print_in_decimal_units():
  assert [numbers.size(n) for n in (0, 999, 1000, 1234, 999_499, 999_999, 5_312_345)] == [
    "0 B", "999 B", "1 kB", "1.23 kB", "999 kB", "1 MB", "5.31 MB",
  ]  # fmt: skip
  assert numbers.size(53 * 10**6) == "53 MB" and numbers.size(2 * 10**12) == "2 TB"


def test_a_run_still_training_shows_its_time_so_far_not_as_its_training_time(tmp_path):
  """timings.json holds a run's clock while it trains (written every few minutes); the README
  gives a run without its summary.json as "so far, not finished", and a finished one plainly."""
  from gelujax.study import report

  (tmp_path / "runs" / "done").mkdir(parents=True)
  (tmp_path / "runs" / "done" / "summary.json").write_text("{}")
  (tmp_path / "runs" / "training").mkdir()
  machine = ["m1"]
  timings = {"done": {"seconds": 600.0, "machines": machine}, "training": {"seconds": 96.0,
             "machines": machine}}  # fmt: skip
  (tmp_path / "timings.json").write_text(json.dumps(timings))
  lines = report.provenance_lines(tmp_path)
  assert "- `done`: 10.0 min on m1" in lines
  assert "- `training`: 1.6 min so far, not finished, on m1" in lines
