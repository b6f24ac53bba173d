"""Reading a JSON file a user points to (a table's record, a kept cell's result.json): a damaged one is one line naming
the option and the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fedprior.errors import ConfigError


def read_json(path: Path, option: str) -> dict[str, Any]:
    """The JSON object in ``path``; a ConfigError naming ``option`` and ``path`` where it cannot be read, is not valid JSON
    or holds no object."""
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise ConfigError(f"{option}: cannot read {path} ({error.strerror or error})") from None
    except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
        raise ConfigError(f"{option}: {path} is not valid JSON ({error}); restore it (git checkout) or remove it") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{option}: {path} holds a JSON {type(document).__name__}, not the object expected; restore it (git checkout) or remove it")
    return document
