"""Commands rsbench prints, written so that they paste back into a shell and into Hydra's override grammar.

A path is a value of an override (``resume=<run dir>``, ``hydra.run.dir=...``, ``ckpt_path=...``): Hydra parses it,
and refuses ``=``, ``,``, brackets, quotes and non-ASCII letters outside quotes, so :func:`hydra_value` quotes such a
value the way Hydra reads it back unchanged. The whole argument is then quoted for the shell (:func:`shell_command`),
so a folder with spaces or ``$`` in its name survives copy and paste. Nothing here imports torch.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path
from typing import Any

from rsbench.files import record_path

_BACKSLASHES_BEFORE_QUOTE_OR_END = re.compile(r"(\\*)('|$)")


@functools.lru_cache(maxsize=1)
def _parser() -> Any:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    return OverridesParser.create()


def reads_back(value: str) -> bool:
    """Whether Hydra reads the override ``key=<value>`` as exactly the string ``value``."""
    try:
        return bool(_parser().parse_override(f"key={value}").value() == value)
    except Exception:  # Hydra's grammar refuses it (an OverrideParseException, or a lexer error)
        return False


def override_value(override: str) -> Any:
    """The value of the override ``key=value`` as Hydra reads it: ``{a:1}`` a mapping, ``[1,2]`` a list, ``.5`` a float.

    Hydra's grammar, not YAML's (YAML reads ``{img_size:32}`` as the key ``img_size:32``); the text after the first
    ``=`` when the grammar refuses the override.

    >>> override_value("+arch.network.options={img_size:32,depth:3}"), override_value("model.path=/runs/a=b/x.ckpt")
    ({'img_size': 32, 'depth': 3}, '/runs/a=b/x.ckpt')
    """
    try:
        return _parser().parse_override(override).value()
    except Exception:  # Hydra's grammar refuses it (an OverrideParseException, or a lexer error)
        return override.partition("=")[2]


def unquote(value: str) -> str:
    """A value as typed after ``key=``, without the quotes Hydra's grammar would strip (``'a=b'`` -> ``a=b``)."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        try:
            parsed = _parser().parse_override(f"key={value}").value()
        except Exception:  # not a quoted string Hydra reads: take it as it is
            return value
        return parsed if isinstance(parsed, str) else value
    return value


def hydra_value(value: str | Path) -> str:
    """``value`` as Hydra must see it after ``key=``: as it is when Hydra reads it back unchanged, else single-quoted.

    Inside Hydra's quotes a quote is escaped by a backslash, and backslashes are doubled only before a quote or at
    the end (the only places Hydra reads them as escapes).

    >>> hydra_value("multirun/x/0_sigma-0.5")
    'multirun/x/0_sigma-0.5'
    >>> hydra_value("multirun/x/1_a=1,b=2")
    "'multirun/x/1_a=1,b=2'"
    """
    text = str(value)
    if text and text == text.strip() and reads_back(text):
        return text
    escaped = _BACKSLASHES_BEFORE_QUOTE_OR_END.sub(
        lambda match: match.group(1) * 2 + ("\\'" if match.group(2) else ""), text
    )
    return f"'{escaped}'"


def override(key: str, value: str | Path) -> str:
    """The override ``key=<value>`` that Hydra parses back to ``value`` (see :func:`hydra_value`)."""
    return f"{key}={hydra_value(value)}"


def override_key(override: str) -> str:
    """The config key an override sets, without its sign; ``""`` for a command-line flag (``--cfg``, ``-m``).

    >>> [override_key(o) for o in ["+trainer.max_epochs=3", "~certify.sigma", "++a.b=1", "hydra/launcher=slurm"]]
    ['trainer.max_epochs', 'certify.sigma', 'a.b', 'hydra/launcher']
    >>> override_key("--cfg")
    ''
    """
    return "" if override.startswith("-") else override.split("=", 1)[0].lstrip("+~")


def shell_command(module: str, *arguments: str) -> str:
    """``python -m <module> <arguments>``, each argument quoted for a POSIX shell where it needs it.

    >>> shell_command("rsbench", "resume=outputs/a b")
    "python -m rsbench 'resume=outputs/a b'"
    """
    return " ".join(["python", "-m", module, *(shlex.quote(argument) for argument in arguments)])


def resume_command(module: str, run_dir: str | Path) -> str:
    """The command that continues the run in ``run_dir``: ``python -m <module> resume=<run dir>``, quoted.

    The run directory is named relative to the working directory when it lies under it (where the command is to be
    pasted; :func:`rsbench.files.record_path`), else absolute.
    """
    return shell_command(module, f"resume={record_path(run_dir)}")
