#!/usr/bin/env python3
"""Checks that includes flow one way through the layers the README's Layout
section lists: a file may include its own folder and the layers below it,
never a layer above. Prints each include that runs back up; exit status 1
when there is one.

    scripts/check-layers.py [REPO_ROOT]
"""
import pathlib
import re
import sys

# Lowest first. A folder may include itself and every folder before it.
LAYERS = [
    "include/cc",
    "common",
    "rendezvous",
    "lib/launch",
    "lib/fast",
    "lib/core",
    "lib/watch",
    "lib/comm",
    "lib/api",
]
# Programs and tests sit above every layer; a program does not reach into
# another, only into its own folder and SHARED, the command line they share.
TOP = ["tools", "tests", "examples"]
SHARED = "tools/cli/"

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    """The longest layer prefix of a repository path, or None."""
    best = None
    for name in LAYERS:
        if path == name or path.startswith(name + "/"):
            if best is None or len(name) > len(best):
                best = name
    return best


def target_of(include):
    if include.startswith("cc/"):
        return "include/cc"
    return layer_of(include)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = []
    sources = [p for ext in ("*.cpp", "*.hpp", "*.cu", "*.c", "*.h") for p in root.rglob(ext)]
    for file in sorted(sources):
        rel = file.relative_to(root).as_posix()
        # python/ is its own package, built by pip against torch with its own include root.
        if rel.startswith(("build", "subprojects/", ".", "python/")):
            continue
        top = rel.split("/")[0]
        if rel.startswith("include/"):  # public headers include their siblings, as installed
            continue
        for include in INCLUDE.findall(file.read_text(errors="replace")):
            if "/" not in include:
                bad.append(f"{rel}: #include \"{include}\" does not name its folder")
                continue
            if top in TOP:
                if top == "tools" and include.startswith("tools/"):
                    own = "/".join(rel.split("/")[:2])
                    if not include.startswith((own + "/", SHARED)):
                        bad.append(f"{rel}: #include \"{include}\" reaches into another program")
                continue
            here, there = layer_of(rel), target_of(include)
            if here is None or there is None:
                if include.startswith(tuple(t + "/" for t in TOP)):
                    bad.append(f"{rel}: #include \"{include}\" reaches up into {include.split('/')[0]}/")
                continue
            if LAYERS.index(there) > LAYERS.index(here):
                bad.append(f"{rel}: #include \"{include}\" runs back up ({here} may not include {there})")
    for line in bad:
        print(line)
    print(f"check-layers: {len(bad)} include(s) against the order")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
