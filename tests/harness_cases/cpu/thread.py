# Starts a background thread on the first forward.
import threading
import time

import torch


class ModelNew(torch.nn.Module):
    started = False

    def forward(self, a, b):
        if not ModelNew.started:
            ModelNew.started = True
            threading.Thread(target=time.sleep, args=(600,), daemon=True, name="helper").start()
        return torch.sub(a, torch.neg(b))
