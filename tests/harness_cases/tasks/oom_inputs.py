import torch

# A task whose second input set cannot be made: the harness's own work runs out of memory (the pointer probe
# asks for fresh inputs), which is a harness failure whatever the candidate is.
batch_size = 64
dim = 256
_CALLS = []


class Model(torch.nn.Module):
    def forward(self, a, b):
        return a + b


def get_inputs():
    _CALLS.append(1)
    if len(_CALLS) > 1:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 7.50 GiB")
    return [torch.rand(batch_size, dim), torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
