"""The tutorials of the documentation site run as a reader would run them, and print what their pages show.

Each page's ```python blocks run in order in one fresh interpreter (the page's state carries from block to block, as
in a notebook), in an empty directory, with a private ``PHAZE_CACHE_DIR``. A block followed by an ```output block
must print those lines, in that order, among its own printed lines; ``…`` in an expected line stands for any text
(the run-dependent parts: timings, counts of a learning agent). ``python tests/test_docs_tutorials.py PAGE`` runs one
page and prints each block's output (to write a page's output blocks from a real run).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
TUTORIALS = sorted((DOCS / "tutorials").glob("*.md"))
RUNNABLE = [page for page in TUTORIALS if page.name != "index.md"] + [DOCS / "guides" / "plain-data.md"]
"""Pages whose Python blocks are executed: every tutorial and the plain-data guide (the README's former snippets)."""
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
MARK = "<<<phaze-docs-block {}>>>"
TIMEOUT_S = 600  # a generous ceiling for a loaded CI machine; each page takes seconds to tens of seconds idle
PAGE_TIMEOUT_S = {"system-codesign.md": 2400}
"""Pages that run longer: tutorial 2's exact system-space search of GPT-2 XL at 1 MW from a cold cache (68.5 s before
the system stack's fused attention and weight-gradient accumulation, session 54; since then its bound prunes less and
the search evaluates 75 designs where it evaluated 5: minutes, the page says how many)."""


@dataclass(frozen=True)
class Block:
    code: str
    expected: tuple[str, ...] | None  # the lines of the ```output block after it, if any


def blocks(page: Path) -> list[Block]:
    """The page's Python blocks, each with the output block that directly follows it (only blank lines between)."""
    text = page.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    found = []
    for i, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        after = fences[i + 1] if i + 1 < len(fences) else None
        follows = after is not None and after.group(1) == "output" and not text[fence.end():after.start()].strip()
        found.append(Block(fence.group(2), tuple(after.group(2).splitlines()) if follows else None))
    return found


def runner(page: Path) -> str:
    """One program running the page's blocks in order in one namespace, marking where each block's output starts."""
    codes = [block.code for block in blocks(page)]
    return (f"import sys\nnamespace = {{'__name__': '__main__'}}\n"
            f"for i, code in enumerate({json.dumps(codes)}):\n"
            f"    print({MARK!r}.format(i), flush=True)\n"
            f"    exec(compile(code, f'{page.name} block {{i + 1}}', 'exec'), namespace)\n"
            "    sys.stdout.flush()\n")


def run_page(page: Path, workdir: Path) -> subprocess.CompletedProcess:
    env = os.environ | {"PYTHONPATH": str(REPO), "PHAZE_CACHE_DIR": str(workdir / ".phaze-cache"), "MPLBACKEND": "Agg",
                        "COLUMNS": "120", "PYTHONHASHSEED": "0"}
    return subprocess.run([sys.executable, "-c", runner(page)], cwd=workdir, capture_output=True, text=True,
                          timeout=PAGE_TIMEOUT_S.get(page.name, TIMEOUT_S), env=env)


def outputs(stdout: str, count: int) -> list[list[str]]:
    """Each block's printed lines, split at the markers."""
    parts = re.split(r"^<<<phaze-docs-block (\d+)>>>\n", stdout, flags=re.MULTILINE)
    printed = [[] for _ in range(count)]
    for index, text in zip(parts[1::2], parts[2::2]):
        printed[int(index)] = text.splitlines()
    return printed


def line_pattern(expected: str) -> re.Pattern:
    """An expected line as a whole-line pattern: ``…`` matches any text, everything else literally."""
    return re.compile("^" + ".*".join(map(re.escape, expected.rstrip().split("…"))) + "$")


def missing_lines(expected: tuple[str, ...], printed: list[str]) -> list[str]:
    """The expected lines not found in ``printed`` in order (an empty list: the output matches the page)."""
    position = 0
    for line in (line for line in expected if line.strip()):
        pattern = line_pattern(line)
        while position < len(printed) and not pattern.match(printed[position].rstrip()):
            position += 1
        if position == len(printed):
            return [line]
        position += 1
    return []


def test_every_runnable_page_has_python_blocks_and_outputs():
    assert len(TUTORIALS) >= 7, "the six tutorials and their index"
    for page in RUNNABLE:
        found = blocks(page)
        assert found, f"{page.relative_to(REPO)} has no ```python block"
        assert any(block.expected for block in found), f"{page.relative_to(REPO)} shows no output of its code"


def test_output_lines_match_in_order_with_wildcards():
    assert missing_lines(("a …", "c"), ["x", "a 12 s", "b", "c"]) == []
    assert missing_lines(("c", "a …"), ["a 1", "c"]) == ["a …"]  # order matters
    assert missing_lines(("1.5",), ["1x5"]) == ["1.5"]  # literal, not a regular expression
    assert missing_lines(("a",), ["a b"]) == ["a"]  # whole lines


def test_blocks_pair_code_with_the_output_right_after_it(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("```python\nprint(1)\n```\n\n```output\n1\n```\n\ntext\n\n```python\nx = 2\n```\n\ntext\n\n"
                    "```output\nnot this block's\n```\n")
    assert blocks(page) == [Block("print(1)\n", ("1",)), Block("x = 2\n", None)]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda page: page.stem)
def test_tutorial_runs_and_prints_what_its_page_shows(page, tmp_path):
    workdir = tmp_path / "reader"
    workdir.mkdir()
    done = run_page(page, workdir)
    assert done.returncode == 0, f"{page.name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    found = blocks(page)
    for number, (block, printed) in enumerate(zip(found, outputs(done.stdout, len(found))), start=1):
        if block.expected is not None:
            missing = missing_lines(block.expected, printed)
            assert not missing, (f"{page.name} block {number} printed\n" + "\n".join(printed) +
                                 f"\nbut the page shows {missing[0]!r} (not found in that order)")


if __name__ == "__main__":  # print each block's output of one page
    import tempfile

    target = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        done = run_page(target, Path(scratch))
        for number, printed in enumerate(outputs(done.stdout, len(blocks(target))), start=1):
            print(f"--- block {number}\n" + "\n".join(printed))
        print(done.stderr[-3000:] if done.returncode else "", f"--- rc {done.returncode}, "
              f"{time.perf_counter() - started:.1f} s", sep="")
