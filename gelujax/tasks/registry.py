"""The ways to a registered task: :func:`register` (the task modules' decorator, which puts a
spec in ``TASKS``), :func:`get` by name with overrides, :func:`from_config` and
:func:`read_task` from a run's record, and :func:`task_names`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gelujax.registry import parse_name
from gelujax.tasks.spec import TASKS, TaskSpec


def register(build: Callable[[], TaskSpec]) -> Callable[[], TaskSpec]:
  spec = build()
  TASKS.register(spec.name, spec)
  return build


def read_task(workdir: str) -> TaskSpec:
  """The task a run's config.json in ``workdir`` records (:func:`from_config`).

  Raises:
    ValueError: the workdir holds no run.
  """
  from gelujax import workdir as workdirs  # Here: a spec needs no workdir.

  config = workdirs.read_config(workdir)
  if config is None:
    raise ValueError(f"Workdir {workdir} holds no run: it has no config.json and no checkpoint.")
  return from_config(config)


def get(name: str) -> TaskSpec:
  """The task registered as ``name``; ``"name(field=value, ...)"`` overrides fields."""
  base, overrides = parse_name(name)
  spec = TASKS.lookup(base)
  return spec.replace(**overrides) if overrides else spec


def from_config(config: Mapping[str, Any]) -> TaskSpec:
  """The task a run's config.json records: its registered task with the recorded fields (JSON
  lists back to tuples)."""
  base = TASKS.lookup(config["task"])
  overrides = {
    k: tuple(v) if isinstance(getattr(base, k), tuple) else v
    for k, v in config["spec"].items()
    if getattr(base, k) != v
  }
  return base.replace(**overrides)


def task_names() -> list[str]:
  """The registered task names, sorted."""
  return TASKS.names()
