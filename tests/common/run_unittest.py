"""Runs test modules or classes with unittest, verbose, as Meson runs a test:
exit 0 when they passed, 1 when any failed, and 77 (Meson's "skipped") when
none could run here (every test skipped, or the module's set-up skipped
them all), each reason printed. `python3 -m unittest` exits 0 then, which
Meson counts as passed.

Usage (in the tests' folder, which is put on the path): run_unittest.py NAME..."""

import os
import sys
import unittest


def main(names):
    sys.path.insert(0, os.getcwd())
    suite = unittest.defaultTestLoader.loadTestsFromNames(names)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    if not result.wasSuccessful():
        return 1
    if result.skipped and result.testsRun <= len(result.skipped):
        for test, why in result.skipped:
            print("SKIP: %s: %s" % (test, why))
        return 77
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
