"""PostgreSQL's walk by the priors: a source of recall's ranking that reads a set of the scope's
records newest-confirmed first, a page at a time, and yields each row once no unread row can beat
it (`memory.engine.postgres.ranking` builds the statement it pages through).

A row read later was confirmed no later than the last one read, so it can add no more recency
than that row did, and no more from the words than the walk's lexical bound: its score is at most
the static bound (the priors' bound without recency, plus the lexical bound) plus the recency of
the last row read. Of each page only its best rows are loaded at first; the rest of the page
waits under the score of its best row not loaded, and is read before any row it could beat is
yielded. With a `give_up`: once `budget` rows are read, or a page ends with the best row in hand
unable to beat even a record confirmed long ago (so nothing could be yielded before the walk's
end), the rest comes from `give_up(position, rows read and not yielded)`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator
from typing import Any

from memory.engine._ranking import ORDER_SQL, fetch, ranked
from memory.search.ranking import Ranked

KEYSET = "(d.confirmed_at, d.record_id) < (%(after_at)s::timestamptz, %(after_id)s::uuid)"  # older than a walk's position
FROM_KEYSET = "(d.confirmed_at, d.record_id) >= (%(last_at)s::timestamptz, %(last_id)s::uuid)"  # down to a page's last row
# What Python loads of a row: the id as text (only the rows yielded become UUIDs, in `ranked`),
# and confirmed_at as text too, which with the id is a page's keyset.
LOADED = "p.record_id::text, p.lexical, p.authority, p.confidence, p.recency, p.confirmed_at, p.at::text"

Position = tuple[str, str]  # (confirmed_at as text, record id as text) of a row: where a walk stands
GiveUp = Callable[[Position, list[Ranked]], Iterator[Ranked]]


class PriorsWalk:
    """One walk. `rows_sql` selects the set's rows scored (as `ranked` reads them, plus
    `confirmed_at AS at`) newest-confirmed first, with a `{range}` slot for the keyset conditions;
    `params` are its parameters. Iterate it once."""

    def __init__(
        self,
        rows_sql: str,
        params: dict[str, Any],
        *,
        static_bound: float,
        page: int,
        page_best: int,
        after: Position | None = None,
        budget: int | None = None,
        give_up: GiveUp | None = None,
    ) -> None:
        # A page returns its `page_best` best rows and the next best (whose score bounds the rest,
        # read only if the walk needs them), its last row (the walk's position) and how many it
        # read: most of a page is never yielded, and loading a whole page into Python costs more
        # than reading it. (Top-N sorts of the page: a full sort of it costs as much as reading it.)
        self.page_sql = (
            f"WITH p AS MATERIALIZED ({rows_sql} LIMIT %(limit)s) "
            f"(SELECT {LOADED}, (SELECT count(*) FROM p), false FROM p {ORDER_SQL} LIMIT %(best)s + 1) UNION ALL "
            f"(SELECT {LOADED}, (SELECT count(*) FROM p), true FROM p ORDER BY p.at, p.record_id LIMIT 1)"
        )
        self.held_sql = f"SELECT {LOADED} FROM ({rows_sql}) p"
        self.params = {**params, "limit": page, "best": page_best}
        self.static_bound = static_bound
        self.page, self.page_best = page, page_best
        self.budget, self.give_up = budget, give_up
        self.start = self.after = after  # where the walk began; where it stands
        # Rows wait as raw tuples under Ranked.sort_key's order (the score summed as Ranked sums
        # it, the id as text as it compares them): only the rows yielded become Ranked.
        self.pending: list[tuple[tuple, tuple]] = []
        self.pushed: set[str] = set()  # ids of the rows put in `pending`
        # Pages whose rows past their best wait unread: (the most any of them scores, the page's
        # range: the position before it (None: the walk's start) and its last row's).
        self.held: list[tuple[float, Position | None, Position]] = []
        self.read = 0  # rows the pages have read
        self.unread_bound = math.inf  # the most a row not yet read can score
        self.exhausted = False  # the last page was the set's last
        self.checked = True  # whether giving up has been considered since the last page

    def __iter__(self) -> Iterator[Ranked]:
        while True:
            best = -self.pending[0][0][0] if self.pending else -math.inf
            held_bound = self.held[0][0] if self.held else -math.inf
            if best > self.unread_bound and best > held_bound:
                yield ranked(heapq.heappop(self.pending)[1])
            elif self.held and held_bound >= self.unread_bound:  # the rows a page held back may come first
                _, newer, last = self.held.pop(0)
                self._read_held(newer, last)
            elif self.exhausted:
                return
            elif self._gives_up(best, held_bound):
                yield from self._hand_over()
                return
            else:
                self._read_page()

    def _gives_up(self, best: float, held_bound: float) -> bool:
        """Whether to hand over to `give_up` now: its budget is spent, or no row in hand can beat
        even an unread row confirmed long ago."""
        if self.checked:
            return False
        spent = self.budget is not None and self.read >= self.budget
        return spent or bool((self.pending or self.held) and max(best, held_bound) <= self.static_bound)

    def _hand_over(self) -> Iterator[Ranked]:
        """Every row read and not yielded goes on with the rest, which `give_up` provides."""
        assert self.give_up is not None and self.after is not None  # a page was read with a give_up
        if self.held:
            self._read_held(self.start, self.after)
        return self.give_up(self.after, [ranked(row) for _, row in sorted(self.pending)])

    def _read_page(self) -> None:
        """The next page: its best rows go into `pending`, the rest of it is held back under the
        score of its best row not loaded, and the walk moves to its last row."""
        after = self.after
        page = fetch(
            self.page_sql.format(range=f" AND {KEYSET}" if after else ""),
            {**self.params, "after_at": after[0], "after_id": after[1]} if after else self.params,
        )
        count = page[0][7] if page else 0
        self.read += count
        self.exhausted = count < self.page
        self.checked = self.give_up is None or self.exhausted
        best_rows = [row for row in page if not row[8]]  # in rank order
        self._push(best_rows[: self.page_best])
        if not count:
            self.unread_bound = -math.inf
            return
        last = page[-1]
        if len(best_rows) > self.page_best:
            self.held.append((sum(best_rows[self.page_best][1:5]), after, (last[6], last[0])))
            self.held.sort(key=lambda h: -h[0])
        self.after = (last[6], last[0])
        self.unread_bound = -math.inf if self.exhausted else self.static_bound + float(last[4])

    def _read_held(self, newer: Position | None, last: Position) -> None:
        """Every row of the range (newer than `newer`, down to `last`) not yet in hand."""
        bounds = [FROM_KEYSET] + ([KEYSET] if newer else [])
        position = {"last_at": last[0], "last_id": last[1], **({"after_at": newer[0], "after_id": newer[1]} if newer else {})}
        self._push(fetch(self.held_sql.format(range="".join(f" AND {b}" for b in bounds)), {**self.params, **position}))

    def _push(self, rows: list[tuple]) -> None:
        for row in rows:
            if row[0] not in self.pushed:
                record_id, lexical, authority, confidence, recency, confirmed = row[:6]
                key = (-(lexical + authority + confidence + recency), -lexical, -confirmed, record_id)
                heapq.heappush(self.pending, (key, row))
                self.pushed.add(row[0])
