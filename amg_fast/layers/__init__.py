"""nn.Modules built on amg_fast.ops."""
from amg_fast.layers.ffno_block import FeedForward, FFNOBlock
from amg_fast.layers.memory_fusion import FUSIONS, AdaptiveMemoryGate, FixedFusion
from amg_fast.layers.s4d_memory import S4DMemory
from amg_fast.layers.spectral_conv import FactorizedSpectralConv, SpectralConv1d

__all__ = ["SpectralConv1d", "FactorizedSpectralConv", "FeedForward", "FFNOBlock", "S4DMemory",
           "FixedFusion", "AdaptiveMemoryGate", "FUSIONS"]
