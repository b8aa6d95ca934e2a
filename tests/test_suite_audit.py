"""The suite itself: every test function can fail, i.e. it asserts something.

A test asserts when its body has an ``assert``, a ``pytest.raises``/``warns``/``fail``, a call whose name
starts with ``assert`` or ``check`` (``np.testing.assert_allclose``, Gymnasium's ``check_env``, which
raise), or a call to a function of its own file that does (found to any depth).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
FAILING_CALLS = {"raises", "warns", "fail"}


def _call_names(node: ast.AST) -> set[str]:
    return {call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
            for call in ast.walk(node) if isinstance(call, ast.Call)}


def _asserts_directly(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node)) or any(
        name in FAILING_CALLS or name.startswith(("assert", "check")) for name in _call_names(node))


def assertion_free_tests(source: str) -> list[str]:
    """Names of the test functions in ``source`` that assert nothing, directly or through its helpers."""
    functions = {n.name: n for n in ast.walk(ast.parse(source)) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    asserting = {name for name, node in functions.items() if _asserts_directly(node)}
    grown = True
    while grown:  # helpers calling asserting helpers
        grown = False
        for name, node in functions.items():
            if name not in asserting and _call_names(node) & asserting:
                asserting.add(name)
                grown = True
    return sorted(name for name in functions if name.startswith("test") and name not in asserting)


@pytest.mark.parametrize("path", sorted(TESTS.glob("test_*.py")), ids=lambda p: p.name)
def test_every_test_asserts_something(path):
    assert assertion_free_tests(path.read_text()) == []


def test_the_audit_finds_assertion_free_tests():
    source = '''
def helper(x):
    assert x

def indirect(x):
    helper(x)

def test_direct():
    assert 1

def test_through_helpers():
    indirect(1)

def test_raises():
    with pytest.raises(ValueError):
        int("x")

def test_numpy():
    np.testing.assert_allclose(1, 1)

def test_runs_only():
    sum([1, 2])

def test_compares_without_asserting():
    1 == 2
'''
    assert assertion_free_tests(source) == ["test_compares_without_asserting", "test_runs_only"]
