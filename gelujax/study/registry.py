"""Every study fixed in code, by name: one registry and one way to run one.

A study is a frozen design (`gelujax.study.forms.Design`, `gelujax.study.confirm.Confirmation`,
`gelujax.study.pilot.Pilot`, `gelujax.study.transformer.Design`) and the kind it is of
(:class:`Kind`: where its designs are fixed, the report module that trains and renders it, and
what a grid of it holds). ``reproduce.py --task=<name>`` runs any of them the same way
(:func:`reproduce`); the paper's tasks, whose settings come from flags, are
`gelujax.study.pipeline`'s.

Adding a study of a kind that exists is one literal in its kind's module and one line in
:data:`STUDIES`'s tuple; a new kind is a design class, a report module with ``reproduce`` and a
:class:`Kind`. A user's own study is a literal in the user's module, named
``"module.path:VARIABLE"`` (:func:`resolve`), without editing gelujax.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gelujax import user_modules
from gelujax import workdir as workdirs
from gelujax.study import confirm, forms, language, numbers, pilot, readme, transformer


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
    f"arms {', '.join(d.arms)}, lrs {numbers.lrs(d.learning_rates)}, {len(d.seeds)} seeds, "
    f"{d.epochs} epochs, {d.dataset}"
  ),
  lambda d: len(d.learning_rates) * len(d.seeds),
)
CONFIRM = Kind(
  "gelujax.study.confirm",
  "gelujax.study.confirm_report",
  lambda d: (
    f"arms {', '.join(d.arms)}, lr {d.learning_rate:g}, seeds {numbers.seeds(d.seeds)}, "
    f"{d.epochs} epochs, {d.dataset}"
  ),
  lambda d: len(d.seeds),
)
PILOT = Kind(
  "gelujax.study.pilot",
  "gelujax.study.pilot_report",
  lambda d: (
    f"arms {', '.join(d.arms)}, lrs {numbers.lrs(d.learning_rates)}, seeds "
    f"{numbers.seeds(d.seeds)}, {d.epochs} epochs, {d.dataset}"
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
  """A study fixed in code: its design and its kind; ``source``, for a user's own study, its
  module's record (`gelujax.user_modules.source_record`: the module, the variable, its file and the
  sha256 of its source as imported); ``module``, where its design is fixed outside its kind's
  module (a study of its own: `gelujax.study.language`)."""

  design: Any
  kind: Kind
  source: Mapping[str, Any] | None = None
  module: str = ""

  @property
  def home(self) -> str:
    """The module its design is fixed in."""
    return self.module or self.kind.module

  @property
  def name(self) -> str:
    return self.design.name

  @property
  def variable(self) -> str:
    """The name its design has in its module (``DESIGN``, ``TWITTER``, ``VIT``, the user's)."""
    if self.source is not None:
      return self.source["function"]
    found = vars(importlib.import_module(self.home))
    return next(k for k, v in found.items() if k.isupper() and v is self.design)

  @property
  def where(self) -> str:
    """Its design's code path: ``gelujax.study.forms.DESIGN``, ``my_studies:MINE``."""
    if self.source is not None:
      return f"{self.source['module']}:{self.variable}"
    return f"{self.home}.{self.variable}"

  @property
  def file(self) -> str:
    """The file its design is fixed in, as a README names it: ``gelujax/study/forms.py``, or
    the user's module's file."""
    if self.source is not None:
      return str(self.source["file"])
    return self.home.replace(".", "/") + ".py"


_ALL = (
  Study(forms.DESIGN, FORMS),
  Study(forms.POWERED, FORMS),
  Study(confirm.TWITTER, CONFIRM),
  Study(pilot.VIT, PILOT),
  Study(pilot.TAGGER, PILOT),
  Study(pilot.CHAR_LM, PILOT),
  Study(pilot.CHAR_LM_CONTROLS, PILOT),
  Study(transformer.VIT, TRANSFORMER),
  Study(transformer.TAGGER, TRANSFORMER),
  Study(language.CHAR_LM, TRANSFORMER, module="gelujax.study.language"),
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


# The design classes of the kinds: what a user's study literal may be.
KINDS: dict[type, Kind] = {
  forms.Design: FORMS,
  confirm.Confirmation: CONFIRM,
  pilot.Pilot: PILOT,
  transformer.Design: TRANSFORMER,
}
# The user's studies resolved in this process, by name (:func:`resolve`).
_USERS: dict[str, Study] = {}


def is_users(name: str) -> bool:
  """Whether ``name`` has the form of a user's own study, ``"module.path:VARIABLE"``."""
  found = user_modules.parse_user_spec(name) if "(" not in name else None
  return found is not None and not found[2]


def resolve(name: str) -> Study:
  """The study ``name``: one of :data:`STUDIES`, or a user's own, ``"module.path:VARIABLE"``:
  a literal of a kind's design class (:data:`KINDS`) in the user's module, imported from the
  Python path (reproduce.py adds the folder it runs in), its source recorded.

  Raises:
    ValueError: in one paragraph, naming the value and what would be valid: no such study, a
      module that does not import, no such variable, a value of no kind's design class, or a
      name of one of gelujax's own studies.
  """
  if name in STUDIES:
    return STUDIES[name]
  if not is_users(name):
    raise ValueError(
      f"No study is named {name!r}: the studies are {', '.join(STUDIES)}, or one of your own, "
      "'module.path:VARIABLE'."
    )
  module_name, variable_name, _ = user_modules.parse_user_spec(name)
  module = user_modules.import_user_module(
    module_name, f"--task {name!r}", "reproduce.py adds the folder it runs in"
  )
  design = getattr(module, variable_name, None)
  kinds = ", ".join(f"{k.__module__}.{k.__qualname__}" for k in KINDS)
  if type(design) not in KINDS:
    what = "nothing" if design is None else f"a {type(design).__name__}"
    raise ValueError(
      f"--task {name!r}: {module_name}.{variable_name} is {what}, not a study's design: a "
      f"study of your own is a literal of one of {kinds} (docs/reproducing.md, Adding a study)."
    )
  if design.name in STUDIES:
    raise ValueError(
      f"--task {name!r}: its design is named {design.name!r}, the name of gelujax's own study "
      f"{STUDIES[design.name].where}: give yours a name of its own (dataclasses.replace(..., "
      "name=...)), so that neither writes into the other's result."
    )
  study = Study(design, KINDS[type(design)], user_modules.source_record(module_name, variable_name))
  _USERS[design.name] = study
  return study


def _known(design: Any) -> Study | None:
  """The study of ``design``'s name: gelujax's own, or a user's resolved in this process."""
  return STUDIES.get(design.name) or _USERS.get(design.name)


def users(design: Any) -> Study | None:
  """The user's own study of ``design``'s name, resolved in this process (:func:`resolve`); None
  for gelujax's own studies and a design known by no study. A report frames a user's study by
  its own design (its name, arms and data), not by gelujax's question."""
  study = _known(design)
  return study if study is not None and study.source is not None else None


def variable(design: Any) -> str:
  """The name the study of ``design``'s name has in its module (``DESIGN``, ``POWERED``,
  ``TWITTER``, ``VIT``, a user's resolved one's); ``design``'s own name where none is known
  under it (a test's copy under another name)."""
  study = _known(design)
  return study.variable if study is not None else design.name


def fixed_in(design: Any) -> str:
  """Where a README says ``design`` was fixed: ``"`gelujax/study/forms.py` (`DESIGN`,
  2026-11-26)"``; a user's study's file, variable, date and the sha256 of its source."""
  study = _known(design)
  if study is None or study.source is None:
    file = study.file if study else f"{design.__module__.replace('.', '/')}.py"
    return f"`{file}` (`{variable(design)}`, {design.date})"
  return (
    f"`{study.file}` (`{study.variable}`, {design.date}; its source's sha256 "
    f"{study.source['sha256']})"
  )


DESIGN_FILE = "design.json"  # under a study's folder: the design its runs were trained with


def design_record(design: Any) -> dict[str, Any]:
  """What a study's folder keeps of the design its runs train (:data:`DESIGN_FILE`): its
  name, the sha256 of its full ``repr`` (every field, every reason) and, for a user's study, its
  module's source record."""
  study = _known(design)
  return {
    "name": design.name,
    "sha256": hashlib.sha256(repr(design).encode()).hexdigest(),
    "source": dict(study.source) if study is not None and study.source else None,
  }


def record_design(design: Any, out: Path) -> None:
  """Records ``design`` in ``out`` before any of its runs trains; a folder whose runs trained
  another design is refused, nothing written: a pre-registered design is not changed after its
  runs began.

  Raises:
    ValueError: ``out`` keeps another design's record.
  """
  path = out / DESIGN_FILE
  found = design_record(design)
  if path.exists():
    kept = workdirs.read_json(path)
    if kept.get("sha256") != found["sha256"]:
      raise ValueError(
        f"{out} holds runs of the design {kept.get('name')!r} with sha256 {kept.get('sha256')} "
        f"({path}); the design {design.name!r} is now sha256 {found['sha256']}: a design fixed "
        "before its runs is not changed after they began. Put the design back as it was, or "
        "give the changed one another name (and so another folder) or another --out."
      )
    return
  out.mkdir(parents=True, exist_ok=True)
  workdirs.write_json(path, found)


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
  its result into ``out``, having recorded the design before any run (:func:`record_design`).
  ``command`` is the command line recorded with every run,
  ``project`` whether it runs in the project's checkout; ``configure(members)`` is called before
  training with the members of a grid (the CLI splits a CPU host into devices there)."""
  design = study.kind.prepare(study.design, root, readme.command_name(project))
  if train:
    record_design(design, out)
    configure(study.kind.members(design))
  report = importlib.import_module(study.kind.report)
  return report.reproduce(
    design, out=out, root=root, data_dir=data_dir, train=train, command=command, project=project
  )
