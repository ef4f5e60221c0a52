"""Runs the trainer/ tests (trainer/tests and trainer/codapipe_reward) and writes their results as `go test -json` events.

make test feeds these events to tools/testreport beside the Go tests', so the
trainer's tests appear in its report and its "N passed, N failed, N skipped"
line, and a failure fails make test. Exit status 1 when a test failed.

Usage: /usr/bin/python3 trainer/tests/gotestjson.py
"""

import datetime
import io
import json
import os
import sys
import time
import traceback
import unittest

PACKAGE = "github.com/codapipe/codapipe/trainer"


def emit(action, test=None, elapsed=None, output=None):
    e = {"Time": datetime.datetime.now(datetime.timezone.utc).isoformat(), "Action": action, "Package": PACKAGE}
    if test:
        e["Test"] = test
    if elapsed is not None:
        e["Elapsed"] = round(elapsed, 3)
    if output is not None:
        e["Output"] = output
    sys.stdout.write(json.dumps(e) + "\n")
    sys.stdout.flush()


class Result(unittest.TestResult):
    """Writes one run event and one pass/fail/skip event per test."""

    def startTest(self, test):
        super().startTest(test)
        self._start = time.monotonic()
        emit("run", test.id())

    def _end(self, test, action, text=""):
        for line in text.splitlines(keepends=True):
            emit("output", test.id(), output=line)
        emit(action, test.id(), elapsed=time.monotonic() - self._start)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._end(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._end(test, "fail", "".join(traceback.format_exception(*err)))

    def addError(self, test, err):
        super().addError(test, err)
        self._end(test, "fail", "".join(traceback.format_exception(*err)))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._end(test, "skip", reason + "\n")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            emit("output", test.id(), output="".join(traceback.format_exception(*err)))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    start = time.monotonic()
    result = Result()
    try:
        # The trainer's tests and the verl reward module's (each folder its own top level).
        dirs = [here, os.path.join(os.path.dirname(here), "codapipe_reward")]
        suite = unittest.TestSuite(unittest.TestLoader().discover(d, top_level_dir=d) for d in dirs)
        suite.run(result)
    except Exception:  # an import error of the tests themselves
        emit("output", output=traceback.format_exc())
        emit("fail", elapsed=time.monotonic() - start)
        return 1
    ok = result.wasSuccessful() and result.testsRun > 0
    emit("pass" if ok else "fail", elapsed=time.monotonic() - start)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
