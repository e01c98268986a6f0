"""The planner: Profile + facts -> ordered actions, each bound to a site. Pure."""

from remirror.plan.actions import Action, Plan, PlanError
from remirror.plan.planner import make_plan
from remirror.plan.teardown import make_teardown

__all__ = ["Action", "Plan", "PlanError", "make_plan", "make_teardown"]
