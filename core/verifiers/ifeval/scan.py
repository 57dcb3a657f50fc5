"""Linear-time scanners with the same matches as IFEval's regexes. Some of those regexes backtrack
quadratically on adversarial text (50k newlines, a line of 50k '['): a policy early in training produces such
text, and verification must stay fast."""

from __future__ import annotations

from core.verifiers.shared.base import (
    Span,
)


def _line_starts(text: str, pos: int):
    """Positions >= pos where `^` matches with re.MULTILINE (start of text or after a newline)."""
    if pos == 0:
        yield 0
        pos = 1
    while True:
        nl = text.find("\n", pos - 1)
        if nl == -1:
            return
        yield nl + 1
        pos = nl + 2


def _line_end(text: str, pos: int) -> int:
    """Where `.*$` started at pos stops: the next newline at or after pos, or the end."""
    end = text.find("\n", pos)
    return len(text) if end == -1 else end


def _bullet_matches(text: str, marker: str) -> list[Span]:
    """The matches of re.finditer(r"^\\s*\\*[^\\*].*$") (marker '*') or r"^\\s*-.*$" (marker '-')
    with re.MULTILINE. `\\s*` may cross blank lines; after it must come the marker (for '*', then
    one character that is not '*', possibly a newline), then the rest of that line."""
    n = len(text)
    nonspace = [n] * (n + 1)  # nonspace[i]: first non-whitespace index >= i
    for i in range(n - 1, -1, -1):
        nonspace[i] = nonspace[i + 1] if text[i].isspace() else i
    matches, pos = [], 0
    while pos <= n:
        found = None
        for start in _line_starts(text, pos):
            if start > n:
                break
            q = nonspace[start]
            if q < n and text[q] == marker:
                if marker == "-":
                    found = (start, _line_end(text, q + 1))
                elif q + 1 < n and text[q + 1] != "*":
                    found = (start, _line_end(text, q + 2))
            if found:
                break
        if found is None:
            break
        matches.append(found)
        pos = found[1] if found[1] > found[0] else found[1] + 1
    return matches


def _bracket_matches(text: str) -> list[Span]:
    """The matches of re.finditer(r"\\[.*?\\]"): from a '[' to the first ']' after it on the same line."""
    matches, pos = [], 0
    while True:
        start = text.find("[", pos)
        if start == -1:
            return matches
        line_end = _line_end(text, start)
        close = text.find("]", start + 1, line_end)
        if close == -1:
            pos = line_end + 1  # no ']' on this line after this '[' nor after any later one
            if pos > len(text):
                return matches
            continue
        matches.append((start, close + 1))
        pos = close + 1


def _title_matches(text: str) -> list[Span]:
    """The matches of re.finditer(r"<<[^\\n]+>>"): per line, from its first '<<' to its last '>>'
    when at least one character lies between them."""
    matches, pos, n = [], 0, len(text)
    while pos <= n:
        end = _line_end(text, pos)
        first, last = text.find("<<", pos, end), text.rfind(">>", pos, end)
        if first != -1 and last >= first + 3:
            matches.append((first, last + 2))
        pos = end + 1
    return matches


def _pieces(text: str, separators: list[Span]) -> list[Span]:
    """The ranges between (and around) the separator matches: len(separators) + 1 pieces."""
    bounds = [0] + [p for span in separators for p in span] + [len(text)]
    return list(zip(bounds[::2], bounds[1::2], strict=True))
