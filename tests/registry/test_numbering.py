"""Records without a number (rows an import brought in) get their model's next numbers, in
the order they were added, after the highest the model already has."""

from __future__ import annotations

from pathlib import Path

from sqlmodel import Session, col, select

import modelreg
from modelreg.registry.tables import RecordRow
from modelreg.registry.writes import number_records
from tests.helpers import add_synthetic


def test_unnumbered_records_continue_their_models_numbers(tmp_path: Path) -> None:
    registry = modelreg.open(f"sqlite:///{tmp_path / 'r.db'}")
    a = [add_synthetic(registry, i, "acme/a") for i in (1, 2, 3)]
    b = [add_synthetic(registry, i, "acme/b") for i in (4, 5)]
    with Session(registry.store.engine) as session:
        for row in session.exec(select(RecordRow).where(col(RecordRow.id).in_(a[1:] + b))):
            row.version = None  # as an import of an older export leaves them
            session.add(row)
        session.commit()
        number_records(session)
        session.commit()
    assert [registry.get(r).handle for r in a] == ["acme/a@v1", "acme/a@v2", "acme/a@v3"]
    assert [registry.get(r).handle for r in b] == ["acme/b@v1", "acme/b@v2"]
