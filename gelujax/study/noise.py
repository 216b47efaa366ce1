"""Fig. 3: the classifiers of a study under test-time input noise.

A run's members at one learning rate are restored from the workdir's checkpoint after their last
epoch and evaluated on the test images (pixels in [0, 1]) plus Unif[-a, a] noise, without
clipping, at each level a of ``gelujax.paper.NOISE_LEVELS``. Each evaluation is kept as
``<out>/noise/<workdir>_lr<lr>.json`` and read back on later invocations, so a result re-renders
from these files alone.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from gelujax import workdir as workdirs
from gelujax.paper import NOISE_LEVELS
from gelujax.study import grids, runs
from gelujax.study.runs import Curve


def evaluate_noise(
  workdir: str | Path,
  *,
  learning_rate: float,
  levels: Sequence[float],
  data_dir: str | None = None,
  noise_seed: int = 0,
) -> dict[str, Any]:
  """Test accuracy and log loss of a run's classifiers under Unif[-a, a] pixel noise (Fig. 3).

  Every member at ``learning_rate`` is restored from the workdir's checkpoint and evaluated on
  the test images scaled to [0, 1] plus uniform noise of each level, without clipping;
  diverged members are left out and counted. One noise draw per level is shared by all members
  (and, with the same ``noise_seed``, by all runs), so activations are compared on identical
  images.

  Returns:
    ``{"learning_rate", "members", "diverged", "levels": [A], "seeds": [S], "accuracy": [S][A],
    "loss": [S][A]}`` over the S non-diverged members.
  """
  # Imported here so that reading results and drawing tables needs no accelerator stack.
  from gelujax import engine, preprocessing, tasks

  workdir = Path(workdir)
  members = runs.load_run(workdir).members  # As its records give them.
  at_lr = [i for i, m in enumerate(members) if runs.same_lr(m["learning_rate"], learning_rate)]
  if not at_lr:
    raise ValueError(
      f"{workdir} has no member with learning rate {learning_rate}; its members' learning rates "
      f"are {sorted({m['learning_rate'] for m in members})}."
    )
  index = [i for i in at_lr if not members[i]["diverged"]]
  spec = tasks.read_task(str(workdir))
  splits = spec.load_data(data_dir)  # Read once: the restore's shapes and the noisy test split.
  parts = tasks.build(spec, splits)
  _, state = engine.restore(parts, str(workdir))
  test = splits["test"]
  if test["inputs"].dtype != np.uint8:
    raise ValueError(
      f"{workdir} holds a {spec.name!r} run: the noise evaluation needs an image classifier "
      f"(uint8 pixels), as mnist's; its test inputs are {test['inputs'].dtype}."
    )
  clean = preprocessing.scale_pixels(test["inputs"])
  rng = np.random.default_rng(noise_seed)
  accuracy, loss = [], []
  for a in levels:
    metrics = engine.evaluate_members(
      parts, state, {**test, "inputs": preprocessing.add_uniform_noise(clean, float(a), rng)}
    )
    if "error" not in metrics:
      raise ValueError(
        f"{workdir} holds a {spec.name!r} run, which is not a classifier (its metrics are "
        f"{sorted(metrics)}): the noise evaluation reports accuracy."
      )
    accuracy.append(1.0 - np.asarray(metrics["error"], np.float64)[index])
    loss.append(np.asarray(metrics["loss"], np.float64)[index])
  return {
    "learning_rate": learning_rate,
    "members": len(at_lr),
    "diverged": len(at_lr) - len(index),
    "levels": [float(a) for a in levels],
    "seeds": [members[i]["seed"] for i in index],
    "accuracy": np.stack(accuracy, axis=1).tolist(),
    "loss": np.stack(loss, axis=1).tolist(),
  }


def noise_path(out: Path, workdir: Path, learning_rate: float) -> Path:
  """Where the noise evaluation of ``workdir``'s members at ``learning_rate`` is kept."""
  return out / "noise" / f"{workdir.name}_lr{learning_rate:g}.json"


def cached_noise(
  workdir: Path,
  learning_rate: float,
  *,
  out: Path,
  root: Path,
  data_dir: str | None,
  evaluate: bool,
) -> dict[str, Any] | None:
  """The noise evaluation of ``workdir`` at ``learning_rate``, read back from ``out/noise/``
  when done before; else evaluated (with ``evaluate``, where the workdir keeps a checkpoint).

  Returns:
    The evaluation, or None where it is neither kept nor can be made.
  """
  path = noise_path(out, workdir, learning_rate)
  if path.exists():
    cached = workdirs.read_json(path)
    if runs.same_lr(cached["learning_rate"], learning_rate) and np.allclose(
      cached["levels"], NOISE_LEVELS
    ):
      return cached
  if not evaluate or not (workdir / workdirs.CHECKPOINT_DIR).is_dir():
    return None
  start = time.time()
  result = evaluate_noise(
    workdir, learning_rate=learning_rate, levels=NOISE_LEVELS, data_dir=data_dir
  )
  result["workdir"] = grids.repo_relative(workdir, root)
  workdirs.write_json(path, result)
  print(f"{workdir.name} at lr {learning_rate:g}: noise evaluation in {time.time() - start:.1f} s")
  return result


def noise_curve(result: Mapping[str, Any], key: str) -> Curve:
  """``"accuracy"`` or ``"loss"`` of :func:`evaluate_noise` against noise level, over seeds."""
  values = np.asarray(result[key], np.float64)  # [seeds, levels]
  return Curve(
    x=np.asarray(result["levels"], np.float64),
    median=np.median(values, axis=0),
    low=values.min(axis=0),
    high=values.max(axis=0),
    members=values.shape[0],
  )


def noise_values(result: Mapping[str, Any], key: str, a: float) -> list[float]:
  """Each seed's ``key`` at noise level ``a``, linearly interpolated between levels."""
  return [float(np.interp(a, result["levels"], seed)) for seed in result[key]]


def noise_at(result: Mapping[str, Any], key: str, a: float) -> float:
  """The median over seeds of :func:`noise_values`: each seed's ``key`` at noise level ``a``
  (interpolated between evaluated levels), then the median."""
  return float(np.median(noise_values(result, key, a)))
