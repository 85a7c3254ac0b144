#!/usr/bin/env python3
"""Checks that every include of a lib/ header comes from a library its includer's target links.

    scripts/check-layering.py [BUILD_DIR]      (default: build)

For each file of lib/ and apps/, each `#include "x/..."` that names a file of lib/ (or one of
the build's generated headers) must be owned by the includer's own target or by a target in its
declared chain: the targets it links, theirs, and so on, as CMake links them (every library
links its dependencies PUBLIC, so a target compiles and links against the whole chain; asking
each target to repeat its dependencies' dependencies would lengthen every DEPS list without
making a cycle or an undeclared library any easier to see). An include from a library that is
not in the chain is a floor the build does not know about: it links only by luck of the final
link line's order, and nothing stops the two libraries from growing into a cycle.

The targets, their sources and their dependencies are read from the build itself, through
CMake's File API (the codemodel of BUILD_DIR/.cmake/api/v1/reply, which lib/CMakeLists.txt asks
for at each configure): no table here repeats lib/CMakeLists.txt. A header belongs to the target
that compiles its .cpp (or .cu). A header with none belongs to its folder's target; in a folder
split between targets, a header that reaches no LibTorch
header belongs to the lowest of the torch-free ones (compiled without LibTorch's include
folders), and one that does to the lowest of those whose files include it, where it is
compiled; the lowest is the one the others in the folder build on. A file no
target compiles in this configuration (model/kernels/cuda/ without the CUDA paths) belongs to its
folder's target. An OBJECT library whose sources all belong to other targets
(xtrain_cpu_variant_check, a second compile) is skipped. Generated headers (util/build_info.h)
are looked up in BUILD_DIR/generated.

WAIVED lists the includes known to cross a floor that no declaration can fix yet, each with its
reason; they are printed with the summary, so that the list is seen to shrink.

The codemodel's dependencies are the order CMake builds the libraries in, always acyclic: DEPS
that make a cycle (xtrain_ckpt naming xtrain_parallel, which names xtrain_ckpt) are broken into
an order there, so a cycle shows here as an include that the later library does not declare.
Includes that all pass therefore follow one acyclic order of floors.

`--without TARGET:DEPENDENCY` checks as if TARGET did not declare DEPENDENCY, which shows that
the check catches a missing declaration (ctest build.layering_catches).

Prints one line per violation, `lib/a/x.cpp:12: includes b/y.h (xtrain_b), which xtrain_a does
not declare`, then a count, and exits 1; prints a summary and exits 0 when clean. Exits 2 when
the build has no codemodel.
"""
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict

SOURCE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKED_TREES = ("lib", "apps")
CODE_SUFFIXES = (".cpp", ".cc", ".cu")
HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".h.in")
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
TORCH_INCLUDE = re.compile(r'^\s*#\s*include\s*<(torch|ATen|c10)/')
# (includer's target, the header as written): why the include stays until the header moves.
WAIVED = {}


def reply_index(build_dir):
    reply = os.path.join(build_dir, ".cmake", "api", "v1", "reply")
    if not os.path.isdir(reply):
        return None
    indexes = sorted(f for f in os.listdir(reply) if f.startswith("index-") and f.endswith(".json"))
    return os.path.join(reply, indexes[-1]) if indexes else None


def newest_cmake_input():
    newest = 0.0
    for top in ("CMakeLists.txt", "cmake", "lib", "apps", "tests", "tools"):
        path = os.path.join(SOURCE_DIR, top)
        if os.path.isfile(path):
            newest = max(newest, os.path.getmtime(path))
            continue
        for root, _, files in os.walk(path):
            for name in files:
                if name == "CMakeLists.txt" or name.endswith(".cmake"):
                    newest = max(newest, os.path.getmtime(os.path.join(root, name)))
    return newest


def load_codemodel(build_dir):
    """The codemodel of the last configure; configures again when it is missing or older than a
    CMakeLists.txt (a folder configured before the build asked for it, or an edit not yet built)."""
    index = reply_index(build_dir)
    if index is None or os.path.getmtime(index) < newest_cmake_input():
        if not os.path.isfile(os.path.join(build_dir, "CMakeCache.txt")):
            sys.exit(f"check-layering: {build_dir} is not a configured build folder (run scripts/build.sh)")
        query = os.path.join(build_dir, ".cmake", "api", "v1", "query")
        os.makedirs(query, exist_ok=True)
        open(os.path.join(query, "codemodel-v2"), "a").close()
        print(f"check-layering: configuring {build_dir} for its codemodel", file=sys.stderr)
        done = subprocess.run(["cmake", build_dir], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            sys.exit(2)
        index = reply_index(build_dir)
    if index is None:
        print(f"check-layering: {build_dir} has no CMake File API reply", file=sys.stderr)
        sys.exit(2)
    reply = os.path.dirname(index)
    with open(index) as f:
        codemodel_file = next(o["jsonFile"] for o in json.load(f)["objects"] if o["kind"] == "codemodel")
    with open(os.path.join(reply, codemodel_file)) as f:
        configuration = json.load(f)["configurations"][0]
    targets = {}
    for entry in configuration["targets"]:
        with open(os.path.join(reply, entry["jsonFile"])) as f:
            targets[entry["id"]] = json.load(f)
    return targets


def relative(path):
    path = path if os.path.isabs(path) else os.path.join(SOURCE_DIR, path)
    return os.path.relpath(os.path.normpath(path), SOURCE_DIR)


def in_checked_tree(path):
    return path.split(os.sep, 1)[0] in CHECKED_TREES


def read_targets(targets):
    """(name -> its compiled files under lib/ and apps/, name -> the names it depends on, the
    names of the targets compiled without LibTorch's include folders)."""
    sources, deps, kinds, torch_free = {}, {}, {}, set()
    for target in targets.values():
        name = target["name"]
        kinds[name] = target["type"]
        includes = [i["path"] for g in target.get("compileGroups", []) for i in g.get("includes", [])]
        if target.get("compileGroups") and not any(p.rstrip("/").endswith("torch/include") for p in includes):
            torch_free.add(name)
        sources[name] = {relative(s["path"]) for s in target.get("sources", [])
                         if s["path"].endswith(CODE_SUFFIXES) and in_checked_tree(relative(s["path"]))}
        deps[name] = {targets[d["id"]]["name"] for d in target.get("dependencies", []) if d["id"] in targets}
    # A second compile of files other targets own (an OBJECT library of variants) is no owner.
    for name, files in list(sources.items()):
        others = set().union(*(f for n, f in sources.items() if n != name))
        if kinds[name] == "OBJECT_LIBRARY" and files and files <= others:
            sources[name] = set()
    return sources, deps, torch_free


def closure(deps):
    reach = {}
    for name in deps:
        seen, todo = set(), list(deps[name])
        while todo:
            dep = todo.pop()
            if dep not in seen:
                seen.add(dep)
                todo.extend(deps.get(dep, ()))
        reach[name] = seen
    return reach


def checked_files():
    for tree in CHECKED_TREES:
        for root, _, files in os.walk(os.path.join(SOURCE_DIR, tree)):
            for name in sorted(files):
                if name.endswith(CODE_SUFFIXES + HEADER_SUFFIXES):
                    yield relative(os.path.join(root, name))


def includes_of(path, lib_folders):
    """(line, as written, the lib/ path it names) for each include of a lib/ file."""
    found = []
    with open(os.path.join(SOURCE_DIR, path), errors="replace") as f:
        for number, line in enumerate(f, 1):
            match = INCLUDE.match(line)
            if not match:
                continue
            written = match.group(1)
            if written.split("/", 1)[0] in lib_folders and "/" in written:
                found.append((number, written, os.path.join("lib", written)))
                continue
            beside = relative(os.path.join(os.path.dirname(path), written))
            if beside.startswith("lib" + os.sep) and os.path.exists(os.path.join(SOURCE_DIR, beside)):
                found.append((number, written, beside))
    return found


def reaches_torch(path, edges, build_dir, memo):
    """Whether the lib/ header, or a lib/ header it includes, includes LibTorch."""
    if path in memo:
        return memo[path]
    memo[path] = False  # a cycle of includes adds nothing
    found = False
    for candidate in (os.path.join(SOURCE_DIR, path), os.path.join(build_dir, "generated", path[len("lib/"):])):
        if os.path.isfile(candidate):
            with open(candidate, errors="replace") as f:
                found = any(TORCH_INCLUDE.match(line) for line in f)
            break
    found = found or any(reaches_torch(t, edges, build_dir, memo) for _, _, t in edges.get(path, ()))
    memo[path] = found
    return found


def parse_arguments(argv):
    """(the build folder, the declarations to leave out: (target, dependency) pairs)."""
    build_dir, without = os.path.join(SOURCE_DIR, "build"), []
    items = iter(argv)
    for item in items:
        if item == "--without":
            pair = next(items, "")
            if pair.count(":") != 1:
                sys.exit("check-layering: --without takes TARGET:DEPENDENCY, e.g. xtrain_optim:xtrain_model_kernels")
            without.append(tuple(pair.split(":")))
        else:
            build_dir = item
    return os.path.abspath(build_dir), without


def main():
    build_dir, without = parse_arguments(sys.argv[1:])
    sources, deps, torch_free = read_targets(load_codemodel(build_dir))
    for name, dependency in without:  # the check of the check: a declaration taken away must show
        if dependency not in deps.get(name, set()):
            sys.exit(f"check-layering: {name} does not declare {dependency}, so --without has nothing to remove")
        deps[name].discard(dependency)
    reach = closure(deps)
    owner = {}
    for name, files in sources.items():
        for path in files:
            owner[path] = name

    def folder_owner(folder):
        while folder and folder != os.sep:
            counts = Counter(o for p, o in owner.items() if os.path.dirname(p) == folder)
            if counts:
                return counts.most_common(1)[0][0]
            folder = os.path.dirname(folder)
        return None

    lib_folders = {d for d in os.listdir(os.path.join(SOURCE_DIR, "lib")) if os.path.isdir(os.path.join(SOURCE_DIR, "lib", d))}
    files = list(checked_files())
    edges = {path: includes_of(path, lib_folders) for path in files}
    folder_targets = defaultdict(set)
    for path, name in owner.items():
        folder_targets[os.path.dirname(path)].add(name)

    def code_owner(path):
        stem = path[:-len(".h.in")] if path.endswith(".h.in") else os.path.splitext(path)[0]
        for suffix in CODE_SUFFIXES:
            if stem + suffix in owner:
                return owner[stem + suffix]
        return owner.get(path)

    # Files with an owner of their own first; then header-only headers, by their includers.
    file_owner = {p: code_owner(p) for p in files}
    header_only = defaultdict(set)  # a lib/ header with no .cpp -> the targets of files that include it
    for path in files:
        for _, _, target_path in edges[path]:
            if code_owner(target_path) is None:
                header_only[target_path]
    changed = True
    while changed:  # header-only headers that include header-only headers take their includers'
        changed = False
        for path in files:
            mine = {file_owner[path]} if file_owner[path] else header_only.get(path, set())
            for _, _, target_path in edges[path]:
                if target_path in header_only and not mine <= header_only[target_path]:
                    header_only[target_path] |= mine
                    changed = True

    torch_memo = {}

    def lowest(targets, among):  # the one most of the others in the folder build on
        return max(sorted(targets), key=lambda c: sum(c in reach[o] for o in among))

    def header_owner(path):
        mine = code_owner(path)
        if mine:
            return mine
        folder = os.path.dirname(path)
        candidates = folder_targets.get(folder, set())
        if len(candidates) > 1:
            if not reaches_torch(path, edges, build_dir, torch_memo) and candidates & torch_free:
                return lowest(candidates & torch_free, candidates)
            users = candidates & header_only.get(path, set())
            if users:
                return lowest(users, candidates)
        return folder_owner(folder)

    for path in files:
        if file_owner[path] is None:
            file_owner[path] = header_owner(path)

    violations, waived, count, seen_targets = [], [], 0, set()
    for path in files:
        includer = file_owner[path]
        if includer is None:
            continue
        seen_targets.add(includer)
        for number, written, target_path in edges[path]:
            count += 1
            included = header_owner(target_path)
            if included is None or included == includer or included in reach.get(includer, ()):
                continue
            line = f"{path}:{number}: includes {written} ({included}), which {includer} does not declare"
            if (includer, written) in WAIVED:
                waived.append(f"  waived: {line}: {WAIVED[(includer, written)]}")
            else:
                violations.append(line)

    for line in violations:
        print(line)
    if violations:
        print(f"check-layering: {len(violations)} includes from libraries their includers do not declare")
        return 1
    print(f"check-layering: {count} includes of lib/ headers in {len(files)} files of {len(seen_targets)} targets, "
          f"each from the includer's own target or one in its declared chain; {len(waived)} waived")
    for line in waived:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
