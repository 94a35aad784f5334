import torch

batch_size = 16
in_features = 64
out_features = 48


class Model(torch.nn.Module):
    """A linear layer whose output is returned in fp32: in a bf16 run the product is computed in bf16 and up-cast,
    so the output dtype stays float32 while the work was bf16."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features))

    def forward(self, x):
        return (x @ self.weight.t()).float()


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
