"""The 2D models (ffno2d, s4ffno2d, amgfno2d) beyond the registry-wide contract
(test_model_contract.py): the axes are wired right (transposing the input = swapping the per-axis
weights and grid channels), the memory is the per-grid-point S4D, the parameter count is the 1D
model's plus one spectral weight per block, AMGFNO2d's gate, the Triton path equals the reference
(forward and every gradient; the 1D tests cover the rollout kernels), and the whole model traces as
one graph."""
import pytest
import torch
from helpers import rel_err

import amg_fast
from amg_fast.layers import S4DMemory
from amg_fast.models import count_parameters, get_model

SMALL = dict(width=8, modes=4)


def model(name, **kw):
    torch.manual_seed(0)
    extra = {"omega": 0.083} if name == "amgfno2d" else {}
    return get_model(name, **{**SMALL, **extra, **kw}).double()


@pytest.mark.parametrize("name", ["ffno2d", "s4ffno2d", "amgfno2d"])
def test_transposed_input_equals_swapped_axis_weights(name):
    """Swap every block's x and y spectral weights and the encoder's x/L, y/L columns: the model of
    the transposed field is the transposed model output. A conv on the wrong axis would break it."""
    net = model(name)
    if name == "amgfno2d":
        with torch.no_grad():
            net.gate.w_z.normal_()  # a non-trivial content gate
    swapped = model(name)
    swapped.load_state_dict(net.state_dict())
    with torch.no_grad():
        for block in swapped.blocks:
            x_axis, y_axis = block.spectral.axes
            x_axis.weight, y_axis.weight = y_axis.weight, x_axis.weight
        swapped.encoder.weight[:, [1, 2]] = swapped.encoder.weight[:, [2, 1]].clone()
    u = torch.randn(2, 5, 16, 12, 1, dtype=torch.float64)
    assert rel_err(swapped(u.transpose(2, 3)), net(u).transpose(2, 3)) <= 1e-12
    assert rel_err(swapped.rollout(u[:, 0].transpose(1, 2), 3), net.rollout(u[:, 0], 3).transpose(2, 3)) <= 1e-12
    assert rel_err(swapped(u), net(u)) > 1e-3  # and the swap does change the model


def test_memory_runs_the_s4d_at_every_grid_point():
    torch.manual_seed(1)
    layer = S4DMemory(6, state_dim=8).double()
    h = torch.randn(2, 7, 4, 3, 6, dtype=torch.float64)
    z = layer(h)
    for i in range(4):
        for j in range(3):
            assert rel_err(z[:, :, i, j], layer(h[:, :, i:i + 1, j])[:, :, 0]) <= 1e-12


@pytest.mark.parametrize("name", ["ffno", "s4ffno", "amgfno"])
@pytest.mark.parametrize("f", [32, 64])
def test_parameter_count_is_the_1d_models_plus_a_spectral_weight_per_block(name, f):
    H, K = 128, f // 2
    one, two = (count_parameters(get_model(n, width=H, modes=K)) for n in (name, name + "2d"))
    assert two == one + 4 * K * H * H * 2 + H  # 4 blocks x one more [K, H, H, 2] weight, one more encoder column


def test_amgfno2d_gate_mean_and_per_batch_omega():
    net = model("amgfno2d")
    u = torch.randn(2, 4, 8, 6, 1, dtype=torch.float64)
    net(u)
    assert 0 < net.gate_mean < 1 and net.last_gate_mean.dim() == 0
    fixed = net.gate_mean
    net(u, omega=torch.tensor([1e-4, 0.5]))
    assert net.gate_mean != fixed
    net.rollout(u[:, 0], 3, omega=torch.tensor([1e-4, 0.5]))
    assert 0 < net.gate_mean < 1
    with pytest.raises(ValueError, match="omega per batch must have 2 values"):
        net(u, omega=torch.tensor([0.1, 0.2, 0.3]))


def test_top_level_exports_are_the_registry_classes():
    for cls in ("FFNO1d", "S4FFNO1d", "AMGFNO1d", "FFNO2d", "S4FFNO2d", "AMGFNO2d", "MultiInputFFNO1d",
                "Factformer1d", "GalerkinTransformer1d", "UNet1d", "Normalized"):
        assert getattr(amg_fast, cls) is getattr(amg_fast.models, cls) and cls in amg_fast.__all__
    assert type(get_model("amgfno2d")) is amg_fast.AMGFNO2d and amg_fast.AMGFNO2d.spatial_dims == 2


def test_amgfno2d_triton_equals_reference(kdev, gen, poisoned):
    torch.manual_seed(0)
    ref = get_model("amgfno2d", width=16, modes=3, omega=0.3, backend="reference").to(kdev)
    fast = get_model("amgfno2d", width=16, modes=3, omega=0.3, backend="triton").to(kdev)
    fast.load_state_dict(ref.state_dict())
    u = torch.randn(1, 2, 8, 8, 1, generator=gen).to(kdev)  # small: each interpreted conv costs ~1 s on CPU
    target = torch.randn(1, 2, 8, 8, 1, generator=gen).to(kdev)
    outs = []
    for net in (ref, fast):
        out = net(u)
        (out - target).square().mean().backward()
        outs.append(out)
    assert rel_err(outs[1], outs[0]) <= 2e-3
    for (pname, p_ref), p_fast in zip(ref.named_parameters(), fast.parameters()):
        assert rel_err(p_fast.grad, p_ref.grad) <= 2e-3, pname


def test_amgfno2d_forward_traces_as_one_graph():
    net = get_model("amgfno2d", width=8, modes=4, omega=0.2, backend="reference")
    u = torch.randn(2, 3, 16, 12, 1)
    compiled = torch.compile(net, backend="eager", fullgraph=True)
    assert rel_err(compiled(u), net(u)) <= 1e-6
