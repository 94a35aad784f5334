"""Compile, verify, time and profile candidate kernels in isolation.

This package imports torch and the standard library only, so it runs on a bare GPU box.
"""
