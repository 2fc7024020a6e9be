#!/usr/bin/env python3
"""Checks the dependency graph docs/ARCHITECTURE.md draws ("Who includes
whom"), and prints each place that goes against it; exit status 1 when there
is one:

- a layer includes only itself and what it reaches through DEPENDS;
- code of libcc includes from rendezvous/etcd only what the plugin shares
  with libcc (PLUGIN_SHARED), never the plugin's inside;
- a backend's folder is included only by itself and the factory
  (BACKENDS): nothing else may ask which backend it has;
- a program in tools/ includes no test and no other program's folder (only
  its own and tools/cli/), and compiles only its own folder's sources;
- namespaces follow folders: a file in tools/<folder>/ opens only
  cc::tools::<folder> (its "cc-" dropped, dashes as underscores:
  tools/cc-rendezvous-bench/ is cc::tools::rendezvous_bench), a file in
  lib/<folder>/ only cc::<folder>, a file in common/ only cc, a file in
  rendezvous/<folder>/ only cc::rv::<folder> and one in rendezvous/ or
  rendezvous/server_core/ (ServerCore's members) only cc::rv, each with
  namespaces of its own inside (cc::comm::args, cc::settings).

    scripts/check-layers.py [REPO_ROOT]
"""
import pathlib
import re
import sys

# Each layer and the layers it includes directly; what they include, it may
# include too. include/cc, the public API, is open to every layer.
DEPENDS = {
    "include/cc": [],
    "common": ["include/cc"],
    "rendezvous": ["common"],
    "rendezvous/rules": ["rendezvous"],
    "rendezvous/server_core": ["rendezvous/rules"],
    "rendezvous/etcd": ["rendezvous"],
    "rendezvous/factory": ["rendezvous/etcd", "rendezvous/rules"],
    "rendezvous/agent": ["rendezvous"],
    "lib/launch": ["rendezvous/factory"],
    "lib/fast": ["common"],
    "lib/core": ["common", "lib/fast"],
    "lib/watch": ["lib/core", "lib/launch"],
    "lib/comm": ["lib/watch"],
    "lib/api": ["lib/comm"],
}
LAYERS = sorted(DEPENDS, key=len, reverse=True)  # longest prefix first

# What libcc itself holds of rendezvous/etcd (the address parser and the
# plugin's loader) and the headers it shares with the plugin (the election's
# options hold the client's).
PLUGIN_SHARED = {
    "rendezvous/etcd/endpoints.hpp",
    "rendezvous/etcd/connect.hpp",
    "rendezvous/etcd/election.hpp",
    "rendezvous/etcd/client.hpp",
    "rendezvous/etcd/plugin.hpp",
}
# The files of rendezvous/etcd compiled into libcc (rendezvous/meson.build).
LIBCC_HALF = PLUGIN_SHARED | {"rendezvous/etcd/endpoints.cpp", "rendezvous/etcd/connect.cpp"}

# A backend's folder and the one folder that may include it besides itself:
# the factory makes every backend, so no other layer or program sees one.
BACKENDS = {"rendezvous/etcd": "rendezvous/factory"}

# Programs, tests and examples sit above every layer. A program reaches into
# no other program and no test: only its own folder and SHARED.
TOP = ["tools", "tests", "examples"]
SHARED = "tools/cli/"

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
# A named namespace opened on a line of its own ("namespace cc::comm {").
NAMESPACE = re.compile(r"^\s*(?:inline\s+)?namespace\s+([A-Za-z_][\w:]*)\s*\{\s*(?://.*)?$", re.M)
SOURCE = re.compile(r"'([^']+\.(?:cpp|cu|c))'")


def reach(layer, seen=None):
    """Every layer `layer` may include: itself and what DEPENDS leads to."""
    seen = set() if seen is None else seen
    if layer not in seen:
        seen.add(layer)
        for below in DEPENDS[layer]:
            reach(below, seen)
    return seen


def layer_of(path):
    """The longest layer prefix of a repository path, or None."""
    for name in LAYERS:
        if path == name or path.startswith(name + "/"):
            return name
    return None


def target_of(include):
    if include.startswith("cc/"):
        return "include/cc"
    return layer_of(include)


def check_backend_include(rel, include, bad):
    """Only a backend itself and the factory include a backend's folder."""
    there = target_of(include)
    if there in BACKENDS and layer_of(rel) not in (there, BACKENDS[there]):
        bad.append(f"{rel}: #include \"{include}\" asks for a backend: make it with "
                   f"{BACKENDS[there]} and ask it what it offers")


def check_tool_include(rel, include, bad):
    if include.startswith("tests/"):
        bad.append(f"{rel}: #include \"{include}\": a program does not include a test")
    elif include.startswith("tools/"):
        own = "/".join(rel.split("/")[:2])
        if not include.startswith((own + "/", SHARED)):
            bad.append(f"{rel}: #include \"{include}\" reaches into another program")


def check_layer_include(rel, include, bad):
    here, there = layer_of(rel), target_of(include)
    if here is None or there is None:
        if include.startswith(tuple(t + "/" for t in TOP)):
            bad.append(f"{rel}: #include \"{include}\" reaches up into {include.split('/')[0]}/")
        return
    if there not in reach(here):
        bad.append(f"{rel}: #include \"{include}\" goes against the graph "
                   f"({here} may not include {there})")
    elif (there == "rendezvous/etcd" and (here != there or rel in LIBCC_HALF)
          and include not in PLUGIN_SHARED):
        bad.append(f"{rel}: #include \"{include}\" reaches inside the etcd plugin "
                   f"(libcc may include only {', '.join(sorted(PLUGIN_SHARED))})")


def folder_namespace(rel):
    """The namespace a file's folder gives it, or None where none is asked."""
    parts = rel.split("/")
    if parts[0] == "tools" and len(parts) > 2:
        name = parts[1][3:] if parts[1].startswith("cc-") else parts[1]
        return "cc::tools::" + name.replace("-", "_")
    if parts[0] == "lib" and len(parts) > 2:
        return "cc::" + parts[1]
    if parts[0] == "common":
        return "cc"
    if parts[0] == "rendezvous":
        # server_core/ holds ServerCore's members, which live in cc::rv.
        if len(parts) > 2 and parts[1] != "server_core":
            return "cc::rv::" + parts[1]
        return "cc::rv"
    return None


# Other libraries' namespaces, opened only to declare their types ahead.
FOREIGN = {"httplib"}


def check_namespaces(rel, text, bad):
    want = folder_namespace(rel)
    if want is None:
        return
    for name in NAMESPACE.findall(text):
        if name in FOREIGN:
            continue
        if name != want and not name.startswith(want + "::"):
            bad.append(f"{rel}: namespace {name} in {rel.rsplit('/', 1)[0]}/, whose namespace "
                       f"is {want} (open it as one name: namespace {want} {{)")


def check_tool_sources(root, bad):
    """Each executable in tools/meson.build compiles only its own folder."""
    build = root / "tools" / "meson.build"
    if not build.exists():
        return
    text = build.read_text()
    for chunk in text.split("executable(")[1:]:
        sources = SOURCE.findall(chunk.split("dependencies:")[0])
        if not sources:
            continue
        own = sources[0].split("/")[0]
        for src in sources:
            if src.split("/")[0] != own or ".." in src.split("/"):
                bad.append(f"tools/meson.build: {own} compiles '{src}', another folder's "
                           f"source: link it from that folder's library")
        if "project_source_root()" in chunk.split("dependencies:")[0]:
            bad.append(f"tools/meson.build: {own} compiles a source from outside tools/")


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    bad = []
    sources = [p for ext in ("*.cpp", "*.hpp", "*.cu", "*.cuh", "*.c", "*.h") for p in root.rglob(ext)]
    for file in sorted(sources):
        rel = file.relative_to(root).as_posix()
        # python/ is its own package, built by pip against torch with its own include root.
        if rel.startswith(("build", "subprojects/", ".", "python/")):
            continue
        if rel.startswith("include/"):  # public headers include their siblings, as installed
            continue
        top = rel.split("/")[0]
        text = file.read_text(errors="replace")
        check_namespaces(rel, text, bad)
        for include in INCLUDE.findall(text):
            if "/" not in include:
                bad.append(f"{rel}: #include \"{include}\" does not name its folder")
            elif top == "tools":
                check_tool_include(rel, include, bad)
                check_backend_include(rel, include, bad)
            elif top not in TOP:
                check_layer_include(rel, include, bad)
                check_backend_include(rel, include, bad)
    check_tool_sources(root, bad)
    for line in bad:
        print(line)
    print(f"check-layers: {len(bad)} place(s) against the graph")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
