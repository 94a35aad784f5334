# Fails loudly if any secret-looking variable reached the candidate.
import os

import torch

LEAKED = sorted(k for k in os.environ if any(w in k.upper() for w in ("KEY", "TOKEN", "SECRET", "PASSWORD")))


class ModelNew(torch.nn.Module):
    def forward(self, a, b):
        if LEAKED:
            raise RuntimeError("leaked: " + ",".join(LEAKED))
        raise RuntimeError("clean env; home=" + os.environ.get("HOME", "") + "; cwd=" + os.getcwd())
