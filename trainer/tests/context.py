"""Puts trainer/ on sys.path and names the fixture, for the tests (run from any folder)."""

import os
import sys

TRAINER = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if TRAINER not in sys.path:
    sys.path.insert(0, TRAINER)

# FIXTURE is `advantage export --format jsonl` of the simulated corpus
# (internal/stage/advantage TestAcceptTrainerFixture writes it with -update).
FIXTURE = os.path.join(TRAINER, "tests", "testdata", "export")
