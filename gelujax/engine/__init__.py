"""The training engine: a grid of members trained as one compiled program on a device mesh.

Three modules, each one job, importing only downwards; what they train is `gelujax.parts.Parts`
(a model, its optimizer and objective, the data and the run's record), which
`gelujax.tasks.build` makes from a task spec and its data:

- `gelujax.engine.step`: one member, pure functions of arrays (`init_member`, `train_step`, its
  scan over a segment, its evaluation and outputs, batch gathering incl. TIMIT's groups).
- `gelujax.engine.mesh`: the ``("members", "data")`` mesh, everything mapped over members,
  placement and padding, and `make_program`, the one place the parts become the step's
  configuration and its jitted programs.
- `gelujax.engine.fit`: the loop (`fit`, `restore`, `evaluate_members`, `predict_members`).

Vocabulary: a **member** is one (learning rate, seed) pair of a run's grid,
`gelujax.members.Members`; the members' states are stacked on a leading axis and every step is
`jax.vmap`ped over them. All randomness comes from keys folded from (seed, stream, epoch, step)
(`gelujax.prng`), so a resumed run is bitwise equal to an uninterrupted one.
"""

from gelujax.engine.fit import (
  DivergedError,
  check_fit,
  evaluate_members,
  fit,
  predict_members,
  restore,
)
from gelujax.engine.mesh import Program, describe_layout, make_mesh, make_program
from gelujax.engine.step import StepConfig, TrainState, step_keys, train_step
from gelujax.parts import Parts

__all__ = [
  "DivergedError",
  "Parts",
  "Program",
  "StepConfig",
  "TrainState",
  "check_fit",
  "describe_layout",
  "evaluate_members",
  "fit",
  "make_mesh",
  "make_program",
  "predict_members",
  "restore",
  "step_keys",
  "train_step",
]
