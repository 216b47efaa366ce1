"""``MODELS``: the presets the engine trains by name, ``functools.partial`` of the models with
the paper's sizes and the transformer tasks', and tiny ones for tests (the list is in
:mod:`gelujax.models`' docstring)."""

from __future__ import annotations

import functools

from gelujax import spelling
from gelujax.models.cnn import CifarCNN, WideResNet
from gelujax.models.mlp import MLP, Autoencoder
from gelujax.models.transformers import CharGPT, TransformerTagger, ViT
from gelujax.models.words import EmbeddingMLP
from gelujax.registry import Registry

MODELS: Registry = Registry("model")

MODELS.register("mlp_mnist", functools.partial(MLP, features=(128,) * 8, num_outputs=10))
MODELS.register(
  "mlp_mnist_gated", functools.partial(MLP, features=(128,) * 8, num_outputs=10, gated=True)
)
MODELS.register("mlp_twitter_pos", functools.partial(MLP, features=(256, 256), num_outputs=25))
MODELS.register(
  "embedding_mlp_twitter_pos",
  functools.partial(EmbeddingMLP, features=(256, 256), num_outputs=25, embed_dim=50),
)
MODELS.register(
  "spelling_mlp_twitter_pos",
  functools.partial(
    EmbeddingMLP, features=(256, 256), num_outputs=25, embed_dim=50, buckets=spelling.BUCKETS
  ),
)
MODELS.register("mlp_timit", functools.partial(MLP, features=(2048,) * 5, num_outputs=39))
MODELS.register("mlp_tiny", functools.partial(MLP, features=(16, 16), num_outputs=10))
MODELS.register(
  "mlp_tiny_gated", functools.partial(MLP, features=(16, 16), num_outputs=10, gated=True)
)
MODELS.register(
  "embedding_mlp_tiny",
  functools.partial(EmbeddingMLP, features=(16, 16), num_outputs=25, embed_dim=4),
)
MODELS.register("autoencoder_mnist", functools.partial(Autoencoder))
MODELS.register("autoencoder_tiny", functools.partial(Autoencoder, encoder_features=(16, 4)))
MODELS.register("cifar_cnn", functools.partial(CifarCNN, num_classes=10))
MODELS.register("cifar_cnn_tiny", functools.partial(CifarCNN, num_classes=10, widths=(4, 8)))
MODELS.register("wrn_40_4", functools.partial(WideResNet, depth=40, width=4, num_classes=100))
MODELS.register("wrn_tiny", functools.partial(WideResNet, depth=10, width=1, num_classes=10))
MODELS.register(
  "vit_fashion_mnist",
  functools.partial(ViT, num_classes=10, patch_size=7, width=48, depth=2, num_heads=4,
                    hidden_features=192),
)  # fmt: skip
MODELS.register(
  "vit_cifar10",
  functools.partial(ViT, num_classes=10, patch_size=4, width=192, depth=6, num_heads=3,
                    hidden_features=768),
)  # fmt: skip
MODELS.register(
  "transformer_twitter_pos",
  functools.partial(TransformerTagger, num_classes=25, width=64, depth=2, num_heads=4,
                    hidden_features=256, embed_dim=50, buckets=spelling.BUCKETS),
)  # fmt: skip
MODELS.register(
  "transformer_tagger_tiny",
  functools.partial(TransformerTagger, num_classes=25, width=16, depth=1, num_heads=2,
                    hidden_features=32, embed_dim=8, buckets=spelling.BUCKETS),
)  # fmt: skip
MODELS.register(
  "vit_tiny",
  functools.partial(ViT, num_classes=10, patch_size=7, width=16, depth=1, num_heads=2,
                    hidden_features=32),
)  # fmt: skip
# nanoGPT's shakespeare_char configurations: its CPU one (block 64 from the data) and its GPU
# one (block 256 from the data; its dropout 0.2 is the task's), and a tiny one for tests.
MODELS.register(
  "char_gpt_cpu",
  functools.partial(CharGPT, width=128, depth=4, num_heads=4, hidden_features=512),
)
MODELS.register(
  "char_gpt_gpu",
  functools.partial(CharGPT, width=384, depth=6, num_heads=6, hidden_features=1536),
)
MODELS.register(
  "char_gpt_tiny",
  functools.partial(CharGPT, width=16, depth=1, num_heads=2, hidden_features=64),
)
