"""Sequence API shared by every model.

model(u): u [B, T, S, C] -> [B, T, S, C]; output t predicts u_{t+1} from inputs 0..t (teacher
forcing = feed the true sequence). model.rollout(u0, steps): u0 [B, S, C] -> [B, steps, S, C],
feeding predictions back through step(), which carries each model's memory from step to step.
Models on a 2D grid (class attribute spatial_dims = 2) take u [B, T, X, Y, C] and u0 [B, X, Y, C]
in the same way.

Inputs must be real floating tensors with no empty dimension, in the dtype of the model's
parameters: a model refuses other dtypes (float64 or fp16 data into an fp32 model) instead of
casting them, so no precision is lost or assumed silently; cast the data (u.float()) or the model
(model.double()). Under autocast the dtypes may differ (autocast casts).

Non-finite inputs: the memory models (s4ffno, amgfno) are causal for finite inputs only. Their
teacher-forced forward runs the S4D memory as an FFT convolution over time, which spreads a NaN
or Inf in frame t to every output frame, earlier ones too (rollout's recurrent steps do not look
ahead). model(u, check_finite=True) and model.rollout(u0, steps, check_finite=True) raise at the
first non-finite input frame or prediction instead (one host sync per check; off by default).
"""
from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

from amg_fast._checks import check_int_range, check_nonempty, check_rank, check_real_float, first_non_finite
from amg_fast._nvtx import nvtx_range
from amg_fast.kernels._common import tracing
from amg_fast.layers import FFNOBlock
from amg_fast.ops._backend import check_backend
from amg_fast.ops.decoder import COMPOSED_MAX_C, COMPOSED_MAX_H, composed_linear
from amg_fast.ops.encoder import GRID_LINEAR_MAX_H, GRID_LINEAR_MAX_K, grid_linear

__all__ = ["grid_coordinates", "append_grid", "SequenceModel", "composed_linears", "FFNOBackbone"]


def _grid(S: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    with torch.inference_mode(False):  # a normal tensor even when first built under inference mode
        return (torch.arange(S, device=device, dtype=dtype) / S)[:, None]


_cached_grid = functools.lru_cache(maxsize=32)(_grid)


def grid_coordinates(S: int, like: torch.Tensor) -> torch.Tensor:
    """Normalised grid x_r / L = r / S as [S, 1] on like's device and dtype (read-only). Cached per
    (S, dtype, device) in eager mode, so a training step spends no kernels on it; built afresh under
    torch.compile / fake-tensor tracing."""
    return (_grid if tracing() else _cached_grid)(S, like.dtype, like.device)


def append_grid(u: torch.Tensor, spatial_dims: int = 1) -> torch.Tensor:
    """u [..., S, C] -> [u, x/L] [..., S, C + 1] (the grid encoding every model uses); with
    spatial_dims = 2, u [..., X, Y, C] -> [u, x/L, y/L] [..., X, Y, C + 2]."""
    if spatial_dims == 1:
        coords = grid_coordinates(u.shape[-2], u)
    else:
        axes = [grid_coordinates(n, u)[:, 0] for n in u.shape[-1 - spatial_dims:-1]]
        coords = torch.stack(torch.meshgrid(*axes, indexing="ij"), dim=-1)  # [X, Y, 2]
    return torch.cat([u, coords.expand(u.shape[:-1] + (spatial_dims,))], dim=-1)


SPATIAL_AXES = {1: "S", 2: "X, Y"}  # how the input checks name the spatial axes


class SequenceModel(nn.Module):
    """Base class: input checks, grid encoder, generic autoregressive rollout.

    Subclasses implement forward(u) and step(u_t, state) -> (prediction, state), with
    initial_state(u0) giving the state before the first step. spatial_dims (class attribute):
    the number of spatial axes of u, 1 ([B, T, S, C]) or 2 ([B, T, X, Y, C]).
    """

    spatial_dims = 1

    def __init__(self, in_channels: int = 1, out_channels: int = 1):
        super().__init__()
        self.in_channels = check_int_range("in_channels", in_channels, 1)
        self.out_channels = check_int_range("out_channels", out_channels, 1)

    # -- construction from a run's settings --------------------------------------------------------
    @classmethod
    def options_kwargs(cls, options, omega=None) -> dict:
        """The constructor's keyword arguments from a TrainConfig-like object `options` (read by
        attribute): width, and modes unless None (then the model's default). A model with settings
        of its own adds them here, so the trainer builds it without knowing it."""
        kwargs = {"width": options.width}
        if options.modes is not None:
            kwargs["modes"] = options.modes
        return kwargs

    @classmethod
    def from_options(cls, options, *, omega=None, backend: str = "auto", in_channels: int = 1,
                     out_channels: int = 1) -> "SequenceModel":
        """The model that `options` describes (options_kwargs); omega: the data's omega_f, for
        models that use it."""
        return cls(in_channels=in_channels, out_channels=out_channels, backend=backend,
                   **cls.options_kwargs(options, omega))

    def __call__(self, *args, check_finite: bool = False, **kwargs):
        """model(u, check_finite=True): raise at the first frame of u, or of the output, that holds
        a NaN or Inf (ValueError for the input, FloatingPointError for the output)."""
        if check_finite:
            u = args[0] if args else kwargs["u"]
            t = first_non_finite(u, 1)
            if t is not None:
                raise ValueError(f"u: frame {t} (u[:, {t}]) holds NaN or Inf (check_finite=True); a memory model "
                                 "would spread it to every output frame, earlier ones too")
        out = super().__call__(*args, **kwargs)
        if check_finite:
            t = first_non_finite(out, 1)
            if t is not None:
                raise FloatingPointError(f"the prediction at frame {t} (output[:, {t}]) holds NaN or Inf though the "
                                         "input is finite (check_finite=True)")
        return out

    # -- input checks ---------------------------------------------------------------------------
    def check_sequence(self, u: torch.Tensor) -> None:
        layout = f"[B, T, {SPATIAL_AXES[self.spatial_dims]}, C]"
        check_real_float("u", u)
        check_rank("u", u, 3 + self.spatial_dims, layout)
        check_nonempty("u", u, layout)
        self._check_channels("u", u)
        self._check_dtype("u", u)

    def check_state(self, name: str, u_t: torch.Tensor) -> None:
        layout = f"[B, {SPATIAL_AXES[self.spatial_dims]}, C]"
        check_real_float(name, u_t)
        check_rank(name, u_t, 2 + self.spatial_dims, layout)
        check_nonempty(name, u_t, layout)
        self._check_channels(name, u_t)
        self._check_dtype(name, u_t)

    def _check_dtype(self, name: str, u: torch.Tensor) -> None:
        param = next(self.parameters(), None)
        if param is None or u.dtype == param.dtype or torch.is_autocast_enabled(u.device.type):
            return
        raise TypeError(f"{name} has dtype {u.dtype} but the model's parameters are {param.dtype}; the model does "
                        f"not cast: pass {param.dtype} data, or convert the model (e.g. model.to({u.dtype}))")

    def _check_channels(self, name: str, u: torch.Tensor) -> None:
        if u.shape[-1] != self.in_channels:
            raise ValueError(
                f"{name} must have {self.in_channels} channel(s) in its last dimension (in_channels), "
                f"got shape {tuple(u.shape)}"
            )

    # -- stepping -------------------------------------------------------------------------------
    def initial_state(self, u0: torch.Tensor) -> Any:
        return None

    def step(self, u_t: torch.Tensor, state: Any, **kwargs) -> tuple[torch.Tensor, Any]:
        """u_t [B, S, C] (2D: [B, X, Y, C]), state -> (prediction of u_{t+1}, same shape; next state)."""
        raise NotImplementedError

    def rollout(self, u0: torch.Tensor, steps: int, *, check_finite: bool = False, **step_kwargs) -> torch.Tensor:
        """Autoregressive rollout from u0 [B, S, C] only -> predictions [B, steps, S, C] (2D: u0
        [B, X, Y, C] -> [B, steps, X, Y, C]).
        check_finite=True raises at a non-finite u0 (ValueError) or at the first step whose
        prediction holds NaN or Inf (FloatingPointError; one host sync per step)."""
        self.check_state("u0", u0)
        check_int_range("steps", steps, 1)
        if check_finite and first_non_finite(u0[:, None], 1) is not None:
            raise ValueError("u0 holds NaN or Inf (check_finite=True)")
        state, current, preds = self.initial_state(u0), u0, []
        for i in range(steps):
            current, state = self.step(current, state, **step_kwargs)
            if check_finite and first_non_finite(current[:, None], 1) is not None:
                raise FloatingPointError(f"rollout: the prediction of step {i + 1} of {steps} holds NaN or Inf "
                                         "(check_finite=True); stopped there")
            preds.append(current)
        return torch.stack(preds, dim=1)


def composed_linears(first: nn.Linear, second: nn.Linear, x: torch.Tensor, backend: str = "reference") -> torch.Tensor:
    """second(first(x)) as one Linear, W = W2 W1 and b = W2 b1 + b2 (ops.composed_linear): exact (no
    activation between) and one pass over the activations instead of two, with no [..., hidden]
    intermediate. x [..., in]. A Linear without a bias counts a zero one."""
    b1 = first.bias if first.bias is not None else first.weight.new_zeros(first.weight.shape[0])
    b2 = second.bias if second.bias is not None else second.weight.new_zeros(second.weight.shape[0])
    return composed_linear(x, first.weight, b1, second.weight, b2, backend=backend)


DECODER_INPUTS = ("stream", "last_block")


class FFNOBackbone(SequenceModel):
    """Encoder Linear([u, x/L]) -> H, `n_blocks` FFNO blocks, decoder H -> 128 -> C (fourierflow).

    encode(u) [..., S, C_in] -> [..., S, H]; decode(h) [..., S, H] -> [..., S, C]. The decoder's two
    Linears (no activation between) run as one (composed_linears); its parameters stay the two.
    With spatial_dims = 2 the grid is [..., X, Y, .], the encoder reads [u, x/L, y/L] and each
    block's spectral conv is factorised (one per axis, summed; FFNOBlock).

    Options of the F-FNO authors' code (fourierflow `factorized_fno`), all off by default (docs/fidelity.md):
    - share_weights: one spectral weight [K, H, H, 2] (one per axis in 2D) for all blocks (fourierflow
      share_weight=True); needs modes given up front.
    - weight_norm: the encoder, feed-forward and decoder Linears weight-normalised, w = g v / ||v||
      per output row (torch's weight_norm parametrisation; fourierflow ff_weight_norm=True).
    - decoder_input: "stream" (default) decodes the residual stream after the last block, x + b;
      "last_block" decodes the last block's feed-forward output b alone, as fourierflow does
      (`self.out(b)` with use_fork=False).
    """

    def __init__(self, in_channels: int = 1, out_channels: int = 1, width: int = 128,
                 modes: int | None = None, *, n_blocks: int = 4, encoder_channels: int | None = None,
                 share_weights: bool = False, weight_norm: bool = False, decoder_input: str = "stream",
                 backend: str = "auto"):
        super().__init__(in_channels, out_channels)
        self.width = check_int_range("width", width, 1)
        self.modes = None if modes is None else check_int_range("modes", modes, 1)
        self.backend = check_backend(backend)
        for name, value in (("share_weights", share_weights), ("weight_norm", weight_norm)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be a bool, got {value!r}")
        if decoder_input not in DECODER_INPUTS:
            raise ValueError(f"decoder_input must be one of {DECODER_INPUTS}, got {decoder_input!r}")
        if share_weights and modes is None:
            raise ValueError("share_weights=True needs modes given up front (the lazily created weights of "
                             "modes=None cannot be tied before the first forward), got modes=None")
        self.share_weights, self.weight_norm, self.decoder_input = share_weights, weight_norm, decoder_input
        enc_in = in_channels if encoder_channels is None else encoder_channels
        self.encoder = nn.Linear(enc_in + self.spatial_dims, width)
        self.blocks = nn.ModuleList(FFNOBlock(width, modes, spatial_dims=self.spatial_dims, backend=backend)
                                    for _ in range(n_blocks))
        self.decoder = nn.Sequential(nn.Linear(width, 128), nn.Linear(128, out_channels))
        if share_weights:
            for block in self.blocks[1:]:
                block.spectral.share_weight_of(self.blocks[0].spectral)
        if weight_norm:
            linears = [self.encoder, *self.decoder]
            linears += [m for block in self.blocks for m in block.feed_forward.modules() if isinstance(m, nn.Linear)]
            for linear in linears:
                nn.utils.parametrizations.weight_norm(linear)

    @classmethod
    def options_kwargs(cls, options, omega=None) -> dict:
        """SequenceModel's plus the fourierflow options share_weights, weight_norm, decoder_input."""
        return {**super().options_kwargs(options, omega), "share_weights": options.share_weights,
                "weight_norm": options.weight_norm, "decoder_input": options.decoder_input}

    def encode(self, u: torch.Tensor) -> torch.Tensor:
        with nvtx_range("amg_fast.model.encode"):
            if self.spatial_dims > 1:
                return self.encoder(append_grid(u, self.spatial_dims))
            grid = grid_coordinates(u.shape[-2], u)[:, 0]
            fits = u.shape[-1] + 1 <= GRID_LINEAR_MAX_K and self.width <= GRID_LINEAR_MAX_H
            return grid_linear(u, grid, self.encoder.weight, self.encoder.bias, backend=self._layer_backend(fits))

    def decode(self, h: torch.Tensor) -> torch.Tensor:
        with nvtx_range("amg_fast.model.decode"):
            fits = self.out_channels <= COMPOSED_MAX_C and h.shape[-1] <= COMPOSED_MAX_H
            return composed_linears(self.decoder[0], self.decoder[1], h, self._layer_backend(fits))

    def _layer_backend(self, fits: bool) -> str:
        """The model's backend for the encoder / decoder op, "auto" (the reference, logged once) where
        backend="triton" but their kernels cannot take the layer's shape: such a model ran before these ops
        (nn.Linear) and keeps running."""
        return "auto" if self.backend == "triton" and not fits else self.backend

    def run_blocks(self, h: torch.Tensor, start: int, stop: int) -> torch.Tensor:
        """Blocks start..stop-1 on h; with decoder_input="last_block", a range that ends with the
        last block returns that block's update b (the decoder's input) instead of h + b."""
        last = len(self.blocks) - 1
        for i, block in enumerate(self.blocks[start:stop], start):
            with nvtx_range(f"amg_fast.model.ffno_block{i}"):
                if i == last and self.decoder_input == "last_block":
                    return block.branch(h)
                h = block(h)
        return h
