"""A small document model rendered twice, as Markdown and as one self-contained HTML page.

Reports are built once as blocks (headings, paragraphs, lists, tables, code, images) so that report.md and
report.html always say the same thing. All text is plain and escaped on output: input files are hostile, and a
comm name or log message must never become markup. `Mono` marks text shown as code (file:line receipts).
The HTML page has no external resource (images are data: URIs, the style is inline) and a Content-Security-Policy
that forbids fetching anything, so it opens offline and cannot phone home.
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field
from urllib.parse import quote

from .escape import printable


class Mono(str):
    """Text shown in a monospace code span."""


@dataclass(frozen=True)
class Heading:
    """A section heading (level 1 is the title)."""

    text: str
    level: int = 2


@dataclass(frozen=True)
class Para:
    """A paragraph of plain text; `strong` prefixes a bold lead-in; `tone` colours a banner (html only)."""

    text: str
    strong: str = ""
    tone: str = ""


@dataclass(frozen=True)
class Bullets:
    """A bulleted list; items may be Mono."""

    items: tuple[str, ...]


@dataclass(frozen=True)
class Table:
    """A table with a header row; cells may be Mono."""

    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class Code:
    """A preformatted block (a shell command)."""

    text: str


@dataclass(frozen=True)
class Image:
    """A PNG, written beside report.md as `file` and embedded into report.html."""

    file: str
    caption: str
    png: bytes = field(repr=False)


@dataclass(frozen=True)
class Links:
    """A paragraph that ends with links to files written beside the report (names of ours, never input text)."""

    text: str
    files: tuple[str, ...]


Block = Heading | Para | Bullets | Table | Code | Image | Links

# --- Markdown -------------------------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*\[\]<])")


def _md(text: str, in_table: bool = False) -> str:
    if isinstance(text, Mono):
        body = printable(str(text))
        if in_table:
            body = body.replace("|", "\\|")
        # A code span ends at the first run of as many backticks as opened it: open with one more than the
        # longest run inside (``` a``b ``` for a``b), padded so that a backtick at either end stays inside.
        longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
        fence, pad = "`" * (longest + 1), " " if longest else ""
        return f"{fence}{pad}{body}{pad}{fence}"
    text = printable(str(text), newlines=not in_table)
    # Escape what Markdown would read as markup: backslash, code, emphasis, links and html everywhere; `_` at a
    # word start (inside a word it is literal in CommonMark); a leading `#`, `>`, `-`, `+` or `1.`; `|` in tables.
    escaped = _MD_SPECIAL.sub(r"\\\1", str(text))
    escaped = re.sub(r"(^|\s)_", r"\1\\_", escaped)
    escaped = re.sub(r"^(\s*)([#>+-])", r"\1\\\2", escaped, flags=re.MULTILINE)
    escaped = re.sub(r"^(\s*\d+)([.)])", r"\1\\\2", escaped, flags=re.MULTILINE)
    if in_table:
        escaped = escaped.replace("|", "\\|").replace("\n", " ")
    return escaped


def render_markdown(blocks: list[Block]) -> str:
    """The blocks as GitHub-flavoured Markdown; images link to the PNG files beside it."""
    out: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f"{'#' * block.level} {_md(block.text)}")
        elif isinstance(block, Para):
            lead = f"**{_md(block.strong)}** " if block.strong else ""
            out.append(lead + _md(block.text))
        elif isinstance(block, Bullets):
            out.append("\n".join(f"- {_md(item)}" for item in block.items))
        elif isinstance(block, Table):
            lines = ["| " + " | ".join(_md(h, True) for h in block.header) + " |",
                     "|" + "|".join("---" for _ in block.header) + "|"]
            lines += ["| " + " | ".join(_md(c, True) or " " for c in row) + " |" for row in block.rows]
            out.append("\n".join(lines))
        elif isinstance(block, Code):
            longest = max((len(run) for run in re.findall(r"`+", block.text)), default=0)
            fence = "`" * max(3, longest + 1)
            out.append(f"{fence}sh\n{printable(block.text, newlines=True)}\n{fence}")
        elif isinstance(block, Image):
            out.append(f"![{_md(block.caption)}]({block.file})\n\n*{_md(block.caption)}*")
        elif isinstance(block, Links):
            out.append(_md(block.text) + " " + ", ".join(f"[{_md(f)}]({quote(f)})" for f in block.files))
    return "\n\n".join(out) + "\n"


# --- HTML -----------------------------------------------------------------------------------------------------

_STYLE = """
body { font: 15px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 2rem auto;
       max-width: 72rem; padding: 0 1.5rem; color: #1d1d1f; }
h1 { font-size: 1.7rem; margin-bottom: .3rem; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2rem;
margin-top: 2.2rem; } h3 { margin-top: 1.4rem; }
table { border-collapse: collapse; margin: .6rem 0 1rem; font-size: .9rem; display: block; overflow-x: auto; }
th, td { border: 1px solid #d0d0d0; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; } tr:nth-child(even) td { background: #fafafa; }
code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: .85rem; }
code { background: #f2f2f2; padding: 0 .2rem; border-radius: 3px; white-space: nowrap; }  /* paths, hashes whole */
pre { background: #f6f8fa; padding: .8rem; overflow-x: auto; border-radius: 4px; }
figure { margin: 1rem 0 1.6rem; } figure img { max-width: 100%; border: 1px solid #e2e2e2; }
figcaption { font-size: .85rem; color: #555; margin-top: .3rem; }
.banner { padding: .7rem 1rem; border-radius: 4px; font-size: 1.05rem; }
.tone-diverged { background: #fde2e1; border-left: 6px solid #c62828; }
.tone-consistent { background: #e3f4e5; border-left: 6px solid #2e7d32; }
.tone-transient, .tone-inconclusive { background: #fff6d6; border-left: 6px solid #b58b00; }
"""

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def _html_text(text: str) -> str:
    if isinstance(text, Mono):
        return f"<code>{_h(text)}</code>"
    return _h(text)


def _h(text: object) -> str:
    """Text for HTML: escaped, control characters shown as escapes (HTML forbids most of them)."""
    return html.escape(printable(str(text), newlines=True))


def render_html(blocks: list[Block], title: str) -> str:
    """One self-contained HTML page: inline style, PNGs as data: URIs, nothing fetched."""
    body: list[str] = []
    for block in blocks:
        if isinstance(block, Heading):
            level = min(max(block.level, 1), 6)
            anchor = re.sub(r"[^a-z0-9]+", "-", block.text.lower()).strip("-")
            body.append(f'<h{level} id="{anchor}">{_h(block.text)}</h{level}>')
        elif isinstance(block, Para):
            lead = f"<strong>{_h(block.strong)}</strong> " if block.strong else ""
            cls = f' class="banner tone-{html.escape(block.tone)}"' if block.tone else ""
            body.append(f"<p{cls}>{lead}{_html_text(block.text)}</p>")
        elif isinstance(block, Bullets):
            body.append("<ul>" + "".join(f"<li>{_html_text(i)}</li>" for i in block.items) + "</ul>")
        elif isinstance(block, Table):
            head = "".join(f"<th>{_html_text(h)}</th>" for h in block.header)
            rows = "".join("<tr>" + "".join(f"<td>{_html_text(c)}</td>" for c in row) + "</tr>" for row in block.rows)
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>")
        elif isinstance(block, Code):
            body.append(f"<pre><code>{_h(block.text)}</code></pre>")
        elif isinstance(block, Links):
            links = ", ".join(f'<a href="{_h(quote(f))}">{_h(f)}</a>' for f in block.files)
            body.append(f"<p>{_h(block.text)} {links}</p>")
        elif isinstance(block, Image):
            data = base64.b64encode(block.png).decode("ascii")
            body.append(f'<figure><img src="data:image/png;base64,{data}" alt="{_h(block.caption)}" '
                        f'data-file="{_h(block.file)}"><figcaption>{_h(block.caption)}'
                        f"</figcaption></figure>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{_h(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        + "\n".join(body) + "\n</body>\n</html>\n"
    )
