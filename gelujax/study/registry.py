"""Every study fixed in code, by name: one registry and one way to run one.

A study is a frozen design (`gelujax.study.forms.Design`, `gelujax.study.confirm.Confirmation`,
`gelujax.study.pilot.Pilot`, `gelujax.study.transformer.Design`) and the kind it is of
(:class:`Kind`: where its designs are fixed, the report module that trains and renders it, and
what a grid of it holds). ``reproduce.py --task=<name>`` runs any of them the same way
(:func:`reproduce`); the paper's tasks, whose settings come from flags, are
`gelujax.study.pipeline`'s.

Adding a study of a kind that exists is one literal in its kind's module and one line in
:data:`STUDIES`'s tuple; a new kind is a design class, a report module with ``reproduce`` and a
:class:`Kind`.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gelujax.study import confirm, forms, pilot, readme, transformer


def _lrs(values) -> str:
  return ", ".join(f"{lr:g}" for lr in values)


def _seeds(design) -> str:
  return f"{design.seeds[0]}-{design.seeds[-1]}"


@dataclasses.dataclass(frozen=True)
class Kind:
  """What runs a kind of study.

  Attributes:
    module: the module its designs are fixed in (``gelujax.study.forms``).
    report: the module whose ``reproduce(design, *, out, root, data_dir, train, command,
      project)`` trains (or renders) a design of it and writes its result.
    fixed: what a design trains, in words (the refusal of a flag that would change it).
    members: the members of one of its grids (how a CPU host is split).
    prepare: the design as it trains, given the folder it runs in and the command's name
      (`gelujax.study.readme.command_name`): the transformer study's numbers come from its
      pilot's committed result; the other kinds' designs train as they are.
  """

  module: str
  report: str
  fixed: Callable[[Any], str]
  members: Callable[[Any], int]
  prepare: Callable[[Any, Path, str], Any] = lambda design, root, command: design


FORMS = Kind(
  "gelujax.study.forms",
  "gelujax.study.forms_report",
  lambda d: (
    f"arms {', '.join(d.arms)}, lrs {_lrs(d.learning_rates)}, {len(d.seeds)} seeds, "
    f"{d.epochs} epochs, {d.dataset}"
  ),
  lambda d: len(d.learning_rates) * len(d.seeds),
)
CONFIRM = Kind(
  "gelujax.study.confirm",
  "gelujax.study.confirm_report",
  lambda d: (
    f"arms {', '.join(d.arms)}, lr {d.learning_rate:g}, seeds {_seeds(d)}, "
    f"{d.epochs} epochs, {d.dataset}"
  ),
  lambda d: len(d.seeds),
)
PILOT = Kind(
  "gelujax.study.pilot",
  "gelujax.study.pilot_report",
  lambda d: (
    f"arms {', '.join(d.arms)}, lrs {_lrs(d.learning_rates)}, seeds {_seeds(d)}, "
    f"{d.epochs} epochs, {d.dataset}"
  ),
  lambda d: len(d.learning_rates) * len(d.seeds),
)
TRANSFORMER = Kind(
  "gelujax.study.transformer",
  "gelujax.study.transformer_report",
  lambda d: (
    f"arms {', '.join(d.arms)}, each arm's lr, the margins and the seeds from its pilot "
    f"{d.pilot.name} by gelujax.study.transformer.from_pilot, {d.epochs} epochs, {d.dataset}"
  ),
  lambda d: len(d.seeds),
  lambda d, root, command: transformer.filled(d, root, command),
)


@dataclasses.dataclass(frozen=True)
class Study:
  """A study fixed in code: its design and its kind."""

  design: Any
  kind: Kind

  @property
  def name(self) -> str:
    return self.design.name

  @property
  def variable(self) -> str:
    """The name its design has in its kind's module (``DESIGN``, ``TWITTER``, ``VIT``)."""
    found = vars(sys.modules[self.kind.module])
    return next(k for k, v in found.items() if k.isupper() and v is self.design)

  @property
  def where(self) -> str:
    """Its design's code path: ``gelujax.study.forms.DESIGN``."""
    return f"{self.kind.module}.{self.variable}"


_ALL = (
  Study(forms.DESIGN, FORMS),
  Study(forms.POWERED, FORMS),
  Study(confirm.TWITTER, CONFIRM),
  Study(pilot.VIT, PILOT),
  Study(pilot.TAGGER, PILOT),
  Study(pilot.CHAR_LM, PILOT),
  Study(transformer.VIT, TRANSFORMER),
  Study(transformer.TAGGER, TRANSFORMER),
)
# The studies by name (``reproduce.py --task``), in the order they were fixed.
STUDIES: dict[str, Study] = {s.name: s for s in _ALL}
assert len(STUDIES) == len(_ALL), "two studies share a name"


def names(kind: Kind | None = None) -> list[str]:
  """The studies' names, of ``kind`` where given."""
  return [n for n, s in STUDIES.items() if kind is None or s.kind is kind]


def get(name: str) -> Any:
  """The design of the study ``name``; ValueError naming the studies where it is none."""
  if name not in STUDIES:
    raise ValueError(f"No study is named {name!r}: the studies are {', '.join(STUDIES)}.")
  return STUDIES[name].design


def variable(design: Any) -> str:
  """The name the registered study of ``design``'s name has in its module (``DESIGN``,
  ``POWERED``, ``TWITTER``, ``VIT``); ``design``'s own name where none is registered under it
  (a test's copy under another name)."""
  study = STUDIES.get(design.name)
  return study.variable if study is not None else design.name


def reproduce(
  study: Study,
  *,
  out: Path,
  root: Path,
  data_dir: str | None,
  train: bool,
  command: str,
  project: bool,
  configure: Callable[[int], None] = lambda members: None,
) -> Path:
  """Trains ``study`` (or with ``train=False`` renders it from the files in ``out``) and writes
  its result into ``out``. ``command`` is the command line recorded with every run,
  ``project`` whether it runs in the project's checkout; ``configure(members)`` is called before
  training with the members of a grid (the CLI splits a CPU host into devices there)."""
  design = study.kind.prepare(study.design, root, readme.command_name(project))
  if train:
    configure(study.kind.members(design))
  report = importlib.import_module(study.kind.report)
  return report.reproduce(
    design, out=out, root=root, data_dir=data_dir, train=train, command=command, project=project
  )
