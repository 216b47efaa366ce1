"""A run's config.json and its identity: which run a workdir holds, and whether it can take one.

`make_config` is the config.json object of a run; its `identity` (a hash less
`RESUMABLE_FIELDS`) is what every checkpoint records. `check_run` refuses, before any work, a
workdir that holds another run, a smaller ``epochs`` than it trained, or results with no
checkpoint to resume them from. `read_config` returns the run a workdir holds: its config.json,
or, when that is missing or not a run's config, the config recorded in its newest checkpoint;
`write_config` keeps a broken config.json as ``config.json.damaged``. `software_record` is
what config.json records of the software that ran the run (`SOFTWARE`), never part of its
identity.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from gelujax.members import Members
from gelujax.workdir.disk import check_writable
from gelujax.workdir.files import (
  CHECKPOINT_DIR,
  CONFIG_FILE,
  METRICS_FILE,
  RECORD_FILE,
  RECORD_ITEM,
  SUMMARY_FILE,
  WorkdirError,
  checkpoint_epochs,
  has_content,
  keep_aside,
  read_json,
  trained_epochs,
  write_json,
)
from gelujax.workdir.records import check_resumable

# Fields of a run's spec that may change when it is resumed; the identity leaves them out.
RESUMABLE_FIELDS = ("epochs",)
# config.json's record of a user's activation (`gelujax.specs.activation_source`).
ACTIVATION_SOURCE = "activation_source"
# config.json's record of a user's model (`gelujax.models.user.model_source`): left out for
# gelujax's own presets, so their runs' configs and identities are unchanged.
MODEL_SOURCE = "model_source"
# config.json's record of what the activation computes (`gelujax.specs.activation_fingerprint`):
# not part of the identity (runs written before it keep theirs), compared on every resume.
ACTIVATION_FINGERPRINT = "activation_fingerprint"
# Spec fields added after runs were committed: config.json leaves each out at its default, so
# the configs (and identities) of runs written before it stay the same.
OMITTED_AT_DEFAULT = {"dropout_bits": "hash", "dtype": "float32", "steps_per_epoch": None}
# config.json's record of the software that ran the run (`software_record`): not part of its
# identity, so a run resumes under other versions.
SOFTWARE = "software"
# The distributions whose versions it names, beside gelujax's own and Python's.
SOFTWARE_PACKAGES = ("jax", "jaxlib", "flax", "optax", "numpy")


def make_config(record: Mapping[str, Any], members: Members) -> dict[str, Any]:
  """The config.json object of a run over ``members`` of the parts whose record is ``record``
  (`gelujax.parts.Parts.record`: ``task``, ``dataset``, ``activation``, ``spec`` and, for
  a user's activation, ``activation_source``, for a user's model ``model_source``), JSON types
  only. Its spec holds the grid's
  learning rates and seed count, so config.json names one grid only; a field of
  `OMITTED_AT_DEFAULT` is left out at its default."""
  spec = {**record["spec"], "learning_rates": members.learning_rates, "seeds": len(members.seeds)}
  spec = {
    k: v for k, v in spec.items() if k not in OMITTED_AT_DEFAULT or v != OMITTED_AT_DEFAULT[k]
  }
  config = {
    "task": record["task"],
    "dataset": record["dataset"],
    "activation": record["activation"],
    "spec": spec,
    "members": members.to_json(),
  }
  if record.get(ACTIVATION_SOURCE) is not None:  # the user's function: module, name, sha256
    config[ACTIVATION_SOURCE] = record[ACTIVATION_SOURCE]
  if record.get(MODEL_SOURCE) is not None:  # the user's model class: module, name, sha256
    config[MODEL_SOURCE] = record[MODEL_SOURCE]
  if record.get(ACTIVATION_FINGERPRINT) is not None:  # its values and derivatives
    config[ACTIVATION_FINGERPRINT] = record[ACTIVATION_FINGERPRINT]
  return json.loads(json.dumps(config))


def software() -> dict[str, Any]:
  """The software of this process: gelujax's version, Python's, those of `SOFTWARE_PACKAGES`
  (None for one not installed), and ``git``: the commit of the checkout gelujax runs from with
  whether its tracked files differ from it (``{"commit", "dirty"}``), None where gelujax is not
  a tracked file of a git checkout or git cannot say (not installed, not a repository)."""
  import gelujax  # here: the package's version, and where it runs from

  found: dict[str, Any] = {"gelujax": gelujax.__version__, "python": platform.python_version()}
  for name in SOFTWARE_PACKAGES:
    try:
      found[name] = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
      found[name] = None
  found["git"] = _git_checkout(os.path.dirname(os.path.abspath(gelujax.__file__)))
  return found


def _git_checkout(package: str) -> dict[str, Any] | None:
  """``{"commit", "dirty"}`` of the git checkout that tracks ``package``'s ``__init__.py``;
  None where none does (an installed wheel, even inside some other repository) or git fails."""

  def git(*args: str) -> str:
    return subprocess.run(
      ["git", "-C", package, *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout.strip()

  try:
    git("ls-files", "--error-unmatch", "__init__.py")
    commit = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
  except (OSError, subprocess.SubprocessError):
    return None
  return {"commit": commit, "dirty": dirty}


def software_record(old: Mapping[str, Any] | None) -> list[dict[str, Any]]:
  """config.json's `SOFTWARE` field: the software of every invocation that ran the run with
  other software than the one before it, oldest first: ``old``'s (the config the workdir
  holds, None for a new run), and this process's (`software`) where it differs from the last."""
  history = list(old.get(SOFTWARE) or []) if old is not None else []
  current = software()
  if not history or history[-1] != current:
    history.append(current)
  return history


def identity(config: Mapping[str, Any]) -> str:
  """The run's identity: a hash of its config (task, spec, members, and a user activation's or
  model's module, name and source sha256) less `RESUMABLE_FIELDS`. The files that module imports
  are checked by `check_run`, not hashed here: a run recorded before they were keeps its
  identity, and its checkpoints stay its own."""
  spec = {k: v for k, v in config["spec"].items() if k not in RESUMABLE_FIELDS}
  fields = {"task": config["task"], "spec": spec, "members": config["members"]}
  if ACTIVATION_SOURCE in config:
    fields[ACTIVATION_SOURCE] = _source_identity(config[ACTIVATION_SOURCE])
  if MODEL_SOURCE in config:
    fields[MODEL_SOURCE] = _source_identity(config[MODEL_SOURCE])
  text = json.dumps(fields, sort_keys=True)
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def _source_identity(source: Mapping[str, Any] | None) -> tuple | None:
  """What of a user activation's record the run depends on: not the file's path (a checkout
  may move), its module, function and bytes."""
  if source is None:
    return None
  return (source.get("module"), source.get("function"), source.get("sha256"))


def _describe_source(source: Mapping[str, Any] | None) -> str:
  if source is None:
    return "none (gelujax's own)"
  digest = (source.get("sha256") or "unknown")[:12]
  return f"{source.get('module')}.{source.get('function')} in {source.get('file')} sha256 {digest}"


def _changed_imports(old: Any, new: list[dict[str, Any]], whose: str = "activation") -> list[str]:
  """Each of the user's modules that the run's activation imported when it trained (``old``,
  its record's ``imports``) whose file changed since, or that is no longer imported; ``new``
  is this process's record. A module this process imports besides is not checked: a run
  written before imports were recorded has none (``old`` None), and a new import is a change
  of a file recorded."""
  from gelujax.user_modules import module_record

  now = {record["module"]: record for record in new}
  differences = []
  for record in old if isinstance(old, list) else []:
    if not isinstance(record, dict):
      continue  # not what gelujax writes: a hand edit, which nothing checks
    name, file, digest = record.get("module"), record.get("file"), record.get("sha256")
    current = now.get(name) or module_record(name)  # however this process found it
    if current is None:
      differences.append(
        f"the module {name} ({file}), which the {whose}'s module imported when the run "
        "trained, is not imported now: its code changed since the run trained with it"
      )
    elif current["sha256"] != digest:
      moved = f"{current['file']} " if current["file"] != file else ""
      differences.append(
        f"the file {file} that the {whose}'s module imports ({name}) sha256 "
        f"{(digest or 'unknown')[:12]} (now {moved}sha256 {(current['sha256'] or 'unknown')[:12]}"
        "): its code changed since the run trained with it"
      )
  return differences


def check_run(
  record: Mapping[str, Any],
  epochs: int,
  workdir: str,
  members: Members,
  *,
  extendable: bool = False,
) -> dict[str, Any] | None:
  """Checks that ``workdir`` can take the run of ``record`` (`make_config`) over ``members``
  for ``epochs``: free, or holding this same run to resume (for another number of ``epochs``
  only where ``extendable``: no step it took depends on the total).

  Touches nothing. `gelujax.engine.fit` calls it once, before any work, and passes what it
  returns to `writing`, which refuses the workdir if another process changed it since.

  Returns:
    The config of the run the workdir holds (`read_config`), None for a new workdir.

  Raises:
    WorkdirError: naming what differs or what is wrong, and what to do.
  """
  check_writable(workdir)
  old = read_config(workdir)
  if old is None:
    return None
  check_same_run(old, make_config(record, members), workdir)
  check_epochs(workdir, epochs)
  if not extendable and old["spec"]["epochs"] != epochs:
    optimizer = old["spec"].get("optimizer")
    what = f"its optimizer's schedule ({optimizer})" if optimizer else "its optimizer's schedule"
    raise WorkdirError(
      f"Workdir {workdir} holds this run set for `epochs` {old['spec']['epochs']}, and "
      f"{what} depends on the run's total epochs: trained for {epochs}, its steps would follow "
      "another schedule than the ones it took, so a run of another length is a new run. Its "
      f"files are left as they are. Pass `epochs` {old['spec']['epochs']} to resume or report "
      f"it, or another `workdir` to train {epochs} epochs from the start."
    )
  check_resumable(workdir)
  return old


def check_same_run(old: Mapping[str, Any], new: Mapping[str, Any], workdir: str) -> None:
  """Refuses ``new`` (a `make_config`) unless it is the run of ``old``, the config ``workdir``
  holds, but for `RESUMABLE_FIELDS`: the one comparison of a resume and of a restore.

  Raises:
    WorkdirError: naming each difference, and what to do.
  """
  old_spec, new_spec = ({**OMITTED_AT_DEFAULT, **c["spec"]} for c in (old, new))
  differences = [
    f"{key} {old_spec.get(key)!r} (now {value!r})"
    for key, value in new_spec.items()
    if key not in (*RESUMABLE_FIELDS, "learning_rates", "seeds") and old_spec.get(key) != value
  ]
  for field, whose in ((ACTIVATION_SOURCE, "activation"), (MODEL_SOURCE, "model")):
    old_source, new_source = (c.get(field) for c in (old, new))
    if _source_identity(old_source) != _source_identity(new_source):
      differences.append(
        f"the {whose}'s source {_describe_source(old_source)} (now "
        f"{_describe_source(new_source)}): its code changed since the run trained with it"
      )
    elif old_source is not None:
      differences += _changed_imports(old_source.get("imports"), new_source.get("imports"), whose)
  old_print, new_print = (c.get(ACTIVATION_FINGERPRINT) for c in (old, new))
  if old_print is not None and new_print is not None:
    from gelujax.specs import same_function  # here: reading runs needs no JAX

    changed = same_function(old_print, new_print)
    if changed is not None:
      differences.append(
        f"what the activation {new['activation']} computes: {changed}, so a resume would "
        "train another function than the run's first epochs did"
      )
  if old["members"] != new["members"]:
    old_members, members = (Members.from_json(c["members"]) for c in (old, new))
    text = f"members {old_members.describe()} (now {members.describe()})"
    if sorted(old_members) == sorted(members):
      text += (
        " (the same members in another order: members are numbered in the order that "
        "`learning_rates` and `seeds` give them)"
      )
    differences.append(text)
  if differences:
    raise WorkdirError(
      f"Workdir {workdir} holds another run (task {old['task']!r}) that differs in: "
      f"{'; '.join(differences)}. Pass another `workdir`, or the same settings to resume it "
      "(only `epochs` may change)."
    )


def check_same_data(old: Mapping[str, Any] | None, record: Mapping[str, Any], workdir: str) -> None:
  """Refuses to resume the run of ``old`` (the config ``workdir`` holds; None: a new run) on
  data whose files' sha256 differ from those its epochs so far were trained on (``record``:
  `gelujax.data`'s record of the data read now). Where the files came from may change.

  Raises:
    WorkdirError: naming the first file that differs.
  """
  before = (old or {}).get("data")
  if not isinstance(before, Mapping) or not isinstance(before.get("sha256"), Mapping):
    return  # a new run, or one recorded before its data were
  then, now = before["sha256"], record.get("sha256", {})
  for name in sorted(set(then) | set(now)):
    if then.get(name) != now.get(name):
      was, is_ = ((d.get(name) or "none")[:12] for d in (then, now))
      raise WorkdirError(
        f"Workdir {workdir} holds a run trained on other data: its file {name} had sha256 "
        f"{was} ({before.get('source')}), and the data read now have {is_} ({record.get('source')}"
        "); a resume would train the rest of the run on other data. Its files are left as they "
        "are. Pass the data it was trained on (`data_dir`), or another `workdir`."
      )


def check_epochs(workdir: str, epochs: int) -> None:
  """Refuses to report a run trained further than ``epochs`` under that smaller number."""
  trained = trained_epochs(workdir)
  if trained > epochs:
    raise WorkdirError(
      f"Workdir {workdir} holds this run trained for {trained} epochs, more than `epochs` "
      f"{epochs}; its files are left as they are. Pass `epochs` {trained} to report it as it "
      "is, a larger `epochs` to train it further, or another `workdir`."
    )


_CONFIG_KEYS = {"task": str, "dataset": str, "activation": str, "spec": dict, "members": list}


def config_problem(config: Any) -> str | None:
  """Why ``config`` is not a run's config.json object (None when it is one)."""
  if not isinstance(config, dict):
    return f"it holds a {type(config).__name__}, not an object"
  for key, kind in _CONFIG_KEYS.items():
    if not isinstance(config.get(key), kind):
      return f"its {key!r} is missing or not a {kind.__name__}"
  if "epochs" not in config["spec"]:
    return "its spec has no 'epochs'"
  for member in config["members"]:
    if not (isinstance(member, dict) and {"seed", "learning_rate"} <= set(member)):
      return f"member {member!r} is not {{'seed': ..., 'learning_rate': ...}}"
  if not config["members"]:
    return "it lists no members"
  return None


def read_config(workdir: str) -> dict[str, Any] | None:
  """The run that ``workdir`` holds: its config.json, or the config its newest checkpoint
  records when config.json is missing or not a run's config. None for a new workdir.

  Touches nothing (`write_config` writes the config back).

  Raises:
    WorkdirError: config.json is not a run's config and no checkpoint records the run, or the
      workdir holds results (metrics, summary) but no record of the run that wrote them.
  """
  path = os.path.join(workdir, CONFIG_FILE)
  problem = None
  if os.path.exists(path):
    try:
      config = read_json(path)
    except (ValueError, UnicodeDecodeError) as e:
      problem = str(e)
    else:
      problem = config_problem(config)
      if problem is None:
        return config
      problem = f"{path} is not a run's config: {problem}"
  recorded = recorded_config(workdir)
  if recorded is not None:
    return recorded
  if problem is not None:
    raise WorkdirError(
      f"{problem.rstrip('.')}. No checkpoint in {workdir}/checkpoints records the run to rebuild "
      "it from: put back the run's config.json (e.g. from version control), or pass another "
      "`workdir`."
    )
  results = [name for name in (METRICS_FILE, SUMMARY_FILE) if has_content(workdir, name)]
  if results:
    raise WorkdirError(
      f"Workdir {workdir} holds {' and '.join(results)} but no config.json and no checkpoint "
      "recording the run that wrote them, so it cannot be resumed or extended: put back its "
      "config.json, or pass another `workdir`."
    )
  return None


def recorded_config(workdir: str) -> dict[str, Any] | None:
  """The config recorded in the newest checkpoint whose record can be read (None if none)."""
  for epoch in reversed(checkpoint_epochs(workdir)):
    path = os.path.join(workdir, CHECKPOINT_DIR, str(epoch), RECORD_ITEM, RECORD_FILE)
    try:
      with open(path) as f:
        config = json.load(f).get("config")
    except (OSError, ValueError, AttributeError, UnicodeDecodeError):
      continue
    if config_problem(config) is None:
      return config
  return None


def write_config(workdir: str, config: dict[str, Any]) -> None:
  """Writes config.json, first keeping one that is not a run's config as
  ``config.json.damaged`` (nothing already written is lost)."""
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path) and trained_epochs(workdir):
    print(f"{path} was missing; rebuilt from the run's checkpoint.", file=sys.stderr)
  if os.path.exists(path):
    try:
      problem = config_problem(read_json(path))
    except (ValueError, UnicodeDecodeError):
      problem = "unreadable"
    if problem is not None:
      kept = keep_aside(path)
      print(
        f"{path} was not a run's config ({problem}); kept as {kept} and rebuilt from the "
        "run's checkpoint.",
        file=sys.stderr,
      )
  write_json(path, config)
