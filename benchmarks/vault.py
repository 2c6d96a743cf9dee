"""A seeded synthetic notes vault for benchmarks: realistic sizes, Zipf-distributed words.

``generate(root, count, seed)`` writes ``count`` notes below ``root``:

* words drawn from a 20,000-word pseudo-vocabulary with Zipf frequencies (s = 1.07, as in
  English prose), in sentences and paragraphs;
* sizes log-normal with a median of about 2.2 KiB (a few notes reach tens of KiB);
* YAML frontmatter (title, tags, date) on 70% of notes, ``#`` and ``##`` headings,
  inline ``#tags``, ``[[wikilinks]]`` to other notes;
* 51 folders: 5 areas of 10 folders each, plus the top level (with a few deeper ones).

Known query terms are planted so every run asks the same questions: :data:`RARE_WORD` in
about 0.1% of notes, :data:`PHRASE` in about 1%, :data:`TAG` on about 2%; :data:`COMMON_WORD`
is the vocabulary's most frequent word (in nearly every note).

Usage: python benchmarks/vault.py DIR COUNT [--seed N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import random
import sys
from pathlib import Path

VOCABULARY = 20_000
ZIPF_S = 1.07
MEDIAN_BYTES = 2250
SIGMA = 0.6  # log-normal spread of note sizes
AREAS = ("work", "home", "garden", "reading", "travel")
FOLDERS_PER_AREA = 10
TAGS = tuple(f"t{i}" for i in range(200))

RARE_WORD = "zephyrine"
PHRASE = "copper kettle"
TAG = "flagged"
COMMON_WORD = "the"  # vocabulary word 0


def question(seed: int = 7) -> str:
    """A 10-word natural-language question over the vault's vocabulary (issue 22): common
    words (``the``, ``of``, ``is``, ``in``), words of middling and low frequency, the
    planted phrase's words, and ``which``, which no note holds."""
    words = _vocabulary(random.Random(seed))
    return f"which {words[120]} of the {PHRASE} is in {words[2500]} {words[9000]}"


_SYLLABLE_TEXT = (
    "ka lo mi ra te so nu ve li da ro pa ne si tu ma le fo gi be ha zu ki no ri sa to mu"
)
_SYLLABLES = tuple((_SYLLABLE_TEXT + " re di ga po la ce ni vo ta").split())
MARKER = ".vault.json"


def _vocabulary(rng: random.Random) -> list[str]:
    words = ["the", "and", "of", "to", "a", "in", "is", "it", "that", "for"]
    seen = set(words) | {RARE_WORD, "copper", "kettle"}
    while len(words) < VOCABULARY:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.choice((1, 2, 2, 3, 3, 4))))
        if word not in seen:
            seen.add(word)
            words.append(word)
    return words


def _folders() -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [()]
    for area in AREAS:
        for i in range(FOLDERS_PER_AREA):
            out.append((area, f"{area}-{i:02d}") if i % 4 else (area, f"{area}-{i:02d}", "deep"))
    return out


def generate(root: Path, count: int, seed: int = 7) -> dict[str, object]:
    """Write the vault (reusing an identical one already at ``root``); returns its facts."""
    facts: dict[str, object] = {"count": count, "seed": seed, "version": 2}
    marker = root / MARKER
    if marker.exists() and json.loads(marker.read_text()).get("params") == facts:
        return dict(json.loads(marker.read_text()))
    rng = random.Random(seed)
    words = _vocabulary(rng)
    weights = list(itertools.accumulate(1.0 / (k + 1) ** ZIPF_S for k in range(VOCABULARY)))
    folders = _folders()
    names: list[tuple[str, ...]] = []
    for n in range(count):
        folder = folders[n % len(folders)]
        names.append((*folder, f"note-{n:07d}.md"))
    rare = phrase = tagged = 0
    total_bytes = 0
    for parts in names:
        size = int(MEDIAN_BYTES * math.exp(rng.gauss(0.0, SIGMA)))
        text_words = rng.choices(words, cum_weights=weights, k=max(20, size // 6))
        if rng.random() < 0.001:
            text_words.insert(rng.randrange(len(text_words)), RARE_WORD)
            rare += 1
        if rng.random() < 0.01:
            at = rng.randrange(len(text_words))
            text_words[at:at] = ["copper", "kettle"]
            phrase += 1
        title = " ".join(rng.choices(words[50:2000], k=rng.randint(2, 5))).capitalize()
        tags = rng.sample(TAGS, rng.randint(0, 3))
        if rng.random() < 0.02:
            tags.append(TAG)
            tagged += 1
        lines: list[str] = []
        if rng.random() < 0.7:
            lines += ["---", f"title: {title}", f"tags: [{', '.join(tags)}]"]
            lines += [f"date: 2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}", "---"]
        else:
            if tags:
                lines.append(" ".join(f"#{t}" for t in tags))
        lines += [f"# {title}", ""]
        pos = 0
        while pos < len(text_words):
            length = rng.randint(30, 90)
            para = text_words[pos : pos + length]
            pos += length
            if rng.random() < 0.25:
                lines += ["", f"## {' '.join(rng.choices(words[20:500], k=2)).capitalize()}", ""]
            if rng.random() < 0.3:
                other = names[rng.randrange(count)][-1][:-3]
                para.insert(rng.randrange(len(para) + 1), f"[[{other}]]")
            sentence = " ".join(para)
            lines += [sentence[:1].upper() + sentence[1:] + ".", ""]
        data = "\n".join(lines).encode()
        path = root.joinpath(*parts)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        total_bytes += len(data)
    facts.update(
        params=dict(facts),
        rare_notes=rare,
        phrase_notes=phrase,
        tagged_notes=tagged,
        bytes=total_bytes,
        folders=len(folders) + 2 * len(AREAS),
    )
    marker.write_text(json.dumps(facts))
    return facts


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("count", type=int)
    p.add_argument("--seed", type=int, default=7)
    args = p.parse_args()
    print(json.dumps(generate(Path(args.dir), args.count, args.seed), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
