"""What a run declared about its effects, read by the backfill guard's one rule for an intent.

A run's conf declares a rerun with ``semantics`` (and ``reason``, ``policy_version``,
``resend_effects``, ...). It is parsed by ``BackfillIntent.from_conf``, the rule the API
server's middleware, the guarded task and the UI apply, so a conf the guard refuses is refused
here with the guard's own message (a ``GuardRefusal``), and one it accepts means the same thing.

What each declaration means for an effect (a payment, an email, a file: it cannot be taken
back by rewriting a table):

- **no semantics** (a scheduled run, a retry, a manual rerun): an effect that went out is never
  sent again; one that never took effect (new, failed, suppressed) is sent.
- **replay** (reproduce what ran, for an incident): nothing outside changes, so nothing is sent,
  not even a new effect; ``resend_effects`` is refused.
- **corrective** (recompute history under a new rule): nothing is sent unless the conf says
  ``"resend_effects": true``; then an effect that went out goes out again once per run, as a new
  generation with a new idempotency key, and a new one is sent.
- **reconcile** (repair only the difference between intended and actual): an effect that never
  took effect (absent, failed, suppressed) is sent, one that went out is never re-sent, and a
  pending one is first settled with its target by idempotency key; ``resend_effects`` is refused.

Every decision a declared rerun causes is recorded on the ledger row with the declaration.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_idempotent.effects.errors import EffectError
from airflow_idempotent.guard import BackfillIntent

#: How each semantics is named in the decisions recorded on a ledger row.
DECISION_KINDS = {"corrective": "corrective backfill", "replay": "replay", "reconcile": "reconcile"}


@dataclass(frozen=True)
class RerunPolicy:
    """A run's declaration about effects, from its conf: recorded with every decision it causes."""

    run_id: str
    #: replay, corrective or reconcile (the guard's SEMANTICS); None for an ordinary run
    semantics: str | None = None
    #: a corrective backfill re-sends done effects (its conf's resend_effects)
    resend: bool = False

    @classmethod
    def from_context(cls, context: Mapping[str, Any], run_id: str, task: Any = None) -> RerunPolicy:
        """The run's policy: its conf read by `BackfillIntent.from_conf` when it declares a rerun.

        Raises the guard's GuardRefusal for a conf the guard refuses (including ``resend_effects``
        on a replay or reconcile), and EffectError when an ordinary run asks ``resend_effects``.
        """
        conf = getattr(context.get("dag_run"), "conf", None) or {}
        if not isinstance(conf, Mapping) or ("semantics" not in conf and not conf.get("resend_effects")):
            return cls(run_id=run_id)
        if "semantics" in conf:  # the guard's rule, which also refuses resend_effects outside corrective
            intent = BackfillIntent.from_conf(conf, declared_params=_declared_params(context, task))
            return cls(run_id=run_id, semantics=intent.semantics, resend=intent.resend_effects)
        raise EffectError(
            f"the run's conf asks resend_effects={conf.get('resend_effects')!r} but declares no semantics: "
            'only a corrective backfill re-sends effects; trigger it with {"semantics": "corrective", '
            '"reason": "...", "policy_version": "...", "resend_effects": true}'
        )

    @property
    def declared(self) -> bool:
        """A declared rerun (replay, corrective, reconcile): every decision is recorded with it."""
        return self.semantics is not None

    @property
    def suppress(self) -> bool:
        """Send nothing: always for a replay, by default for a corrective backfill."""
        return self.semantics == "replay" or (self.semantics == "corrective" and not self.resend)

    def decision(self, what: str) -> str:
        kind = DECISION_KINDS.get(self.semantics or "", "ordinary run")
        return f"{kind} run {self.run_id} (resend_effects={str(self.resend).lower()}): {what}"


def _declared_params(context: Mapping[str, Any], task: Any) -> set[str]:
    """The DAG's own params (the Backfill dialog pre-fills the conf with them), as the task reads them."""
    task = task if task is not None else context.get("task")
    dag = context.get("dag")
    if dag is None and task is not None and getattr(task, "has_dag", lambda: False)():
        dag = task.dag
    return set(getattr(dag, "params", None) or ())
