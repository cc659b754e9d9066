"""Fixtures for the dashboard tests: recorded sessions, a fixed terminal size, no cursor blink."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
