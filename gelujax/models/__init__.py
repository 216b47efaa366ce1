"""Flax Linen models of the GELU paper and of the transformer tasks, each taking its activation
as a callable.

Every model is ``__call__(x, train: bool)`` and has the fields ``activation`` (what
:class:`gelujax.linen.Activation` applies: a function of an array such as ``gelujax.gelu`` or
``jax.nn.relu``, or a Linen module class such as ``gelujax.LearnableGELU``;
:func:`gelujax.linen.make_activation` makes one from a spec such as ``"gelu_tanh"`` or
``"gaussian_gelu(sigma=0.5)"``, as ``TaskSpec.build_model`` does),
``dropout`` (the drop rate; 0 disables it) and ``dtype``, the type its layers and activations
compute in (``jnp.bfloat16`` for mixed precision; parameters and batch statistics stay float32,
as Flax's ``param_dtype`` default keeps them). Dropout draws from the ``'dropout'`` rng and is
active only when ``train=True``; batch-norm statistics live in the ``'batch_stats'`` collection.

``MODELS`` holds the paper's presets (``functools.partial`` of the general modules) and tiny
presets for tests:

- ``mlp_mnist``: 784 -> 8x128 -> 10 (MNIST, Fig. 2).
- ``mlp_mnist_gated``: ``mlp_mnist`` with gated hidden layers (``MLP(gated=True)``), 784 -> 8x80
  -> 10 with the same number of parameters (217,130 against 217,354; see :class:`MLP`).
- ``mlp_twitter_pos``: 150 -> 2x256 -> 25 (Twitter POS). The frozen lookup of the window's three
  50-d word embeddings is done once on the host by the task (``gelujax.tasks``, step
  ``embed_words``), as in the authors' code, so the model sees the 150-d vectors.
- ``embedding_mlp_twitter_pos``: the window's 3 word ids -> a trainable 50-d table -> the same
  150 -> 2x256 -> 25 MLP (Twitter POS with trainable embeddings); its ``vocab_size`` comes from
  the data (``gelujax.tasks.build``).
- ``spelling_mlp_twitter_pos``: ``embedding_mlp_twitter_pos`` that also reads each word's
  spelling: hashed character n-grams and shape flags (:mod:`gelujax.spelling`, the task's
  ``spell_words`` step), so that a word unseen in training is not one vector.
- ``mlp_timit``: 286 -> 5x2048 -> 39 (TIMIT frames; the paper's intended 39-way output).
- ``autoencoder_mnist``: 784 -> 1000 -> 500 -> 250 -> 30 -> 250 -> 500 -> 1000 -> 784 (Fig. 4).
- ``cifar_cnn``: the 9-conv CIFAR-10 network. ``wrn_40_4``: Wide ResNet 40-4 for CIFAR-100.
- ``vit_fashion_mnist``: a small Vision Transformer (:class:`ViT`: 16 patches of 7x7 pixels, 2
  pre-LN blocks of width 48, 4 heads, a feed-forward of 192) on 28x28 images;
  ``--activation=geglu`` gives its blocks gated feed-forwards at the same parameter count.
- ``vit_cifar10``: a ViT sized for an accelerator (:class:`ViT`: 64 patches of 4x4 pixels, 6
  pre-LN blocks of width 192, 3 heads, a feed-forward of 768: ViT-Tiny's width, depth halved)
  on 32x32 colour images;
- ``transformer_twitter_pos``: a tagger that reads the whole tweet (:class:`TransformerTagger`:
  each token's spelling-model vector of 50 features, projected to 64, a learned position, 2
  pre-LN blocks of 4 heads and a feed-forward of 256, 25 tags per token); its ``vocab_size``
  comes from the data.
- ``mlp_tiny``, ``mlp_tiny_gated``, ``vit_tiny``, ``embedding_mlp_tiny``, ``autoencoder_tiny``,
  ``cifar_cnn_tiny``, ``wrn_tiny``, ``transformer_tagger_tiny``: small versions, for tests.

Every convolution is :data:`gelujax.conv.Conv`: ``nn.Conv`` through a convolution whose kernel
gradient keeps a convolution net's training step inside the trainer's ``lax.scan`` fast on CPU.

The package's modules: ``mlp`` (:class:`MLP`, :class:`Autoencoder`, the dense initialisation
and the gated widths), ``words`` (:class:`EmbeddingMLP`, :func:`embed_words`), ``cnn``
(:class:`CifarCNN`, :class:`WideResNet`), ``transformers`` (:class:`ViT`,
:class:`TransformerTagger`, :class:`CharGPT`) and ``presets`` (``MODELS``); every public name is
imported from the package itself (``gelujax.models.MLP``). ``user`` is a model class of the
user's own named as a task's model, ``"module:Class"`` (Linen, or NNX through
:class:`gelujax.models.user.FromNNX`); the tasks and the commands import it from there.
"""

from __future__ import annotations

from gelujax.models.cnn import CifarCNN, WideResNet, WideResNetBlock
from gelujax.models.mlp import (
  MLP,
  Autoencoder,
  dense_parameter_count,
  gated_features,
  unit_norm_init,
)
from gelujax.models.presets import MODELS
from gelujax.models.transformers import PADDING_ID, CharGPT, TransformerTagger, ViT
from gelujax.models.words import EmbeddingMLP, embed_words

__all__ = [
  "MLP",
  "MODELS",
  "PADDING_ID",
  "Autoencoder",
  "CharGPT",
  "CifarCNN",
  "EmbeddingMLP",
  "TransformerTagger",
  "ViT",
  "WideResNet",
  "WideResNetBlock",
  "dense_parameter_count",
  "embed_words",
  "gated_features",
  "unit_norm_init",
]
