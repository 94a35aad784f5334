# Runs out of memory inside its own forward: the candidate's failure (``oom``), not the harness's.
import torch


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 4096.00 GiB")
