"""The cluster suite drives each node with LangBot's own client, as the conformance suite
does: its helpers are loaded from there."""

import importlib.util
import os
import sys

_here = os.path.dirname(__file__)
_spec = importlib.util.spec_from_file_location("conformance_conftest",
                                               os.path.join(_here, "..", "conformance", "conftest.py"))
_mod = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mod)
BoxConnection = _mod.BoxConnection
sys.path.insert(0, _here)
