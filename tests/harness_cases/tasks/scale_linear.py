import torch

batch_size = 32
in_features = 64
out_features = 48


class Model(torch.nn.Module):
    """Weights come from seeded construction: candidates must match them."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features))

    def forward(self, x):
        return torch.relu(x @ self.weight.t()) * 2.0


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
