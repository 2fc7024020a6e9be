"""The Python binding against include/cc/cc.h: every prototype in
_library.py, every enum value and constant in _errors.py, _arrays.py,
_comm.py and _config.py, and cc_config_t's fields (names, order, offsets,
sizes) in _config.py.

The names come from parsing the header; the values, offsets and sizes from
a C probe generated from those names and compiled against the header, so
the compiler, not this file, says what the header means."""

import ctypes
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

from cc import _arrays, _comm, _config, _errors, _library, _torch_build

import helpers

P = ctypes.POINTER

# Functions of cc.h that the binding does not offer, each for a reason; a
# new function in cc.h must be bound in _library.py or named here.
NOT_BOUND = {
    "cc_comm_allreduce_plan": "not offered in Python yet",
    "cc_mem_alloc": "torch's and CuPy's allocators serve Python",
    "cc_mem_free": "torch's and CuPy's allocators serve Python",
    "cc_comm_register": "buffer registration is not offered in Python yet",
    "cc_comm_deregister": "buffer registration is not offered in Python yet",
    "cc_comm_window_register": "window registration is not offered in Python yet",
    "cc_comm_window_deregister": "window registration is not offered in Python yet",
}


def header_dirs():
    return _torch_build.include_dirs(helpers.libcc_path())


def header_text():
    for d in header_dirs():
        path = pathlib.Path(d) / "cc" / "cc.h"
        if path.is_file():
            return path.read_text()
    raise AssertionError("cc/cc.h not found in %s" % header_dirs())


def without_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def parse_enums(text):
    """{enum type name: [constant names in order]} of every typedef enum."""
    enums = {}
    for body, name in re.findall(r"typedef\s+enum\s+\w*\s*\{(.*?)\}\s*(\w+)\s*;", text, flags=re.S):
        enums[name] = re.findall(r"\b(CC_\w+)\s*(?:=|,|$)", body)
    return enums


def parse_defines(text):
    """Names of the object-like #defines of integer constants."""
    return re.findall(r"^#define\s+(CC_\w+)\s+(?:\(|0x|[0-9]|INT32_MIN)", text, flags=re.M)


def parse_config_fields(text):
    """[(type, name)] of cc_config_t's fields, in order."""
    m = re.search(r"typedef\s+struct\s+cc_config\s*\{(.*?)\}\s*cc_config_t\s*;", text, flags=re.S)
    if m is None:
        raise AssertionError("cc.h has no 'typedef struct cc_config { ... } cc_config_t;'")
    fields = []
    for decl in m.group(1).split(";"):
        decl = " ".join(decl.split())
        if not decl:
            continue
        dm = re.match(r"(.*?)(\w+)$", decl)
        fields.append((dm.group(1).strip(), dm.group(2)))
    return fields


def parse_prototypes(text):
    """{name: (return type, [parameter types])} of every CC_API function."""
    protos = {}
    for ret, name, params in re.findall(r"CC_API\s+([\w\s\*]+?)\s*\b(cc_\w+)\s*\(([^)]*)\)\s*;",
                                        text, flags=re.S):
        types = []
        params = " ".join(params.split())
        if params not in ("", "void"):
            for p in params.split(","):
                p = p.strip()
                pm = re.match(r"(.*?[\s\*])(\w+)$", p)
                types.append((pm.group(1) if pm else p).strip())
        protos[name] = (" ".join(ret.split()), types)
    return protos


_SCALARS = {
    "int": ctypes.c_int, "cc_result_t": ctypes.c_int, "cc_datatype_t": ctypes.c_int,
    "cc_redop_t": ctypes.c_int, "size_t": ctypes.c_size_t, "int64_t": ctypes.c_int64,
    "unsigned int": ctypes.c_uint, "uint32_t": ctypes.c_uint32,
}
_HANDLES = {"cc_comm_t", "cc_store_t", "cc_server_t", "cc_stream_t"}


def accepted_ctypes(c_type):
    """The ctypes types that pass a C type faithfully: exact integer widths,
    c_void_p for handles and untyped memory, c_char_p or c_void_p for
    strings and bytes, POINTER(x) for a pointer to a value cc writes."""
    tokens = c_type.replace("*", " * ").split()
    stars = tokens.count("*")
    base = " ".join(t for t in tokens if t not in ("*", "const"))
    if stars == 0:
        if base == "void":
            return {None}
        if base in _SCALARS:
            return {_SCALARS[base]}
        if base in _HANDLES:
            return {ctypes.c_void_p}
        raise AssertionError("the binding test does not know the C type '%s': add it to "
                             "accepted_ctypes in %s" % (c_type, __file__))
    if stars == 1 and base in ("char", "void"):
        return {ctypes.c_char_p, ctypes.c_void_p}
    if stars == 1 and base == "cc_config_t":
        return {ctypes.c_void_p, P(_config.ConfigStruct)}
    inner = accepted_ctypes(base + " *" * (stars - 1))
    return {P(t) for t in inner}


def ctypes_name(t):
    return "None" if t is None else t.__name__


def compiler():
    words = shlex.split(os.environ.get("CC_TEST_C_COMPILER", ""))
    if words:
        return words
    found = shutil.which("cc") or shutil.which("gcc")
    return [found] if found else None


def probe(names_values, fields):
    """Compiles and runs a C program printing each constant's value and each
    cc_config_t field's offset and size; returns ({name: value},
    {field: (offset, size)}, sizeof(cc_config_t))."""
    cmd = compiler()
    if cmd is None:
        raise unittest.SkipTest("no C compiler to build the header probe with")
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "cc/cc.h"',
             "int main(void) {",
             '  printf("sizeof %zu\\n", sizeof(cc_config_t));']
    for name in names_values:
        lines.append('  printf("value %s %%lld\\n", (long long)(%s));' % (name, name))
    for _, field in fields:
        lines.append('  printf("field %s %%zu %%zu\\n", offsetof(cc_config_t, %s), '
                     "sizeof(((cc_config_t*)0)->%s));" % (field, field, field))
    lines += ["  return 0;", "}"]
    with tempfile.TemporaryDirectory() as tmp:
        source = pathlib.Path(tmp) / "probe.c"
        source.write_text("\n".join(lines) + "\n")
        exe = pathlib.Path(tmp) / "probe"
        build = subprocess.run(cmd + ["-std=c99", "-Wall", "-Werror", "-o", str(exe), str(source)]
                               + ["-I" + d for d in header_dirs()],
                               capture_output=True, text=True)
        if build.returncode != 0:
            raise AssertionError("the header probe did not compile:\n" + build.stderr)
        out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    values, offsets, size = {}, {}, None
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "sizeof":
            size = int(rest[0])
        elif kind == "value":
            values[rest[0]] = int(rest[1])
        else:
            offsets[rest[0]] = (int(rest[1]), int(rest[2]))
    return values, offsets, size


class Binding(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        text = without_comments(header_text())
        cls.enums = parse_enums(text)
        cls.defines = parse_defines(text)
        cls.fields = parse_config_fields(text)
        cls.prototypes = parse_prototypes(text)
        names = [n for members in cls.enums.values() for n in members] + cls.defines
        names.append("CC_VERSION_CODE")  # cc_version.h, which cc.h includes
        cls.values, cls.offsets, cls.config_size = probe(names, cls.fields)

    def test_the_header_was_read(self):
        # The parser's own check: a header it misreads must not pass as empty.
        self.assertIn("cc_result_t", self.enums)
        self.assertIn("cc_datatype_t", self.enums)
        self.assertIn("cc_redop_t", self.enums)
        self.assertIn("CC_CONFIG_MAGIC", self.defines)
        self.assertEqual(self.fields[0], ("size_t", "size"))
        self.assertIn("cc_allreduce", self.prototypes)
        self.assertGreaterEqual(len(self.prototypes), len(_library._PROTOTYPES))

    def test_result_codes(self):
        members = [n for n in self.enums["cc_result_t"] if n != "CC_NUM_RESULTS"]
        for name in members:
            value = self.values[name]
            attr = name[len("CC_"):]
            self.assertEqual(getattr(_errors, attr, None), value,
                             "_errors.%s should be %d, as %s in cc.h" % (attr, value, name))
            self.assertEqual(_errors.CODE_NAMES.get(value), name,
                             "_errors.CODE_NAMES[%d] should be '%s', as in cc.h" % (value, name))
            if value != 0:
                self.assertIn(value, _errors._CLASSES,
                              "_errors._CLASSES has no exception class for %s" % name)
        known = {v: k for k, v in _errors.CODE_NAMES.items()}
        for name in known:
            self.assertIn(name, members, "_errors.CODE_NAMES has %s, which cc.h lacks" % name)
        self.assertEqual(self.values["CC_NUM_RESULTS"], len(members))

    def test_datatypes(self):
        members = [n for n in self.enums["cc_datatype_t"] if n != "CC_NUM_DATATYPES"]
        for name in members:
            attr = name[len("CC_"):]
            self.assertEqual(getattr(_arrays, attr, None), self.values[name],
                             "_arrays.%s should be %d, as %s in cc.h"
                             % (attr, self.values[name], name))
            self.assertIn(self.values[name], _arrays.DTYPE_NAMES,
                          "_arrays.DTYPE_NAMES has no name for %s" % name)
            self.assertIn(self.values[name], _arrays.ITEMSIZE,
                          "_arrays.ITEMSIZE has no size for %s" % name)
        self.assertEqual(len(_arrays.DTYPE_NAMES), self.values["CC_NUM_DATATYPES"],
                         "_arrays.DTYPE_NAMES should name every cc_datatype_t")

    def test_reduction_ops(self):
        members = [n for n in self.enums["cc_redop_t"] if n != "CC_NUM_REDOPS"]
        for name in members:
            word = name[len("CC_"):].lower()
            self.assertEqual(_comm._OPS.get(word), self.values[name],
                             "_comm._OPS['%s'] should be %d, as %s in cc.h"
                             % (word, self.values[name], name))
        self.assertEqual(set(_comm._OPS.values()), {self.values[n] for n in members},
                         "_comm._OPS holds a value cc.h has no cc_redop_t for")

    def test_config_constants(self):
        self.assertEqual(_config.CONFIG_MAGIC, self.values["CC_CONFIG_MAGIC"],
                         "_config.CONFIG_MAGIC differs from CC_CONFIG_MAGIC")
        self.assertEqual(_config.UNDEF_INT, self.values["CC_CONFIG_UNDEF_INT"],
                         "_config.UNDEF_INT differs from CC_CONFIG_UNDEF_INT")
        self.assertEqual(_config.HEADER_VERSION, self.values["CC_VERSION_CODE"],
                         "_config.HEADER_VERSION should be CC_VERSION_CODE (%d) once its struct "
                         "matches cc.h's cc_config_t" % self.values["CC_VERSION_CODE"])
        for prefix, table in (("CC_RENDEZVOUS_", _config.RENDEZVOUS),
                              ("CC_FAST_ALLREDUCE_", _config.FAST_ALLREDUCE)):
            names = [d for d in self.defines if d.startswith(prefix)]
            self.assertTrue(names, prefix)
            for name in names:
                word = name[len(prefix):].lower()
                self.assertEqual(table.get(word), self.values[name],
                                 "_config: '%s' should be %d, as %s in cc.h"
                                 % (word, self.values[name], name))

    def test_config_fields(self):
        ours = [(name, getattr(_config.ConfigStruct, name)) for name, _ in
                _config.ConfigStruct._fields_]
        theirs = [name for _, name in self.fields]
        mine = [n for n, _ in ours]
        for i in range(max(len(mine), len(theirs))):
            c_name = theirs[i] if i < len(theirs) else "(none)"
            py_name = mine[i] if i < len(mine) else "(none)"
            self.assertEqual(py_name, c_name,
                             "cc_config_t's field %d is '%s' in cc.h but '%s' in "
                             "_config.ConfigStruct (cc.h: %s)"
                             % (i + 1, c_name, py_name, ", ".join(theirs)))
        for (name, field), (c_type, _) in zip(ours, self.fields):
            offset, size = self.offsets[name]
            self.assertEqual(field.offset, offset,
                             "cc_config_t.%s: at offset %d in cc.h, %d in _config.py"
                             % (name, offset, field.offset))
            self.assertEqual(field.size, size, "cc_config_t.%s: %d bytes in cc.h, %d in _config.py"
                             % (name, size, field.size))
            py_type = dict(_config.ConfigStruct._fields_)[name]
            self.assertIn(py_type, accepted_ctypes(c_type),
                          "cc_config_t.%s is %s in cc.h but %s in _config.py"
                          % (name, c_type, ctypes_name(py_type)))
        self.assertEqual(ctypes.sizeof(_config.ConfigStruct), self.config_size,
                         "sizeof(cc_config_t) is %d in cc.h, %d in _config.py"
                         % (self.config_size, ctypes.sizeof(_config.ConfigStruct)))

    def test_prototypes(self):
        for name, (restype, argtypes) in sorted(_library._PROTOTYPES.items()):
            self.assertTrue(name in self.prototypes, "_library.py binds %s, which cc.h lacks" % name)
            c_ret, c_params = self.prototypes[name]
            self.assertEqual(len(argtypes), len(c_params),
                             "%s takes %d parameters in cc.h (%s), %d in _library.py"
                             % (name, len(c_params), ", ".join(c_params), len(argtypes)))
            self.assertIn(restype, accepted_ctypes(c_ret),
                          "%s returns %s in cc.h but %s in _library.py"
                          % (name, c_ret, ctypes_name(restype)))
            for i, (py, c) in enumerate(zip(argtypes, c_params)):
                self.assertIn(py, accepted_ctypes(c),
                              "%s: parameter %d is %s in cc.h but %s in _library.py"
                              % (name, i + 1, c, ctypes_name(py)))

    def test_every_function_is_bound_or_named_unbound(self):
        for name in sorted(self.prototypes):
            self.assertTrue(name in _library._PROTOTYPES or name in NOT_BOUND,
                            "cc.h declares %s: bind it in python/cc/_library.py, or name it in "
                            "NOT_BOUND in %s with the reason" % (name, os.path.basename(__file__)))
        for name in NOT_BOUND:
            self.assertTrue(name in self.prototypes, "NOT_BOUND names %s, which cc.h lacks" % name)
            self.assertNotIn(name, _library._PROTOTYPES, "%s is bound: drop it from NOT_BOUND"
                             % name)


if __name__ == "__main__":
    unittest.main()
