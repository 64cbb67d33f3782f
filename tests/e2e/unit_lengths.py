"""The sample lengths `fabula prep --tokenizer bytes` must write, one
"NOVEL LENGTH" a line in file order, by the rules of docs/prep.md ("Sample
units", "What a rank does") written independently of fabula's C: Python's
json and re, the headings of chapter_count.py.

    unit_lengths.py UNIT MAX_SEQ_LEN OVERLAP MIN_SEQ_LEN FILE.jsonl...

UNIT: windows (the whole novel is one piece), chapters (a heading ends a
piece), scenes (a scene break too); a piece without a line of its own text
(blank lines, headings and breaks only) joins the next. A piece's content tokens are its bytes
plus one <|chapter_sep|> per heading in it; each piece is cut into windows of
W = MAX_SEQ_LEN - 1 content tokens with stride W - OVERLAP, the last window
the first that reaches the end, and a last window shorter than
max(MIN_SEQ_LEN, 2) tokens (genre token included) dropped."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chapter_count import BLANK, heading_starts  # noqa: E402

MARKS = set("*#~=-_") | set("\u00b7\u2022\u2013\u2014\u2015\u203b\u2042\u25cb\u25cf\u25c7\u25c6\u25a1\u25a0"
                           "\u2606\u2605\u2756\uff0a\uff03\uff5e")


def is_break_line(line):
    trimmed = line.strip(BLANK)
    if not trimmed or len(trimmed.encode()) > 80:
        return False
    return all(ch in MARKS or ch in BLANK for ch in trimmed)


def scene_starts(text):
    """Character offsets of the scene-break lines: between blank lines."""
    lines = text.split("\n")
    starts, pos = [], 0
    for i, line in enumerate(lines):
        blank_before = i > 0 and not lines[i - 1].strip(BLANK)
        blank_after = i + 1 == len(lines) or not lines[i + 1].strip(BLANK)
        if line.strip(BLANK) and blank_before and blank_after and is_break_line(line):
            starts.append(pos)
        pos += len(line) + 1
    return starts


def has_text(text, a, b, marked):
    """Whether text[a:b] has a line that is neither blank nor a heading or
    scene break (whose starts are in marked)."""
    pos = a
    for line in text[a:b].split("\n"):
        if line.strip(BLANK) and pos not in marked:
            return True
        pos += len(line) + 1
    return False


def pieces(text, unit):
    heads = heading_starts(text)
    cuts = []
    if unit != "windows":
        cands = set(heads)
        if unit == "scenes":
            cands |= set(scene_starts(text))
        last = 0
        for at in sorted(cands):
            if has_text(text, last, at, cands):
                cuts.append(at)
                last = at
    bounds = [0] + cuts + [len(text)]
    for a, b in zip(bounds, bounds[1:]):
        seps = sum(1 for h in heads if a <= h < b)
        yield len(text[a:b].encode()) + seps


def windows(content, max_seq_len, overlap, min_seq_len):
    width, stride, keep = max_seq_len - 1, max_seq_len - 1 - overlap, max(min_seq_len, 2)
    if content == 0:
        return
    k = 0
    while True:
        start = k * stride
        end = min(start + width, content)
        last = start + width >= content
        if not last or end - start + 1 >= keep:
            yield end - start + 1
        if last:
            return
        k += 1


def main():
    unit, max_seq_len, overlap, min_seq_len = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    novel = 0
    for path in sys.argv[5:]:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                content = json.loads(line).get("content")
                if not isinstance(content, str) or not content:
                    continue
                for piece in pieces(content, unit):
                    for length in windows(piece, max_seq_len, overlap, min_seq_len):
                        print(novel, length)
                novel += 1


if __name__ == "__main__":
    main()
