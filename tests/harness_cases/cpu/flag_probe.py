# A correct candidate that fails as soon as it is called under other backend settings (TF32 modes, cuDNN math
# modes) than on its first call: it passes only when it is timed on the path it was verified on.
import torch

_FIRST = []


def _state():
    b = torch.backends
    return (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, b.cudnn.benchmark, b.cudnn.deterministic,
            torch.get_float32_matmul_precision())


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        if not _FIRST:
            _FIRST.append(_state())
        if _state() != _FIRST[0]:
            raise RuntimeError(f"numeric path changed between calls: {_FIRST[0]} -> {_state()}")
        return torch.sub(a, torch.neg(b))
