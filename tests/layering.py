#!/usr/bin/env python3
"""The tree's architecture, checked on the sources themselves.

1. Layering: a folder includes only the folders below it. ALLOWED is the
   one statement of that rule (README "Source layout" and docs/layout.md
   explain it); an include outside it fails, and so does any cycle.
2. Build: every source file of a folder is listed in that folder's
   Makemodule.am, and a Makemodule.am lists only its own folder's files.
3. Parse, then one call: a src/cli file includes, besides cli/ and the
   rooms every command reads its input through (CLI_PARSING: util, io,
   config, parallel, and the config's resolution against the model), the
   headers of at most one room, the one its subcommand calls.
4. No include cycle between the files of one folder either: a file pair
   that includes each other is one concept cut in two, or two concepts
   with a third beneath them.

Runs from make check with FB_SRCDIR set, or from the top of a checkout.
"""
import os
import re
import sys

SRC = os.environ.get("FB_SRCDIR") or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# folder -> the folders its files may include (besides itself). kernels/ is
# one floor (ops.h, rng.h, cpu/, cuda/): the model and the rooms above call
# ops only through it.
ALLOWED = {
    "util": set(),
    "io": {"util"},
    "kernels": {"util"},
    "parallel": {"io", "util", "kernels"},
    "config": {"parallel", "io", "util"},
    "monitor": {"config", "parallel", "io", "util"},
    "tboard": {"util"},
    "tokenizer": {"config", "parallel", "io", "util"},
    "corpus": {"tokenizer", "config", "parallel", "io", "util", "kernels"},
    "loader": {"corpus", "tokenizer", "config", "parallel", "io", "util", "kernels"},
    "model": {"config", "parallel", "io", "util", "kernels"},
    "zero": {"model", "config", "parallel", "io", "util", "kernels"},
    "ckpt": {"zero", "loader", "model", "corpus", "tokenizer", "config", "parallel", "io", "util", "kernels"},
    "train": {"ckpt", "zero", "loader", "model", "corpus", "tokenizer", "monitor", "tboard", "config", "parallel",
              "io", "util", "kernels"},
}
# Hugging Face formats in and out: checkpoints, models and tokenizers to and from their files
ALLOWED["hf"] = {"ckpt", "zero", "loader", "model", "corpus", "tokenizer", "config", "parallel", "io", "util", "kernels"}
# init_from is used by the trainer
ALLOWED["train"].add("hf")

# generation reads a model's weights and runs its forward incrementally
ALLOWED["infer"] = {"ckpt", "zero", "model", "tokenizer", "config", "parallel", "io", "util", "kernels"}
# a model opens from a checkpoint or a Hugging Face directory (infer_model_open)
ALLOWED["infer"].add("hf")
# train --dry-run sizes a rank's memory with the planner's functions
ALLOWED["train"].add("plan")
# eval's logits of a Hugging Face directory open the model as inference does
ALLOWED["train"].add("infer")
# the report reads run directories back: files and JSON, nothing of training
ALLOWED["report"] = {"io", "util"}
# planning: arithmetic on the config, the model's shapes and the step plan; no MPI
ALLOWED["plan"] = {"zero", "loader", "model", "corpus", "tokenizer", "config", "io", "util", "kernels"}
# measuring this machine for the planner: model passes on train's backend,
# the ops table's rates, the links between ranks
ALLOWED["probe"] = {"train", "hf", "loader", "model", "monitor", "parallel", "config", "util", "kernels"}
# `fabula validate`: reference jobs run through the trainer (and prep's
# corpus and tokenizer jobs), compared with committed curves
# (and the reference's inputs: the data, the initial weights, the step plan)
ALLOWED["validate"] = {"train", "zero", "loader", "corpus", "tokenizer", "model", "config", "parallel", "io", "util",
                       "kernels"}
ALLOWED["cli"] = set(ALLOWED) - {"cli"}
ALLOWED["main"] = {"cli", "util"}

# what any subcommand reads its input through: the command line (cli/),
# the config (config/ and its resolution against the model), files (io/),
# errors (util/), MPI's start and end (parallel/)
CLI_PARSING = {"cli", "util", "io", "config", "parallel"}
CLI_PARSING_HEADERS = {"model/config_resolve.h"}
# (file, room) pairs allowed beside the one room, each with its reason
CLI_EXCEPTIONS = {
    ("src/cli/cli_generate.c", "train"): "train_choose_threads, the thread count train gives a rank, "
                                         "until it moves below both train and infer",
}

SOURCE = re.compile(r"\.(c|h|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
KERNEL_DIRS = {"cpu", "cuda"}


def room_of(rel):
    """The room of a file, by path relative to the top: src/X/... -> X."""
    parts = rel.split("/")
    if parts[0] == "kernels":
        return "kernels"
    if parts[0] == "src":
        return "main" if len(parts) == 2 else parts[1]
    return None


def room_of_include(inc):
    """The room an include names ("loader/pack.h" -> loader, "ops.h" -> kernels)."""
    head = inc.split("/")[0] if "/" in inc else None
    if head is None:
        return "kernels" if inc in ("ops.h", "rng.h", "kernels_info.h") else None
    if head in KERNEL_DIRS:
        return "kernels"
    return head


def sources(top):
    for d, _, files in os.walk(os.path.join(SRC, top)):
        for f in files:
            if SOURCE.search(f):
                yield os.path.relpath(os.path.join(d, f), SRC)


def check_layering(problems):
    edges = {}
    for rel in sorted(list(sources("src")) + list(sources("kernels"))):
        room = room_of(rel)
        with open(os.path.join(SRC, rel), encoding="utf-8") as fh:
            text = fh.read()
        for inc in INCLUDE.findall(text):
            target = room_of_include(inc)
            if target is None or target == room:
                continue
            if target not in ALLOWED:
                problems.append(f"{rel}: includes \"{inc}\", which is in no known room")
                continue
            edges.setdefault(room, set()).add(target)
            if target not in ALLOWED[room]:
                problems.append(f"{rel}: includes \"{inc}\": {room}/ may not include {target}/ "
                                f"(it may include {', '.join(sorted(ALLOWED[room])) or 'nothing'})")
    # A cycle would need ALLOWED itself to hold one; check the real graph
    # anyway: every strongly connected set of folders is one cycle.
    index, low, stack, on, sccs = {}, {}, [], set(), []

    def strong(n):
        index[n] = low[n] = len(index)
        stack.append(n)
        on.add(n)
        for m in edges.get(n, ()):
            if m not in index:
                strong(m)
                low[n] = min(low[n], low[m])
            elif m in on:
                low[n] = min(low[n], index[m])
        if low[n] == index[n]:
            scc = []
            while True:
                m = stack.pop()
                on.discard(m)
                scc.append(m)
                if m == n:
                    break
            if len(scc) > 1:
                sccs.append(sorted(scc))

    for n in sorted(edges):
        if n not in index:
            strong(n)
    for scc in sccs:
        problems.append("include cycle among the folders " + ", ".join(scc))
    return edges


MAKE_PATH = re.compile(r"(?<![\w$/.-])((?:src|kernels|tests|validation|bench)/[\w./-]+\.(?:c|h|cu|cuh))\b")


def check_makemodules(problems):
    listed = {}
    for d, _, files in os.walk(SRC):
        if "Makemodule.am" not in files:
            continue
        mm = os.path.relpath(os.path.join(d, "Makemodule.am"), SRC)
        folder = os.path.dirname(mm)
        with open(os.path.join(SRC, mm), encoding="utf-8") as fh:
            text = re.sub(r"#.*", "", fh.read())
        for path in MAKE_PATH.findall(text):
            if os.path.dirname(path) != folder:
                problems.append(f"{mm} lists {path}, a file of {os.path.dirname(path)}/")
            listed[path] = mm
    for top in ("src", "kernels"):
        for rel in sources(top):
            if rel == "src/main.c":
                continue  # the binary's own source, in the top Makefile.am
            if rel not in listed:
                problems.append(f"{rel} is in no Makemodule.am (expected in {os.path.dirname(rel)}/Makemodule.am)")
            elif listed[rel] != os.path.join(os.path.dirname(rel), "Makemodule.am"):
                problems.append(f"{rel} is listed in {listed[rel]}, not in its own folder's")


def includes_of(rel):
    with open(os.path.join(SRC, rel), encoding="utf-8") as fh:
        return INCLUDE.findall(fh.read())


def check_cli_calls(problems):
    """Rule 3: a cli file parses, then calls one room."""
    n = 0
    for rel in sorted(sources("src/cli")):
        rooms = set()
        for inc in includes_of(rel):
            room = room_of_include(inc)
            if room is None or room in CLI_PARSING or inc in CLI_PARSING_HEADERS:
                continue
            if (rel, room) in CLI_EXCEPTIONS:
                continue
            rooms.add(room)
        n += 1
        if len(rooms) > 1:
            problems.append(f"{rel}: includes {len(rooms)} rooms besides {', '.join(sorted(CLI_PARSING))} "
                            f"({', '.join(sorted(rooms))}): a subcommand parses, then calls one room")
    return n


def check_file_cycles(problems):
    """Rule 4: no include cycle among the code units of one folder. A unit
    is a .c file with its .h; a unit uses another when its .c or .h
    includes the other's .h, directly or through a header that has no .c
    (a private header of types, model_impl.h, is a part of whoever includes
    it)."""
    folders = {}
    for rel in list(sources("src")) + list(sources("kernels")):
        folders.setdefault(os.path.dirname(rel), set()).add(rel)
    for folder, files in sorted(folders.items()):
        def local(inc):
            path = os.path.normpath(os.path.join("src" if folder.startswith("src") else "kernels", inc))
            if folder.startswith("kernels") and "/" not in inc:
                path = os.path.normpath(os.path.join("kernels", inc))
            return path if path in files else None
        stem = lambda path: os.path.splitext(path)[0]
        units = {stem(f) for f in files if f.endswith((".c", ".cu"))}

        def used(path, seen):
            """The units path's includes reach, through header-only files."""
            out = set()
            for inc in includes_of(path):
                target = local(inc)
                if target is None or target in seen:
                    continue
                seen.add(target)
                if stem(target) in units:
                    out.add(stem(target))
                else:
                    out |= used(target, seen)
            return out

        graph = {}
        for u in units:
            deps = set()
            for ext in (".c", ".cu", ".h", ".cuh"):
                if u + ext in files:
                    deps |= used(u + ext, set())
            graph[u] = deps - {u}

        def reaches(a, b):
            todo, got = [a], {a}
            while todo:
                for m in graph.get(todo.pop(), ()):
                    if m == b:
                        return True
                    if m not in got:
                        got.add(m)
                        todo.append(m)
            return False

        for a in sorted(graph):
            for b in sorted(graph[a]):
                if reaches(b, a) and (a < b or a not in graph.get(b, ())):
                    problems.append(f"{a}: uses {os.path.basename(b)} and is used by it in turn "
                                    f"(an include cycle inside {folder}/)")


def main():
    problems = []
    edges = check_layering(problems)
    check_makemodules(problems)
    ncli = check_cli_calls(problems)
    check_file_cycles(problems)
    for p in problems:
        print("FAIL " + p)
    n = sum(len(v) for v in edges.values())
    print(f"{n} folder-to-folder include edges among {len(edges)} folders checked against the layering, "
          f"{ncli} cli files against parse-then-one-call, file-level cycles in every folder; "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
