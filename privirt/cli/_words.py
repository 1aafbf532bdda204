"""Library messages in command-line words.

The library's errors are written for Python callers and name the keyword to pass, often
with the flag beside it: ``pass items=[...] (CLI: --items)``.  On the command line only the
flag means anything, so :func:`cli_text` keeps the flag and drops the Python spelling, and
rewrites the few Python names that have no ``(CLI: ...)`` twin.
"""

from __future__ import annotations

import re

__all__ = ["cli_text", "cli_message", "NON_PRIVATE_COMMANDS"]

#: the commands where leaving out --epsilon gives the non-private estimate (``privirt estimate``);
#: only there does the library's "no non-private path (use spectral_estimate instead)" become
#: that advice
NON_PRIVATE_COMMANDS = frozenset({"estimate"})

_NO_NON_PRIVATE = re.compile(r"privirt has no non-private path through its private functions "
                             r"\(use spectral_estimate instead\)")
#: the library's advice where the command has a non-private path
_NON_PRIVATE_RULES: list[tuple[re.Pattern[str], str]] = [
    (_NO_NON_PRIVATE, "for the non-private estimate leave out --epsilon"),
    (re.compile(r"use spectral_estimate instead"), "leave out --epsilon for the non-private estimate"),
]
#: ... and where it has none (``privirt serve``'s budgets and allowances): the advice is dropped
_PRIVATE_ONLY_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r";? ?" + _NO_NON_PRIVATE.pattern), ""),
    (re.compile(r";? ?\(?use spectral_estimate instead\)?"), ""),
]

#: Python keyword -> the command-line flag that sets it
_FLAGS = {
    "items": "--items",
    "n_persons": "--n-persons",
    "epsilon": "--epsilon",
    "delta": "--delta",
    "person_col": "--person-col",
    "item_col": "--item-col",
    "response_col": "--response-col",
    "weights": "--weights-col",
    "regularization": "--regularization",
    "missing": "--missing",
    "p0": "--p0",
    "n_boot": "--n-boot",
    "mechanism": "--mechanism",
    "method": "--method",
    "estimator": "--estimator",
    "engine": "--engine",
    "drop_cols": "--drop-cols",
}

#: the samplers' (privirt gibbs / mh) Python names of the schedule -> their flags
_SAMPLER_FLAGS = {"n_chains": "--chains", "n_iter": "--iter", "warmup": "--warmup", "thin": "--thin"}

_RULES: list[tuple[re.Pattern[str], str]] = [
    # the long table's column names (the library lists its three keywords, then the flags)
    (re.compile(r"name yours with person_col=, item_col=, response_col= \(CLI: ([^)]+)\)"), r"name yours with \1"),
    # "as items=[...] (CLI: --items)", "weights='frequency' (CLI: --weights-col frequency)",
    # "regularization > 0 (CLI: --regularization 1)": keep the flag only
    (re.compile(r"\b[a-z_]+(?:=| [<>]=? )(?:'[^']*'|\"[^\"]*\"|\S*?) \(CLI: ([^)]+)\)"), r"\1"),
    # "the public number of persons (CLI: --n-persons)"
    (re.compile(r"\(CLI: ([^)]+)\)"), r"(\1)"),
    (re.compile(r"engine='dask'"), "--engine dask"),
    # the Andersen test's advice (fit/andersen.py) names the score split not used; the CLI splits
    # by score only
    (re.compile(r"split differently \(e\.g\. split='(median|mean)' or a covariate\)"),
     r"split differently (--andersen \1)"),
    (re.compile(r"split by a covariate \(one group label per person\)"),
     "split by a covariate (privirt.andersen_test's split= in Python)"),
    (re.compile(r"pass device=\"cpu\""), "pass --device cpu"),
    # the ledger's lock (private/ledger.py): the CLI opens ledgers with the default timeout
    (re.compile(r"retry, or open the ledger with a longer timeout="),
     "retry once the other run has finished"),
    # ... and a missing ledger's advice names the Python constructor beside the command
    (re.compile(r"create one with Ledger\(path, epsilon=\.\.\., delta=\.\.\.\) or `privirt budget init"),
     "create one with `privirt budget init"),
    (re.compile(r"use spectral_estimate \(regularised\)"), "use --method spectral (regularised)"),
    # 'priors={"b": (0.0, 4.0)}' -> "--prior-b 0.0 4.0" (privirt gibbs / mh)
    (re.compile(r"priors=\{\"([ab])\": \(([-\d.e]+), ([-\d.e]+)\)\}"), r"--prior-\1 \2 \3"),
    # "`items`" -> "--items"
    (re.compile(r"`([a-z_]+)`"), lambda m: _FLAGS.get(m.group(1), m.group(0))),
    # "n_persons=2000" -> "--n-persons 2000"
    (re.compile(r"\b(n_persons|person_col|item_col|response_col)=(\S+)"),
     lambda m: f"{_FLAGS[m.group(1)]} {m.group(2)}"),
    # "pass n_boot=0 or use mechanism='gaussian'" -> "pass --n-boot 0 or use --mechanism gaussian"
    (re.compile(r"\b(n_boot|mechanism|method|estimator|missing|engine)=(?:'([^']*)'|\"([^\"]*)\"|([\w.]+))"),
     lambda m: f"{_FLAGS[m.group(1)]} {m.group(2) or m.group(3) or m.group(4)}"),
    # "or 'laplace'" after a flag's value: "--mechanism gaussian or 'laplace'" -> "... or laplace"
    (re.compile(r"(--\w[\w-]* \w+) or '(\w+)'"), r"\1 or \2"),
    # the totals method's refusal of missing cells (the Dask path, where the CLI does not word it)
    (re.compile(r"private_totals_estimate/release_totals were told"), "the totals method was run with"),
    (re.compile(r"privirt\.private_spectral_estimate"), "--method spectral"),
    # "epsilon must be a finite number" -> "--epsilon must be ..."; "n_boot must be 0 (no ...)"
    (re.compile(r"^(epsilon|delta|n_persons|p0|n_boot) must\b"), lambda m: f"{_FLAGS[m.group(1)]} must"),
    # "epsilon=1e-320 is below ...; choose epsilon >= 1e-06" (private/accounting.py)
    (re.compile(r"^(epsilon|delta)=(\S+) is below\b"), lambda m: f"{_FLAGS[m.group(1)]} {m.group(2)} is below"),
    (re.compile(r"\bchoose (epsilon|delta) >="), lambda m: f"choose {_FLAGS[m.group(1)]} >="),
    # "p0 = 1e-320 is too small ...; use p0 >= 0.483 (p0='auto') or larger" (the comparison graph)
    (re.compile(r"^p0 = (\S+) is too small\b"), r"--p0 \1 is too small"),
    (re.compile(r"\buse p0 >= (\S+) \(p0='auto'\)"), r"use --p0 >= \1 (--p0 auto)"),
    # "drop_cols names 'x', not a column of the table" (data/_labels.py)
    (re.compile(r"^drop_cols names\b"), "--drop-cols names"),
    # "person_col 'nope' is not a column of the table", "drop_cols 'x' names two columns"
    (re.compile(r"\b(person_col|item_col|response_col|drop_cols) (?=')"), lambda m: f"{_FLAGS[m.group(1)]} "),
    # the samplers' schedule (bayes/schedule.py): "n_chains must be at least 1, got 0"
    (re.compile(r"^(n_chains|n_iter|warmup|thin) must be at least\b"),
     lambda m: f"{_SAMPLER_FLAGS[m.group(1)]} must be at least"),
    (re.compile(r"^warmup \((\d+)\) must be smaller than n_iter \((\d+)\); n_iter counts all "
                r"iterations including the warmup \(e\.g\. n_iter=10000, warmup=5000\)"),
     r"--warmup (\1) must be smaller than --iter (\2); --iter counts all iterations including "
     r"the warmup (e.g. --iter 10000 --warmup 5000)"),
    (re.compile(r"^thin=(\d+) is larger than the (\d+) post-warmup iterations; lower thin or raise n_iter"),
     r"--thin \1 is larger than the \2 post-warmup iterations; lower --thin or raise --iter"),
    # "priors['a'] needs ...", "priors['theta'] = (0.0, 0.0): ...", "the mean of priors['b'] is ..."
    (re.compile(r"\bpriors\['(theta|a|b)'\](?: =)?"), r"--prior-\1"),
    # "proposal_sd for theta must be finite and positive" (privirt mh's --proposal-sd THETA A B)
    (re.compile(r"^proposal_sd for (theta|a|b)\b"), lambda m: f"--proposal-sd {m.group(1).upper()}"),
    (re.compile(r"^seed must be a non-negative integer, a numpy SeedSequence or None\b"),
     "--seed must be a non-negative integer"),
]


def cli_text(text: str, *, non_private: bool = True) -> str:
    """``text`` (one line) with Python spellings replaced by command-line flags.

    Parameters
    ----------
    text : str
        One line of the library.
    non_private : bool, default True
        Whether the command has a non-private path (leaving out ``--epsilon``: see
        :data:`NON_PRIVATE_COMMANDS`); without one, the library's advice to take it is dropped.
    """
    for pattern, repl in (_NON_PRIVATE_RULES if non_private else _PRIVATE_ONLY_RULES) + _RULES:
        text = pattern.sub(repl, text)
    return text


def cli_message(exc: BaseException, *, flags: bool = True, non_private: bool = True) -> str:
    """The one line a command prints for ``exc`` (``flags=False``: keep the library's names,
    as ``privirt sweep`` does, whose configuration spells its keys as the library does;
    ``non_private``: as for :func:`cli_text`)."""
    if isinstance(exc, FileNotFoundError) and exc.filename and exc.strerror:
        return f"no such file or folder: {exc.filename}"
    text = " ".join((str(exc).strip() or type(exc).__name__).split())
    return cli_text(text, non_private=non_private) if flags else text
