"""A suite that cannot contradict itself, and one that does not measure what the model was
tuned on.

Seed 002 asks for an evaluation set fixed before results, split into subsets, each judged on
its own. Three ways a suite file defeats that, each refused when the file is read
(``suites.parse_suite``, so ``suite check``, ``suite attach``, ``verify --suite`` and
``targets apply`` all refuse it):

- **the same prompt twice with different expectations** — one of them fails whatever the
  model says (three cases asking "What is the capital of France?" that expect Paris, Paris
  and Lyon cap the pass rate at 2/3 and reward a wrong answer once);
- **the same prompt twice with the same expectation** — one question counted twice;
- **near-duplicates across subsets** — a subset's floor then partly measures another
  subset's question, and the two floors can disagree about one answer.

"Same" and "near" are about the text a reviewer reads: prompts are compared after Unicode
NFKC normalisation, case folding and collapsing whitespace (and a long-context case's needle
is part of its text). Two prompts are *near-duplicates* when their normalised Indel
similarity (rapidfuzz ``fuzz.ratio``: 100 × (1 − insertions and deletions needed ÷ both
lengths)) is at least ``NEAR_DUPLICATE_RATIO`` — for two 50-character prompts, at most ~10
characters inserted or deleted. Within one subset near-duplicates are allowed (templated
variants, "the capital of France / of Japan", are how a subset is built); across subsets
they are not.

Calibration (``calibration_problems``): a quantization recipe names the calibration set its
importance matrix was computed on, by name and sha256. A suite whose prompts are in that set
measures what the quantizer was tuned on. Given the calibration file, every prompt is looked
for in it (normalised as above), and the file's digest must be the recipe's; given only the
recipe, its digest is compared with the digest of the suite's prompts (each one, and all of
them one per line), which catches a calibration set that *is* the suite.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import TYPE_CHECKING

from modelreg.errors import InvalidInput

if TYPE_CHECKING:
    from pathlib import Path

    from modelreg.schemas.manifest import QuantRecipe
    from modelreg.schemas.suite import Case, Suite

NEAR_DUPLICATE_RATIO = 90.0
# A prompt shorter than this (normalised) is not looked for in a calibration text: "Hi" is
# in every corpus.
MIN_CALIBRATION_MATCH_CHARS = 20
MAX_CALIBRATION_BYTES = 256 << 20
PROBLEMS_SHOWN = 5
MAX_PROBLEMS = 100  # found before the search stops (a hostile suite has millions of pairs)


def normalise(text: str) -> str:
    """The text as compared: NFKC, case-folded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _asked(case: Case) -> str:
    needle = case.long_context.needle if case.long_context is not None else ""
    return normalise(f"{needle}\n{case.prompt}" if needle else case.prompt)


def _mode(case: Case) -> str:
    return "default" if case.chat is None else "chat" if case.chat else "completion"


def duplicate_problems(suite: Suite) -> list[str]:
    """Cases that ask the same prompt (in the same mode) twice: with different expectations,
    or with the same one. One line per pair."""
    problems = []
    first: dict[tuple[str, str], Case] = {}
    for case in suite.cases:
        key = (_asked(case), _mode(case))
        earlier = first.get(key)
        if earlier is None:
            first[key] = case
            continue
        if earlier.expect != case.expect:
            problems.append(
                f"cases {earlier.id!r} and {case.id!r} ask the same prompt and expect different "
                f"answers ({earlier.expect.describe()} / {case.expect.describe()}): one of them "
                "fails whatever the model says — keep one expectation"
            )
        else:
            problems.append(
                f"cases {earlier.id!r} and {case.id!r} ask the same prompt with the same "
                "expectation: one question counted twice — remove one"
            )
    return problems


def near_duplicate_problems(suite: Suite, ratio: float = NEAR_DUPLICATE_RATIO) -> list[str]:
    """Pairs of cases in different subsets whose prompts are near-duplicates (see the module
    docstring); a same-mode exact duplicate is ``duplicate_problems``' to report."""
    import numpy as np
    from rapidfuzz import fuzz, process

    cases = list(suite.cases)
    texts = [_asked(case) for case in cases]
    # Every pair at once, in rapidfuzz's C++ (pairs below the cutoff score 0).
    scores = process.cdist(texts, texts, scorer=fuzz.ratio, score_cutoff=ratio, dtype=np.uint8)
    problems: list[str] = []
    for i, j in zip(*np.nonzero(np.triu(scores, k=1)), strict=True):
        a, b = cases[int(i)], cases[int(j)]
        if a.subset == b.subset or (texts[i] == texts[j] and _mode(a) == _mode(b)):
            continue
        if len(problems) == MAX_PROBLEMS:
            break
        problems.append(
            f"cases {a.id!r} (subset {a.subset}) and {b.id!r} (subset {b.subset}) ask "
            f"near-duplicate prompts ({int(scores[i, j])}% alike; {ratio:.0f}% or more is "
            "near): a subset's floor would measure another's question — keep the question in "
            "one subset"
        )
    return problems


def suite_problems(suite: Suite) -> list[str]:
    """Every way ``suite`` contradicts or repeats itself (empty: none)."""
    return duplicate_problems(suite) + near_duplicate_problems(suite)


def require_consistent(suite: Suite, origin: str) -> Suite:
    """``suite``, or one ``InvalidInput`` naming its first problems."""
    problems = suite_problems(suite)
    if problems:
        shown = "; ".join(problems[:PROBLEMS_SHOWN])
        more = len(problems) - PROBLEMS_SHOWN
        raise InvalidInput(
            f"{origin}: {shown}" + (f" (and {more} more)" if more > 0 else ""),
            "a suite is fixed before results: each question once, each subset its own",
        )
    return suite


# ---------------------------------------------------------------------------- calibration


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def prompts_digests(suite: Suite) -> dict[str, str]:
    """sha256 of each case's prompt (UTF-8), and of every prompt one per line (with and
    without a final newline): what a calibration set that *is* the suite would hash to."""
    digests = {_sha256(c.prompt.encode()): f"the prompt of case {c.id!r}" for c in suite.cases}
    joined = "\n".join(c.prompt for c in suite.cases)
    digests[_sha256(joined.encode())] = "the suite's prompts, one per line"
    digests[_sha256((joined + "\n").encode())] = "the suite's prompts, one per line"
    return digests


def calibration_problems(
    suite: Suite,
    recipe: QuantRecipe | None = None,
    calibration: Path | None = None,
) -> list[str]:
    """Where ``suite`` overlaps the calibration set of ``recipe`` (its ``calibration_set`` /
    ``calibration_set_sha256``) or the ``calibration`` text file. Empty when neither is
    given or nothing overlaps."""
    from modelreg.boundedfile import read_bounded

    problems = []
    wanted = recipe.calibration_set_sha256 if recipe is not None else None
    named = (recipe.calibration_set if recipe is not None else None) or "(unnamed)"
    if calibration is not None:
        data = read_bounded(calibration, max_bytes=MAX_CALIBRATION_BYTES, what="calibration set")
        if wanted is not None and _sha256(data) != wanted:
            problems.append(
                f"{calibration} has sha256 {_sha256(data)[:16]}…, the recipe's calibration set "
                f"{named} has {wanted[:16]}…: not the set the importance "
                "matrix was computed on"
            )
        text = normalise(data.decode("utf-8", errors="replace"))
        for case in suite.cases:
            prompt = normalise(case.prompt)
            if len(prompt) >= MIN_CALIBRATION_MATCH_CHARS and prompt in text:
                problems.append(
                    f"the prompt of case {case.id!r} is in the calibration set {calibration.name}: "
                    "the suite would measure what the quantizer was tuned on"
                )
    elif wanted is not None:
        same = prompts_digests(suite).get(wanted)
        if same is not None:
            problems.append(
                f"the recipe's calibration set {named} (sha256 "
                f"{wanted[:16]}…) is {same}: the suite would measure what the quantizer was "
                "tuned on"
            )
    return problems


def check_calibration(
    suite: Suite, recipe_path: Path | None, calibration: Path | None, origin: str
) -> None:
    """``suite check --recipe R --calibration F``: one ``InvalidInput`` naming the overlaps of
    ``suite`` with the recipe's calibration set (nothing when there are none)."""
    from modelreg.manifests.recipe import load_recipe

    recipe = load_recipe(recipe_path) if recipe_path is not None else None
    problems = calibration_problems(suite, recipe, calibration)
    if problems:
        shown = "; ".join(problems[:PROBLEMS_SHOWN])
        more = len(problems) - PROBLEMS_SHOWN
        raise InvalidInput(
            f"{origin}: {shown}" + (f" (and {more} more)" if more > 0 else ""),
            "evaluate on prompts the calibration set does not hold",
        )
