import torch

batch_size = 4096
dim = 4096


class Model(torch.nn.Module):
    """relu(2 x + bias): an elementwise task with a parameter, written in fp32; under --precision bf16 the harness
    casts x and the bias to bfloat16."""

    def __init__(self, dim):
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return torch.relu(x * 2.0 + self.bias)


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
