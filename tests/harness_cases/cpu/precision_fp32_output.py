# precision_mix in bf16, but the output is left in fp32: the reference's is bfloat16, so the harness must fail it
# with a message naming both dtypes and the precision.
import torch


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features))
        self.register_buffer("gain", 1.0 + 0.1 * torch.randn(out_features))
        self.scale = scale

    def forward(self, x, rows):
        y = torch.relu(x.float() @ self.weight.float().t()) * self.gain.float() * self.scale.float()
        return y[rows]
