"""MkDocs hook: a link to a page the site does not build fails the build.

MkDocs only logs (at INFO) a link to a Markdown file that ``exclude_docs`` leaves out, so `mkdocs
build --strict` passes while the page links to a 404 (issue 52: eight links to ``paper_report/*.md``).
This hook resolves every relative ``.md`` link of every page against the site's files and raises
``PluginError`` naming the page, the link and the fix for one that is missing or excluded.
"""
from __future__ import annotations

import posixpath
import re
from typing import Any, List

LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+\.md)(?:#[^)\s]*)?\)")


def broken(markdown: str, src_uri: str, files: Any) -> List[str]:
    """The relative .md links of ``markdown`` (a page at ``src_uri``) that the site does not build."""
    out = []
    for target in LINK.findall(re.sub(r"```.*?```", "", markdown, flags=re.S)):
        if re.match(r"^[a-z]+:", target) or target.startswith("/"):
            continue
        path = posixpath.normpath(posixpath.join(posixpath.dirname(src_uri), target))
        f = files.get_file_from_path(path) if files is not None else None
        inclusion = getattr(f, "inclusion", None)
        excluded = inclusion is not None and inclusion.is_excluded()
        if f is None or excluded:
            out.append(target)
    return out


def on_page_markdown(markdown: str, page: Any = None, config: Any = None, files: Any = None) -> str:
    bad = broken(markdown, page.file.src_uri if page is not None else "", files)
    if bad:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"{page.file.src_uri if page is not None else '?'}: link(s) to pages the site does not build "
                          f"(missing or in exclude_docs): {', '.join(bad)}; link the page's .csv or name it in code "
                          "instead")
    return markdown
