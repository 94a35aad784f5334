import torch

batch_size = 16
in_features = 64
out_features = 48


class Model(torch.nn.Module):
    """A parameter, a buffer, a tensor from get_init_inputs and an integer index input: under --precision bf16 the
    floating ones are cast to bfloat16 and the index stays int64."""

    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features))
        self.register_buffer("gain", 1.0 + 0.1 * torch.randn(out_features))
        self.scale = scale

    def forward(self, x, rows):
        y = torch.relu(x @ self.weight.t()) * self.gain * self.scale
        return y[rows]


def get_inputs():
    return [torch.rand(batch_size, in_features), torch.randint(0, batch_size, (batch_size // 2,))]


def get_init_inputs():
    return [in_features, out_features, torch.tensor(2.0)]
