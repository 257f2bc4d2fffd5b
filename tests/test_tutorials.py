"""The tutorials in docs/tutorials are jupytext percent-format scripts that the documentation build executes as
notebooks and that run as plain ``python docs/tutorials/NN_name.py [--full]``. These tests check their form
without running them (running them is the documentation build's job): the percent format, that the file and each
cell parse, the size switch, that the tiny settings never read the shared datasets, that figures work without a
display, and that nothing is pushed to the Hub.
"""

from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import jupytext
import pytest

TUTORIALS = Path(__file__).resolve().parent.parent / "docs" / "tutorials"
NAMES = ["01_char_lstm.py", "02_attention_seq2seq.py", "03_transformer_lm.py", "04_bert_pretrain_finetune.py",
         "05_embeddings_textcnn.py", "06_export_onnx_hub.py"]
SWITCH = 'os.environ.get("HFSM_TUTORIAL_FULL") == "1" or "--full" in sys.argv'


def source(name: str) -> str:
    return (TUTORIALS / name).read_text(encoding="utf-8")


def full_switch(tree: ast.Module) -> ast.Assign:
    """The module-level ``FULL = ...`` assignment (exactly one)."""
    assignments = [node for node in tree.body if isinstance(node, ast.Assign)
                   and any(isinstance(t, ast.Name) and t.id == "FULL" for t in node.targets)]
    assert len(assignments) == 1, f"expected one module-level FULL assignment, found {len(assignments)}"
    return assignments[0]


def with_parents(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child.parent = node
    return tree


def guarded_by_full(tree: ast.AST, node: ast.AST, seen: frozenset[str] = frozenset()) -> bool:
    """Whether ``node`` runs only when FULL is true: inside the true branch of an ``if FULL`` statement or a
    ``... if FULL else ...`` expression, or inside a function that is only called there."""
    child, parent = node, getattr(node, "parent", None)
    while parent is not None:
        if isinstance(parent, ast.If | ast.IfExp) and isinstance(parent.test, ast.Name) and parent.test.id == "FULL":
            if child in parent.body if isinstance(parent, ast.If) else child is parent.body:
                return True
        if isinstance(parent, ast.FunctionDef):
            if parent.name in seen:
                return False  # a recursion that is not guarded on its way in
            return all(guarded_by_full(tree, call, seen | {parent.name}) for call in calls_to(tree, parent.name))
        child, parent = parent, getattr(parent, "parent", None)
    return False


def calls_to(tree: ast.AST, name: str) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and ((isinstance(node.func, ast.Name) and node.func.id == name)
                 or (isinstance(node.func, ast.Attribute) and node.func.attr == name))]


def test_the_six_tutorials_and_nothing_else():
    assert sorted(p.name for p in TUTORIALS.glob("[0-9][0-9]_*.py")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_jupytext_percent_format(name):
    text = source(name)
    assert text.startswith("# %% [markdown]\n# # "), "a tutorial opens with a markdown cell holding its title"
    notebook = jupytext.reads(text, fmt="py:percent")
    kinds = [cell.cell_type for cell in notebook.cells]
    assert kinds.count("markdown") >= 3 and kinds.count("code") >= 3, kinds
    assert notebook.cells[0].source.startswith(f"# {int(name[:2])}. "), "the title is numbered as the file"
    # the file is what jupytext writes for its own notebook: no code outside a cell, markers well formed
    assert jupytext.writes(notebook, fmt="py:percent") == text


@pytest.mark.parametrize("name", NAMES)
def test_the_file_and_every_code_cell_parse(name):
    ast.parse(source(name), filename=name)
    notebook = jupytext.reads(source(name), fmt="py:percent")
    for index, cell in enumerate(notebook.cells):
        if cell.cell_type == "code":  # a notebook runs cell by cell: each must be whole statements
            ast.parse(cell.source, filename=f"{name}, cell {index}")


@pytest.mark.parametrize("name", NAMES)
def test_the_full_switch(name):
    tree = ast.parse(source(name))
    assignment = full_switch(tree)
    assert ast.unparse(assignment.value) == ast.unparse(ast.parse(SWITCH, mode="eval").body)
    first_use = min(node.lineno for node in ast.walk(tree) if isinstance(node, ast.Name) and node.id == "FULL"
                    and isinstance(node.ctx, ast.Load))
    assert first_use > assignment.lineno, "FULL is read before it is set"
    switch = compile(ast.Expression(assignment.value), name, "eval")

    def full(environ: dict[str, str], argv: list[str]) -> bool:
        return eval(switch, {"os": SimpleNamespace(environ=environ), "sys": SimpleNamespace(argv=argv)})

    script = f"docs/tutorials/{name}"
    assert full({}, [script]) is False  # plain `python NN.py`: tiny
    assert full({}, [script, "--full"]) is True
    assert full({"HFSM_TUTORIAL_FULL": "1"}, ["ipykernel_launcher.py", "-f", "kernel.json"]) is True  # a notebook
    assert full({"HFSM_TUTORIAL_FULL": "0"}, ["ipykernel_launcher.py", "-f", "kernel.json"]) is False
    assert full({"HFSM_TUTORIAL_FULL": ""}, [script]) is False
    assert full({}, [script, "--fullness"]) is False


@pytest.mark.parametrize("name", NAMES)
def test_tiny_settings_never_read_the_shared_data(name):
    tree = with_parents(ast.parse(source(name)))
    reads = calls_to(tree, "shared_data")
    for call in reads:
        assert guarded_by_full(tree, call), f"line {call.lineno} reads the shared data outside `if FULL`"
    # the shared folder is named in one place, the shared_data function, so no other path reaches it
    functions = {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}
    named_inside = {id(node) for node in ast.walk(functions["shared_data"])} if "shared_data" in functions else set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and "shared" in node.value:
            assert id(node) in named_inside, f"line {node.lineno} names the shared data outside shared_data"


@pytest.mark.parametrize("name", NAMES)
def test_figures_need_no_display(name):
    text = source(name)
    if "import matplotlib.pyplot" not in text:
        return
    use_agg = text.index('matplotlib.use("Agg")')
    assert use_agg < text.index("import matplotlib.pyplot"), "the backend is chosen before pyplot is imported"
    guard = text.rfind("\n", 0, use_agg)
    assert text[text.rfind("\n", 0, guard - 1) + 1 : guard].startswith('if "ipykernel" not in sys.modules:')


@pytest.mark.parametrize("name", NAMES)
def test_nothing_is_pushed(name):
    tree = ast.parse(source(name))
    for call in calls_to(tree, "push_folder_to_hub"):
        dry_run = {k.arg: k.value for k in call.keywords}.get("dry_run")
        assert isinstance(dry_run, ast.Constant) and dry_run.value is True, f"line {call.lineno} pushes for real"
    assert not calls_to(tree, "push_to_hub"), "push_to_hub uploads"
