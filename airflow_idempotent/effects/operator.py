"""``EffectOperator``: the base class of operators whose work is one external effect."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_idempotent.effects.effect import Effect
from airflow_idempotent.effects.once import DEFAULT_WAIT, perform
from airflow_idempotent.history.store import DEFAULT_CONN_ID
from airflow_idempotent.window import Anchor, Window, parse_granularity, window_from_context

if TYPE_CHECKING:
    import datetime

    import jinja2
    from airflow.sdk import Context


class EffectOperator(BaseOperator):
    """Base class of operators whose work is one external effect, performed at most once per identity.

    Subclasses implement ``build_effect(context, window) -> Effect``. ``execute`` returns (XCom)
    the Outcome as a dict: status performed / skipped / reconciled / suppressed, reference, keys.

    :param effect_name: the effect's name in its identity (default: the task_id).
    :param key: the business key (templated); a rerun of the window with another key is another effect.
    :param granularity, timezone, anchor: how the window is derived from the run (as the write operators).
    :param history_conn_id: the history store connection holding the ledger.
    :param wait_timeout: seconds to wait for another live attempt on the same effect.
    """

    template_fields: Sequence[str] = ("key",)
    ui_color = "#fbe3d0"

    def __init__(
        self,
        *,
        effect_name: str | None = None,
        key: Any = None,
        granularity: str | datetime.timedelta | None = None,
        timezone: str = "UTC",
        anchor: Anchor = "start",
        history_conn_id: str = DEFAULT_CONN_ID,
        wait_timeout: float = DEFAULT_WAIT,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        parse_granularity(granularity)
        self.effect_name = effect_name or self.task_id
        self.key = key
        self.granularity = granularity
        self.timezone = timezone
        self.anchor: Anchor = anchor
        self.history_conn_id = history_conn_id
        self.wait_timeout = float(wait_timeout)

    def window(self, context: Context | Mapping[str, Any]) -> Window:
        return window_from_context(context, self.granularity, self.timezone, self.anchor)

    def render_template_fields(self, context: Context, jinja_env: jinja2.Environment | None = None) -> None:
        """Offer the window to templates ({{ window_start }}, {{ window_end }}, {{ window }})."""
        context.update(self.window(context).template_vars())  # type: ignore[typeddict-item]
        super().render_template_fields(context, jinja_env)

    def build_effect(self, context: Context | Mapping[str, Any], window: Window) -> Effect:
        raise NotImplementedError

    def execute(self, context: Context) -> dict[str, Any]:
        window = self.window(context)
        effect = self.build_effect(context, window)
        outcome = perform(
            effect,
            self.key,
            name=self.effect_name,
            context=context,
            granularity=self.granularity,
            timezone=self.timezone,
            anchor=self.anchor,
            conn_id=self.history_conn_id,
            wait=self.wait_timeout,
            task=self,
        )
        return outcome.as_dict()
