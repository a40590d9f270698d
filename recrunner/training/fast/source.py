"""What a model's Python does in its loss that compiled or recorded code would not do again.

torch.compile traces a loss once and reuses the trace while its guards hold; a CUDA graph
(`cuda_graph_step`, recrunner.training.loop.graphs) replays recorded kernels and runs no Python at
all. Three things in a RecBole model's source matter to them, read here from the source (pure):

| the loss in Python                     | example                           | what it means                  |
|----------------------------------------|-----------------------------------|--------------------------------|
| sets an attribute (`set_in_loss`)      | LightGCN drops its cached         | a replay would not: no graph   |
|                                        | embeddings                        |                                |
| raises an int attribute (`counters`)   | MultiVAE, MacridVAE, RaCT count   | compiled as a symbol, not as a |
|                                        | steps in `self.update`            | constant (one graph per step)  |
| draws from Python's or numpy's         | LINE's `random.random()` choice   | a replay keeps the recording's |
| generator (`host_random`)              | of a side                         | draws: no graph                |

The loss is `calculate_loss` and `forward`, with every method of the model they call as
`self.name(...)`: RaCT raises its count in `calculate_actor_loss`, which its loss calls.
"""

from __future__ import annotations

import ast
import inspect
import re
import textwrap

ROOTS = ("calculate_loss", "forward")


def set_in_loss(model_class) -> list[str]:
    """The attributes that `model_class`'s loss assigns in Python (`self.x = ...`, `self.x += 1`),
    in its own methods or those it calls on `self` (pure over the class's source; sorted)."""
    names = set()
    for tree in _called(model_class, ROOTS):
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
            names.update(leaf.attr for target in targets for leaf in ast.walk(target) if _on_self(leaf))
    return sorted(names)


def source_of_calls(model_class, roots) -> list[str]:
    """The source of `model_class`'s methods `roots` and of every method of it they call on `self`
    (pure over the class's source): what a replay of them would run (training/loop/eval_graphs.py)."""
    return [ast.unparse(tree) for tree in _called(model_class, roots)]


def _called(model_class, roots):
    """The parsed methods `roots` of `model_class` and those they call as `self.name(...)`, each once."""
    todo, seen = list(roots), set()
    while todo:
        method = todo.pop()
        seen.add(method)
        tree = _tree(getattr(model_class, method, None))
        if tree is None:
            continue
        yield tree
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and _on_self(node.func) and node.func.attr not in seen \
                    and node.func.attr not in todo and inspect.isfunction(getattr(model_class, node.func.attr, None)):
                todo.append(node.func.attr)


def counters(model) -> list[str]:
    """The int attributes of `model` that its loss changes (step counts such as MultiVAE's
    `self.update`, which its KL annealing reads; sorted). torch.compile takes an int attribute as a
    constant, so such a loss compiled as it is would be compiled again at each step, up to torch's
    recompile limit (8), and then run eagerly."""
    return [name for name in set_in_loss(type(model)) if type(getattr(model, name, None)) is int]


_HOST_RANDOM = re.compile(r"\b(?:np|numpy)\.random\.\w+|(?<![\w.])random\.\w+(?=\()")


def host_random(*classes) -> list[str]:
    """The draws from Python's or numpy's generator in the source of `classes` (a model's, and its
    layers') and their bases, torch's excepted (pure over their source; sorted). A replayed graph
    keeps the values drawn when it was recorded (FEARec's `random.choice` of a same-target sequence,
    LINE's `random.random()` choice of a side), so such a model's step stays eager; a model that
    draws only while it is built loses the speed, not the numbers."""
    found = set()
    for cls in {base for cls in classes for base in cls.__mro__}:
        if cls.__module__.split(".")[0] in ("torch", "builtins"):
            continue
        try:
            found.update(_HOST_RANDOM.findall(inspect.getsource(cls)))
        except (TypeError, OSError):
            continue
    return sorted(found)


def _tree(function) -> ast.AST | None:
    try:
        return ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (TypeError, OSError, SyntaxError):
        return None


def _on_self(node) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self"
