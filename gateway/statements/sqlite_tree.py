"""Walking a sqlglot tree of a SQLite statement: its tables with WITH names in scope, its functions, its names.

SQLite compares names without regard to ASCII case, quoted or not (``"Tenants"`` is ``tenants``), and folds
nothing else, so a name is kept with its ASCII letters in lower case.
"""

from __future__ import annotations

from sqlglot import exp

from gateway.statements.model import Table
from gateway.statements.refusals import Refusal, StatementRefused

ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def folded(name: str) -> str:
    """A name as SQLite compares it: ASCII letters in lower case, every other character as it is."""
    return name.translate(ASCII_LOWER)


def table(node: exp.Table) -> Table:
    """The table a table node names (with a database in front of the schema: refused, not modelled)."""
    if node.catalog:
        raise StatementRefused(
            Refusal.NOT_UNDERSTOOD, f"the name {node.sql(dialect='sqlite')} has three parts; write schema.table"
        )
    return Table(folded(node.db) if node.db else None, folded(node.name))


def is_named_table(node: exp.Table) -> bool:
    """Whether a table node names a table (not a table-valued function such as json_each)."""
    return isinstance(node.this, exp.Identifier)


def tables(top: exp.Expr) -> frozenset[Table]:
    """Every table the statement names, a WITH query's name excepted where it is in scope (as for PostgreSQL:
    the main statement and later WITH queries see it, all of them under RECURSIVE, only unqualified)."""
    found: set[Table] = set()
    pending: list[tuple[exp.Expr, frozenset[str]]] = [(top, frozenset())]
    while pending:
        node, scope = pending.pop()
        if isinstance(node, exp.Table) and is_named_table(node) and (node.db or folded(node.name) not in scope):
            found.add(table(node))
        with_clause = node.args.get("with_")
        if isinstance(with_clause, exp.With):
            queries = [query for query in with_clause.expressions if isinstance(query, exp.CTE)]
            names = [folded(query.alias) for query in queries]
            for index, query in enumerate(queries):
                visible = names if with_clause.args.get("recursive") else names[:index]
                pending.append((query, scope | frozenset(visible)))
            pending.extend(
                (child, scope | frozenset(names)) for child in node.iter_expressions() if child is not with_clause
            )
            continue
        pending.extend((child, scope) for child in node.iter_expressions())
    return frozenset(found)


def function_name(node: exp.Func) -> str:
    """A function's name, folded as SQLite compares it: as written for one sqlglot does not know, else the name
    sqlglot prints it with."""
    if isinstance(node, exp.Anonymous):
        return folded(str(node.name))
    return folded(str(node.sql_name()))
