"""The lowering strategies, one module per form of standard ONNX: each says what it handles, why it
refuses a node (``check``), what it costs (``cost``) and which nodes it writes (``emit``)."""
