#!/usr/bin/env python3
"""Validate a model: ``python scripts/validate_model.py MODEL.onnx|GRAPH.json [options]``.

A thin wrapper around ``onnx-dequant validate`` (same options, same exit codes: 0 agree, 1 disagree,
2 bad input); see ``docs/validation.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from onnx_dequant.cli import main

if __name__ == "__main__":
    sys.exit(main(["validate", *sys.argv[1:]]))
