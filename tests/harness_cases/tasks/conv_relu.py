import torch

# A convolution whose eager time depends on cuDNN's TF32 setting (on by default in PyTorch)
batch_size = 32
in_channels = 64
out_channels = 128
height = width = 56
kernel_size = 3


class Model(torch.nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, out_channels, kernel_size, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]


def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
