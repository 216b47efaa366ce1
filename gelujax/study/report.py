"""The one renderer of every study fixed in code: what each study's report module shares.

A report module builds its README's sections (:func:`section`) and :func:`publish` writes them,
under its title and above the one Training section (:func:`training_lines`: the command and the
code's revision it recorded, each grid's wall-clock time and machines, how to train and
re-render it), with its table.md and summary.json, and the project's overview. Before it writes,
every study takes one step (:func:`reproducer`): train what is unfinished, or check that there are
runs to render."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gelujax import workdir as workdirs
from gelujax.study import grids, numbers, overview, readme

PROVENANCE_FILE = "trained_with.json"  # the command and the revision a study trained with


def record_provenance(out: Path, root: Path, command: str) -> None:
  """Keeps the command and the code's revision (``git rev-parse HEAD`` of ``root``, marked
  ``+changes`` where tracked files differ from it) in ``out/trained_with.json``."""
  import subprocess

  def git(*args: str) -> str:
    found = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else ""

  revision = git("rev-parse", "--short", "HEAD") or "unknown (not a git checkout)"
  if git("status", "--porcelain", "--untracked-files=no"):
    revision += "+changes"
  out.mkdir(parents=True, exist_ok=True)
  workdirs.write_json(out / PROVENANCE_FILE, {"command": command, "revision": revision})


def provenance_lines(out: Path, unit: str = "run", when_none: str | None = None) -> list[str]:
  """A study's README lines on how it trained: the command and revision it recorded
  (`PROVENANCE_FILE`), then each ``unit``'s wall-clock time and machines (`grids.read_timings`),
  "so far" for one whose run has no ``runs/<unit>/summary.json`` yet (still training: its clock
  runs with it); ``when_none``, where given, stands in for the times of a study with none trained
  yet."""
  timings = grids.read_timings(out)
  path = out / PROVENANCE_FILE
  provenance = workdirs.read_json(path) if path.exists() else {}
  lines = []
  if provenance:
    lines.append(
      f"Trained with `{provenance['command']}` from a `git worktree` of {provenance['revision']}."
    )
  lines.append(f"Wall-clock time per {unit}, with whatever else ran on the machine beside it:")
  if not timings and when_none is not None:
    lines.append(when_none)
  for name, t in timings.items():
    machines = "; ".join(t["machines"]) or "unknown machine"
    so_far = (
      "" if (out / "runs" / name / workdirs.SUMMARY_FILE).exists() else " so far, not finished,"
    )
    lines.append(f"- `{name}`: {t['seconds'] / 60:.1f} min{so_far} on {machines}")
  return lines


def training_lines(
  name: str,
  out: Path,
  root: Path,
  project: bool,
  *,
  unit: str = "run",
  when_none: str | None = "- none trained yet",
  resume: bool = True,
) -> list[str]:
  """The Training section of study ``name``'s README: :func:`provenance_lines`, then the
  command that trains (or resumes) it, where ``resume``, and the one that re-renders it from
  ``out``'s files alone."""
  command = readme.command_name(project)
  render = f"`{command} --task={name} --out={grids.repo_relative(out, root)} --render`."
  again = f"Train (or resume): `{command} --task={name}`. " if resume else ""
  return [
    *provenance_lines(out, unit, when_none),
    "",
    f"{again}Re-render from these files alone: {render}",
  ]


def seed_table(
  seeds: Sequence[int], columns: Mapping[str, Mapping[int, float]], places: int = 0
) -> list[str]:
  """A table of every seed's value per column (an arm's, as the tests compare them): a row per
  seed of ``seeds``, each value to ``places`` decimal places, "diverged" for NaN, "–" for a seed
  a column lacks."""
  lines = ["| seed | " + " | ".join(columns) + " |", "|---|" + "---|" * len(columns)]
  for seed in seeds:
    cells = []
    for values in columns.values():
      v = values.get(seed)
      cells.append(
        numbers.DASH if v is None else "diverged" if math.isnan(v) else f"{v:.{places}f}"
      )
    lines.append(f"| {seed} | " + " | ".join(cells) + " |")
  return lines


def paired_cells(
  o: Any, medians: Callable[[float], str], effect: Callable[[Any], str]
) -> list[str]:
  """A paired verdict's cells of a verdict table, the same in every study that tests paired
  seeds (`gelujax.study.judge`'s outcomes): the medians compared (each in ``medians``), the
  paired shift (``effect`` of the paired comparison) with its interval's level, the pairs, the
  signed-rank p and Holm's; a dash each where the outcome has no pairs."""
  if o.paired is None:
    return [numbers.DASH] * 5
  c = o.paired
  return [
    " vs ".join(medians(m) for m in o.medians),
    f"{effect(c)}, {100 * c.confidence:.1f}%",
    str(len(c.seeds)),
    f"{o.p:.2g}",
    f"{o.holm:.2g}",
  ]


def section(title: str, lines: Sequence[str], level: int = 2) -> list[str]:
  """A README section: its heading, a blank line, ``lines`` and a blank line; nothing where
  ``lines`` is empty (a section with nothing to say is left out)."""
  return [f"{'#' * level} {title}", "", *lines, ""] if lines else []


def publish(
  name: str,
  *,
  out: Path,
  root: Path,
  project: bool,
  title: str,
  intro: str,
  body: Sequence[str],
  footer: str,
  table: Sequence[str],
  summary: dict[str, Any],
  training: Sequence[str] | None = None,
) -> Path:
  """Writes study ``name``'s result into ``out``: README.md (``title``, ``intro``, the
  sections of ``body``, then Training, ``training`` or :func:`training_lines`, and
  ``footer``), table.md (``table``) and summary.json (its name and title, then ``summary``);
  and the project's overview where ``out`` is under its results/ and ``project``. Returns
  ``out``."""
  if training is None:
    training = training_lines(name, out, root, project)
  (out / "table.md").write_text("\n".join(table) + "\n")
  readme_lines = [f"# {title}", "", intro, "", *body, *section("Training", training), footer]
  (out / "README.md").write_text("\n".join(readme_lines) + "\n")
  workdirs.write_json(out / workdirs.SUMMARY_FILE, {"study": name, "title": title, **summary})
  if project and out.resolve().is_relative_to((root / "results").resolve()):
    overview.write_results_overview(root)
  return out


def reproducer(
  make_grids: Callable[[Any, Path], Sequence[grids.Grid]],
  write_result: Callable[..., Path],
  task: str,
  *,
  after: Callable[[Any, grids.Grid, Path, str | None], Any] | None = None,
  kind: str = "study",
) -> Callable[..., Path]:
  """The ``reproduce`` of a kind of study, the one way every study fixed in code runs:
  ``reproduce(design, *, out, root, data_dir=None, train=True, command=..., project=True)``.

  With ``train``, it records ``command`` (by default the one that trains ``task``) and the
  code's revision (:func:`record_provenance`) and trains every grid of ``make_grids(design,
  out)`` that is not finished, resuming partial ones (`gelujax.study.grids.train_grids`, calling
  ``after(design, grid, out, data_dir)`` with each: its swaps or wrong forms evaluated); without,
  trains and evaluates nothing and only checks that ``out`` holds runs to render. Then
  ``write_result(design, out=, root=, project=)``, which it returns. ``root`` and ``project`` as
  :func:`gelujax.study.reproduce` takes them: a user's study (``project=False``) leaves the
  project's overview alone.

  Raises (``reproduce``):
    ValueError: ``train`` is False and ``out`` holds no runs (named as a ``kind``).
  """

  def reproduce(
    design: Any,
    *,
    out: Path,
    root: Path,
    data_dir: str | None = None,
    train: bool = True,
    command: str = f"{readme.PROJECT_COMMAND} --task={task}",
    project: bool = True,
  ) -> Path:
    if train:
      made = make_grids(design, out)  # Checks the design before anything is recorded.
      record_provenance(out, root, command)
      grids.train_grids(
        made, seeds=design.seeds, data_dir=data_dir, out=out,
        after=after and (lambda grid: after(design, grid, out, data_dir)),
      )  # fmt: skip
    elif not (out / "runs").is_dir():
      raise ValueError(
        f"`render`: {out / 'runs'} holds no runs to render. Pass the `out` of a {design.name} "
        f"{kind} that trained, or leave `render` out to train it."
      )
    return write_result(design, out=out, root=root, project=project)

  return reproduce
