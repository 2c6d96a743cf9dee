"""Line shapes for the memory tests: the heaviest legitimate content, and what hostile lines
are made of."""

from __future__ import annotations


def code_note(size: int, tail: str = "") -> str:
    """``size`` bytes (UTF-8) of code dense in braces, brackets, commas, colons, quotes and
    backslashes (what JSON structure and escaping are made of), ending in ``tail``."""
    unit = (
        'function f(a, b) { return {x: [a, b], y: {z: [1, 2, 3]}, s: "q\\"x"}; }\n'
        "const t = [{a: 1}, {b: 2}, [[], []], {}, 'c', `${a},${b}`];\n"
        '{"key": [1, 2, 3], "k2": {"n": null}, "k3": [{}, {}, []], "k4": "\\\\"}\n'
    )
    body = (unit * (size // len(unit) + 1))[: size - len(tail.encode())]
    return body + tail
