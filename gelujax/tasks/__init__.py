"""The GELU paper's experiments as task specifications: data, model, loss, optimizer, schedule.

A :class:`TaskSpec` is a frozen dataclass of plain values (it is written to ``config.json``),
each checked once, when the spec is made. :func:`build` turns a spec and its data
(:meth:`TaskSpec.load_data`: the data with host-side preprocessing done) into what the engine
trains, `gelujax.parts.Parts`: the model (its activation resolved), the optimizer
(`gelujax.optimizers.build`), the objective, i.e. batch preparation, loss, metrics, regularizer
(`gelujax.objectives.make`), and the run's record; every string of the spec is parsed there,
once a process. ``TASKS`` holds one spec per experiment; ``get("mnist(dropout=0.5)")`` returns
a spec with fields overridden.

- ``mnist``: 784 -> 8x128 -> 10 MLP, Adam, batch 128, 50 epochs (Fig. 2).
- ``mnist_ae``: the 784-1000-500-250-30-... autoencoder, MSE, batch 64, 250 epochs (Fig. 4).
- ``twitter_pos``: 150 -> 2x256 -> 25 MLP on 3-word windows, batch 16, 30 epochs.
- ``timit``: 286 -> 5x2048 -> 39 MLP, batches of 64 whole utterances, 30 epochs.
- ``cifar10``: the 9-conv CNN, Adam (ε in the root) with the second half annealed, 200 epochs.
- ``cifar100``: WRN-40-4, Nesterov SGD, per-step cosine, L2 5e-4, 50 epochs of flip-doubled data.
- ``vit_fashion_mnist``: not in the paper; a small ViT (2 pre-LN blocks of width 48) on
  Fashion-MNIST, the GELU family in a transformer's feed-forward.
- ``transformer_twitter_pos``: not in the paper; a tagger that reads the whole tweet (2 pre-LN
  blocks of width 64 over each token's spelling features), a tag per token, on Twitter POS.
- ``char_lm``: not in the paper; a character-level GPT on Tiny Shakespeare at nanoGPT's CPU
  configuration (4 causal pre-LN blocks of width 128, windows of 64 characters), 2000 steps.
- ``tiny_mnist``: a 2x16 MLP for 2 epochs, for fast trainer tests.
- ``tiny_cifar``: a depth-10 width-1 WRN with crops, noise and L2, for fast trainer tests with BN.

Each task's choices that neither the paper nor the authors' code fixes are marked *(choice)* in
the docstring of the function that builds it.

The package's modules: ``spec`` (:class:`TaskSpec`, the checks of its values, ``SpecError`` and
``TASKS``), ``registry`` (``register``, :func:`get`, :func:`from_config`, :func:`read_task`,
:func:`task_names`), ``builder`` (:func:`build`, :func:`record`), and the registered tasks:
``paper`` (the paper's six), ``tiny`` (the trainer tests') and ``transformers`` (the ViTs, the
tweet tagger, the character-level GPT); every public name is imported from the package itself
(``gelujax.tasks.get``).
"""

from __future__ import annotations

from gelujax.tasks.builder import build, record

# The task modules register their tasks when imported, in this order (`task_names()` sorts).
from gelujax.tasks.paper import (
  MNIST_LIKE,
  cifar10_task,
  cifar100_task,
  mnist_ae_task,
  mnist_task,
  timit_task,
  twitter_pos_task,
)
from gelujax.tasks.registry import from_config, get, read_task, task_names
from gelujax.tasks.spec import DTYPES, MAX_EPOCHS, SPLITS, TASKS, SpecError, TaskSpec
from gelujax.tasks.tiny import tiny_cifar_task, tiny_mnist_task
from gelujax.tasks.transformers import (
  EPOCHS_TAGGER,
  EPOCHS_VIT,
  char_lm_task,
  transformer_twitter_pos_task,
  vit_cifar10_task,
  vit_fashion_mnist_task,
)

__all__ = [
  "DTYPES",
  "EPOCHS_TAGGER",
  "EPOCHS_VIT",
  "MAX_EPOCHS",
  "MNIST_LIKE",
  "SPLITS",
  "TASKS",
  "SpecError",
  "TaskSpec",
  "build",
  "char_lm_task",
  "cifar10_task",
  "cifar100_task",
  "from_config",
  "get",
  "mnist_ae_task",
  "mnist_task",
  "read_task",
  "record",
  "task_names",
  "timit_task",
  "tiny_cifar_task",
  "tiny_mnist_task",
  "transformer_twitter_pos_task",
  "twitter_pos_task",
  "vit_cifar10_task",
  "vit_fashion_mnist_task",
]
