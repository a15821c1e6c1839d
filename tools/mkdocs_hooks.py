"""MkDocs hooks of the documentation site (mkdocs.yml `hooks:`).

The benchmarks page shows the result files of bench/results/ as they are when the site is built:
its `<!-- bench-results -->` marker is replaced by every `bench/results/*.md`, each file's headings
one level down (its title becomes a section of the page), so a new run's file appears without
anyone copying figures by hand.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
MARKER = "<!-- bench-results -->"
RELATIVE_LINK = re.compile(r"\[([^\]]+)\]\((?!https?:|#)[^)]+\)")


def bench_results() -> str:
    """Every result file, in name order, its headings one level down."""
    parts = []
    for path in sorted(RESULTS.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        demoted = re.sub(r"^(#{1,5}) ", r"#\1 ", text, flags=re.M)
        # a link relative to bench/results/ means nothing on the site: keep its text
        demoted = RELATIVE_LINK.sub(r"\1", demoted)
        parts.append(f"<!-- bench/results/{path.name} -->\n{demoted.strip()}\n")
    if not parts:
        raise FileNotFoundError(f"no benchmark results in {RESULTS}")
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    if MARKER in markdown:
        return markdown.replace(MARKER, bench_results())
    return markdown
