"""The reads that measure a SQLite write's effect, derived from sqlglot's tree and checked by parsing them back.

    DELETE / UPDATE ... [FROM ...] WHERE p   SELECT COUNT(*) FROM target [, the others] WHERE p
                                             (with other tables: the distinct target rowids)
    INSERT ... VALUES (..), (..)             the rows given, no read
    INSERT ... SELECT q                      SELECT COUNT(*) FROM (q) AS source
    DROP TABLE t / ALTER TABLE t             the rows in the table
    CREATE TABLE, CREATE INDEX               none change (0); CREATE TABLE ... AS q: the rows of q

SQLite has no built-in hash function, so no fingerprint read: the count is the plan's only measure. Not measured
(the reason is said): a WITH query, RETURNING, an upsert (ON CONFLICT, INSERT OR REPLACE and the other OR forms,
which delete or skip rows depending on what exists), DELETE or UPDATE with ORDER BY or LIMIT, a random function
deciding the rows, views and triggers.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from gateway.statements.model import Measure, StatementClass

RANDOM = ("random", "randomblob")
DIALECT = "sqlite"


def measure(statement: exp.Expr, kind: StatementClass) -> Measure | str:
    """The measure of a write, or the sentence saying why it cannot be measured honestly."""
    try:
        return _measure(statement, kind)
    except SqlglotError:  # a derived read sqlglot cannot read back: no honest measure
        return "the measuring read would not parse; write the statement more plainly"


def _measure(statement: exp.Expr, kind: StatementClass) -> Measure | str:
    if isinstance(statement, (exp.Delete, exp.Update)):
        return _matched(statement)
    if isinstance(statement, exp.Insert):
        return _inserted(statement)
    if isinstance(statement, exp.TruncateTable):
        return _table_rows([node for node in statement.expressions if isinstance(node, exp.Table)])
    if isinstance(statement, exp.Drop) and str(statement.args.get("kind")).upper() == "TABLE":
        if statement.args.get("cascade"):
            return "DROP ... CASCADE also drops what depends on the table, which a parser cannot see"
        return _table_rows([node for node in statement.args.get("tables") or () if isinstance(node, exp.Table)])
    if isinstance(statement, exp.Alter) and str(statement.args.get("kind")).upper() == "TABLE":
        return _table_rows([statement.this] if isinstance(statement.this, exp.Table) else [])
    if isinstance(statement, exp.Create) and str(statement.args.get("kind")).upper() in ("TABLE", "INDEX"):
        source = statement.expression
        if isinstance(source, exp.Query):
            return _selected(source)
        return Measure(unit="rows changed", given=0)
    return f"{kind} of this form ({type(statement).__name__}) has no measure here; a person cannot weigh it by rows"


def _matched(statement: exp.Delete | exp.Update) -> Measure | str:
    refused = _unmeasured_write(statement)
    if refused:
        return refused
    if statement.args.get("order") or statement.args.get("limit"):
        return "ORDER BY and LIMIT in a write pick rows a count of the condition would not; write a condition"
    target = statement.this
    if not isinstance(target, exp.Table):
        return "its target is not a plain table"
    where = statement.args.get("where")
    others = statement.args.get("from_")
    if random := _random(where, others):
        return f"{random} decides which rows change, so a count taken now would not be the count then"
    condition = f" {where.sql(dialect=DIALECT)}" if isinstance(where, exp.Where) else ""
    if isinstance(others, exp.From):
        reference = target.alias_or_name if target.alias else target.sql(dialect=DIALECT)
        joined = f"{target.sql(dialect=DIALECT)}, {others.this.sql(dialect=DIALECT)}"
        count = f"SELECT COUNT(*) FROM (SELECT DISTINCT {reference}.rowid FROM {joined}{condition}) AS affected"
    else:
        count = f"SELECT COUNT(*) FROM {target.sql(dialect=DIALECT)}{condition}"
    if not _reads_rows(count, (target, others, where)):
        return "the measuring read would not select the same rows; write the statement more plainly"
    return Measure(unit="rows matched", count_sql=count)


def _inserted(statement: exp.Insert) -> Measure | str:
    refused = _unmeasured_write(statement)
    if refused:
        return refused
    if statement.args.get("conflict") or statement.args.get("alternative"):
        return "an upsert (ON CONFLICT, INSERT OR ...) inserts, replaces or skips depending on rows that exist"
    source = statement.expression
    if statement.args.get("default") or source is None:
        return Measure(unit="rows given", given=1)
    if isinstance(source, exp.Values):
        return Measure(unit="rows given", given=len(source.expressions))
    if isinstance(source, exp.Query):
        return _selected(source)
    return "its rows come from a form of statement that is not measured here"


def _selected(source: exp.Query) -> Measure | str:
    if random := _random(source):
        return f"{random} decides which rows are selected, so a count taken now would not be the count then"
    count = f"SELECT COUNT(*) FROM ({source.sql(dialect=DIALECT)}) AS source"
    parsed = sqlglot.parse_one(count, read=DIALECT)
    inner = parsed.find(exp.Subquery)
    if inner is None or inner.this != source:
        return "the measuring read would not select the same rows; write the statement more plainly"
    return Measure(unit="rows selected", count_sql=count)


def _table_rows(relations: list[exp.Table]) -> Measure | str:
    if not relations:
        return "it names no table whose rows could be counted"
    parts = [f"(SELECT COUNT(*) FROM {table.sql(dialect=DIALECT)})" for table in relations]
    return Measure(unit="rows in the table", count_sql="SELECT " + " + ".join(parts))


def _unmeasured_write(statement: exp.Expr) -> str | None:
    if statement.args.get("with_"):
        return "a write with WITH is not measured; put the WITH query in a subquery of the write"
    if statement.args.get("returning"):
        return "RETURNING turns a write into a read of unbounded rows; read the rows with a query, then write"
    return None


def _random(*parts: exp.Expr | None) -> str | None:
    for part in parts:
        for node in part.walk() if part is not None else ():
            if isinstance(node, exp.Rand) or (isinstance(node, exp.Anonymous) and node.name.lower() in RANDOM):
                return f"{node.sql(dialect=DIALECT)}"
    return None


def _reads_rows(read: str, parts: tuple[exp.Expr | None, ...]) -> bool:
    """Whether sqlglot reads the derived text as a query over the write's tables and condition."""
    where = parts[-1]
    parsed = sqlglot.parse_one(read, read=DIALECT)
    inner = [node for node in parsed.find_all(exp.Select) if node.args.get("where") == where]
    named = sorted(
        table.sql(dialect=DIALECT) for part in parts if part is not None for table in part.find_all(exp.Table)
    )
    return bool(inner) and sorted(table.sql(dialect=DIALECT) for table in inner[0].find_all(exp.Table)) == named
