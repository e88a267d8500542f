"""Independent, reproducible random streams for certification: one per (run seed, image index, phase).

Selection (n0 samples) and estimation (n samples) must be independent; per-image streams also make an interrupted
certification resume with exactly the numbers an uninterrupted run would have produced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

SELECTION = 0
ESTIMATION = 1
PREDICTION = 2


def derive_seed(*keys: int) -> int:
    """A 63-bit seed derived from integer keys with NumPy's SeedSequence (distinct keys give unrelated streams)."""
    if any(k < 0 for k in keys):
        raise ValueError(f"seed keys must be >= 0, got {keys}")
    state = np.random.SeedSequence(list(keys)).generate_state(2, dtype=np.uint32)
    return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)


def make_generator(device: torch.device | str, *keys: int) -> torch.Generator:
    """A ``torch.Generator`` on ``device`` seeded from ``keys``."""
    import torch  # (here: derive_seed serves torch-free tools, the replay of released logs)

    generator = torch.Generator(device=device)
    generator.manual_seed(derive_seed(*keys))
    return generator
