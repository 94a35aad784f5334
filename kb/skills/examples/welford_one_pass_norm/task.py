"""LayerNorm over the last dimension (no affine), 32768 rows x 4096 fp32 (512 MB in, 512 MB out)."""

import torch
import torch.nn as nn

ROWS = 32768
COLS = 4096


class Model(nn.Module):
    def __init__(self, cols: int = COLS, eps: float = 1e-5) -> None:
        super().__init__()
        self.cols, self.eps = cols, eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.layer_norm(x, (self.cols,), eps=self.eps)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(ROWS, COLS) * 2.0 + 3.0]


def get_init_inputs() -> list:
    return [COLS, 1e-5]
