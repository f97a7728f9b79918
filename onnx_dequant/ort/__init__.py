"""Running models that keep the Dequantize op under ONNX Runtime, through a Python kernel.

``session(model)`` returns a ``KernelSession`` (an ``onnxruntime.InferenceSession``): nodes whose types
onnxruntime-extensions can carry run the exact NumPy reference as a Python custom op, the others are
lowered to standard ONNX. See ``kernels`` for how the extension's sharp edges are handled.
"""

from __future__ import annotations

from .kernels import SUPPORTED_EXTENSIONS, fast_bridge_installed
from .session import KernelIOBinding, KernelSession, session

__all__ = ["session", "KernelSession", "KernelIOBinding", "SUPPORTED_EXTENSIONS", "fast_bridge_installed"]
