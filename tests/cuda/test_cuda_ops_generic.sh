#!/bin/sh
# test_cuda_ops's attention checks on the generic kernels
# (FABULA_ATTN_GENERIC=1, which the program sets for itself with this flag).
# Its exit status is the test's: 0 pass, 1 fail, 77 skip (no CUDA device).
exec "${FB_BUILDDIR:-.}/tests/cuda/test_cuda_ops" --attn-generic
