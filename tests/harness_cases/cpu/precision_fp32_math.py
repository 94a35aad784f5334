# precision_mix in bf16: checks that every floating input, init input, weight and buffer arrived as bfloat16 (and
# the index as int64), then computes in fp32 and rounds once at the end. The reference rounds after each bf16 op,
# so the two differ by bf16 rounding: inside bf16's tolerance (1e-2), far outside fp32's (1e-4).
import torch

BF16 = torch.bfloat16


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features, scale):
        super().__init__()
        if scale.dtype != BF16:
            raise TypeError(f"the init input scale arrived as {scale.dtype}")
        self.weight = torch.nn.Parameter(torch.randn(out_features, in_features))
        self.register_buffer("gain", 1.0 + 0.1 * torch.randn(out_features))
        self.scale = scale

    def forward(self, x, rows):
        seen = {"x": x.dtype, "weight": self.weight.dtype, "gain": self.gain.dtype, "rows": rows.dtype}
        want = {"x": BF16, "weight": BF16, "gain": BF16, "rows": torch.int64}
        if seen != want:
            raise TypeError(f"dtypes {seen}, expected {want}")
        y = torch.relu(x.float() @ self.weight.float().t()) * self.gain.float() * self.scale.float()
        return self.finish(y[rows])

    def finish(self, y):
        return y.to(BF16)
