"""Walking a libpg_query tree (pglast): its nodes, its tables with WITH names in scope, names printed back.

Iterative, so a deeply nested expression costs a long loop, never Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Iterator

from pglast import ast
from pglast.stream import RawStream

from gateway.statements.model import Table
from gateway.statements.refusals import Refusal, StatementRefused


def nodes(value: object) -> Iterator[ast.Node]:
    """The nodes in a value: the node itself, or every node of a (nested) tuple."""
    if isinstance(value, ast.Node):
        yield value
    elif isinstance(value, tuple):
        for item in value:
            yield from nodes(item)


def children(node: ast.Node, skip: str | None = None) -> Iterator[ast.Node]:
    """The node's direct children, in the order of its fields (``skip`` leaves one field out)."""
    for name in node:
        if name != skip:
            yield from nodes(getattr(node, name))


def walk(top: object) -> Iterator[ast.Node]:
    """Every node under ``top`` (a node or a tuple of them), itself included."""
    pending = list(nodes(top))
    while pending:
        node = pending.pop()
        yield node
        pending.extend(children(node))


def table(node: ast.RangeVar) -> Table:
    """The table a range variable names (a name with a database in front is refused: it is not one we model)."""
    if node.catalogname:
        raise StatementRefused(
            Refusal.NOT_UNDERSTOOD,
            f"the name {printed(node)} names a database; name the table as schema.table or table",
        )
    return Table(node.schemaname or None, str(node.relname))


def tables(top: ast.Node) -> frozenset[Table]:
    """Every table the statement names, a WITH query's name excepted where it is in scope.

    A WITH query is visible to the main statement and to the WITH queries after it (to all of them under
    RECURSIVE), and only as an unqualified name: ``WITH tenants AS (SELECT * FROM secrets) ...`` names
    ``secrets``, and ``WITH secrets AS (SELECT * FROM secrets)`` still names the table inside its own body."""
    found: set[Table] = set()
    pending: list[tuple[ast.Node, frozenset[str]]] = [(top, frozenset())]
    while pending:
        node, scope = pending.pop()
        if isinstance(node, ast.RangeVar):
            if node.schemaname or node.catalogname or node.relname not in scope:
                found.add(table(node))
            continue
        with_clause = getattr(node, "withClause", None)
        if isinstance(with_clause, ast.WithClause):
            queries = [query for query in nodes(with_clause.ctes) if isinstance(query, ast.CommonTableExpr)]
            names = [str(query.ctename) for query in queries]
            for index, query in enumerate(queries):
                visible = names if with_clause.recursive else names[:index]
                pending.append((query, scope | frozenset(visible)))
            pending.extend((child, scope | frozenset(names)) for child in children(node, skip="withClause"))
            continue
        pending.extend((child, scope) for child in children(node))
    return frozenset(found)


def function_name(call: ast.FuncCall) -> str:
    """A called function's name as written, schema-qualified where it was (``pg_catalog.nextval``)."""
    return ".".join(str(part.sval) for part in nodes(call.funcname) if isinstance(part, ast.String))


def printed(node: ast.Node) -> str:
    """A node printed back as PostgreSQL text (pglast's printer, which libpg_query reads back to the same tree)."""
    return str(RawStream()(node))
