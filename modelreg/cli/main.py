"""``modelreg`` command line: parse, call one API function (``modelreg.api``), render.

Exit codes: 0 ok; 1 a check failed / not deployable; 2 bad input or usage; 3 internal error;
4 the registry database could not be reached (nothing changed: retry). Data goes to stdout
(``--json``: the models of ``modelreg.schemas.output``), messages to stderr; with ``--json``
an error is a JSON object on stdout too. Tracebacks only with ``MODELREG_DEBUG=1``.
"""

from __future__ import annotations

import contextlib
import os
import sys
import traceback
from typing import TYPE_CHECKING

import typer

from modelreg import config

# Commands live in their own modules and register themselves on ``app`` (modelreg.cli.app).
from modelreg.cli import card as _card  # noqa: F401
from modelreg.cli import deploy as _deploy  # noqa: F401
from modelreg.cli import fleet as _fleet  # noqa: F401
from modelreg.cli import records as _records  # noqa: F401
from modelreg.cli import registry as _registry_commands  # noqa: F401
from modelreg.cli import scan as _scan  # noqa: F401
from modelreg.cli import suites as _suites  # noqa: F401
from modelreg.cli import team as _team  # noqa: F401
from modelreg.cli.app import app
from modelreg.errors import ErrorCode, InvalidInput, ModelregError
from modelreg.process import tune_collector

if TYPE_CHECKING:
    from modelreg.steps import Step


def _redacted(text: str) -> str:
    """``text`` with every secret hidden — the last line of defence before an error is shown
    (``modelreg.secrets``). The targets file's ``token_env`` variables count even when the
    error came before (or from) reading it."""
    from modelreg.secrets import note_token_envs_in_file, redact_secrets

    with contextlib.suppress(Exception):  # e.g. MODELREG_HOME is a file: nothing to note
        note_token_envs_in_file(config.targets_file())
    return redact_secrets(text)


def _error_json(code: str, message: str, hint: str | None, step: Step | None = None) -> None:
    from modelreg.cli.render import emit
    from modelreg.schemas.output import ErrorBody, ErrorOutput, StepOut

    shown_hint = _redacted(hint) if hint is not None else None
    body = ErrorBody(code=code, message=_redacted(message), hint=shown_hint, next=StepOut.of(step))
    emit(ErrorOutput(error=body))


def _error_line(text: str) -> None:
    """One line on stderr, secrets hidden, control characters escaped."""
    from modelreg.cli.render import clean

    sys.stderr.write(f"{clean(_redacted(text))}\n")


# The library's parameters (``errors.PARAMETERS``, named in its messages as ``name``) as this
# CLI's flags.
FLAGS = {
    "why": "--why",
    "prompts": "--prompt",
    "expect": "--expect",
    "to": "--to",
    "state": "--state",
    "sha256": "--expect-sha256",
    "hold": "--hold",
    "record": "--record",
    "reference": "--reference",
    "case_id": "--case",
    "compile_host": "--compile-host",
    "effective_params": "--effective-params",
    "effective_source": "--effective-source",
    "since": "--since",
    "limit": "--limit",
    "model_id": "--model-id",
    "with_targets": "--with-targets",
    "target": "--target",
    "bits": "--bits",
    "quant": "--quant",
    "total_params": "--total-params",
    "active_params": "--active-params",
    "params_source": "--params-source",
    "base_model": "--base-model",
    "license_id": "--license",
    "source": "--source",
    "path": "--path",
}


def _report(exc: ModelregError, json_out: bool) -> int:
    if config.debug():
        sys.stderr.write(_redacted(traceback.format_exc()))
    from modelreg.cli.steps import said

    message, hint = exc.worded(FLAGS)
    if json_out:
        _error_json(exc.code.value, message, hint, exc.step)
    after = [t for t in (hint, said(exc.step)) if t]
    _error_line(f"error: {message} — {'; '.join(after)}" if after else f"error: {message}")
    return exc.exit_code


def _database_failure(exc: Exception, args: list[str]) -> ModelregError | None:
    """An unreachable database seen mid-command (not at open) is exit 4, like at open."""
    from modelreg.api import database_unavailable

    return database_unavailable(exc, config.database_url(_db_from_args(args)))


def _db_from_args(argv: list[str]) -> str | None:
    """The --db the command was given (the arguments of this call, not ``sys.argv``)."""
    for i, arg in enumerate(argv):
        if arg == "--db" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--db="):
            return arg.removeprefix("--db=")
    return None


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code (tests call this directly)."""
    args = sys.argv[1:] if argv is None else argv
    tune_collector()
    if "_MODELREG_COMPLETE" in os.environ:  # the shell asking for completions
        from typer._completion_classes import completion_init

        completion_init()
    json_out = "--json" in args
    if any("\x00" in arg for arg in args):  # the OS cannot pass one; a library caller can
        if json_out:
            _error_json(ErrorCode.INVALID_INPUT.value, "an argument holds a NUL byte", None)
        sys.stderr.write("error: an argument holds a NUL byte\n")
        return 2
    try:
        result = app(args=args, prog_name="modelreg", standalone_mode=False)
    except typer.Abort:
        sys.stderr.write("aborted\n")
        return 130
    except typer.Exit as exc:
        return exc.exit_code
    except typer.TyperException as exc:  # usage errors: missing or malformed options
        if json_out:
            _error_json(ErrorCode.INVALID_INPUT.value, exc.format_message(), "see --help")
        show = getattr(exc, "show", None)
        if show is not None:
            import io

            shown = io.StringIO()
            show(file=shown)  # click's usage text may quote an option's value: redacted
            sys.stderr.write(_redacted(shown.getvalue()))
        else:
            _error_line(f"error: {exc}")
        return 2
    except ModelregError as exc:
        return _report(exc, json_out)
    except OSError as exc:
        if exc.filename is None:
            return _internal(exc, json_out)
        # A path the user named cannot be used (too long, not permitted, not a directory…).
        return _report(InvalidInput(f"{exc.filename}: {exc.strerror}"), json_out)
    except Exception as exc:  # the one place an unexpected error becomes exit code 3
        translated = _database_failure(exc, args)
        if translated is not None:
            return _report(translated, json_out)
        return _internal(exc, json_out)
    return result if isinstance(result, int) else 0


def _internal(exc: BaseException, json_out: bool) -> int:
    """The one place an unexpected error becomes exit code 3 (secrets redacted)."""
    if config.debug():
        sys.stderr.write(_redacted("".join(traceback.format_exception(exc))))
    message = _redacted(f"{type(exc).__name__}: {exc}")
    if json_out:
        _error_json(ErrorCode.INTERNAL.value, message, "rerun with MODELREG_DEBUG=1")
    _error_line(f"internal error: {message} (rerun with MODELREG_DEBUG=1 for a traceback)")
    return 3


def run() -> None:
    sys.exit(main())
