"""The README says what the project does: its test command is CI's, its op table is the importer's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import onnx_dequant as odq

ROOT = Path(__file__).resolve().parent.parent


def _quick_start() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start.*?```sh\n(.*?)```", readme, re.S)
    assert block, "the README has a quick start block"
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_two_commands_and_ci_runs_the_same_tests():
    main_job, tests = _quick_start()
    assert "onnx-dequant validate models/" in main_job
    sample = re.search(r"(models/\S+)", main_job).group(1)
    assert (ROOT / sample).is_file()
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert tests in ci  # CI runs the README's own test command


def test_readme_op_table_is_the_importers():
    def table(text: str) -> str:
        section = text[text.index("| nGraph op |") :]
        return section[: section.index("\n\n")]

    readme = (ROOT / "README.md").read_text()
    doc = (ROOT / "docs" / "ngraph.md").read_text()
    assert table(readme) == table(doc)
    for op in odq.ngraph.supported_ops():
        assert f"| {op} " in table(readme) or f", {op}" in table(readme) or f"{op}," in table(readme), op


def _layout_block() -> str:
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"## How it is built\n\n```\n(.*?)```", readme, re.S)
    assert block, "the README has a layout block"
    return block.group(1)


def test_readme_layout_matches_the_folders():
    """Every module of the package, the lowering pass and validation is named in "How it is built", and
    every name there exists."""
    block = _layout_block()
    package = ROOT / "onnx_dequant"
    for folder in (package, package / "lowering", package / "lowering" / "strategies", package / "validation"):
        for path in folder.glob("*.py"):
            if path.name not in ("__init__.py", "__main__.py"):
                assert re.search(rf"\b{re.escape(path.stem)}\b", block), f"{path.relative_to(ROOT)} not in README"
        for sub in folder.iterdir():
            if sub.is_dir() and (sub / "__init__.py").exists():
                assert f"{sub.name}/" in block, f"{sub.relative_to(ROOT)}/ not in README"
    for name in re.findall(r"\b(\w+)\.py\b", block):
        assert list(package.rglob(f"{name}.py")), f"README names {name}.py, which does not exist"


def test_lowering_doc_names_every_step_and_strategy():
    doc = (ROOT / "docs" / "lowering.md").read_text()
    for folder in ("lowering", "lowering/strategies"):
        for path in (ROOT / "onnx_dequant" / folder).glob("*.py"):
            if path.name != "__init__.py":
                assert f"`{path.name}`" in doc or f"({path.name})" in doc or f"`{path.stem}" in doc, path.name


def test_readme_lists_every_op_of_both_opsets_with_what_it_becomes():
    from onnx_dequant.ngraph.catalog import OPSET0, OPSET1, catalog_markdown

    table = catalog_markdown()
    for text in ((ROOT / "README.md").read_text(), (ROOT / "docs" / "ngraph.md").read_text()):
        assert table in text  # the table is print(odq.ngraph.catalog.catalog_markdown())
    assert len(OPSET0) == 155 and len(OPSET1) == 109
    rows = {line.split(" | ")[0][2:]: line for line in table.splitlines()[2:]}
    assert set(OPSET0) | set(OPSET1) <= set(rows)
    for op in ("Send", "Recv", "AllReduce", "BroadcastDistributed", "RandomUniform"):
        assert "refused: " in rows[op]
    for op in odq.ngraph.supported_ops():
        assert "| converted (op_version" in rows[op] or op not in rows
    graph = (
        '[{"name":"f","ops":[{"name":"P","op":"Parameter","element_type":"float","shape":[1]},'
        '{"name":"S","op":"Send","inputs":["P"]},{"name":"R","op":"Result","inputs":["S"]}],'
        '"parameters":["P"],"result":["R"]}]'
    )
    with pytest.raises(odq.DequantizeError, match="Send is refused: communication between devices"):
        odq.ngraph.convert(graph)
