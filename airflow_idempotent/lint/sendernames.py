"""Which operator class names a sender: a service's name as a whole word of the class name.

Principle (round 33, a games company's ``GsnSqlSensor``): a class is an SNS sender when ``Sns`` is
one of its name's words (``SnsPublishOperator``, ``SNS_Publisher``), not when the letters ``sns``
run across two words (``G-sns-qlSensor``); and a sensor waits for a condition: it sends nothing
because of its name.
"""

from __future__ import annotations

import ast
import re

from airflow_idempotent.lint.scope import Scope
from airflow_idempotent.lint.syntax import dotted, last_name

__all__ = ["is_sensor", "name_parts", "names_service"]

_PART = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
#: endings a service's word takes in a class name without naming another thing (``Emailer``,
#: ``Webhooks``)
_SUFFIXES = ("", "s", "er")


def name_parts(name: str) -> list[str]:
    """The words of a class or function name, lower case: CamelCase and snake_case split
    (``MSGraphAsyncOperator`` -> ms, graph, async, operator; ``sns_publish`` -> sns, publish)."""
    return [part.lower() for chunk in re.split(r"[_\W]+", name) for part in _PART.findall(chunk)]


def names_service(name: str, service: str) -> bool:
    """`service` (``Sns``, ``MSGraph``, ``Pagerduty``) is one word, or a run of adjacent words, of
    `name`: ``PagerDutyOperator`` names Pagerduty, ``GsnSqlSensor`` does not name Sns."""
    parts = name_parts(last_name(name))
    wanted = service.lower()
    for start in range(len(parts)):
        run = ""
        for part in parts[start:]:
            run += part
            if len(run) > len(wanted) + 2:
                break
            if any(run == wanted + suffix for suffix in _SUFFIXES):
                return True
    return False


def is_sensor(operator: str, scope: Scope | None) -> bool:
    """A sensor: a class whose name's last word (before ``Async``) is ``Sensor``, or one of the
    repository's classes derived from ``BaseSensorOperator`` or another ``...Sensor`` class."""
    parts = [p for p in name_parts(last_name(operator)) if p != "async"]
    if parts and parts[-1] == "sensor":
        return True
    if scope is None:
        return False
    for cls, _ in scope.class_chain(last_name(operator)):
        for base in cls.bases:
            written = dotted(base) if isinstance(base, ast.Name | ast.Attribute) else ""
            if last_name(written) == "BaseSensorOperator" or written.endswith("Sensor"):
                return True
    return False
