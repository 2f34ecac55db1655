"""The approval gate: Airflow's ApprovalOperator, recording the decision even when it is a Reject."""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.hitl import ApprovalOperator

DECISION_KEY = "decision"


class RemediationApprovalOperator(ApprovalOperator):
    """ApprovalOperator whose decision (option, who, when, timed out or not) is always pushed to XCom.

    On Reject the base class skips the downstream tasks by raising, which drops its return value;
    the incident still needs to know who decided what, so the decision goes out first.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("defaults", self.REJECT)  # no answer in time is a Reject: nothing changes
        if kwargs["defaults"] not in (self.REJECT, [self.REJECT]):
            raise ValueError("a remediation approval may only default to Reject")
        super().__init__(**kwargs)

    def execute_complete(self, context, event: dict[str, Any]) -> Any:
        if "error" not in event:
            responded_at = event.get("responded_at")
            context["ti"].xcom_push(
                key=DECISION_KEY,
                value={
                    "chosen_options": list(event.get("chosen_options") or []),
                    "responded_by_user": event.get("responded_by_user"),
                    "responded_at": responded_at.isoformat() if hasattr(responded_at, "isoformat") else responded_at,
                    "timedout": bool(event.get("timedout")),
                },
            )
        return super().execute_complete(context=context, event=event)
