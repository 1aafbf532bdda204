"""How every command reads its responses file: the options and one reader.

``FILE`` may be ``-`` (comma-separated text on standard input) or a compressed CSV
(``.csv.gz``); a long table's column names are set with ``--person-col``, ``--item-col`` and
``--response-col``, and ``--drop-cols`` removes columns that are neither labels nor answers.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_long_columns", "read_responses", "public_items", "FILE_HELP"]

FILE_HELP = ("responses: .csv (also .csv.gz), .tsv or .parquet, wide or long; "
             "- reads CSV from standard input")


def add_long_columns(p: argparse.ArgumentParser) -> None:
    """``--item-col``, ``--response-col`` and ``--drop-cols`` (``--person-col`` is added by
    each command)."""
    p.add_argument("--item-col", default="item", metavar="COL",
                   help="long tables: the column with the item labels (default: item)")
    p.add_argument("--response-col", default="response", metavar="COL",
                   help="long tables: the column with the 0/1 responses (default: response)")
    p.add_argument("--drop-cols", default=None, type=column_list, metavar="COL[,COL...]",
                   help="columns to remove before the responses are read, such as text label "
                   "columns (state, party) beside the person column")


def column_list(text: str) -> list[str]:
    """The column names of ``--drop-cols a,b`` (surrounding spaces removed)."""
    names = [n.strip() for n in text.split(",")]
    if any(not n for n in names):
        raise argparse.ArgumentTypeError(f"{text!r} has an empty column name; use COL[,COL...]")
    return names


def read_responses(args: argparse.Namespace, *, private: bool = False, **kwargs: Any):
    """The validated responses of ``args.file`` with the command's layout options.

    ``private=True`` reads them as a private path must (:func:`privirt.data.responses.private_responses`:
    labels as text, empty persons and items kept, a table without rows allowed)."""
    from ..data.responses import as_responses, private_responses

    fmt = getattr(args, "format", None) or "auto"
    item_col = getattr(args, "item_col", "item")
    response_col = getattr(args, "response_col", "response")
    if fmt == "auto" and (item_col != "item" or response_col != "response"):
        fmt = "long"  # naming a long table's columns says the table is long
    kwargs.setdefault("weights", getattr(args, "weights_col", None))
    source: Any = args.file
    if args.file == "-":
        import io

        content = getattr(sys.stdin, "buffer", sys.stdin).read()
        source = io.BytesIO(content) if isinstance(content, bytes) else io.StringIO(content)
        source.name = "<stdin>"
    reader = private_responses if private else as_responses
    return reader(source, format=fmt, person_col=getattr(args, "person_col", None),
                  item_col=item_col, response_col=response_col,
                  drop_cols=getattr(args, "drop_cols", None), **kwargs)


def public_items(spec: str) -> list[str]:
    """The labels of ``--items`` (``a,b,c`` or ``@FILE``), as text.

    They are matched to the data's labels by their text, and every output (the table, the
    ``--out`` file, the statement) is labelled with them: never with the data's labels, whose
    type (``5`` or ``"5"``) a reader may infer from the rows."""
    if spec.startswith("@"):
        if spec == "@":
            raise ValueError("--items @ needs a file name: @FILE, a file with one item label a line")
        path = Path(spec[1:])
        if path.is_dir():
            raise ValueError(f"--items {spec} is a folder; give a file with one item label a line")
        if path.exists() and not path.is_file():
            raise ValueError(f"--items {spec} is not a regular file; give a file with one item label a line")
        if not path.is_file():
            raise ValueError(f"--items {spec}: no such file {path}")
        try:
            # (-sig: the BOM Notepad's and Excel's "UTF-8" write first is not part of a label)
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError:
            raise ValueError(f"--items {spec} is not UTF-8 text; save it as UTF-8") from None
        names = [line.strip() for line in text.splitlines()]
        names = [n for n in names if n]
    else:
        names = [n.strip() for n in spec.split(",")]
        if any(not n for n in names):
            raise ValueError(f"--items {spec!r}: empty label (use a,b,c or @FILE)")
    if len(names) < 2:
        raise ValueError(f"--items needs at least 2 item labels, got {names}")
    return names
