"""The lowering strategies, one module per form of standard ONNX, each like an onnxscript rewrite rule:
what it handles (the module docstring), ``check`` (a ``Refusal`` with its reason, or the choice it will
emit), ``cost`` and ``emit`` of that choice. ``base`` defines the shape every strategy has; ``dql``
the DequantizeLinear forms' shared part; ``shapes`` shape tensors. The planner holds the rule set."""
