import torch
import torch.nn as nn


class Model(nn.Module):
    """Two hidden layers with ReLU and a linear output layer."""

    def __init__(self, d_in, hidden, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, d_out)

    def forward(self, x):
        x = torch.relu(self.fc1(x))
        x = torch.relu(self.fc2(x))
        return self.out(x)


batch, d_in, hidden, d_out = 64, 8192, 8192, 1024


def get_inputs():
    return [torch.randn(batch, d_in)]


def get_init_inputs():
    return [d_in, hidden, d_out]
