#!/usr/bin/env python3
"""Check relative Markdown links and their #anchors (GitHub's heading slugs).

usage: check_links.py [FILE.md ...]   (default: every tracked *.md)
Prints each broken link as FILE:LINE: target (why); exits 1 if any.
"""
import os, re, subprocess, sys

LINK = re.compile(r'(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+"[^"]*")?\)')

def slug(text):
    s = text.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)      # GitHub drops punctuation, keeps letters, digits, _ and -
    return s.replace(' ', '-')

def anchors(path, cache={}):
    if path not in cache:
        seen, out, fence = {}, set(), False
        for line in open(path, encoding='utf-8'):
            if line.startswith('```'):
                fence = not fence
            if fence or not line.startswith('#'):
                continue
            m = re.match(r'#+\s+(.*?)\s*#*\s*$', line)
            if not m:
                continue
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f'{base}-{n}')
        cache[path] = out
    return cache[path]

def check(md):
    bad = []
    fence = False
    for no, line in enumerate(open(md, encoding='utf-8'), 1):
        if line.startswith('```'):
            fence = not fence
        if fence:
            continue
        for target in LINK.findall(re.sub(r'`[^`]*`', '', line)):
            if re.match(r'[a-z]+:', target):          # http:, mailto: ...
                continue
            path, _, frag = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            if not os.path.exists(dest):
                bad.append(f'{md}:{no}: {target} (no such file)')
            elif frag and dest.endswith('.md') and frag not in anchors(dest):
                bad.append(f'{md}:{no}: {target} (no heading #{frag})')
    return bad

files = sys.argv[1:] or subprocess.run(['git', 'ls-files', '*.md'], capture_output=True,
                                       text=True, check=True).stdout.split()
bad = [b for f in files for b in check(f)]
print('\n'.join(bad) if bad else f'{len(files)} files: every relative link resolves')
sys.exit(1 if bad else 0)
