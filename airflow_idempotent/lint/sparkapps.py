"""The script a task runs: the PySpark script a ``SparkSubmitOperator(application="job.py")``
submits (issue 35, lint41), and a Python script of the repository a command runs (round 36f, lint61):
``BashOperator(bash_command="python scripts/load.py --day {{ ds }}")``, ``spark-submit job.py``, an
``SSHOperator``'s or ``DockerOperator``'s ``command``, ``subprocess.run(["python", "load.py"])`` in
the task's own code.

The DAG file says only where the script is; what the task does (``df.write.mode("append")``, an
INSERT, a clock read) is written in the script. When the path names a Python file of the linted tree
(beside the DAG file, below a linted root, or where a deployed path lands, as a SQL file is found;
after a ``cd DIR &&`` the command names, below DIR), the script's top-level code is read as the task's
own code, in the script's scope, so its findings point at the script's lines; when the words after the
script name one of its subcommands, only that subcommand's code (`subcommands`, round 36h). A path known
only at run time (a template, a Variable, a shell variable other than the DAG folder's) is skipped, as other
file references are (round 31: 8 missed appends).
"""

from __future__ import annotations

import ast
import posixpath
import re
from pathlib import Path

from airflow_idempotent.lint.definitions import TaskDef
from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.source import UNRESOLVED, deployed_path, found_file
from airflow_idempotent.lint.subcommands import dispatched_body
from airflow_idempotent.lint.syntax import dotted

__all__ = ["attach_submitted_script", "commanded_runs", "commanded_scripts"]

_SUBMIT_OPERATORS = frozenset({"SparkSubmitOperator"})
#: operators that run a shell command, and the argument that holds it
_COMMAND_ARGUMENTS = {
    "BashOperator": "bash_command",
    "SSHOperator": "command",
    "DockerOperator": "command",
    "KubernetesPodOperator": "arguments",
}
_SUBPROCESS = frozenset(
    {
        "subprocess.run",
        "subprocess.call",
        "subprocess.check_call",
        "subprocess.check_output",
        "subprocess.Popen",
    }
)
#: interpreters and launchers whose first ``.py`` argument is the script they run
_RUNNER = re.compile(r"^(?:\S*/)?(?:python(?:3(?:\.\d+)?)?|spark-submit)$")
#: the DAG folder's shell variable: its scripts are found as a deployed path is
_DAGS_FOLDER = re.compile(r"^\$\{?AIRFLOW__CORE__DAGS_FOLDER\}?/|^\$\{?AIRFLOW_HOME\}?/")


def attach_submitted_script(task: TaskDef) -> None:
    """Add the top level of each script the task runs to its functions (read in the script's scope)."""
    for found in _run_scripts(task):
        if any(id(fn) in task.homes and task.homes[id(fn)] is found[1] for fn in task.functions):
            continue
        body, scope = found
        task.functions.append(body)
        task.homes[id(body)] = scope


def _run_scripts(task: TaskDef) -> list[tuple[ast.FunctionDef, Scope]]:
    """The scripts the task runs: its operator's application or command, its code's subprocesses."""
    runs: list[tuple[str, tuple[str, ...]]] = []
    if task.operator in _SUBMIT_OPERATORS:
        named = task.scope.string(task.kwargs.get("application"))
        if named is not None and not named.unresolved and named.text.endswith(".py"):
            given = task.scope.strings(task.kwargs.get("application_args"))
            runs.append((named.text, tuple(s.text for s in given)))
    argument = _COMMAND_ARGUMENTS.get(task.operator)
    if argument is not None:
        command = " ".join(s.text for s in task.scope.strings(task.kwargs.get(argument)))
        runs.extend(commanded_runs(command))
    for fn in list(task.functions):
        home = task.homes.get(id(fn), task.scope)
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and dotted(node.func) in _SUBPROCESS and node.args:
                spelled = [s.text for s in home.strings(node.args[0])]
                runs.extend(commanded_runs(" ".join(spelled)))
    out = []
    for text, words in dict.fromkeys(runs):
        found = _script_body(text, list(words), task)
        if found is not None:
            out.append(found)
    return out


def commanded_scripts(command: str) -> list[str]:
    """The Python scripts a shell command runs (``python x.py``, ``python3 -u x.py``, ``spark-submit
    .. x.py``), joined to the folder a ``cd DIR &&`` before it names; a part known only at run time
    (a template, a shell variable but the DAG folder's) leaves the script out."""
    return [script for script, _ in commanded_runs(command)]


def commanded_runs(command: str) -> list[tuple[str, tuple[str, ...]]]:
    """`commanded_scripts`, each with the words after the script (its arguments: a subcommand)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    folder = ""
    for part in re.split(r"&&|\|\||;|\n", command):
        words = part.split()
        if len(words) >= 2 and words[0] == "cd":
            folder = words[1]
            continue
        at = _script_word(words)
        if at is None:
            continue
        script = words[at].strip("'\"")
        script = _DAGS_FOLDER.sub("/", script)
        if folder and not script.startswith("/"):
            script = posixpath.join(_DAGS_FOLDER.sub("/", folder), script)
        if not any(mark in script for mark in ("{{", "$", "%", UNRESOLVED)):
            out.append((script, tuple(words[at + 1 :])))
    return out


def _script_word(words: list[str]) -> int | None:
    """Where the first ``.py`` word after an interpreter or ``spark-submit`` is (its options skipped)."""
    runner = next((i for i, word in enumerate(words) if _RUNNER.match(word.strip("'\""))), None)
    if runner is None:
        return None
    for at in range(runner + 1, len(words)):
        word = words[at].strip("'\"")
        if word.endswith(".py"):
            return at
        if word == "-m" or word == "-c":
            return None  # a module or inline code, no script file
    return None


def _script_body(text: str, words: list[str], task: TaskDef) -> tuple[ast.FunctionDef, Scope] | None:
    path = _script_path(text, task.scope)
    script = task.scope.workspace.scope(path) if path is not None else None
    if script is None or script.source is task.scope.source:
        return None
    # the module's statements as one function: the check reads a task's code function by function;
    # a subcommand the words name (`subcommands`) keeps only its branch and what it calls
    dispatched = dispatched_body(script.tree, words)
    body = ast.FunctionDef(
        name=path.stem if path is not None else "script",
        args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[], defaults=[]),
        body=dispatched if dispatched is not None else script.tree.body or [ast.Pass()],
        decorator_list=[],
        returns=None,
        lineno=1,
        col_offset=0,
    )
    return body, script


def _script_path(text: str, scope: Scope) -> Path | None:
    """The script's file in the checkout: beside the DAG file, below a linted root, or where a
    deployed (or working-directory-relative) path lands (`deployed_path`)."""
    here = scope.source.path
    found = found_file(text, [here.parent, *scope.workspace.roots], here)
    if found is None and not posixpath.isabs(text):
        found = deployed_path("/" + text, here)
    return found if found is not None and found.is_file() else None
