"""Finding libcc: CC_LIBRARY, then the install prefix, then the loader path;
cc.library_path() and cc.version() say what was loaded; a function missing
from an older libcc is a MissingFunctionError naming it."""

import os
import pathlib
import shutil
import tempfile
import unittest

import helpers

PRINT = "import cc; print(cc.library_path()); print(cc.version()); print(cc._library.api().how)"


class LibraryLookup(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.lib = helpers.libcc_path()
        cls.libdir = os.path.dirname(cls.lib)

    def run_print(self, env, cwd=None):
        env = dict(env)
        env.setdefault("PYTHONPATH", str(helpers.PACKAGE_ROOT))
        return helpers.run_python(PRINT, env, cwd=cwd)

    def test_cc_library_is_loaded_and_named(self):
        rc, out, err = self.run_print({"CC_LIBRARY": self.lib})
        self.assertEqual(rc, 0, err)
        path, version, how = out.splitlines()
        self.assertEqual(os.path.realpath(path), os.path.realpath(self.lib))
        self.assertRegex(version, r"^\d+\.\d+\.\d+$")
        self.assertEqual(how, "CC_LIBRARY")

    def test_cc_library_that_cannot_load_is_an_error_naming_it(self):
        missing = "/nonexistent/libcc.so.0"
        rc, out, err = helpers.run_python(
            "import cc\ntry:\n    cc.version()\nexcept cc.LibraryNotFoundError as e:\n"
            "    print(e.code_name); print(e)\n",
            {"PYTHONPATH": str(helpers.PACKAGE_ROOT), "CC_LIBRARY": missing,
             "LD_LIBRARY_PATH": self.libdir})
        self.assertEqual(rc, 0, err)
        self.assertIn("CC_ERR_INVALID_ARGUMENT", out)
        self.assertIn("CC_LIBRARY=" + missing, out)
        self.assertIn("could not be loaded", out)

    def test_loader_path_is_used_when_nothing_else_is_set(self):
        if any(c.exists() for c in _prefix_candidates_of_source_tree()):
            self.skipTest("a libcc is installed in this Python's prefix; it would win")
        rc, out, err = self.run_print({"LD_LIBRARY_PATH": self.libdir})
        self.assertEqual(rc, 0, err)
        path, _, how = out.splitlines()
        self.assertEqual(how, "loader path")
        self.assertEqual(os.path.realpath(path), os.path.realpath(self.lib))

    def test_install_prefix_wins_over_loader_path_and_loses_to_cc_library(self):
        with tempfile.TemporaryDirectory() as prefix:
            prefix = pathlib.Path(prefix)
            site = prefix / "lib" / "python3" / "site-packages"
            shutil.copytree(helpers.PACKAGE_ROOT / "cc", site / "cc",
                            ignore=shutil.ignore_patterns("__pycache__", "*.so"))
            (prefix / "lib" / "libcc.so.0").symlink_to(self.lib)
            env = {"PYTHONPATH": str(site), "LD_LIBRARY_PATH": self.libdir}
            rc, out, err = self.run_print(env, cwd=str(prefix))
            self.assertEqual(rc, 0, err)
            path, _, how = out.splitlines()
            self.assertEqual(how, "install prefix")
            self.assertEqual(path, str(prefix / "lib" / "libcc.so.0"))

            other = prefix / "elsewhere" / "libcc.so.0"
            other.parent.mkdir()
            other.symlink_to(self.lib)
            rc, out, err = self.run_print(dict(env, CC_LIBRARY=str(other)), cwd=str(prefix))
            self.assertEqual(rc, 0, err)
            path, _, how = out.splitlines()
            self.assertEqual(how, "CC_LIBRARY")
            self.assertEqual(path, str(other))

    def test_nothing_found_lists_every_place_tried(self):
        if any(c.exists() for c in _prefix_candidates_of_source_tree()):
            self.skipTest("a libcc is installed in this Python's prefix")
        rc, out, err = helpers.run_python(
            "import cc\ntry:\n    cc.library_path()\nexcept ImportError as e:\n    print(e)\n",
            {"PYTHONPATH": str(helpers.PACKAGE_ROOT)})
        self.assertEqual(rc, 0, err)
        if "libcc was not found" not in out:
            self.skipTest("the system loader finds a libcc of its own: " + out.strip())
        self.assertIn("CC_LIBRARY (not set)", out)
        self.assertIn("the loader path", out)
        self.assertIn("set CC_LIBRARY", out)

    def test_missing_function_is_named_and_other_calls_still_work(self):
        # A libcc without one function: the real one, asked for a name it
        # does not export, through the same lookup every call uses.
        import cc
        from cc import _library
        api = _library.api()
        _library._PROTOTYPES["cc_no_such_call"] = (None, [])
        try:
            with self.assertRaises(cc.MissingFunctionError) as caught:
                api.cc_no_such_call()
            self.assertIsInstance(caught.exception, cc.InvalidUsageError)
            self.assertIn("cc_no_such_call is not in the libcc loaded from " + api.path,
                          str(caught.exception))
            self.assertFalse(api.has("cc_no_such_call"))
            self.assertTrue(api.has("cc_allreduce"))
        finally:
            del _library._PROTOTYPES["cc_no_such_call"]
        self.assertRegex(cc.version(), r"^\d+\.\d+\.\d+$")


def _prefix_candidates_of_source_tree():
    from cc import _library
    return _library._prefix_candidates()


if __name__ == "__main__":
    unittest.main()
