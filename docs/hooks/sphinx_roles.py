"""MkDocs hook: the docstrings are written with Sphinx cross-reference roles (``:class:`~phaze_env.plan_spec.PlanSpec```),
which mkdocstrings renders literally (":class:" then the code). This turns each role into the code span alone, shortened
as Sphinx would (``~`` keeps the last component), so the API pages read as the docstrings mean, without editing the
source (other engineers own those files)."""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):<code>(~?)([^<]+)</code>")


def strip_roles(html: str) -> str:
    """``:class:<code>~a.b.C</code>`` -> ``<code>C</code>``; without ``~`` the full dotted name stays."""
    return ROLE.sub(lambda m: f"<code>{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}</code>", html)


def on_page_content(html: str, **_: object) -> str:
    return strip_roles(html)
