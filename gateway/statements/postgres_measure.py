"""The reads that measure a PostgreSQL write's effect, derived from its tree and checked by parsing them back.

    DELETE / UPDATE ... [USING | FROM ...] WHERE p   SELECT count(*) FROM target [, the others] WHERE p
                                                     (with other tables: the distinct target rows, as PostgreSQL
                                                     changes a target row once however many rows it joins)
    INSERT ... VALUES (..), (..)                     the rows given, no read
    INSERT ... SELECT q                              SELECT count(*) FROM (q) AS source
    TRUNCATE t, u / DROP TABLE t / ALTER TABLE t     the rows in those tables
    CREATE TABLE, CREATE INDEX                       none change (0); CREATE TABLE ... AS q: the rows of q

The fingerprint (DELETE, UPDATE, whole tables) is an md5 over the sorted identities of the rows the write will
touch: ``tableoid:ctid:xmin``. A ctid is where a row version lives; PostgreSQL gives a row a new ctid whenever it
is updated, so a fingerprint taken at preview and again just before the write changes when any affected row was
updated, deleted or added in between (xmin tells a new row that reuses a freed ctid from the old one; tableoid
tells rows of two partitions apart). A table rewrite (VACUUM FULL, CLUSTER) moves every row too: then the plan
reads as stale and is previewed again, never as fresh. It needs no primary key and no catalog read, and it costs
what the count costs: one pass over the same rows.

A write is not measured (the reason is said) when the number could differ from what it then touches: a WITH
query, RETURNING (rows rather than a count), ON CONFLICT (which rows exist decides between insert and update),
WHERE CURRENT OF (a cursor's position), a random function or TABLESAMPLE deciding the rows, CASCADE (dependants
a parser cannot see), DDL other than the forms above. Triggers and foreign keys with ON DELETE CASCADE act
beyond any parser's sight: the number is what the statement itself names.

Helper functions are written ``pg_catalog.count`` and so on, so a function of the same name earlier on a
search path cannot stand in for them (COALESCE is syntax, not a function, and needs no schema).
"""

from __future__ import annotations

import pglast
from pglast import ast, parser
from pglast.enums import DropBehavior, ObjectType

from gateway.statements.model import Measure, StatementClass
from gateway.statements.postgres_tree import function_name, nodes, printed, walk

VOLATILE = frozenset(
    {
        "random",
        "random_normal",
        "setseed",
        "gen_random_uuid",
        "uuidv4",
        "uuidv7",
        "uuid_generate_v1",
        "uuid_generate_v1mc",
        "uuid_generate_v4",
        "clock_timestamp",
        "timeofday",
    }
)
"""Functions whose value differs from one call to the next: deciding the rows with one makes any count a guess."""

ROW_KEY = "pg_catalog.concat_ws(':', {ref}.tableoid, {ref}.ctid, {ref}.xmin)"
FINGERPRINT = (
    "SELECT pg_catalog.count(*) AS rows, "
    "COALESCE(pg_catalog.md5(pg_catalog.string_agg(affected.k, ',' ORDER BY affected.k)), '') "
    "AS fingerprint FROM ({rows}) AS affected"
)


def measure(statement: ast.Node, kind: StatementClass) -> Measure | str:
    """The measure of a write, or the sentence saying why it cannot be measured honestly."""
    try:
        return _measure(statement, kind)
    except parser.ParseError:  # a derived read libpg_query cannot read back: no honest measure
        return "the measuring read would not parse; write the statement more plainly"


def _measure(statement: ast.Node, kind: StatementClass) -> Measure | str:
    if isinstance(statement, (ast.DeleteStmt, ast.UpdateStmt)):
        return _matched(statement)
    if isinstance(statement, ast.InsertStmt):
        return _inserted(statement)
    if isinstance(statement, ast.TruncateStmt):
        if statement.behavior == DropBehavior.DROP_CASCADE:
            return "TRUNCATE ... CASCADE also empties tables that refer to these; name every table instead"
        return _table_rows(tuple(node for node in nodes(statement.relations) if isinstance(node, ast.RangeVar)))
    return _ddl(statement, kind)


def _matched(statement: ast.DeleteStmt | ast.UpdateStmt) -> Measure | str:
    refused = _unmeasured_write(statement)
    if refused:
        return refused
    others = statement.usingClause if isinstance(statement, ast.DeleteStmt) else statement.fromClause
    target = statement.relation
    assert target is not None
    items = (target, *nodes(others))
    where = statement.whereClause
    if isinstance(where, ast.CurrentOfExpr):
        return "WHERE CURRENT OF depends on a cursor's position, which a preview cannot hold"
    decided_by = (*items, *nodes(where))
    if random := _random(decided_by):
        return f"{random} decides which rows change, so a count taken now would not be the count then"
    rows_from = f"FROM {', '.join(printed(item) for item in items)}" + (f" WHERE {printed(where)}" if where else "")
    ref = printed(ast.ColumnRef(fields=_reference(target)))
    if len(items) == 1:
        count = f"SELECT pg_catalog.count(*) {rows_from}"
    else:
        count = f"SELECT pg_catalog.count(*) FROM (SELECT DISTINCT {ref}.tableoid, {ref}.ctid {rows_from}) AS affected"
    fingerprint = FINGERPRINT.format(rows=f"SELECT DISTINCT {ROW_KEY.format(ref=ref)} AS k {rows_from}")
    for read in (count, fingerprint):
        if not _reads_rows(read, items, where):
            return "the measuring read would not select the same rows; write the statement more plainly"
    return Measure(unit="rows matched", count_sql=count, fingerprint_sql=fingerprint)


def _inserted(statement: ast.InsertStmt) -> Measure | str:
    refused = _unmeasured_write(statement)
    if refused:
        return refused
    if statement.onConflictClause is not None:
        return "ON CONFLICT turns an insert into an update or nothing, depending on rows a preview cannot hold"
    source = statement.selectStmt
    if source is None:
        return Measure(unit="rows given", given=1)
    assert isinstance(source, ast.SelectStmt)
    if source.valuesLists and _only_values(source):
        return Measure(unit="rows given", given=len(source.valuesLists))
    return _selected(source)


def _selected(source: ast.SelectStmt) -> Measure | str:
    if random := _random((source,)):
        return f"{random} decides which rows are selected, so a count taken now would not be the count then"
    count = f"SELECT pg_catalog.count(*) FROM ({printed(source)}) AS source"
    parsed = pglast.parse_sql(count)[0].stmt
    assert isinstance(parsed, ast.SelectStmt)
    inner = next(nodes(parsed.fromClause))
    if not (isinstance(inner, ast.RangeSubselect) and inner.subquery == source):
        return "the measuring read would not select the same rows; write the statement more plainly"
    return Measure(unit="rows selected", count_sql=count)


def _table_rows(relations: tuple[ast.RangeVar, ...]) -> Measure | str:
    if not relations:
        return "it names no table whose rows could be counted"
    count = "SELECT " + " + ".join(f"(SELECT pg_catalog.count(*) FROM {printed(table)})" for table in relations)
    keys = " UNION ALL ".join(
        f"SELECT {ROW_KEY.format(ref=printed(ast.ColumnRef(fields=_reference(table))))} AS k FROM {printed(table)}"
        for table in relations
    )
    return Measure(unit="rows in the table", count_sql=count, fingerprint_sql=FINGERPRINT.format(rows=keys))


def _ddl(statement: ast.Node, kind: StatementClass) -> Measure | str:
    if isinstance(statement, (ast.CreateStmt, ast.IndexStmt)):
        return Measure(unit="rows changed", given=0)
    if isinstance(statement, ast.CreateTableAsStmt) and statement.objtype == ObjectType.OBJECT_TABLE:
        assert statement.into is not None
        if statement.into.skipData or not isinstance(statement.query, ast.SelectStmt):
            return Measure(unit="rows changed", given=0)
        return _selected(statement.query)
    if isinstance(statement, ast.AlterTableStmt) and statement.objtype == ObjectType.OBJECT_TABLE:
        assert statement.relation is not None
        return _table_rows((statement.relation,))
    if isinstance(statement, ast.RenameStmt) and statement.renameType in RENAMED and statement.relation:
        return _table_rows((statement.relation,))
    if isinstance(statement, ast.DropStmt) and statement.removeType == ObjectType.OBJECT_TABLE:
        if statement.behavior == DropBehavior.DROP_CASCADE:
            return "DROP ... CASCADE also drops what depends on the table (views, keys), which a parser cannot see"
        return _table_rows(tuple(_range_var(name) for name in statement.objects or () if isinstance(name, tuple)))
    return f"{kind} of this form ({type(statement).__name__}) has no measure here; a person cannot weigh it by rows"


RENAMED = (ObjectType.OBJECT_TABLE, ObjectType.OBJECT_COLUMN)


def _unmeasured_write(statement: ast.DeleteStmt | ast.UpdateStmt | ast.InsertStmt) -> str | None:
    if statement.withClause is not None:
        return "a write with WITH is not measured; put the WITH query in a subquery of the write"
    if statement.returningClause is not None:
        return "RETURNING turns a write into a read of unbounded rows; read the rows with a query, then write"
    if any(isinstance(node, ast.RangeTableSample) for node in walk(statement)):
        return "TABLESAMPLE decides the rows at random, so a count taken now would not be the count then"
    return None


def _random(parts: tuple[ast.Node, ...]) -> str | None:
    for node in walk(parts):
        if isinstance(node, ast.FuncCall) and function_name(node).rpartition(".")[2].casefold() in VOLATILE:
            return f"{function_name(node)}()"
    return None


def _only_values(select: ast.SelectStmt) -> bool:
    """A bare VALUES list: no ORDER BY, LIMIT, OFFSET or WITH that could change how many rows it gives."""
    return not (select.sortClause or select.limitCount or select.limitOffset or select.withClause)


def _reference(table: ast.RangeVar) -> tuple[ast.String, ...]:
    """How the statement refers to its target: its alias, else its (schema-qualified) name."""
    if table.alias is not None:
        return (ast.String(sval=table.alias.aliasname),)
    return tuple(ast.String(sval=part) for part in (table.schemaname, table.relname) if part)


def _range_var(name: tuple[ast.Node, ...]) -> ast.RangeVar:
    parts = [str(part.sval) for part in name if isinstance(part, ast.String)]
    return ast.RangeVar(
        schemaname=parts[-2] if len(parts) > 1 else None, relname=parts[-1], inh=True, relpersistence="p"
    )


def _reads_rows(read: str, items: tuple[ast.Node, ...], where: ast.Node | None) -> bool:
    """Whether PostgreSQL reads the derived text as a query over exactly the write's tables and condition."""
    for node in walk(pglast.parse_sql(read)[0].stmt):
        if isinstance(node, ast.SelectStmt) and tuple(nodes(node.fromClause)) == items and node.whereClause == where:
            return True
    return False
