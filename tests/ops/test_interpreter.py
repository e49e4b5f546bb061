"""kernels/_interpreter.py: Triton's interpreter without its nested re-patching of triton.language. Interpreter only
(CPU tensors): on a GPU the kernels compile and nothing is patched."""
import importlib
import sys

import pytest
import torch
import triton
import triton.language as tl
from helpers import interpreter_only

from amg_fast.kernels._interpreter import skip_nested_language_patches
from amg_fast.kernels._tf32 import split_tf32

pytestmark = interpreter_only


@triton.jit
def _scaled(x, factor):
    return x * factor


@triton.jit
def _twice_scaled_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    for _ in range(3):  # a helper called in a loop, in each program: each call re-patched the language before
        x = _scaled(x, 2.0)
    tl.store(out_ptr + offs, x, mask=mask)


def _launch(kernel, n=40, block=16):
    x = torch.randn(n)
    out = torch.empty(n)
    kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
    return x, out


def test_a_launch_patches_the_language_once_and_restores_it(monkeypatch):
    """Installed by the first launch of an amg_fast kernel (once: a second call wraps nothing again). A launch of 3
    programs whose helper runs 3 times each patches triton.language as one launch (each module once), computes
    what it did, and leaves the builtins as they were."""
    from triton.runtime import interpreter

    split_tf32(torch.randn(4, 8))  # an amg_fast kernel's launch (kernels._common.wrap_triton)
    assert getattr(interpreter._patch_lang, "skips_nested", False)
    wrapped = interpreter._patch_lang, interpreter.GridExecutor.__call__
    assert skip_nested_language_patches() and (interpreter._patch_lang, interpreter.GridExecutor.__call__) == wrapped
    calls = []
    patch_builtin = interpreter._patch_builtin
    monkeypatch.setattr(interpreter, "_patch_builtin", lambda *a: (calls.append(a[0]), patch_builtin(*a))[1])
    x, out = _launch(_twice_scaled_kernel)
    assert torch.equal(out, x * 8)
    per_launch = len(calls)
    calls.clear()
    before = tl.program_id
    _launch(_twice_scaled_kernel)
    assert len(calls) == per_launch and per_launch == len({id(pkg) for pkg in calls}), calls  # one patch a module
    assert tl.program_id is before and triton.language.core.is_builtin(tl.program_id)  # restored after the launch


def test_a_helper_that_sees_more_of_the_language_is_patched(tmp_path, monkeypatch):
    """A helper whose module also holds triton.language.core (which the kernel's does not) is patched as before:
    skipping it would leave core's builtins unpatched, and the kernel would fail."""
    (tmp_path / "core_helper.py").write_text(
        "import triton\nimport triton.language as tl\nfrom triton.language import core\n\n\n"
        "@triton.jit\ndef shifted(x):\n    return x + core.full(x.shape, 1.0, tl.float32)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("core_helper")
    (tmp_path / "core_kernel.py").write_text(
        "import triton\nimport triton.language as tl\nfrom core_helper import shifted\n\n\n"
        "@triton.jit\ndef kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):\n"
        "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
        "    tl.store(out_ptr + offs, shifted(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)\n")
    kernel = importlib.import_module("core_kernel").kernel
    try:
        x, out = _launch(kernel)
        assert torch.equal(out, x + 1)
    finally:
        for name in ("core_kernel", "core_helper"):
            sys.modules.pop(name, None)
