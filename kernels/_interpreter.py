"""Triton's interpreter (TRITON_INTERPRET=1: the kernels on CPU tensors, as CI runs them), without its redundant work.

A launch patches triton.language for the interpreter (`_patch_lang`: inspect.getmembers over four modules) and
restores it at its end; a call of a @triton.jit helper inside the kernel patches it again, although it is patched
already, and every program of the grid calls its helpers anew. Those nested patches took ~28% of an interpreted
training step (cProfile of `bench/gpu_summary.py --dry-run`, 2026-11-30: 24.8 of 87 s in `_patch_builtin`).
skip_nested_language_patches makes a nested patch a no-op when the launch in progress has patched the same
language modules (the helper's `tl` is the kernel's), and leaves every other call to Triton. Nothing changes in
what the kernels compute: a nested patch wrapped no builtin again (each is a wrapper already), replaced the
launch's other patches with equal ones, and dropped its own restore record (the launch's restore undid it all).
Installed at the first interpreted launch (kernels._common.wrap_triton); Triton versions without these internals
are left alone.
"""
from __future__ import annotations

import functools
import inspect
import threading

__all__ = ["skip_nested_language_patches"]

_launch = threading.local()  # .patched: the module ids the launch in progress patched (None outside a launch)


def _language_modules(fn, tl) -> set[int]:
    """The ids of triton.language and triton.language.core among fn's globals (what _patch_lang patches for fn)."""
    return {id(value) for value in fn.__globals__.values() if inspect.ismodule(value) and value in (tl, tl.core)}


def skip_nested_language_patches() -> bool:
    """Wrap the interpreter's launch and its `_patch_lang` (once); False where this Triton has neither."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return False
    executor = getattr(interpreter, "GridExecutor", None)
    patch_lang = getattr(interpreter, "_patch_lang", None)
    scope_type = getattr(interpreter, "_LangPatchScope", None)
    if executor is None or patch_lang is None or scope_type is None:
        return False
    if getattr(patch_lang, "skips_nested", False):
        return True
    launch = executor.__call__

    @functools.wraps(launch)
    def launch_once_patched(self, *args, **kwargs):
        outer, _launch.patched = getattr(_launch, "patched", None), set()  # this launch's first patch runs
        try:
            return launch(self, *args, **kwargs)
        finally:
            _launch.patched = outer

    @functools.wraps(patch_lang)
    def patch_lang_once(fn):
        patched = getattr(_launch, "patched", None)
        modules = _language_modules(fn, tl)
        if patched and modules <= patched:
            return scope_type()  # patched by this launch already: nothing to do, nothing to restore
        scope = patch_lang(fn)
        if patched is not None:
            patched |= modules
        return scope

    patch_lang_once.skips_nested = True
    executor.__call__ = launch_once_patched
    interpreter._patch_lang = patch_lang_once
    return True
