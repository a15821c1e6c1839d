"""SQLAlchemy writes in task code: Core ``insert(Model).values(..)`` and ORM ``session.add(Model(..))``.

Round 20b (issue 35): rialto-airflow's ORCID stats task runs
``session.execute(insert(OrcidIntegrationStats).values(**row))``, a row numbered by an auto-increment
id under no other key, so a rerun adds a second row; the linter read SQL text and operators only. An
insert into a model class or ``Table(..)`` of the repository is an append into its table, and the
model's declared keys are the table's keys, so IDEM002 decides as it does for SQL: a unique key the
written columns carry (not one the database numbers itself) makes a rerun fail, not append; an insert
with ``.on_conflict_do_update`` / ``.on_conflict_do_nothing`` / ``.on_duplicate_key_update``, or
``session.merge(Model(..))`` (by primary key), is an upsert. Installed classes are never read: a
model must be defined in the repository, so ``set.add(..)`` and a library's ``insert`` are not writes.

Round 32b: ``session.add_all(rows)`` of a list the same function fills with ``rows.append(Model(..))``
adds those rows (cern-sis' catalog metrics, one row per bucket, appended again by a rerun); and
``session.merge(Model(..))`` given columns that leave out the primary key the database numbers is an
insert (merge looks rows up by primary key: none given, a new row), so a unique key it writes makes a
rerun fail, as cern-sis' people counter does on its unique ``date``.

Round 21: an ORM delete is a delete of the model's table, so an add the same task makes after it
replaces rows, as SQL's delete-then-insert does (IDEM002 reads the pair as an overwrite):
``session.delete(found)`` of an object looked up through the model (``found =
VendorFile.load_with_vendor_interface(..)``, ``session.query(VendorFile)..first()``,
``session.get(VendorFile, id)``), and ``session.query(Model)..delete()`` (sul-dlss' libsys-airflow
deletes the vendor file row it then adds again, a false IDEM002 of round 21).
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.facts import TaskFacts, Write
from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.sqlfacts import TableKeys
from airflow_idempotent.lint.syntax import dotted, keywords, last_name

__all__ = ["orm_write"]

#: statement methods that make an insert an upsert (PostgreSQL/SQLite, MySQL)
_UPSERTS = frozenset({"on_conflict_do_update", "on_conflict_do_nothing", "on_duplicate_key_update"})
#: session methods that add objects: ``merge`` upserts by primary key
_ADDS = {"add": "append", "add_all": "append", "merge": "upsert"}
_INTEGER_TYPES = frozenset({"Integer", "BigInteger", "SmallInteger", "int"})


def orm_write(
    facts: TaskFacts,
    node: ast.Call,
    scope: Scope,
    parent_of: dict[ast.AST, ast.AST],
    file: str,
    conn: str | None,
) -> bool:
    """Record the write `node` makes when it is a SQLAlchemy insert or session add of a repository
    model (into ``facts.writes``, with the model's keys into ``facts.declared``); False otherwise."""
    func = node.func
    if (
        isinstance(func, ast.Attribute)
        and func.attr in ("insert", "delete")
        and not node.args
        and (core := _core_table(func.value, scope)) is not None
    ):
        return _core_write(facts, node, func.attr, core, parent_of, file, conn, scope)
    if _is_sqlalchemy_insert(func, scope) and len(node.args) == 1:
        table = _table(node.args[0], scope)
        if table is None:
            return False
        name, keys, shown = table
        chain = _chain(node, parent_of)
        how = "upsert" if any(method in _UPSERTS for method, _ in chain) else "append"
        columns = next((_columns(call, scope) for method, call in chain if method == "values"), ())
        detail = f"insert({shown})" + ("" if how == "append" else " .. on conflict")
        facts.declared.append(keys)
        facts.writes.append(Write(name, how, detail, file, node.lineno, conn, columns=columns))
        return True
    if isinstance(func, ast.Attribute) and func.attr == "delete" and not node.keywords:
        table = _deleted(node, scope)
        if table is None:
            return False
        name, _keys, shown = table
        detail = f"{dotted(func.value) or 'session'}.delete(..) of a {shown} it looked up"
        facts.writes.append(Write(name, "delete", detail, file, node.lineno, conn))
        return True
    if isinstance(func, ast.Attribute) and func.attr in _ADDS and len(node.args) == 1:
        added = node.args[0]
        items = added.elts if isinstance(added, ast.List | ast.Tuple) and func.attr == "add_all" else [added]
        if func.attr == "add_all" and isinstance(added, ast.Name):
            items = _appended(node, added.id, parent_of) or items
        found = False
        for item in items:
            value, at = scope.value(item)
            if not isinstance(value, ast.Call) or not isinstance(value.func, ast.Name):
                continue
            table = _table(value.func, at)
            if table is None:
                continue
            name, keys, shown = table
            how = "upsert" if _looked_up_first(node, value.func.id, parent_of) else _ADDS[func.attr]
            columns = _columns(value, at)
            if how == "upsert" and func.attr == "merge" and columns and keys.generated.isdisjoint(columns):
                how = "append"  # round 32b: merge finds rows by primary key; none given, it inserts
            facts.declared.append(keys)
            detail = f"{dotted(func.value) or 'session'}.{func.attr}({shown}(..))"
            facts.writes.append(Write(name, how, detail, file, node.lineno, conn, columns=columns))
            found = True
        return found
    return False


def _core_write(
    facts: TaskFacts,
    node: ast.Call,
    method: str,
    core: tuple[str, TableKeys, str, str],
    parent_of: dict[ast.AST, ast.AST],
    file: str,
    conn: str | None,
    scope: Scope,
) -> bool:
    """Round 29b: ``table.insert().values(..)`` / ``table.delete()`` of a Core ``Table(..)`` the code
    builds (reflected with ``autoload_with=engine`` too): an append, an upsert when a conflict clause
    follows or a lookup through the same table found nothing first, a delete of its rows."""
    name, keys, shown, variable = core
    if method == "delete":
        facts.writes.append(Write(name, "delete", f"{variable}.delete() of {shown}", file, node.lineno, conn))
        return True
    chain = _chain(node, parent_of)
    looked = _looked_up_first(node, variable, parent_of) or _returned_when_found(node, name, parent_of)
    how = "upsert" if looked or any(m in _UPSERTS for m, _ in chain) else "append"
    columns = next((_columns(call, scope) for m, call in chain if m == "values"), ())
    detail = f"{variable}.insert() into {shown}" + ("" if how == "append" else " .. on conflict or looked up")
    facts.declared.append(keys)
    facts.writes.append(Write(name, how, detail, file, node.lineno, conn, columns=columns))
    return True


def _appended(node: ast.AST, name: str, parent_of: dict[ast.AST, ast.AST]) -> list[ast.expr]:
    """Round 32b: the rows ``name.append(Model(..))`` adds to the list `node` (``session.add_all(name)``)
    then adds, in the function that holds both (cern-sis' ``records.append(LibraryCatalogMetrics(..))``
    in a loop, then ``session.add_all(records)``: an append of each row, as a list literal's are)."""
    fn: ast.AST | None = node
    while fn is not None and not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        fn = parent_of.get(fn)
    if fn is None:
        return []
    return [
        call.args[0]
        for call in ast.walk(fn)
        if isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and call.func.attr == "append"
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == name
        and len(call.args) == 1
    ]


def _returned_when_found(node: ast.AST, table: str, parent_of: dict[ast.AST, ast.AST]) -> bool:
    """Before `node`, its function returns when a lookup of `table`, or of another table it builds a
    ``Table(..)`` of and inserts into, found a row: ``found = session.execute("SELECT .. FROM
    s.mission ..").fetchone()`` then ``if found: .. return`` (get or create: a rerun finds the mission
    and returns before inserting it or the rows that hang on it)."""
    fn: ast.AST | None = node
    while fn is not None and not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
        fn = parent_of.get(fn)
    if fn is None:
        return False
    built = {
        arg.value
        for c in ast.walk(fn)
        if isinstance(c, ast.Call) and last_name(dotted(c.func)) == "Table" and c.args
        if isinstance(arg := c.args[0], ast.Constant) and isinstance(arg.value, str)
    }
    names = "|".join(re.escape(t) for t in sorted({table.split(".")[-1], *built}))
    word = re.compile(rf"(?<!\w)(?:\w+\.)?(?:{names})(?!\w)", re.I)
    found: set[str] = set()
    for stmt in ast.walk(fn):
        if isinstance(stmt, ast.Assign) and any(
            isinstance(c, ast.Constant) and isinstance(c.value, str) and word.search(c.value)
            for c in ast.walk(stmt.value)
        ):
            found |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
    lineno = getattr(node, "lineno", 0)
    return any(
        isinstance(stmt, ast.If)
        and stmt.lineno < lineno
        and _absent_when(stmt.test, False) in found
        and any(isinstance(n, ast.Return) for n in ast.walk(stmt))
        and not any(n is node for n in ast.walk(stmt))
        for stmt in ast.walk(fn)
    )


def _core_table(node: ast.expr, scope: Scope) -> tuple[str, TableKeys, str, str] | None:
    """The table a name assigned ``Table("name", metadata, .., schema="s")`` names (schema-qualified),
    its declared keys, how it is shown, and the name; None for anything else."""
    if not isinstance(node, ast.Name):
        return None
    value, at = scope.value(node)
    if not (isinstance(value, ast.Call) and last_name(dotted(value.func)) == "Table"):
        return None
    table = _table(node, scope)
    if table is None:
        return None
    name, keys, shown = table
    schema = at.literal(keywords(value).get("schema"))
    if isinstance(schema, str) and schema:
        name, shown = f"{schema.lower()}.{name}", f"{schema}.{shown}"
    return name, keys, shown, node.id


def _deleted(node: ast.Call, scope: Scope) -> tuple[str, TableKeys, str] | None:
    """The model whose rows ``x.delete(found)`` (`found` assigned from an expression naming a
    repository model) or ``session.query(Model)..delete()`` deletes; None for any other delete."""
    func = node.func
    assert isinstance(func, ast.Attribute)
    if len(node.args) == 1:
        source, at = scope.value(node.args[0])
        if source is None or source is node.args[0]:
            return None  # not a local assigned from a lookup: nothing says what it is
    elif not node.args:
        source, at = func.value, scope
        if not any(
            isinstance(n, ast.Call) and last_name(dotted(n.func)) == "query" for n in ast.walk(source)
        ):
            return None
    else:
        return None
    for name in (n for n in ast.walk(source) if isinstance(n, ast.Name)):
        table = _table(name, at)
        if table is not None:
            return table
    return None


def _looked_up_first(node: ast.AST, model: str, parent_of: dict[ast.AST, ast.AST]) -> bool:
    """`node` runs only when a lookup of `model` found nothing: ``found = session.query(Author)..first()``
    then ``if found is None: session.add(Author(..))``, or ``if found: .. else: session.add(..)`` (get
    or create: a rerun finds the row and adds none, as an anti-join against the target does in SQL)."""
    current: ast.AST | None = node
    looked = None
    while current is not None and (parent := parent_of.get(current)) is not None:
        if isinstance(parent, ast.FunctionDef):
            break
        if isinstance(parent, ast.If) and (current in parent.body or current in parent.orelse):
            looked = _absent_when(parent.test, current in parent.body)
            break
        current = parent
    while looked is not None and current is not None and not isinstance(current, ast.FunctionDef):
        current = parent_of.get(current)  # the function whose body the lookup is in
    if looked is None or current is None:
        return False
    return any(
        isinstance(s, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == looked for t in s.targets)
        and any(isinstance(n, ast.Name) and n.id == model for n in ast.walk(s.value))
        for s in ast.walk(current)
    )


def _absent_when(test: ast.expr, body: bool) -> str | None:
    """The name whose absence `test` checks on the branch taken (`body`: its ``if`` branch, else its
    ``else``): ``x is None`` / ``not x`` for the body, ``x`` / ``x is not None`` for the else."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _absent_when(test.operand, not body)
    if isinstance(test, ast.Name):
        return None if body else test.id
    if (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.left, ast.Name)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        if isinstance(test.ops[0], ast.Is):
            return test.left.id if body else None
        if isinstance(test.ops[0], ast.IsNot):
            return None if body else test.left.id
    return None


def _is_sqlalchemy_insert(func: ast.expr, scope: Scope) -> bool:
    """``insert`` imported from SQLAlchemy (``sqlalchemy``, its dialects), or ``sa.insert``."""
    name = dotted(func)
    if name is None or last_name(name) != "insert":
        return False
    head = name.split(".")[0]
    imported = scope.root.imports.get(head)
    return imported is not None and imported[0].split(".")[0] == "sqlalchemy"


def _chain(node: ast.Call, parent_of: dict[ast.AST, ast.AST]) -> list[tuple[str, ast.Call]]:
    """The methods called on `node`'s statement: ``insert(M).values(..).on_conflict_do_nothing()``."""
    out: list[tuple[str, ast.Call]] = []
    current: ast.AST = node
    while isinstance(attr := parent_of.get(current), ast.Attribute) and attr.value is current:
        call = parent_of.get(attr)
        if not isinstance(call, ast.Call) or call.func is not attr:
            break
        out.append((attr.attr, call))
        current = call
    return out


def _columns(call: ast.Call, scope: Scope) -> tuple[str, ...]:
    """The columns `call` (``.values(..)`` or ``Model(..)``) writes: its keywords, the keys of a dict
    it is given or unpacks; empty when any of them cannot be read."""
    columns = [k.arg for k in call.keywords if k.arg is not None]
    for mapping in [*(k.value for k in call.keywords if k.arg is None), *call.args]:
        keys = scope.mapping(mapping)
        if not keys:
            return ()
        columns.extend(keys)
    return tuple(columns)


def _table(node: ast.expr, scope: Scope) -> tuple[str, TableKeys, str] | None:
    """The table a model class (``__tablename__``) or ``Table("name", ..)`` of the repository names,
    its declared keys and how it is shown; None for anything else."""
    if isinstance(node, ast.Name) and (found := scope.class_def(node.id)) is not None:
        cls, at = found
        tablename = next(
            (
                at.literal(s.value)
                for s in cls.body
                if isinstance(s, ast.Assign | ast.AnnAssign)
                and s.value is not None
                and any(isinstance(t, ast.Name) and t.id == "__tablename__" for t in _targets(s))
            ),
            None,
        )
        if not isinstance(tablename, str):
            return None
        defined = _model_columns(cls)
        args = next(
            (
                s.value
                for s in cls.body
                if isinstance(s, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "__table_args__" for t in s.targets)
            ),
            None,
        )
        extra = list(args.elts) if isinstance(args, ast.Tuple) else []
        return tablename.lower(), _keys(tablename.lower(), defined, extra, at), node.id
    value, at = scope.value(node)
    if isinstance(value, ast.Call) and last_name(dotted(value.func)) == "Table" and value.args:
        tablename = at.literal(value.args[0])
        if not isinstance(tablename, str):
            return None
        named: list[tuple[str, ast.Call, ast.expr | None]] = [
            (name, column, None)
            for column in value.args[1:]
            if isinstance(column, ast.Call) and last_name(dotted(column.func)) == "Column" and column.args
            if isinstance(name := at.literal(column.args[0]), str)
        ]
        return tablename.lower(), _keys(tablename.lower(), named, list(value.args[1:]), at), tablename
    return None


def _model_columns(cls: ast.ClassDef) -> list[tuple[str, ast.Call, ast.expr | None]]:
    """A model's ``name = Column(..)`` / ``name: Mapped[int] = mapped_column(..)``, with the annotation."""
    out: list[tuple[str, ast.Call, ast.expr | None]] = []
    for stmt in cls.body:
        if not isinstance(stmt, ast.Assign | ast.AnnAssign) or not isinstance(stmt.value, ast.Call):
            continue
        if last_name(dotted(stmt.value.func)) not in ("Column", "mapped_column"):
            continue
        annotation = stmt.annotation if isinstance(stmt, ast.AnnAssign) else None
        out.extend((t.id, stmt.value, annotation) for t in _targets(stmt) if isinstance(t, ast.Name))
    return out


def _targets(stmt: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(stmt.targets) if isinstance(stmt, ast.Assign) else [stmt.target]


def _keys(
    table: str, columns: list[tuple[str, ast.Call, ast.expr | None]], extra: list[ast.expr], scope: Scope
) -> TableKeys:
    """A model's keys: its primary key, each ``unique=True`` column, each ``UniqueConstraint`` /
    ``PrimaryKeyConstraint``; generated: a lone integer primary key (SQLAlchemy numbers it unless
    ``autoincrement=False``) or one marked ``autoincrement=True`` / ``Identity()``."""
    primary = [n for n, call, _ in columns if scope.literal(keywords(call).get("primary_key")) is True]
    keys: list[tuple[str, ...]] = [tuple(primary)] if primary else []
    keys.extend((n,) for n, call, _ in columns if scope.literal(keywords(call).get("unique")) is True)
    for item in extra:
        if isinstance(item, ast.Call) and last_name(dotted(item.func)) in (
            "UniqueConstraint",
            "PrimaryKeyConstraint",
        ):
            names = tuple(v for a in item.args if isinstance(v := scope.literal(a), str))
            if names:
                keys.append(names)
    generated = set()
    for n, call, annotation in columns:
        if n not in primary:
            continue
        auto = scope.literal(keywords(call).get("autoincrement"))
        types = {last_name(dotted(a.func if isinstance(a, ast.Call) else a)) for a in call.args}
        if annotation is not None and isinstance(annotation, ast.Subscript):
            types.add(last_name(dotted(annotation.slice)))
        if (
            auto is True
            or "Identity" in types
            or (len(primary) == 1 and auto is not False and types & _INTEGER_TYPES)
        ):
            generated.add(n)
    return TableKeys(table, tuple(keys), frozenset(generated))
