"""A result's README.md, and the top-level README's overview of every committed result.

The README opens with what was found: the task's hypotheses and their verdicts (where the paper
states claims for it), the tables and the findings; then says how the verdicts were reached
(the method, the design changes), the commands that reproduce and re-render it, what was run
(read from the runs' files), where and for how long it trained, every deviation from the
paper's protocol (the runs' config.json against the task's paper defaults in `gelujax.tasks`
and `gelujax.paper`) and its files.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shlex
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gelujax import host
from gelujax import workdir as workdirs
from gelujax.paper import (
  NOISE_LEVELS,
  NOISE_SUFFIX,
  PAPER,
  PAPER_ACTIVATIONS,
  REFERENCES,
  Report,
  defaults,
  design,
  figure,
)
from gelujax.study import findings, grids, method, numbers, tables
from gelujax.study.analysis import Analysis

# How a result's README runs it again. The project's own results (``project``: under the
# checkout's results/, run from its root) name the design card's script; a user's result, in a
# folder of their own, names the installed command, which runs there.
PROJECT_COMMAND = "python experiments/reproduce.py"
USER_COMMAND = "gelujax reproduce"


def command_name(project: bool) -> str:
  """The command a result's README names: :data:`PROJECT_COMMAND` or :data:`USER_COMMAND`."""
  return PROJECT_COMMAND if project else USER_COMMAND


def where_to_run(root: Path, project: bool) -> str:
  """Where a result's README says its commands run: the repository's root for the project's
  own, else the folder it was run in (``root``), where the paths they name are relative to and a
  user's activation module imports from."""
  return "the repository root" if project else f"`{root}`, the folder it was run in"


# TaskSpec fields that reproduce.py's own flags set (or that each run varies).
_FLAG_FIELDS = frozenset(
  {"name", "dataset", "epochs", "activation", "dropout", "learning_rates", "seeds", "data_options"}
)


def _literal(value: Any) -> str:
  """``value`` (as config.json holds it) as a Python literal a task's name can take, strings
  double-quoted so that the shell command needs one pair of single quotes."""
  if isinstance(value, str):
    return json.dumps(value)
  if isinstance(value, list):
    items = [_literal(v) for v in value]
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"
  return repr(value)


def reproduce_command(
  settings: Mapping[str, Any], paper: Any, *, out: Path, root: Path, project: bool = True
) -> str:
  """The command that reproduces a result from scratch, from its settings (flags left at their
  defaults are left out), run from ``root`` (`command_name`: the project's or a user's).
  Re-running it skips what is finished."""
  task, noise = settings["task"], settings["task"].endswith(NOISE_SUFFIX)
  base = task.removesuffix(NOISE_SUFFIX)
  # Spec fields no flag of reproduce.py sets go into the task's name as field overrides.
  theirs = workdirs.jsonable(dataclasses.asdict(paper))
  overrides = [
    f"{field}={_literal(ours)}"
    for field, ours in settings["spec"].items()
    if field not in _FLAG_FIELDS and ours != theirs.get(field, ours)
  ]
  name = f"{base}({', '.join(overrides)})" if overrides else base
  flags = [f"--task={name}{NOISE_SUFFIX if noise else ''}"]
  seeds = settings["seeds"]
  default = defaults(task, paper, len(seeds))
  if settings["dataset"] != paper.dataset:
    flags.append(f"--dataset={settings['dataset']}")
  if settings["epochs"] != default.epochs:
    flags.append(f"--epochs={settings['epochs']}")
  if tuple(settings["activations"]) != default.activations:
    flags.append(f"--activations={','.join(settings['activations'])}")
  if tuple(seeds) != default.seeds:
    flags.append(
      f"--seeds={len(seeds)}"
      if seeds == list(range(len(seeds)))
      else f"--seeds={','.join(map(str, seeds))},"
    )
  evaluation = settings.get("evaluation_seeds")
  if evaluation and tuple(evaluation) != default.evaluation_seeds:
    flags.append(f"--evaluation_seeds={','.join(map(str, evaluation))},")
  if tuple(settings["learning_rates"]) != default.learning_rates:
    flags.append(f"--learning_rates={','.join(f'{lr:g}' for lr in settings['learning_rates'])}")
  if tuple(settings["dropout_rates"]) != default.dropout_rates:
    flags.append(f"--dropout_rates={','.join(f'{r:g}' for r in settings['dropout_rates'])}")
  embeddings = settings["spec"]["data_options"].get("embeddings")
  if embeddings:
    flags.append(f"--embeddings={embeddings}")
  if out.resolve() != (root / "results" / settings["dataset"] / task).resolve():
    flags.append(f"--out={grids.repo_relative(out, root)}")
  references = settings.get("references", REFERENCES)
  if tuple(references) != REFERENCES:
    flags.append(f"--reference={','.join(references)}")
  return f"{command_name(project)} " + shlex.join(flags)


def render_command(command: str) -> str:
  """The command that re-renders a result without training: its program, task, dataset, out and
  references."""
  words = shlex.split(command)
  program = list(itertools.takewhile(lambda word: not word.startswith("--"), words))
  kept = [w for w in words if w.split("=")[0] in ("--task", "--dataset", "--out", "--reference")]
  return shlex.join([*program, *kept, "--render"])


def list_deviations(
  task: str,
  paper: Any,
  spec: Mapping[str, Any],
  *,
  seeds: Sequence[int],
  learning_rates: Sequence[float],
  activations: Sequence[str],
  dropout_rates: Sequence[float],
  noise: bool,
) -> list[str]:
  """Every way a reproduction's protocol differs from the paper's: the runs' spec (as their
  config.json holds it) against the task's paper defaults, and the grid against the paper's."""
  theirs_spec = workdirs.jsonable(dataclasses.asdict(paper))
  deviations = []
  if spec["dataset"] != paper.dataset:
    deviations.append(f"Dataset: {spec['dataset']} instead of the paper's {paper.dataset}.")
  varied = {"name", "dataset", "activation", "dropout", "learning_rates", "seeds"}
  for field, theirs in theirs_spec.items():
    ours = spec.get(field, theirs)  # config.json leaves some fields out at their default.
    if field not in varied and ours != theirs:
      deviations.append(f"{field}: {ours!r} instead of the paper's {theirs!r}.")
  authors_evals = PAPER[task].authors_evals_per_epoch if task in PAPER else None
  if authors_evals is not None and spec.get("evals_per_epoch") != authors_evals:
    deviations.append(
      f"(choice) Evaluations per epoch: {spec.get('evals_per_epoch')} instead of the "
      f"{authors_evals} of the authors' script (the paper states none); best-epoch values are "
      "picked among these evaluations."
    )
  if len(seeds) != paper.seeds:
    deviations.append(
      f"Runs per setting: {len(seeds)} (seeds {list(seeds)}) instead of {paper.seeds}."
    )
  if tuple(learning_rates) != tuple(paper.learning_rates):
    deviations.append(
      f"Learning rates: {list(learning_rates)} instead of the paper's {list(paper.learning_rates)}."
    )
  paper_rates = defaults(task + (NOISE_SUFFIX if noise else ""), paper).dropout_rates
  if tuple(dropout_rates) != tuple(paper_rates):
    deviations.append(f"Dropout rates: {list(dropout_rates)} instead of {list(paper_rates)}.")
  missing = [a for a in PAPER_ACTIVATIONS if a not in activations]
  if missing:
    deviations.append(f"Activations of the paper not run: {', '.join(missing)}.")
  added = [a for a in activations if a not in PAPER_ACTIVATIONS]
  if added:
    deviations.append(
      f"Activations added that the paper reports no numbers for: {', '.join(added)} (the "
      "paper's GELU is `gelu_tanh`; `gelu` is the exact erf form)."
    )
  if task == "twitter_pos" and not spec["data_options"].get("embeddings"):
    deviations.append(
      "Twitter POS without the paper's pretrained 50-d tweet embeddings (not publicly "
      "retrievable): a substitute is used, frozen random (the task's `embed_words` step), "
      "trainable random (`model='embedding_mlp_twitter_pos'`; see gelujax.tasks) or one that "
      "also reads each word's spelling (`model='spelling_mlp_twitter_pos'` with the "
      "`spell_words` step; see gelujax.spelling), as the fields above say; the rounds of "
      "`scripts/twitter_trial.py` chose among them on validation error "
      "(`results/twitter_pos/trial/README.md`)."
    )
  if noise:
    deviations.append(
      f"(choice) Noise levels a = linspace(0, 3, {len(NOISE_LEVELS)}), added to pixels in [0, 1] "
      "without clipping; the paper states only that a goes up to 3."
    )
  return deviations


def describe_settings(settings: Mapping[str, Any], report: Report | None) -> list[str]:
  """The README's list of what was run."""
  spec, task = settings["spec"], settings["task"]
  base, noise = task.removesuffix(NOISE_SUFFIX), task.endswith(NOISE_SUFFIX)
  splits = "validation and test splits"
  if spec["data_options"].get("train_on_all"):
    splits = "test split (the task has no validation split)"
  evals = spec["evals_per_epoch"]
  authors = PAPER[base].authors_evals_per_epoch if base in PAPER else None
  evaluation = settings.get("evaluation_seeds") or []
  plan = design(base, len(settings["seeds"]))
  candidates = plan.select_lr and plan.candidates
  lines = [
    f"Task {base}: model {spec['model']}, batch size {spec['batch_size']}, "
    f"{settings['epochs']} epochs",
    f"Evaluations: the {splits} {'once' if evals == 1 else f'{evals} times'} per epoch"
    + (f" (the authors' script: {authors} times per epoch)" if authors else ""),
    f"Activations: {', '.join(settings['activations'])}",
    *[describe_source(*source) for source in settings.get("activation_sources", {}).items()],
    *[
      describe_source(*source, kind="Model") for source in settings.get("model_sources", {}).items()
    ],
    f"Dropout rates: {', '.join(f'{r:g}' for r in settings['dropout_rates'])}",
    f"Learning rates: {', '.join(f'{lr:g}' for lr in settings['learning_rates'])} "
    f"({describe_selection(report, settings)})",
    f"Selection seeds (the grids'): {', '.join(map(str, settings['seeds']))}",
    "Evaluation seeds: "
    + (", ".join(map(str, evaluation)) if evaluation else "none trained yet")
    + " (`runs/<run>_eval/`"
    + (", and `runs/<run>_eval_lr<lr>/` at another candidate lr)" if candidates else ")"),
  ]
  if base in PAPER and PAPER[base].retrain and not noise:
    lines.append(
      "The evaluation runs train on the whole train file at the selected lr, as the paper retrains"
    )
  if noise:
    lines.append(
      f"Noise evaluation: each run's members restored after their last epoch (epoch "
      f"{settings['epochs']}), not at their best-validation epoch"
    )
  return lines


def describe_source(name: str, source: Mapping[str, Any], kind: str = "Activation") -> str:
  """A user's activation (or ``kind="Model"``, model) as the README names it: the function or
  class, its module's file and that file's sha256 as the runs imported it, and the folder that
  module was imported from (`gelujax.study.stages.activation_sources`, `model_sources`), where
  the commands above import it again."""
  sha256 = f" (sha256 {source['sha256']})" if source.get("sha256") else ""
  return (
    f"{kind} {name}: `{source['function']}` of `{source['file']}`{sha256}, imported from the "
    f"folder `{source['folder']}` (the commands above import it from there: run them in that "
    "folder, or with it on PYTHONPATH)"
  )


def describe_selection(report: Report | None, settings: Mapping[str, Any]) -> str:
  """How a result picks each run's lr, for the README."""
  base = settings["task"].removesuffix(NOISE_SUFFIX)
  if not design(base, len(settings["seeds"])).select_lr:
    return "none selected: every lr is tested"
  selection = (
    "one selected per run on its selection seeds: lowest median over seeds of the best "
    "validation metric, or of the test metric where the task has no validation split"
  )
  if report is not None and report.learning_rate is not None:
    return f"the table compares at the paper's lr {report.learning_rate:g}; {selection}"
  return selection


def describe_training(timings: dict[str, dict[str, Any]]) -> list[str]:
  """The README's list items on the training time and machines of every run."""
  if not timings:
    return ["- Training time: none recorded (no invocation that wrote here trained)."]
  seconds = ", ".join(f"{name} {t['seconds']:.0f} s" for name, t in timings.items())
  by_machines: dict[str, list[str]] = {}
  for name, t in timings.items():
    key = " | then | ".join(t["machines"]) or "not recorded (trained before machines were recorded)"
    by_machines.setdefault(key, []).append(name)
  return [
    f"- Training time per run (summed over the invocations that trained it): {seconds}.",
    "- Trained on:",
    *[f"  - {', '.join(names)}: {key}" for key, names in by_machines.items()],
  ]


README_FILE = "README.md"
RUNS_DIR = "runs"
# What a run's render reads of it (`gelujax.study.runs.load_run`): every other file of a run
# folder can go without changing its result.
RECORD_FILES = (workdirs.CONFIG_FILE, workdirs.METRICS_FILE, workdirs.SUMMARY_FILE)
# A run folder's files but its records, checkpoints and TensorBoard files (a lock, damaged/).
RUN_OTHERS = "runs' other files"
DISK_KINDS = ("checkpoints", "tensorboard", "records", RUN_OTHERS, "figures", "other")


def _disk_kind(parts: tuple[str, ...]) -> tuple[str, str]:
  """The kind of a file of a result folder (its path's ``parts`` below the folder) as
  :func:`describe_disk` counts it, and the name it is listed by."""
  if parts[0] == RUNS_DIR and len(parts) >= 3:
    if parts[2] == workdirs.CHECKPOINT_DIR:
      return "checkpoints", ""
    if parts[2] == workdirs.TENSORBOARD_DIR:
      return "tensorboard", ""
    if len(parts) == 3 and parts[2] in RECORD_FILES:
      return "records", ""
    return RUN_OTHERS, parts[2] + ("/" if len(parts) > 3 else "")
  if len(parts) == 1 and parts[0].endswith(".png"):
    return "figures", parts[0]
  return "other", parts[0] + ("/" if len(parts) > 1 else "")


def disk_usage(out: Path) -> dict[str, tuple[int, int, list[str]]]:
  """What fills a result folder, walked now (links not followed; its README.md left out): per
  kind of :data:`DISK_KINDS`, ``(files, bytes, names)``: the runs' checkpoints/,
  tensorboard/ and records (:data:`RECORD_FILES`), their other files, the figures (PNGs) and
  every other file; ``names``: the runs' other files by their names in a run folder, the
  figures and other files by theirs in the result folder (a folder's as ``noise/``)."""
  found: dict[str, tuple[int, int, list[str]]] = {kind: (0, 0, []) for kind in DISK_KINDS}
  for folder, dirs, files in os.walk(out):
    dirs.sort()
    for name in sorted(files):
      path = Path(folder, name)
      parts = path.relative_to(out).parts
      if parts == (README_FILE,):
        continue
      kind, shown = _disk_kind(parts)
      count, size, names = found[kind]
      if shown and shown not in names:
        names = [*names, shown]
      found[kind] = (count + 1, size + path.lstat().st_size, names)
  return {kind: (count, size, sorted(names)) for kind, (count, size, names) in found.items()}


def describe_disk(out: Path) -> str:
  """The README's line on what fills its folder (:func:`disk_usage`, walked as it is written),
  and, where it holds runs, that their checkpoints and TensorBoard files can go: rendering
  reads of a run only its :data:`RECORD_FILES` (tested)."""
  usage = disk_usage(out)

  def amount(kind: str) -> str:
    count, size, names = usage[kind]
    listed = f" ({', '.join(names)})" if names else ""
    return f"{listed} {'none' if not count else numbers.size(size)}"

  total = sum(size for _, size, _ in usage.values())
  runs = (out / RUNS_DIR).is_dir()
  parts = []
  if runs:
    held = [
      f"checkpoints/{amount('checkpoints')}",
      f"tensorboard/{amount('tensorboard')}",
      f"records ({', '.join(RECORD_FILES)}){amount('records')}",
    ]
    if usage[RUN_OTHERS][0]:
      held.append(f"other files{amount(RUN_OTHERS)}")
    parts.append(f"in {RUNS_DIR}/, " + ", ".join(held))
  parts += [f"figures{amount('figures')}", f"other files{amount('other')}"]
  line = (
    f"Disk, when this README was written: {numbers.size(total)} in this folder besides the "
    f"README: {'; '.join(parts)}."
  )
  if runs:
    line += (
      f" The runs' checkpoints/ and tensorboard/ can be deleted without changing this result: "
      f"rendering it reads of each run only its {', '.join(RECORD_FILES[:-1])} and "
      f"{RECORD_FILES[-1]}, besides this folder's own files; a run's checkpoints serve only to "
      "train it on to more epochs, or to evaluate its networks under noise (a `<task>_noise` "
      "result)."
    )
  else:
    line += " It holds no runs: its classifiers are the runs of the workdirs named above."
  return line


def hypotheses_part(task: str, analysis: Analysis) -> list[str]:
  """The README's opening: the hypotheses tables and their notes; nothing for a task the paper
  states no claim for."""
  if task not in PAPER and not analysis.primary and not analysis.secondary:
    return []
  lines = []
  if task in PAPER:
    lines += [
      f"{figure(task)} states: “{PAPER[task].claim}”. Its claims, fixed in code as hypotheses "
      "before the runs that judge them (`gelujax.paper.PAPER`), and their verdicts:",
      "",
    ]
  lines += ["## Primary hypotheses", ""]
  if analysis.primary:
    lines.append(tables.format_hypotheses(analysis.primary, analysis=analysis))
  else:
    lines += ["None: the paper states no claim for this task.", ""]
  lines += [findings.contradiction_line(task, h) for h in analysis.contradictions]
  if analysis.contradictions:
    lines.append("")
  if analysis.secondary:
    lines += [
      "## Secondary hypotheses",
      "",
      "Corrected within their own family.",
      "",
      tables.format_hypotheses(analysis.secondary, analysis=analysis),
    ]
  return lines


def method_part(task: str, analysis: Analysis) -> list[str]:
  """The README's method, after the tables and findings: how the verdicts are reached (first
  saying that there are none, for a task the paper states no claim for), the design changes
  that apply, and the earlier design's verdicts where a change altered them."""
  lines = ["## How the verdicts are reached", ""]
  if not hypotheses_part(task, analysis):
    lines += [
      "None: the paper states no claim for this task. Every comparison above is exploratory.",
      "",
    ]
  lines += [method.method(task, analysis), ""]
  lines += method.design_change_lines(task, analysis)
  for family, verdicts in (
    ("primary", analysis.earlier_primary),
    ("secondary", analysis.earlier_secondary),
  ):
    if verdicts:
      lines += [
        f"## Earlier design: {family} hypotheses at the selected lrs alone",
        "",
        "The verdicts as the design stood before the change above: each run at the lr its "
        "selection seeds selected, one test per hypothesis in Holm's family. Kept as the "
        "record, superseded by the tables above.",
        "",
        tables.format_hypotheses(verdicts),
      ]
  return lines


def write_readme(
  out: Path,
  *,
  title: str,
  opening: Sequence[str],
  method: Sequence[str],
  command: str,
  settings: Sequence[str],
  trained: bool,
  deviations: Sequence[str],
  files: Sequence[str],
  sections: Mapping[str, Sequence[str]],
  table: str,
  run_from: str = "the repository root",
) -> None:
  """README.md of a reproduction, written from its files; its commands run from ``run_from``
  (`where_to_run`). What was found comes first: ``opening`` (the hypotheses' tables, if any),
  the tables (``table``: table.md's text) and the findings; then ``method`` (`method_part`),
  how to reproduce it, what ran, the deviations and the files."""
  lines = [
    f"# {title}",
    "",
    *opening,
    "## Tables",
    "",
    # table.md's headings, one level down inside this file.
    *[f"#{line}" if line.startswith("#") else line for line in table.splitlines()],
    "",
    "## Findings",
    "",
    "Every line below is generated from summary.json by one fixed rule per kind of finding "
    "(`gelujax.study.findings`); the rules of what the curves show are those of "
    "`gelujax.study.curves`. Exploratory lines give effects (Hodges–Lehmann shift of the first "
    "run from the second, with its exact interval) and uncorrected p-values, no verdicts.",
  ]
  for section, section_lines in sections.items():
    lines += ["", f"### {section}", "", *section_lines]
  lines += [
    "",
    *method,
    "## Reproduce",
    "",
    f"From scratch (from {run_from}; finished runs are skipped, so with the runs in place this "
    "only trains what is missing):",
    "",
    "```bash",
    command,
    "```",
    "",
    "Re-render the tables, figures and this README from the committed files alone, training "
    "nothing (every setting is read from the runs' files):",
    "",
    "```bash",
    render_command(command),
    "```",
    "",
    *[f"- {s}" for s in settings],
    *describe_training(grids.read_timings(out)),
    f"- Written {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by an invocation that "
    + ("trained or evaluated what was missing" if trained else "rendered without training")
    + f", on {host.describe_machine()}.",
    "",
    "## Deviations from the paper's protocol",
    "",
    *([f"- {d}" for d in deviations] or ["- None."]),
    "",
    "## Files",
    "",
    *[f"- {f}" for f in files],
  ]
  (out / "README.md").write_text("\n".join(lines) + "\n")


def describe_result(settings: Mapping[str, Any], paper: Any) -> str:
  """One line on what a result ran, for the top-level README."""
  task = settings["task"]
  base = task.removesuffix(NOISE_SUFFIX)
  evals = settings["spec"]["evals_per_epoch"]
  authors = PAPER[base].authors_evals_per_epoch if base in PAPER else None
  evaluation = settings.get("evaluation_seeds") or []
  return (
    f"{figure(task)}, {task} on {settings['dataset']}: {', '.join(settings['activations'])}; "
    "dropout "
    f"{' and '.join(f'{r:g}' for r in settings['dropout_rates'])}; lrs "
    f"{', '.join(f'{lr:g}' for lr in settings['learning_rates'])}; {len(settings['seeds'])} "
    f"selection seeds, {len(evaluation)} evaluation seeds; {settings['epochs']} epochs (the "
    f"paper's: {paper.epochs}); {evals} evaluation{'s' if evals > 1 else ''} per epoch"
    + (f" (the authors' script: {authors})" if authors else "")
  )
