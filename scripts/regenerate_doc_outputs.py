"""Rerun every documented ``$ python -m phaze_env.evaluate ...`` command in the given Markdown pages and replace
the output under it with what the current code prints (so sample outputs cannot go stale by hand).

    PYTHONPATH=$PWD python scripts/regenerate_doc_outputs.py docs/moe.md docs/context_parallel.md

A command may continue over lines ending in a backslash; the output is everything after the command up to the
block's end (a refused command's: its one line on stderr). Each page is written atomically, once all its commands ran.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

from phaze_env.files import write_text_atomic

BLOCK = re.compile(r"(```[^\n]*\n)(.*?)(```)", re.S)
PREFIX = "$ python -m phaze_env.evaluate"


def command_lines(block: str) -> list[str]:
    """The block's command: its first line and every line a trailing backslash continues it onto."""
    lines = block.splitlines()
    taken = [lines[0]]
    while taken[-1].rstrip().endswith("\\") and len(taken) < len(lines):
        taken.append(lines[len(taken)])
    return taken


def regenerate(block: str) -> str:
    if not block.startswith(PREFIX):
        return block
    command = command_lines(block)
    argv = shlex.split(" ".join(line.rstrip().rstrip("\\") for line in command)[2:])
    print(" ".join(argv), file=sys.stderr, flush=True)
    run = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, check=False)
    # a page may document a refused command (status 2, its one line on stderr) or an infeasible plan (status 1)
    return "\n".join(command) + "\n" + (run.stdout if run.returncode in (0, 1) else run.stderr)


def main(pages: list[str]) -> None:
    for page in map(Path, pages):
        text = page.read_text(encoding="utf-8")
        new = BLOCK.sub(lambda m: m.group(1) + regenerate(m.group(2)) + m.group(3), text)
        if new != text:
            write_text_atomic(page, new)
            print(f"rewrote {page}", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
