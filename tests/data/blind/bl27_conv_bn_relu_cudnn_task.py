"""Blind-set task bl27_conv_bn_relu_cudnn: conv2d (torch/cuDNN) followed by inference batch-norm and ReLU in a custom kernel."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, w, gamma, beta, mean, var):
        y = torch.nn.functional.conv2d(x, w, padding=1)
        y = torch.nn.functional.batch_norm(y, mean, var, gamma, beta, training=False, eps=1e-5)
        return torch.relu(y)


def get_inputs():
    return [torch.randn(32, 64, 56, 56), torch.randn(64, 64, 3, 3) * 0.05, torch.rand(64) + 0.5,
            torch.randn(64) * 0.1, torch.randn(64) * 0.1, torch.rand(64) + 0.5]


def get_init_inputs():
    return []
