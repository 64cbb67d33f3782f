"""Counts chapter headings in JSON Lines novels, one count a line (novels in
file order), by the rules of docs/prep.md ("Chapter headings"), written
independently of fabula's PCRE2 implementation: Python's json and re.
Records without a non-empty "content" string are skipped, as prep does."""
import json
import re
import sys

BLANK = " \t\r\f\v\u3000"
NUMBER = ("(?:twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety)"
          "(?:-(?:one|two|three|four|five|six|seven|eight|nine))?"
          "|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
          "|thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen")
HEADING = re.compile(
    "第[0-9０-９一二三四五六七八九十百千万零〇○两兩]+[章回节節卷]"
    "|(?i:(?:chapter|book|part)[ \t]+(?:[0-9]+|[ivxlcdm]+|the[ \t]+[^\\W\\d_]+|" + NUMBER + ")(?![^\\W_]))"
    "|[IVXLC]+\\.(?:[ \t]|$)")


def heading_starts(text):
    """Character offsets of the heading lines of text."""
    starts, seen_text, blank_run, pos = [], False, 0, 0
    for line in text.split("\n"):
        trimmed = line.strip(BLANK)
        if not trimmed:
            blank_run += 1
        else:
            if (not seen_text or blank_run >= 2) and len(trimmed.encode()) <= 200 \
                    and HEADING.match(trimmed):
                starts.append(pos)
            seen_text, blank_run = True, 0
        pos += len(line) + 1
    return starts


def headings(text):
    return len(heading_starts(text))


if __name__ == "__main__":
    for path in sys.argv[1:]:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if not line.strip():
                    continue
                novel = json.loads(line)
                content = novel.get("content")
                if isinstance(content, str) and content:
                    print(headings(content))
