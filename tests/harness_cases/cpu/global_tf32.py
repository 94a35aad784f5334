# Switches TF32 on for the whole process when imported and lowers the matmul precision: not a cheat by itself;
# the harness confines it to the candidate's calls and the checks judge the result.
import torch

torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        return torch.sub(a, torch.neg(b))
