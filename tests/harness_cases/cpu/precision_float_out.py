# precision_float_out in bf16: the product of the bf16 input and weight computed in fp32 without the reference's
# rounding to bf16 first. Its fp32 output differs by bf16 rounding: within the precision's 1e-2 (KernelBench holds
# every output of a bf16 run to it), far outside fp32's 1e-4.
import torch


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features))

    def forward(self, x):
        return x.float() @ self.weight.float().t()
