"""How a study fixed in code trained: the command and the code's revision it recorded, each
grid's wall-clock time and machines, and the one step every such study takes before it writes
its result (train what is unfinished, or check that there are runs to render)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gelujax import workdir as workdirs
from gelujax.study import grids

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
  (`PROVENANCE_FILE`), then each ``unit``'s wall-clock time and machines (`grids.read_timings`);
  ``when_none``, where given, stands in for the times of a study with none trained yet."""
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
    lines.append(f"- `{name}`: {t['seconds'] / 60:.1f} min on {machines}")
  return lines


def train_or_check(
  name: str,
  make_grids: Callable[[], Sequence[grids.Grid]],
  *,
  seeds: Sequence[int],
  out: Path,
  root: Path,
  data_dir: str | None,
  train: bool,
  command: str,
  after: Callable[[grids.Grid], Any] | None = None,
  kind: str = "study",
) -> None:
  """What a study fixed in code does before it writes its result: with ``train``, records
  ``command`` and the code's revision (:func:`record_provenance`) and trains every grid of
  ``make_grids()`` that is not finished (`gelujax.study.grids.train_grids`, calling ``after``
  with each); without, only checks that ``out`` holds runs to render.

  Raises:
    ValueError: ``train`` is False and ``out`` holds no runs (``name``: the study's, a
      ``kind``).
  """
  if train:
    record_provenance(out, root, command)
    grids.train_grids(make_grids(), seeds=seeds, data_dir=data_dir, out=out, after=after)
  elif not (out / "runs").is_dir():
    raise ValueError(
      f"`render`: {out / 'runs'} holds no runs to render. Pass the `out` of a {name} {kind} "
      "that trained, or leave `render` out to train it."
    )
